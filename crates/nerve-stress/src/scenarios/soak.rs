//! T14: a mixed system under churn for a time. A publisher of small messages (the
//! shared-memory ring) and large ones (iceoryx2 loans) at 500 Hz, a subscriber of both, a
//! server of a service and an action, and in this process a client calling the service
//! at about 200 Hz, an action client sending a goal every second, and a recorder writing
//! the small topic to MCAP files (split every 16 MiB, the older ones removed as it goes);
//! every few seconds the subscriber is SIGKILLed and started again, and less often the
//! publisher. Once a second this process samples its own resident memory and descriptors
//! and those of the server (which lives throughout), the domain's shared memory, and the
//! P99 round trip of that second's calls; the slopes of those series are reported per
//! hour, over the whole run and over its second half (past the step the first churn
//! makes), beside their means. The verdict: nothing lost or torn, every call and goal of
//! the living server answered correctly, nothing left behind. Flatness, the P99 against
//! the first, quiet part of the run and the recorder's counts are figures.
//!
//! Run as root, it adds the network plane: a publisher of small messages (back-pressure
//! QoS) on one simulated host and a subscriber of it on another, across Zenoh; that
//! subscriber is SIGKILLed and started again every 7 s, and what it received must be
//! whole and without gaps; the publisher's memory and descriptors are sampled too.

use super::*;
use nerve::action::{ActionClient, GoalState};
use nerve_bag::record::{RecordOptions, Recorder, Selection};
use nerve_msgs::action::{Fibonacci, FibonacciGoal};
use nerve_msgs::srv::Bytes;
use nerve_msgs::srv::Echo;

const SMALL: &str = "/stress/t14/small";
const LARGE: &str = "/stress/t14/large";
const SERVICE: &str = "/stress/t14/echo";
const ACTION: &str = "/stress/t14/fibonacci";
const NET_SMALL: &str = "/stress/t14/net";
/// Size at which the recorder starts a new file.
const SPLIT_BYTES: u64 = 16 << 20;

/// One second of the run.
#[derive(Clone, Copy, Debug, Default)]
struct Sample {
    t: f64,
    rss: f64,
    fds: f64,
    server_rss: f64,
    server_fds: f64,
    shm: f64,
    p99_us: f64,
    net_rss: f64,
    net_fds: f64,
}

/// The network plane's part of the soak: a publisher on simulated host 0, a subscriber
/// on host 1.
struct NetPair {
    sim: nerve_bench_harness::hosts::SimHosts,
    publisher: nerve_bench_harness::child::Child,
    subscriber: nerve_bench_harness::child::Child,
}

/// What the network pair's roles run with.
fn net_spec(node: &str) -> RoleSpec {
    RoleSpec {
        node: node.into(),
        small: Some(NET_SMALL.into()),
        depth: 64,
        rate_hz: 200.0,
        reliable: true,
        timeout_ms: 500,
        ..RoleSpec::default()
    }
}

/// Starts the network pair where simulated hosts can be made (root); `None` otherwise.
fn start_net(d: &Domain, out: &mut Outcome) -> Result<Option<NetPair>, StressError> {
    let name = Scenario::Soak.name();
    if nerve_bench_harness::hosts::unavailable().is_some() {
        out.figure("network plane part (1: run, 0: not, it needs root)", 0.0);
        return Ok(None);
    }
    out.figure("network plane part (1: run, 0: not, it needs root)", 1.0);
    let sim = nerve_bench_harness::hosts::SimHosts::create(2, 2000).map_err(|e| setup(name, e))?;
    let mut subscriber = d.spawn_on(&sim, 1, "subscriber", net_spec("stress_t14_net_sub"))?;
    subscriber
        .expect("ready", WAIT)
        .map_err(|e| setup(name, e))?;
    let publisher = d.spawn_on(&sim, 0, "publisher", net_spec("stress_t14_net_pub"))?;
    subscriber
        .expect("first", WAIT)
        .map_err(|e| setup(name, format!("nothing crossed the network plane: {e}")))?;
    Ok(Some(NetPair {
        sim,
        publisher,
        subscriber,
    }))
}

/// Runs the scenario for `seconds`.
pub fn run(opts: &Options) -> Result<Outcome, StressError> {
    let name = Scenario::Soak.name();
    let d = Domain::new(name, opts)?;
    let mut out = Outcome::new(
        Scenario::Soak,
        "a mixed system under churn: nothing lost or torn, every call answered, memory, \
         descriptors and shared memory flat, nothing left behind",
    );
    let spec = |node: &str| RoleSpec {
        node: node.into(),
        small: Some(SMALL.into()),
        large: Some(LARGE.into()),
        large_bytes: 256 * 1024,
        depth: 16,
        rate_hz: 500.0,
        service: Some(SERVICE.into()),
        action: Some(ACTION.into()),
        ..RoleSpec::default()
    };
    let mut samples = Vec::new();
    let with_net;
    let bag_dir = d.config.state_dir.join("soak-bags");
    std::fs::create_dir_all(&bag_dir).map_err(|e| setup(name, e))?;
    {
        let mut server = d.spawn("server", spec("stress_t14_server"))?;
        server.expect("ready", WAIT).map_err(|e| setup(name, e))?;
        let mut publisher = d.spawn("publisher", spec("stress_t14_pub"))?;
        let mut subscriber = d.spawn("subscriber", spec("stress_t14_sub"))?;
        let ctx = d.context()?;
        let node = ctx
            .node("stress_t14_client")
            .create()
            .map_err(|e| setup(name, e))?;
        let client = node
            .client::<Echo>(SERVICE)
            .create()
            .map_err(|e| setup(name, e))?;
        let actions =
            ActionClient::<Fibonacci>::create(&node, ACTION).map_err(|e| setup(name, e))?;
        if !actions.wait_for_server(WAIT) {
            return Err(setup(name, "the action server did not appear"));
        }
        let recorder = Recorder::start(
            &ctx,
            RecordOptions {
                selection: Selection {
                    topics: vec![SMALL.into()],
                    ..Selection::default()
                },
                split_size: Some(SPLIT_BYTES),
                overwrite: true,
                ..RecordOptions::new(bag_dir.join("soak.mcap"))
            },
        )
        .map_err(|e| setup(name, e))?;
        let mut net = start_net(&d, &mut out)?;
        with_net = net.is_some();
        let mut goals = 0u64;
        let payload = vec![5u8; 256];
        let start = Instant::now();
        let total = Duration::from_secs_f64(opts.seconds);
        let bar = progress(opts, total.as_secs().max(1), name);
        let (mut second, mut calls) = (0u64, 0u64);
        let mut rec = nerve_bench_harness::stats::Recorder::new();
        // churn: the subscriber every 5 s, the publisher every 13 s (none in the first
        // fifth of the run: the quiet part the P99 is compared with)
        let quiet = total.as_secs_f64() / 5.0;
        while start.elapsed() < total {
            calls += 1;
            let t = Instant::now();
            match client.call_slice(&Bytes { tag: calls }, &payload, Duration::from_secs(1)) {
                Ok(r) if r.tag == calls && r.elems() == &payload[..] => {
                    rec.record(t.elapsed());
                    out.inputs += 1;
                }
                Ok(_) => out.lost += 1,
                Err(e) => out.failures.push(format!("call {calls}: {e}")),
            }
            let now = start.elapsed().as_secs();
            if now > second {
                second = now;
                samples.push(Sample {
                    t: start.elapsed().as_secs_f64(),
                    rss: crate::domain::rss_bytes(std::process::id()).unwrap_or(0) as f64,
                    fds: crate::domain::open_fds() as f64,
                    server_rss: crate::domain::rss_bytes(server.pid()).unwrap_or(0) as f64,
                    server_fds: crate::domain::fds_of(server.pid()).unwrap_or(0) as f64,
                    shm: d.shm_bytes() as f64,
                    p99_us: rec.rtt().p99,
                    net_rss: net.as_ref().map_or(0, |n| {
                        crate::domain::rss_bytes(n.publisher.pid()).unwrap_or(0)
                    }) as f64,
                    net_fds: net
                        .as_ref()
                        .map_or(0, |n| crate::domain::fds_of(n.publisher.pid()).unwrap_or(0))
                        as f64,
                });
                rec = nerve_bench_harness::stats::Recorder::new();
                bar.inc(1);
                goals += 1;
                goal(&actions, goals, &mut out);
                prune_bags(&bag_dir);
                let t = start.elapsed().as_secs_f64();
                if t > quiet && second % 5 == 0 {
                    churn(
                        &d,
                        &mut subscriber,
                        "subscriber",
                        spec("stress_t14_sub"),
                        &mut out,
                    )?;
                }
                if let Some(n) = net.as_mut().filter(|_| t > quiet && second % 7 == 0) {
                    n.subscriber.kill();
                    out.faults += 1;
                    n.subscriber =
                        d.spawn_on(&n.sim, 1, "subscriber", net_spec("stress_t14_net_sub"))?;
                    if let Err(e) = n.subscriber.expect("first", WAIT) {
                        out.failures.push(format!(
                            "a restarted subscriber on another host did not receive: {e}"
                        ));
                    }
                }
                if t > quiet && second % 13 == 0 {
                    churn(
                        &d,
                        &mut publisher,
                        "publisher",
                        spec("stress_t14_pub"),
                        &mut out,
                    )?;
                }
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        bar.finish_and_clear();
        match recorder.stop() {
            Ok(r) => {
                let written: u64 = r.topics.iter().map(|t| t.written).sum();
                out.figure("recorder: samples written", written as f64);
                out.figure("recorder: samples lost (counted)", r.losses() as f64);
                out.figure("recorder: files", r.files.len() as f64);
            }
            Err(e) => out.failures.push(format!("the recorder failed: {e}")),
        }
        out.figure("action goals answered", goals as f64);
        let r = report_of(&mut subscriber, name)?;
        out.inputs += r.received;
        out.lost += r.torn + r.malformed;
        publisher.close_stdin();
        publisher.stop();
        server.stop();
        if let Some(mut n) = net.take() {
            // reliable across hosts: a gap within one subscriber's life is a loss
            let r = report_of(&mut n.subscriber, name)?;
            out.figure(
                "network plane: samples received by the last subscriber",
                r.received as f64,
            );
            out.inputs += r.received;
            out.lost += r.torn + r.malformed + r.lost;
            n.publisher.close_stdin();
            n.publisher.stop();
        }
    }
    let _ = std::fs::remove_dir_all(&bag_dir);
    figures(&samples, opts.seconds, with_net, &mut out);
    out.leftovers = d.leftovers();
    Ok(out.finish())
}

/// Sends goal number `n` (order 10 to 29) and checks its result: the right sequence.
fn goal(actions: &ActionClient<Fibonacci>, n: u64, out: &mut Outcome) {
    let order = 10 + (n % 20) as i64;
    let result = actions
        .send_goal(&FibonacciGoal { order })
        .and_then(|g| g.result(Duration::from_secs(2)));
    match result {
        Ok(r) if r.state() == GoalState::Succeeded => {
            out.inputs += 1;
            if r.elems() != &fibonacci(order as usize)[..] {
                out.lost += 1;
            }
        }
        Ok(r) => out
            .failures
            .push(format!("goal {n} ended {}", r.state().name())),
        Err(e) => out.failures.push(format!("goal {n}: {e}")),
    }
}

/// Removes the recorder's finished files (all but the newest), so the disk holds at most
/// two splits.
fn prune_bags(dir: &std::path::Path) {
    let mut files: Vec<(std::time::SystemTime, std::path::PathBuf)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .collect();
    files.sort();
    files.pop();
    for (_, f) in files {
        let _ = std::fs::remove_file(f);
    }
}

/// Kills a child and starts it again; the new one must work.
fn churn(
    d: &Domain,
    child: &mut nerve_bench_harness::child::Child,
    role: &str,
    spec: RoleSpec,
    out: &mut Outcome,
) -> Result<(), StressError> {
    child.kill();
    out.faults += 1;
    *child = d.spawn(role, spec)?;
    let line = if role == "subscriber" {
        "first"
    } else {
        "sending"
    };
    if let Err(e) = child.expect(line, WAIT) {
        out.failures
            .push(format!("a restarted {role} did not work: {e}"));
    }
    Ok(())
}

/// Least-squares slope of `y` over `x`.
pub fn slope(points: &[(f64, f64)]) -> f64 {
    let n = points.len() as f64;
    if n < 2.0 {
        return 0.0;
    }
    let (mx, my) = (
        points.iter().map(|p| p.0).sum::<f64>() / n,
        points.iter().map(|p| p.1).sum::<f64>() / n,
    );
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    if sxx == 0.0 {
        0.0
    } else {
        sxy / sxx
    }
}

/// Slopes per hour (whole run and second half) and means of every series; the P99 of
/// the churned part against the quiet first fifth. The first two seconds (start-up) are
/// left out of the slopes; the network publisher's series only `with_net`.
fn figures(samples: &[Sample], seconds: f64, with_net: bool, out: &mut Outcome) {
    let settled: Vec<&Sample> = samples.iter().filter(|s| s.t >= 2.0).collect();
    /// A series: its label, how to read it from a sample, and its scale.
    type Series = (&'static str, fn(&Sample) -> f64, f64);
    let series: [Series; 8] = [
        ("RSS of this process MiB", |s| s.rss, 1.0 / (1 << 20) as f64),
        ("descriptors of this process", |s| s.fds, 1.0),
        (
            "RSS of the server MiB",
            |s| s.server_rss,
            1.0 / (1 << 20) as f64,
        ),
        ("descriptors of the server", |s| s.server_fds, 1.0),
        (
            "shared memory of the domain MiB",
            |s| s.shm,
            1.0 / (1 << 20) as f64,
        ),
        ("call P99 µs", |s| s.p99_us, 1.0),
        (
            "RSS of the network publisher MiB",
            |s| s.net_rss,
            1.0 / (1 << 20) as f64,
        ),
        ("descriptors of the network publisher", |s| s.net_fds, 1.0),
    ];
    // the last two series are the network publisher's, sampled only when it ran
    let shown = if with_net {
        series.len()
    } else {
        series.len() - 2
    };
    for (label, f, scale) in series.into_iter().take(shown) {
        let points: Vec<(f64, f64)> = settled.iter().map(|s| (s.t, f(s) * scale)).collect();
        let mean = points.iter().map(|p| p.1).sum::<f64>() / points.len().max(1) as f64;
        out.figure(&format!("{label}: mean"), mean);
        out.figure(&format!("{label}: slope per hour"), slope(&points) * 3600.0);
        // the second half alone: a step when the churn starts (threads, arenas and code
        // pages of the reconnection paths touched once) is warm-up, not growth
        let late: Vec<(f64, f64)> = points
            .iter()
            .copied()
            .filter(|p| p.0 > seconds / 2.0)
            .collect();
        out.figure(
            &format!("{label}: slope per hour, second half"),
            slope(&late) * 3600.0,
        );
    }
    let quiet: Vec<f64> = settled
        .iter()
        .filter(|s| s.t <= seconds / 5.0)
        .map(|s| s.p99_us)
        .collect();
    let churned: Vec<f64> = settled
        .iter()
        .filter(|s| s.t > seconds / 5.0)
        .map(|s| s.p99_us)
        .collect();
    let median = |v: &[f64]| {
        let mut v = v.to_vec();
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied().unwrap_or(0.0)
    };
    if !quiet.is_empty() && !churned.is_empty() {
        out.figure(
            "call P99 under churn / quiet (medians of the per-second P99s)",
            median(&churned) / median(&quiet).max(1e-9),
        );
    }
    out.figure("seconds sampled", samples.len() as f64);
}

#[cfg(test)]
mod tests {
    use super::slope;

    #[test]
    fn slope_of_a_line_and_of_noise() {
        let line: Vec<(f64, f64)> = (0..10).map(|x| (x as f64, 3.0 * x as f64 + 1.0)).collect();
        assert!((slope(&line) - 3.0).abs() < 1e-9);
        let flat: Vec<(f64, f64)> = (0..10).map(|x| (x as f64, 5.0)).collect();
        assert_eq!(slope(&flat), 0.0);
        assert_eq!(slope(&[(1.0, 2.0)]), 0.0);
    }
}
