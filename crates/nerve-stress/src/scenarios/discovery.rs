//! T12: many nodes in many processes started at once, then all SIGKILLed and started
//! again, round after round. Each process holds four nodes; node `k` of process `i`
//! publishes on its own topic and subscribes to node `k` of process `i + 1`, so every
//! process must discover its neighbour's publishers and the neighbour its subscribers. A
//! round has converged when every process has heard all its peers and this process's
//! view of the graph lists every node alive; it must converge within [`CONVERGE_LIMIT`].
//! Per round: the time to converge, the processes' CPU over a second once converged, their
//! resident memory, and the domain's shared memory (which must not grow from round to
//! round: the nodes killed in one round are reclaimed by the next).

use super::*;
use nerve_bench_harness::child::Child;
use nerve_bench_harness::machine::cpu_seconds;
use nerve_bench_harness::stats::Recorder;

const TOPICS: &str = "/stress/t12";
const NODE: &str = "stress_t12";
/// Nodes per process.
const NODES_PER_PROCESS: usize = 4;
/// The bound on convergence (from the first spawn to every node heard and listed).
const CONVERGE_LIMIT: Duration = Duration::from_secs(60);

/// Runs the scenario with `opts.processes` processes for `opts.rounds` restarts.
pub fn run(opts: &Options) -> Result<Outcome, StressError> {
    let name = Scenario::Discovery.name();
    let d = Domain::new(name, opts)?;
    let ctx = d.context()?;
    let procs = opts.processes;
    let total = procs * NODES_PER_PROCESS;
    let mut out = Outcome::new(
        Scenario::Discovery,
        &format!(
            "{total} nodes in {procs} processes started at once and restarted after \
             SIGKILL: every round converges within {}s (every subscriber hears its peer, \
             every node listed alive), shared memory does not grow from round to round, \
             nothing left behind",
            CONVERGE_LIMIT.as_secs()
        ),
    );
    let mut converge = Recorder::new();
    let (mut cpu_max, mut rss_max, mut dead_max) = (0.0f64, 0u64, 0usize);
    let mut shm_first = None;
    let mut shm_last = 0u64;
    let bar = progress(opts, opts.rounds + 1, name);
    for round in 0..=opts.rounds {
        let started = Instant::now();
        let mut system = (0..procs)
            .map(|i| d.spawn("nodes", spec(i, procs)))
            .collect::<Result<Vec<Child>, _>>()?;
        if let Err(e) = converged(&ctx, &mut system, total, started) {
            out.failures.push(format!("round {round}: {e}"));
            break;
        }
        converge.record(started.elapsed());
        let dead = list(&ctx).map_or(0, |(_, dead)| dead);
        dead_max = dead_max.max(dead);
        // a second of the converged system: the CPU of all its processes, in cores
        let pids: Vec<u32> = system.iter().map(Child::pid).collect();
        let cpu = |pids: &[u32]| pids.iter().filter_map(|&p| cpu_seconds(p)).sum::<f64>();
        let (c0, t0) = (cpu(&pids), Instant::now());
        std::thread::sleep(Duration::from_secs(1));
        cpu_max = cpu_max.max((cpu(&pids) - c0) / t0.elapsed().as_secs_f64());
        let rss: u64 = pids
            .iter()
            .filter_map(|&p| crate::domain::rss_bytes(p))
            .sum();
        rss_max = rss_max.max(rss);
        shm_last = d.shm_bytes();
        shm_first.get_or_insert(shm_last);
        if round == opts.rounds {
            for c in &mut system {
                let r = report_of(c, name)?;
                out.inputs += r.received;
                out.lost += r.torn + r.malformed;
                c.stop();
            }
        } else {
            for c in &mut system {
                c.kill();
                out.faults += 1;
            }
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    let shm_first = shm_first.unwrap_or(0);
    out.check(shm_last <= shm_first + shm_first / 4, || {
        format!(
            "the domain's shared memory grew from {} KiB (first round) to {} KiB (last)",
            shm_first / 1024,
            shm_last / 1024
        )
    });
    let c = converge.rtt();
    out.figure("processes", procs as f64);
    out.figure("nodes", total as f64);
    out.figure("converge P50 ms", c.p50 / 1000.0);
    out.figure("converge max ms", c.max / 1000.0);
    out.figure("converged CPU of all processes max (cores)", cpu_max);
    out.figure(
        "resident memory of all processes max MiB",
        rss_max as f64 / 1048576.0,
    );
    out.figure(
        "dead nodes still listed at convergence max",
        dead_max as f64,
    );
    out.figure(
        "domain shared memory first round KiB",
        shm_first as f64 / 1024.0,
    );
    out.figure(
        "domain shared memory last round KiB",
        shm_last as f64 / 1024.0,
    );
    drop(ctx);
    out.leftovers = d.leftovers();
    Ok(out.finish())
}

/// The spec of process `i` of `procs`: four nodes, 100 Hz, drop-oldest.
fn spec(i: usize, procs: usize) -> RoleSpec {
    RoleSpec {
        node: NODE.into(),
        small: Some(TOPICS.into()),
        depth: 4,
        rate_hz: 100.0,
        nodes: NODES_PER_PROCESS,
        index: i,
        processes: procs,
        ..RoleSpec::default()
    }
}

/// Waits until every process has heard all its peers and the graph lists `total` of the
/// scenario's nodes alive, within [`CONVERGE_LIMIT`] of `started`.
fn converged(
    ctx: &Context,
    system: &mut [Child],
    total: usize,
    started: Instant,
) -> Result<(), String> {
    let deadline = started + CONVERGE_LIMIT;
    for (i, c) in system.iter_mut().enumerate() {
        let left = deadline.saturating_duration_since(Instant::now());
        c.expect("first", left)
            .map_err(|e| format!("process {i} did not hear its peers: {e}"))?;
    }
    loop {
        let alive = list(ctx).map(|(alive, _)| alive)?;
        if alive == total {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!(
                "the graph lists {alive} of {total} nodes alive after {:?}",
                CONVERGE_LIMIT
            ));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The scenario's nodes the graph lists: (alive, dead).
fn list(ctx: &Context) -> Result<(usize, usize), String> {
    let nodes = nerve::introspect::list_nodes(ctx)?;
    let ours = nodes.iter().filter(|n| n.name.starts_with(NODE));
    Ok(ours.fold((0, 0), |(a, d), n| match n.state {
        "alive" => (a + 1, d),
        "dead" => (a, d + 1),
        _ => (a, d),
    }))
}
