//! T11: a back-pressure topic kept saturated (its publisher always blocked on a slow
//! subscriber) beside a drop-oldest ping-pong between the same two contexts. The
//! ping-pong runs at 1 kHz alone and beside the saturated topic: every ping must be
//! answered, the saturated topic must lose nothing, and its publisher must never wait past
//! its timeout. The latency of the ping-pong is reported (a target, not part of the
//! verdict: timing belongs to the figures) in five phases that take turns in slices of
//! two seconds, so the machine's own drift falls on all of them alike:
//! - quiet, and beside the saturated topic;
//! - beside the same load carried by the standard library's bounded channel instead of
//!   Nerve (a flat-out sender blocked on a channel of the same depth, a receiver taking
//!   one a ms): the control that tells what the load costs the machine from what Nerve
//!   adds to it;
//! - quiet and beside the saturated topic again, with the ping-pong's two threads at
//!   SCHED_FIFO on one CPU, as a latency-critical loop is run (where the kernel grants it).

use super::*;
use nerve_bench_harness::stats::Recorder;
use nerve_msgs::CmdVel;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

const TIMEOUT_MS: u64 = 1_000;

/// SCHED_FIFO priority of the ping-pong's threads in the real-time phases.
const RT_PRIORITY: i32 = 80;

/// The CPUs this process may run on, as it started; the real-time phases put both threads
/// of the ping-pong on the first (a wake-up on the same CPU costs no inter-processor
/// interrupt, which a virtual machine pays dearly), the others go back to all of them.
static CPUS: std::sync::OnceLock<Vec<usize>> = std::sync::OnceLock::new();

/// Length of one slice of a phase: the phases take turns slice by slice, so that
/// whatever else the machine does over the run falls on all of them alike.
const SLICE: Duration = Duration::from_secs(2);

/// What runs beside the ping-pong in a phase.
#[derive(Clone, Copy)]
enum Load {
    None,
    /// The saturated Nerve topic.
    Topic,
    /// The same traffic on the standard library's bounded channel (the control).
    Channel,
}

/// One phase of the scenario.
#[derive(Clone, Copy)]
struct Phase {
    name: &'static str,
    load: Load,
    /// The ping-pong's threads at SCHED_FIFO.
    realtime: bool,
}

/// The phases, in the order their figures are computed from (the ratios index them).
const PHASES: [Phase; 5] = [
    Phase {
        name: "quiet",
        load: Load::None,
        realtime: false,
    },
    Phase {
        name: "saturated topic beside",
        load: Load::Topic,
        realtime: false,
    },
    Phase {
        name: "saturated std channel beside",
        load: Load::Channel,
        realtime: false,
    },
    Phase {
        name: "quiet, SCHED_FIFO",
        load: Load::None,
        realtime: true,
    },
    Phase {
        name: "saturated topic beside, SCHED_FIFO",
        load: Load::Topic,
        realtime: true,
    },
];

/// Puts the calling thread (the pinger) and the ponger at SCHED_FIFO, or back to normal;
/// true if both are where asked once done.
fn set_realtime(on: bool, want_rt: &AtomicBool, pong_rt: &AtomicBool) -> bool {
    if !realtime_here(on) {
        return false;
    }
    // SYNC: a plain handshake: the ponger applies what it reads on its next turn and
    // says so; nothing is published with it.
    want_rt.store(on, Ordering::Relaxed);
    let t0 = Instant::now();
    while pong_rt.load(Ordering::Relaxed) != on && t0.elapsed() < WAIT {
        std::thread::sleep(Duration::from_millis(1));
    }
    pong_rt.load(Ordering::Relaxed) == on
}

/// Puts the calling thread at SCHED_FIFO on the first of [`CPUS`], or back to the normal
/// policy on all of them; true if the kernel took it.
fn realtime_here(on: bool) -> bool {
    let cpus = CPUS.get_or_init(nerve::rt::current_cpus);
    let Some(&first) = cpus.first() else {
        return false;
    };
    let cfg = nerve::rt::RtConfig {
        fifo_priority: on.then_some(RT_PRIORITY),
        cpus: Some(if on { vec![first] } else { cpus.clone() }),
        ..Default::default()
    };
    let report = nerve::rt::apply(&cfg);
    report.affinity.applied()
        && if on {
            report.fifo.applied()
        } else {
            nerve::rt::set_normal()
        }
}

/// What the saturated topic did, over every phase it ran in.
#[derive(Default)]
struct TopicLoad {
    sent: u64,
    failed: u64,
    slowest: Duration,
    /// Lost or torn samples (must be 0).
    lost: u64,
    taken: u64,
}

impl TopicLoad {
    fn add(&mut self, o: TopicLoad) {
        self.sent += o.sent;
        self.failed += o.failed;
        self.slowest = self.slowest.max(o.slowest);
        self.lost += o.lost;
        self.taken += o.taken;
    }
}

fn saturated_qos() -> Qos {
    Qos::sensor().depth(16).overflow(Overflow::BackPressure {
        timeout: Duration::from_millis(TIMEOUT_MS),
    })
}

/// Runs the scenario (`seconds` per phase).
pub fn run(opts: &Options) -> Result<Outcome, StressError> {
    let name = Scenario::MixedQos.name();
    let d = Domain::new(name, opts)?;
    let mut out = Outcome::new(
        Scenario::MixedQos,
        "a saturated back-pressure topic does not stall a drop-oldest ping-pong of the same \
         processes: every ping answered, nothing of the saturated topic lost, its publisher \
         never past its timeout",
    );
    let seconds = Duration::from_secs_f64(opts.seconds);
    {
        let a = d.context()?;
        let b = d.context()?;
        let stop = Arc::new(AtomicBool::new(false));
        let want_rt = Arc::new(AtomicBool::new(false));
        let pong_rt = Arc::new(AtomicBool::new(false));
        let ponger = {
            let (b, stop, want, have) = (b.clone(), stop.clone(), want_rt.clone(), pong_rt.clone());
            std::thread::spawn(move || pong(&b, &stop, &want, &have))
        };
        let node = a
            .node("stress_t11_ping")
            .create()
            .map_err(|e| setup(name, e))?;
        let ping = node
            .publisher::<CmdVel>("/stress/t11/ping")
            .qos(Qos::sensor().depth(8))
            .create()
            .map_err(|e| setup(name, e))?;
        let pong_sub = node
            .subscriber::<CmdVel>("/stress/t11/pong")
            .qos(Qos::sensor().depth(8))
            .create()
            .map_err(|e| setup(name, e))?;
        if !ping.wait_for_subscribers(1, WAIT) {
            return Err(setup(name, "the ponger did not appear"));
        }
        // the ping-pong's threads at SCHED_FIFO in the real-time phases, as a
        // latency-critical loop is run; those phases are skipped where the kernel refuses
        let back_to_normal = || {
            set_realtime(false, &want_rt, &pong_rt)
                .then_some(())
                .ok_or_else(|| setup(name, "cannot return the ping-pong to the normal policy"))
        };
        let realtime = set_realtime(true, &want_rt, &pong_rt);
        back_to_normal()?;
        out.figure(
            "real-time phases run (SCHED_FIFO granted)",
            f64::from(u8::from(realtime)),
        );
        let phases: Vec<Phase> = PHASES
            .iter()
            .copied()
            .filter(|p| realtime || !p.realtime)
            .collect();
        let mut rtts: Vec<_> = phases.iter().map(|_| Recorder::new()).collect();
        let mut load = TopicLoad::default();
        let slices = (seconds.as_secs_f64() / SLICE.as_secs_f64())
            .ceil()
            .max(1.0) as u32;
        let slice = seconds / slices;
        let bar = progress(opts, u64::from(slices), "slices of every phase");
        for _ in 0..slices {
            for (phase, rec) in phases.iter().zip(&mut rtts) {
                if phase.realtime && !set_realtime(true, &want_rt, &pong_rt) {
                    return Err(setup(name, "SCHED_FIFO refused after it was granted"));
                }
                let mut pings = || round_trips(&ping, &pong_sub, slice, rec, &mut out);
                match phase.load {
                    Load::None => pings()?,
                    Load::Topic => load.add(with_topic_load(&a, &b, pings)?.1),
                    Load::Channel => with_channel_load(pings)?,
                }
                if phase.realtime {
                    back_to_normal()?;
                }
            }
            bar.inc(1);
        }
        bar.finish_and_clear();
        stop.store(true, Ordering::Relaxed);
        let _ = ponger.join();
        out.inputs += load.sent;
        out.lost += load.lost;
        out.check(load.failed == 0, || {
            format!(
                "{} of {} saturated publishes timed out",
                load.failed, load.sent
            )
        });
        out.check(
            load.slowest <= Duration::from_millis(TIMEOUT_MS + 100),
            || {
                format!(
                    "a saturated publish took {:?} (timeout {TIMEOUT_MS} ms)",
                    load.slowest
                )
            },
        );
        let rtts: Vec<_> = rtts.iter().map(Recorder::rtt).collect();
        for (phase, r) in phases.iter().zip(&rtts) {
            out.figure(&format!("ping-pong P50 µs, {}", phase.name), r.p50);
            out.figure(&format!("ping-pong P99 µs, {}", phase.name), r.p99);
            if let Some(p999) = r.p999 {
                out.figure(&format!("ping-pong P99.9 µs, {}", phase.name), p999);
            }
            out.figure(&format!("ping-pong max µs, {}", phase.name), r.max);
        }
        out.figure("P99 saturated / quiet", rtts[1].p99 / rtts[0].p99);
        out.figure(
            "P99 saturated std channel / quiet",
            rtts[2].p99 / rtts[0].p99,
        );
        if realtime {
            out.figure(
                "P99 saturated / quiet, SCHED_FIFO",
                rtts[4].p99 / rtts[3].p99,
            );
        }
        out.figure("saturated topic: messages delivered", load.taken as f64);
    }
    out.leftovers = d.leftovers();
    Ok(out.finish())
}

/// Runs `phase` beside the saturated topic: a publisher in `a` always blocked on a
/// subscriber in `b` that takes one a ms.
fn with_topic_load<T>(
    a: &Context,
    b: &Context,
    phase: impl FnOnce() -> Result<T, StressError>,
) -> Result<(T, TopicLoad), StressError> {
    let name = Scenario::MixedQos.name();
    let taken = Arc::new(AtomicU64::new(0));
    let torn = Arc::new(AtomicU64::new(0));
    let load_stop = Arc::new(AtomicBool::new(false));
    let slow = {
        let (b, stop, taken, torn) = (b.clone(), load_stop.clone(), taken.clone(), torn.clone());
        std::thread::spawn(move || slow_reader(&b, &stop, &taken, &torn))
    };
    let flood_stop = Arc::new(AtomicBool::new(false));
    let flood = {
        let (a, stop) = (a.clone(), flood_stop.clone());
        std::thread::spawn(move || flood_publish(&a, &stop))
    };
    std::thread::sleep(Duration::from_millis(50));
    let result = phase();
    // SYNC: plain stop flags; the counters are read after the threads are joined.
    flood_stop.store(true, Ordering::Relaxed);
    let flooded = flood
        .join()
        .map_err(|_| setup(name, "the flooding thread panicked"))?;
    std::thread::sleep(Duration::from_millis(100));
    load_stop.store(true, Ordering::Relaxed);
    let lost = slow
        .join()
        .map_err(|_| setup(name, "the slow reader panicked"))?
        .map_err(|e| setup(name, e))?;
    let (sent, failed, slowest) = flooded.map_err(|e| setup(name, e))?;
    let load = TopicLoad {
        sent,
        failed,
        slowest,
        lost: lost + torn.load(Ordering::Relaxed),
        taken: taken.load(Ordering::Relaxed),
    };
    Ok((result?, load))
}

/// Runs `phase` beside the control load: the saturated topic's traffic on a bounded
/// channel of the standard library (same depth, same message, same pace of the reader).
fn with_channel_load<T>(phase: impl FnOnce() -> Result<T, StressError>) -> Result<T, StressError> {
    let (tx, rx) = std::sync::mpsc::sync_channel::<Imu>(saturated_qos().depth);
    let stop = Arc::new(AtomicBool::new(false));
    let flood = std::thread::spawn(move || {
        let mut sent = 0u64;
        // stops when the receiver goes
        while tx.send(imu(sent + 1)).is_ok() {
            sent += 1;
        }
    });
    let slow = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut taken = 0u64;
            // SYNC: a plain stop flag.
            while !stop.load(Ordering::Relaxed) {
                if let Ok(m) = rx.try_recv() {
                    // the same check as the saturated topic's reader (the channel keeps
                    // order and loses nothing)
                    taken += 1;
                    std::hint::black_box(imu_whole(&m, taken));
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        })
    };
    std::thread::sleep(Duration::from_millis(50));
    let result = phase();
    stop.store(true, Ordering::Relaxed);
    let _ = slow.join();
    let _ = flood.join();
    result
}

/// Pings at 1 kHz for `t`, recording round trips into `rec`; every ping must be answered
/// within a second.
fn round_trips(
    ping: &nerve::Publisher<CmdVel>,
    pong: &nerve::Subscriber<CmdVel>,
    t: Duration,
    rec: &mut Recorder,
    out: &mut Outcome,
) -> Result<(), StressError> {
    let name = Scenario::MixedQos.name();
    let end = Instant::now() + t;
    let mut k = 0u64;
    while Instant::now() < end {
        k += 1;
        let m = CmdVel {
            stamp: nerve_msgs::Time { nanos: k as i64 },
            ..CmdVel::default()
        };
        let sent = Instant::now();
        ping.publish(&m).map_err(|e| setup(name, e))?;
        out.inputs += 1;
        loop {
            match pong
                .recv_timeout(Duration::from_secs(1))
                .map_err(|e| setup(name, e))?
            {
                Some(r) if r.stamp.nanos == k as i64 => break,
                Some(_) => continue,
                None => {
                    out.lost += 1;
                    break;
                }
            }
        }
        rec.record(sent.elapsed());
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok(())
}

/// Answers every ping until `stop`, at SCHED_FIFO while `want_rt` (`have_rt` says once it
/// is in force).
fn pong(
    ctx: &Context,
    stop: &AtomicBool,
    want_rt: &AtomicBool,
    have_rt: &AtomicBool,
) -> Result<(), String> {
    let e = |e: &dyn std::fmt::Display| e.to_string();
    let node = ctx.node("stress_t11_pong").create().map_err(|x| e(&x))?;
    let sub = node
        .subscriber::<CmdVel>("/stress/t11/ping")
        .qos(Qos::sensor().depth(8))
        .create()
        .map_err(|x| e(&x))?;
    let publisher = node
        .publisher::<CmdVel>("/stress/t11/pong")
        .qos(Qos::sensor().depth(8))
        .create()
        .map_err(|x| e(&x))?;
    // SYNC: plain flags.
    while !stop.load(Ordering::Relaxed) {
        let want = want_rt.load(Ordering::Relaxed);
        if want != have_rt.load(Ordering::Relaxed) {
            // what is in force now: the new setting, or still the old one if refused
            let have = if realtime_here(want) { want } else { !want };
            have_rt.store(have, Ordering::Relaxed);
        }
        if let Some(m) = sub
            .recv_timeout(Duration::from_millis(50))
            .map_err(|x| e(&x))?
        {
            publisher.publish(&m).map_err(|x| e(&x))?;
        }
    }
    Ok(())
}

/// Takes one sample of the saturated topic a millisecond; returns the losses it counted.
fn slow_reader(
    ctx: &Context,
    stop: &AtomicBool,
    taken: &AtomicU64,
    torn: &AtomicU64,
) -> Result<u64, String> {
    let node = ctx
        .node("stress_t11_slow")
        .create()
        .map_err(|e| e.to_string())?;
    let sub = node
        .subscriber::<Imu>("/stress/t11/saturated")
        .qos(saturated_qos())
        .create()
        .map_err(|e| e.to_string())?;
    // SYNC: plain counters and a stop flag, read after the thread is joined.
    while !stop.load(Ordering::Relaxed) {
        if let Ok(Some(m)) = sub.try_recv() {
            taken.fetch_add(1, Ordering::Relaxed);
            if !imu_whole(&m, m.header().seq) {
                torn.fetch_add(1, Ordering::Relaxed);
            }
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    // what is left is taken too
    while let Ok(Some(m)) = sub.try_recv() {
        taken.fetch_add(1, Ordering::Relaxed);
        if !imu_whole(&m, m.header().seq) {
            torn.fetch_add(1, Ordering::Relaxed);
        }
    }
    Ok(sub.stats().lost)
}

/// Publishes flat out on the saturated topic until `stop`: (sent, failed, slowest).
fn flood_publish(ctx: &Context, stop: &AtomicBool) -> Result<(u64, u64, Duration), String> {
    let node = ctx
        .node("stress_t11_flood")
        .create()
        .map_err(|e| e.to_string())?;
    let p = node
        .publisher::<Imu>("/stress/t11/saturated")
        .qos(saturated_qos())
        .create()
        .map_err(|e| e.to_string())?;
    if !p.wait_for_subscribers(1, WAIT) {
        return Err("the slow reader did not appear".into());
    }
    let (mut sent, mut failed, mut slowest) = (0u64, 0u64, Duration::ZERO);
    // SYNC: a plain stop flag.
    while !stop.load(Ordering::Relaxed) {
        let t = Instant::now();
        sent += 1;
        if p.publish(&imu(sent)).is_err() {
            failed += 1;
        }
        slowest = slowest.max(t.elapsed());
    }
    Ok((sent, failed, slowest))
}
