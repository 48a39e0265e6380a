//! T11: a back-pressure topic kept saturated (its publisher always blocked on a slow
//! subscriber) beside a drop-oldest ping-pong between the same two contexts. The
//! ping-pong runs at 1 kHz, first alone, then beside the saturated topic: every ping must
//! be answered, the saturated topic must lose nothing, and its publisher must never wait
//! past its timeout. The latency of the ping-pong with and without the load is reported
//! (a target, not part of the verdict: timing belongs to the figures), and beside the
//! same load carried by the standard library's bounded channel instead of Nerve (a flat
//! out sender blocked on a channel of the same depth, a receiver taking one a ms): the
//! control that tells what the load costs the machine from what Nerve adds to it.

use super::*;
use nerve_msgs::CmdVel;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

const TIMEOUT_MS: u64 = 1_000;

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
        let ponger = {
            let (b, stop) = (b.clone(), stop.clone());
            std::thread::spawn(move || pong(&b, &stop))
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
        let quiet = round_trips(&ping, &pong_sub, seconds, &mut out)?;
        // the load: a publisher always blocked on a subscriber that takes one a ms
        let taken = Arc::new(AtomicU64::new(0));
        let torn = Arc::new(AtomicU64::new(0));
        let load_stop = Arc::new(AtomicBool::new(false));
        let slow = {
            let (b, stop, taken, torn) =
                (b.clone(), load_stop.clone(), taken.clone(), torn.clone());
            std::thread::spawn(move || slow_reader(&b, &stop, &taken, &torn))
        };
        let flood_stop = Arc::new(AtomicBool::new(false));
        let flood = {
            let ctx = a.clone();
            let stop = flood_stop.clone();
            std::thread::spawn(move || flood_publish(&ctx, &stop))
        };
        std::thread::sleep(Duration::from_millis(50));
        let loaded = round_trips(&ping, &pong_sub, seconds, &mut out)?;
        // SYNC: plain stop flags.
        flood_stop.store(true, Ordering::Relaxed);
        let (sent, failed, slowest) = flood
            .join()
            .map_err(|_| setup(name, "the flooding thread panicked"))?
            .map_err(|e| setup(name, e))?;
        std::thread::sleep(Duration::from_millis(100));
        load_stop.store(true, Ordering::Relaxed);
        let lost = slow
            .join()
            .map_err(|_| setup(name, "the slow reader panicked"))?
            .map_err(|e| setup(name, e))?;
        let control = with_channel_load(|| round_trips(&ping, &pong_sub, seconds, &mut out))?;
        stop.store(true, Ordering::Relaxed);
        let _ = ponger.join();
        out.inputs += sent;
        out.lost += lost + torn.load(Ordering::Relaxed);
        out.check(failed == 0, || {
            format!("{failed} of {sent} saturated publishes timed out")
        });
        out.check(slowest <= Duration::from_millis(TIMEOUT_MS + 100), || {
            format!("a saturated publish took {slowest:?} (timeout {TIMEOUT_MS} ms)")
        });
        let (q, l, c) = (quiet.rtt(), loaded.rtt(), control.rtt());
        out.figure("ping-pong P50 µs, quiet", q.p50);
        out.figure("ping-pong P99 µs, quiet", q.p99);
        out.figure("ping-pong max µs, quiet", q.max);
        out.figure("ping-pong P50 µs, saturated topic beside", l.p50);
        out.figure("ping-pong P99 µs, saturated topic beside", l.p99);
        out.figure("ping-pong max µs, saturated topic beside", l.max);
        out.figure("ping-pong P50 µs, saturated std channel beside", c.p50);
        out.figure("ping-pong P99 µs, saturated std channel beside", c.p99);
        out.figure("ping-pong max µs, saturated std channel beside", c.max);
        out.figure("P99 saturated / quiet", l.p99 / q.p99);
        out.figure("P99 saturated std channel / quiet", c.p99 / q.p99);
        out.figure(
            "saturated topic: messages delivered",
            taken.load(Ordering::Relaxed) as f64,
        );
    }
    out.leftovers = d.leftovers();
    Ok(out.finish())
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

/// Pings at 1 kHz for `t`; every ping must be answered within a second.
fn round_trips(
    ping: &nerve::Publisher<CmdVel>,
    pong: &nerve::Subscriber<CmdVel>,
    t: Duration,
    out: &mut Outcome,
) -> Result<nerve_bench::stats::Recorder, StressError> {
    let name = Scenario::MixedQos.name();
    let mut rec = nerve_bench::stats::Recorder::new();
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
    Ok(rec)
}

fn pong(ctx: &Context, stop: &AtomicBool) -> Result<(), String> {
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
    // SYNC: a plain stop flag.
    while !stop.load(Ordering::Relaxed) {
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
