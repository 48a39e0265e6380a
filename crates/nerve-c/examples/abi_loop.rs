//! A loop of CmdVel publishes (loan, write, send) and receives (take, release) through
//! the Rust API and through the C ABI, on one thread: mean ns per operation of each, for
//! profiling the C ABI's cost (`perf record` this binary, built with
//! `--profile profiling`). `nerve bench paths` measures the same operations op by op.

use nerve_c::*;
use nerve_msgs::CmdVel;
use std::ffi::c_void;
use std::time::Instant;

fn ok(code: nerve_status_t) {
    assert_eq!(code, nerve_status_t::NERVE_OK);
}

fn main() {
    let ops: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(2_000_000);
    let which = std::env::args().nth(2).unwrap_or_else(|| "both".into());
    let dir = std::env::temp_dir().join(format!("nerve-abi-loop-{}", std::process::id()));
    let cfg = nerve::Config::default()
        .domain(977)
        .unwrap()
        .state_dir(&dir);
    let ctx = nerve::Context::new(cfg).unwrap();
    let node = ctx.node("abi_loop_rust").create().unwrap();
    let sub = node
        .subscriber::<CmdVel>("/abi_loop/rust")
        .create()
        .unwrap();
    let publisher = node.publisher::<CmdVel>("/abi_loop/rust").create().unwrap();
    let state = std::ffi::CString::new(dir.to_str().unwrap()).unwrap();
    let opts = nerve_context_options_t {
        config_path: std::ptr::null(),
        domain: 977,
        set_domain: true,
        state_dir: state.as_ptr(),
        network: 0,
        node_namespace: std::ptr::null(),
        remap: std::ptr::null(),
    };
    let (mut c_ctx, mut c_node) = (nerve_context_t::default(), nerve_node_t::default());
    let (mut c_pub, mut c_sub) = (nerve_publisher_t::default(), nerve_subscriber_t::default());
    let schema =
        std::ffi::CString::new(nerve::message::schema::Schema::of::<CmdVel>().encode()).unwrap();
    // SAFETY: valid options, strings and out-pointers.
    unsafe {
        ok(nerve_context_create(&opts, &mut c_ctx));
        ok(nerve_node_create(
            c_ctx,
            c"abi_loop_c".as_ptr(),
            &mut c_node,
        ));
        ok(nerve_subscriber_create(
            c_node,
            c"/abi_loop/c".as_ptr(),
            schema.as_ptr(),
            0,
            std::ptr::null(),
            &mut c_sub,
        ));
        ok(nerve_publisher_create(
            c_node,
            c"/abi_loop/c".as_ptr(),
            schema.as_ptr(),
            0,
            std::ptr::null(),
            &mut c_pub,
        ));
    }
    println!(
        "RawSample {} RawLoan {} RawRequest {} RawReply {} bytes",
        std::mem::size_of::<nerve::RawSample>(),
        std::mem::size_of::<nerve::RawLoan>(),
        std::mem::size_of::<nerve::RawRequest>(),
        std::mem::size_of::<nerve::RawReply>()
    );
    let schema_rs = nerve::message::schema::Schema::of::<CmdVel>();
    let raw_sub = nerve::RawSubscriber::with_schema(
        &node,
        "/abi_loop/raw",
        &schema_rs,
        nerve::Qos::default(),
    )
    .unwrap();
    let raw_pub =
        nerve::RawPublisher::create(&node, "/abi_loop/raw", &schema_rs, nerve::Qos::default())
            .unwrap();
    if which == "view" {
        let mut loan = nerve_loan_t::default();
        let mut data: *mut c_void = std::ptr::null_mut();
        let mut sample = nerve_sample_t::default();
        let mut view = std::mem::MaybeUninit::<nerve_sample_view_t>::uninit();
        // SAFETY: valid out-pointers.
        unsafe {
            ok(nerve_publisher_loan(
                c_pub,
                std::mem::size_of::<CmdVel>(),
                &mut loan,
                &mut data,
            ));
            ok(nerve_sample_send(loan));
            ok(nerve_subscriber_take(
                c_sub,
                0,
                &mut sample,
                view.as_mut_ptr(),
            ));
        }
        for _ in 0..3 {
            let t0 = nerve::stamp_ns();
            for _ in 0..ops {
                // SAFETY: a valid out-pointer.
                ok(unsafe { nerve_sample_view(std::hint::black_box(sample), view.as_mut_ptr()) });
            }
            let t1 = nerve::stamp_ns();
            println!("nerve_sample_view: {:.1} ns", (t1 - t0) as f64 / ops as f64);
            let t0 = nerve::stamp_ns();
            for _ in 0..ops {
                std::hint::black_box(nerve_live_handles);
                std::hint::black_box(nerve::stamp_ns());
            }
            let t1 = nerve::stamp_ns();
            println!("stamp_ns: {:.1} ns", (t1 - t0) as f64 / ops as f64);
        }
        return;
    }
    if which == "loanraw" || which == "loanc" {
        let t0 = nerve::stamp_ns();
        for _ in 0..ops {
            if which == "loanraw" {
                let l = raw_pub.loan(std::mem::size_of::<CmdVel>()).unwrap();
                drop(std::hint::black_box(l));
            } else {
                let mut loan = nerve_loan_t::default();
                let mut data: *mut c_void = std::ptr::null_mut();
                // SAFETY: valid out-pointers.
                ok(unsafe {
                    nerve_publisher_loan(c_pub, std::mem::size_of::<CmdVel>(), &mut loan, &mut data)
                });
                ok(nerve_loan_discard(loan));
            }
        }
        let t1 = nerve::stamp_ns();
        println!("{which}: {:.1} ns", (t1 - t0) as f64 / ops as f64);
        return;
    }
    if which == "calls" {
        let n = ops as f64;
        for _ in 0..3 {
            let t0 = nerve::stamp_ns();
            for _ in 0..ops {
                std::hint::black_box(raw_sub.try_recv().unwrap().is_none());
            }
            let t1 = nerve::stamp_ns();
            let mut sample = nerve_sample_t::default();
            let mut view = std::mem::MaybeUninit::<nerve_sample_view_t>::uninit();
            for _ in 0..ops {
                // SAFETY: valid out-pointers.
                let c = unsafe { nerve_subscriber_take(c_sub, 0, &mut sample, view.as_mut_ptr()) };
                std::hint::black_box(c);
            }
            let t2 = nerve::stamp_ns();
            for _ in 0..ops {
                let l = raw_pub.loan(std::mem::size_of::<CmdVel>()).unwrap();
                drop(std::hint::black_box(l));
            }
            let t3 = nerve::stamp_ns();
            for _ in 0..ops {
                let mut loan = nerve_loan_t::default();
                let mut data: *mut c_void = std::ptr::null_mut();
                // SAFETY: valid out-pointers.
                ok(unsafe {
                    nerve_publisher_loan(c_pub, std::mem::size_of::<CmdVel>(), &mut loan, &mut data)
                });
                ok(nerve_loan_discard(loan));
            }
            let t4 = nerve::stamp_ns();
            println!(
                "empty take: raw {:.1} c {:.1}; loan+discard: raw {:.1} c {:.1}",
                (t1 - t0) as f64 / n,
                (t2 - t1) as f64 / n,
                (t3 - t2) as f64 / n,
                (t4 - t3) as f64 / n
            );
        }
        return;
    }
    for round in 0..3 {
        if which == "raw" || which == "all" {
            let (mut p, mut r) = (0u64, 0u64);
            for i in 0..ops {
                let t0 = nerve::stamp_ns();
                let mut l = raw_pub.loan(std::mem::size_of::<CmdVel>()).unwrap();
                l.bytes_mut()[0] = i as u8;
                raw_pub.send(l).unwrap();
                let t1 = nerve::stamp_ns();
                let s = raw_sub.try_recv().unwrap().unwrap();
                std::hint::black_box(s.bytes().as_ptr());
                drop(s);
                let t2 = nerve::stamp_ns();
                p += t1 - t0;
                r += t2 - t1;
            }
            println!(
                "round {round} raw:  publish {:.1} ns, receive {:.1} ns",
                p as f64 / ops as f64,
                r as f64 / ops as f64
            );
        }
        if which == "rust" || which == "all" || which == "both" {
            let (mut p, mut r) = (0u64, 0u64);
            for i in 0..ops {
                let t0 = nerve::stamp_ns();
                let mut l = publisher.loan().unwrap();
                l.linear = i as f32;
                l.send().unwrap();
                let t1 = nerve::stamp_ns();
                drop(sub.try_recv().unwrap());
                let t2 = nerve::stamp_ns();
                p += t1 - t0;
                r += t2 - t1;
            }
            println!(
                "round {round} rust: publish {:.1} ns, receive {:.1} ns",
                p as f64 / ops as f64,
                r as f64 / ops as f64
            );
        }
        if which == "c" || which == "all" || which == "both" {
            let (mut p, mut r) = (0u64, 0u64);
            let start = Instant::now();
            for i in 0..ops {
                let mut loan = nerve_loan_t::default();
                let mut data: *mut c_void = std::ptr::null_mut();
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
                    ));
                    (*data.cast::<CmdVel>()).linear = i as f32;
                }
                ok(nerve_sample_send(loan));
                let t1 = nerve::stamp_ns();
                // SAFETY: valid out-pointers.
                ok(unsafe { nerve_subscriber_take(c_sub, 0, &mut sample, view.as_mut_ptr()) });
                ok(nerve_sample_release(sample));
                let t2 = nerve::stamp_ns();
                p += t1 - t0;
                r += t2 - t1;
            }
            println!(
                "round {round} c:    publish {:.1} ns, receive {:.1} ns ({:?} in all)",
                p as f64 / ops as f64,
                r as f64 / ops as f64,
                start.elapsed()
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
