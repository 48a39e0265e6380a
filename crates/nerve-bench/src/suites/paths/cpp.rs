//! The C++ rows of the ping-pong: Nerve's C++ API (`nerve.hpp` over the C ABI) as both
//! ends (C++ ↔ C++) and as the ponger of a Rust pinger (Rust ↔ C++), cross-process 1:1,
//! beside the Rust ↔ Rust row of the same run. The C++ peers (`cpp/peer.cpp`, compiled
//! into this binary by build.rs) busy-poll like the Rust peers in spin mode and do the
//! same work: the pinger fills the whole message, the ponger copies it into its reply.
//!
//! Also the C ABI's own cost: the same publish and take loops through the Rust API and
//! through the C ABI's entry points, in one process.

use super::{fail, pingers_threads, MessageKind, PathsSuite, PongSpec};
use crate::harness::child::Child;
use crate::harness::machine::pin_to_cpu;
use crate::harness::stats::Recorder;
use crate::harness::PeerError;
use crate::peers::cpp::unavailable;
#[cfg(nerve_bench_cpp)]
use crate::peers::cpp::{ffi, message};
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Duration;

/// The messages of the C++ rows (the CmdVel, Imu, PointCloud 10K).
pub const MESSAGES: [MessageKind; 3] = [
    MessageKind::CmdVel,
    MessageKind::Imu,
    MessageKind::PointCloud10K,
];

fn kind_code(m: MessageKind) -> Result<i32, PeerError> {
    match m {
        MessageKind::CmdVel => Ok(0),
        MessageKind::Imu => Ok(1),
        MessageKind::PointCloud10K => Ok(2),
        other => Err(fail(format!("no C++ peer for {}", other.name()))),
    }
}

/// Runs the C++ ponger of `spec` until stdin closes (the `cpp-ponger` role). Prints
/// `ready` once it listens.
pub fn run_cpp_ponger(spec: &PongSpec) -> Result<(), PeerError> {
    if let Some(why) = unavailable() {
        return Err(fail(why));
    }
    let kind = kind_code(spec.message)?;
    let stop = AtomicI32::new(0);
    let ready = AtomicI32::new(0);
    let topic = std::ffi::CString::new(spec.topic.clone()).map_err(fail)?;
    std::thread::scope(|s| {
        let worker = s.spawn(|| {
            if let Some(base) = spec.cpu {
                pin_to_cpu(base);
            }
            run_ponger(kind, &topic, spec.domain, &stop, &ready)
        });
        let begun = std::time::Instant::now();
        // SYNC: Acquire pairs with the ponger's release store once it listens.
        while ready.load(Ordering::Acquire) == 0 && !worker.is_finished() {
            if begun.elapsed() > Duration::from_secs(30) {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        if ready.load(Ordering::Acquire) != 0 {
            use std::io::{BufRead, Write};
            println!("ready");
            let _ = std::io::stdout().flush();
            for _ in std::io::stdin().lock().lines().map_while(Result::ok) {}
        }
        // SYNC: a plain stop flag, read Relaxed by the ponger's loop.
        stop.store(1, Ordering::Relaxed);
        worker
            .join()
            .unwrap_or_else(|_| Err(fail("the C++ ponger thread panicked")))
    })
}

#[cfg(nerve_bench_cpp)]
fn run_ponger(
    kind: i32,
    topic: &std::ffi::CStr,
    domain: u32,
    stop: &AtomicI32,
    ready: &AtomicI32,
) -> Result<(), PeerError> {
    let mut err = [0u8; 512];
    // SAFETY: valid C string, atomics that outlive the call (read and written with
    // atomic builtins on the C++ side), an error buffer of its stated length.
    let rc = unsafe {
        ffi::nerve_bench_cpp_ponger(
            kind,
            topic.as_ptr(),
            domain,
            stop.as_ptr(),
            ready.as_ptr(),
            err.as_mut_ptr().cast(),
            err.len(),
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(fail(format!("C++ ponger: {}", message(&err))))
    }
}

#[cfg(not(nerve_bench_cpp))]
fn run_ponger(
    _: i32,
    _: &std::ffi::CStr,
    _: u32,
    _: &AtomicI32,
    _: &AtomicI32,
) -> Result<(), PeerError> {
    Err(fail(unavailable().unwrap_or_default()))
}

/// The C++ pinger's round trips, on a thread of its own (pinned like a Rust pinger).
#[cfg(nerve_bench_cpp)]
fn cpp_pinger(spec: &PongSpec, suite: &PathsSuite) -> Result<Recorder, PeerError> {
    let kind = kind_code(spec.message)?;
    let topic = std::ffi::CString::new(spec.topic.clone()).map_err(fail)?;
    let mut rtt = vec![0u64; suite.iterations];
    let mut err = [0u8; 512];
    let rc = std::thread::scope(|s| {
        s.spawn(|| {
            if let Some(base) = spec.cpu {
                pin_to_cpu(base + spec.pongers);
            }
            // SAFETY: valid C string; `rtt` holds `iterations` values; an error buffer
            // of its stated length.
            unsafe {
                ffi::nerve_bench_cpp_pinger(
                    kind,
                    topic.as_ptr(),
                    spec.domain,
                    spec.message.elems(),
                    suite.warmup,
                    suite.iterations,
                    rtt.as_mut_ptr(),
                    err.as_mut_ptr().cast(),
                    err.len(),
                )
            }
        })
        .join()
        .unwrap_or(-1)
    });
    if rc != 0 {
        return Err(fail(format!("C++ pinger: {}", message(&err))));
    }
    let mut rec = Recorder::new();
    for ns in rtt {
        rec.record_ns(ns);
    }
    Ok(rec)
}

#[cfg(not(nerve_bench_cpp))]
fn cpp_pinger(_: &PongSpec, _: &PathsSuite) -> Result<Recorder, PeerError> {
    Err(fail(unavailable().unwrap_or_default()))
}

/// Which ends are C++.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ends {
    /// C++ pinger, C++ ponger.
    CppCpp,
    /// Rust pinger, C++ ponger.
    RustCpp,
}

impl Ends {
    /// The row's system name.
    pub fn system(self) -> &'static str {
        match self {
            Ends::CppCpp => "nerve C++",
            Ends::RustCpp => "nerve Rust↔C++",
        }
    }
}

/// One cross-process 1:1 run with C++ at `ends`; the round trips.
pub(super) fn run(
    suite: &PathsSuite,
    message: MessageKind,
    ends: Ends,
    n: usize,
) -> Result<Recorder, PeerError> {
    if let Some(why) = unavailable() {
        return Err(fail(why));
    }
    let cores = crate::harness::machine::online_cpus();
    if cores < 2 {
        return Err(fail(format!(
            "the C++ peers busy-poll, which needs 2 cores; this machine has {cores}"
        )));
    }
    let spec = PongSpec {
        message,
        topic: format!("/bench/paths_cpp_{}_{n}", std::process::id()),
        pingers: 1,
        pongers: 1,
        domain: suite.domain,
        spin: true,
        raw: false,
        cpu: Some(0),
    };
    let json = serde_json::to_string(&spec).map_err(|e| PeerError::setup("bench", e))?;
    let mut args = suite.role_command.1.clone();
    args.extend(["cpp-ponger".to_string(), json]);
    let mut child = Child::spawn(&suite.role_command.0, &args, &[], "C++ ponger")?;
    child.expect("ready", Duration::from_secs(30))?;
    let r = match ends {
        Ends::CppCpp => cpp_pinger(&spec, suite),
        Ends::RustCpp => {
            let ctx = suite.context()?;
            pingers_threads(&ctx, &spec, 1, suite)
        }
    };
    child.stop();
    r
}

/// The C ABI's own cost: median ns of one publish (loan, write, send) and of one receive
/// (take, release) of a CmdVel on one thread and one context, through the Rust API and
/// through the C ABI (what `nerve.hpp` calls, inline), timed op by op in alternating
/// rounds.
#[derive(Clone, Debug, serde::Serialize)]
pub struct AbiCost {
    /// Rounds alternating Rust and C.
    pub rounds: usize,
    /// Operations timed per round and API.
    pub ops: usize,
    /// Rust API: median ns per publish.
    pub rust_publish_ns: f64,
    /// C ABI: median ns per publish.
    pub c_publish_ns: f64,
    /// Rust API: median ns per receive.
    pub rust_receive_ns: f64,
    /// C ABI: median ns per receive.
    pub c_receive_ns: f64,
}

impl AbiCost {
    /// What the C ABI adds to a publish, in ns.
    pub fn publish_added(&self) -> f64 {
        self.c_publish_ns - self.rust_publish_ns
    }
    /// What the C ABI adds to a receive, in ns.
    pub fn receive_added(&self) -> f64 {
        self.c_receive_ns - self.rust_receive_ns
    }
}

/// Measures [`AbiCost`].
pub(super) fn abi_cost(suite: &PathsSuite) -> Result<AbiCost, PeerError> {
    use nerve_c::*;
    use nerve_msgs::CmdVel;
    let ops = if suite.quick { 20_000 } else { 100_000 };
    let rounds = 5;
    let topic = format!("/bench/abi_{}", std::process::id());
    // Rust
    let ctx = suite.context()?;
    let node = ctx.node("abi_rust").create().map_err(fail)?;
    let sub = node
        .subscriber::<CmdVel>(&format!("{topic}_rust"))
        .create()
        .map_err(fail)?;
    let publisher = node
        .publisher::<CmdVel>(&format!("{topic}_rust"))
        .create()
        .map_err(fail)?;
    // C
    let ok = |code: nerve_status_t| -> Result<(), PeerError> {
        if code == nerve_status_t::NERVE_OK {
            Ok(())
        } else {
            // SAFETY: nerve_last_error returns a valid NUL-terminated string.
            let e = unsafe { std::ffi::CStr::from_ptr(nerve_last_error()) };
            Err(fail(format!("C ABI: {code:?}: {}", e.to_string_lossy())))
        }
    };
    let opts = nerve_context_options_t {
        config_path: std::ptr::null(),
        domain: suite.domain,
        set_domain: true,
        state_dir: std::ptr::null(),
        network: -1,
        node_namespace: std::ptr::null(),
        remap: std::ptr::null(),
    };
    let (mut c_ctx, mut c_node) = (nerve_context_t::default(), nerve_node_t::default());
    let (mut c_pub, mut c_sub) = (nerve_publisher_t::default(), nerve_subscriber_t::default());
    let c_topic = std::ffi::CString::new(format!("{topic}_c")).map_err(fail)?;
    let schema = std::ffi::CString::new(nerve::message::schema::Schema::of::<CmdVel>().encode())
        .map_err(fail)?;
    // SAFETY: valid options, strings and out-pointers.
    unsafe {
        ok(nerve_context_create(&opts, &mut c_ctx))?;
        ok(nerve_node_create(c_ctx, c"abi_c".as_ptr(), &mut c_node))?;
        ok(nerve_subscriber_create(
            c_node,
            c_topic.as_ptr(),
            schema.as_ptr(),
            0,
            std::ptr::null(),
            &mut c_sub,
        ))?;
        ok(nerve_publisher_create(
            c_node,
            c_topic.as_ptr(),
            schema.as_ptr(),
            0,
            std::ptr::null(),
            &mut c_pub,
        ))?;
    }
    let mut rust = (Recorder::new(), Recorder::new());
    let mut c = (Recorder::new(), Recorder::new());
    for round in 0..rounds {
        // warm-up rounds are the first of each API's loop
        let measured = |i: usize| round > 0 || i >= ops / 10;
        for i in 0..ops {
            let t0 = nerve::stamp_ns();
            let mut l = publisher.loan().map_err(fail)?;
            l.linear = i as f32;
            l.send().map_err(fail)?;
            let t1 = nerve::stamp_ns();
            let s = sub.try_recv().map_err(fail)?;
            drop(s);
            let t2 = nerve::stamp_ns();
            if measured(i) {
                rust.0.record_ns(t1 - t0);
                rust.1.record_ns(t2 - t1);
            }
        }
        for i in 0..ops {
            let mut loan = nerve_loan_t::default();
            let mut data: *mut std::ffi::c_void = std::ptr::null_mut();
            let mut sample = nerve_sample_t::default();
            let mut view = std::mem::MaybeUninit::<nerve_sample_view_t>::uninit();
            let t0 = nerve::stamp_ns();
            // SAFETY: valid out-pointers; the loan is a writable, aligned CmdVel.
            unsafe {
                ok(nerve_publisher_loan(
                    c_pub,
                    std::mem::size_of::<CmdVel>(),
                    &mut loan,
                    &mut data,
                ))?;
                (*data.cast::<CmdVel>()).linear = i as f32;
            }
            ok(nerve_sample_send(loan))?;
            let t1 = nerve::stamp_ns();
            // SAFETY: valid out-pointers.
            ok(unsafe { nerve_subscriber_take(c_sub, 0, &mut sample, view.as_mut_ptr()) })?;
            ok(nerve_sample_release(sample))?;
            let t2 = nerve::stamp_ns();
            if measured(i) {
                c.0.record_ns(t1 - t0);
                c.1.record_ns(t2 - t1);
            }
        }
    }
    for code in [
        nerve_publisher_destroy(c_pub),
        nerve_subscriber_destroy(c_sub),
        nerve_node_destroy(c_node),
        nerve_context_destroy(c_ctx),
    ] {
        ok(code)?;
    }
    let ns = |r: &Recorder| r.dist().p50 * 1000.0;
    Ok(AbiCost {
        rounds,
        ops,
        rust_publish_ns: ns(&rust.0),
        c_publish_ns: ns(&c.0),
        rust_receive_ns: ns(&rust.1),
        c_receive_ns: ns(&c.1),
    })
}
