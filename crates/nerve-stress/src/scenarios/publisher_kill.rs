//! T1: a publisher SIGKILLed mid-loan and mid-write, round after round, restarted under
//! the same node name each time. It holds a loan of a large message (iceoryx2) and writes
//! small ones (the shared-memory ring) flat out when it is killed. Each new publisher must
//! be read at once, no sample may be torn, and at the end shared memory and the state
//! directory are as they were.

use super::*;

/// Runs the scenario.
pub fn run(opts: &Options) -> Result<Outcome, StressError> {
    let name = Scenario::PublisherKill.name();
    let d = Domain::new(name, opts)?;
    let mut out = Outcome::new(
        Scenario::PublisherKill,
        "a publisher killed mid-loan and mid-write restarts under the same name at once; \
         no torn sample reaches the subscriber; nothing is left behind",
    );
    let mut restart = nerve_bench_harness::stats::Recorder::new();
    {
        let ctx = d.context()?;
        let node = ctx
            .node("stress_t1_watch")
            .create()
            .map_err(|e| setup(name, e))?;
        let small = node
            .subscriber::<Imu>(SMALL)
            .qos(Qos::sensor().depth(256))
            .create()
            .map_err(|e| setup(name, e))?;
        let large = node
            .subscriber::<PointCloud>(LARGE)
            .qos(Qos::sensor().depth(4))
            .create()
            .map_err(|e| setup(name, e))?;
        let bar = progress(opts, opts.rounds, name);
        for round in 0..opts.rounds {
            let started = Instant::now();
            let mut child = d.spawn(
                "publisher",
                RoleSpec {
                    node: "stress_t1_pub".into(),
                    small: Some(SMALL.into()),
                    large: Some(LARGE.into()),
                    large_bytes: 64 * 1024,
                    depth: 4,
                    hold_loan: true,
                    ..RoleSpec::default()
                },
            )?;
            if let Err(e) = child.expect("loaned", WAIT) {
                out.failures
                    .push(format!("round {round}: the restart did not loan: {e}"));
                break;
            }
            // the new publisher is read at once: wait for its first sample
            let mut first = None;
            while first.is_none() && started.elapsed() < WAIT {
                if let Some(m) = small
                    .recv_timeout(Duration::from_millis(10))
                    .map_err(|e| setup(name, e))?
                {
                    out.inputs += 1;
                    out.lost += u64::from(!imu_whole(&m, m.header().seq));
                    first = Some(started.elapsed());
                }
            }
            let Some(first) = first else {
                out.failures.push(format!(
                    "round {round}: no sample of the new publisher within {WAIT:?}"
                ));
                break;
            };
            restart.record(first);
            // kill it at a moment of its writing loop that varies from round to round
            std::thread::sleep(Duration::from_micros(fastrand::u64(0..2_000)));
            child.kill();
            out.faults += 1;
            out.inputs += drain(&small, &large, &mut out.lost).map_err(|e| setup(name, e))?;
            bar.inc(1);
        }
        bar.finish_and_clear();
        out.lost += small.stats().malformed + large.stats().malformed;
    }
    let r = restart.rtt();
    out.figure("restart to first sample P50 ms", r.p50 / 1000.0);
    out.figure("restart to first sample max ms", r.max / 1000.0);
    out.leftovers = d.leftovers();
    Ok(out.finish())
}

const SMALL: &str = "/stress/t1/small";
const LARGE: &str = "/stress/t1/large";

/// Takes what is queued; counts samples whose content does not match their sequence
/// number into `torn`. Returns how many were checked.
fn drain(
    small: &nerve::Subscriber<Imu>,
    large: &nerve::Subscriber<PointCloud>,
    torn: &mut u64,
) -> Result<u64, nerve::RecvError> {
    let mut n = 0;
    while let Some(m) = small.try_recv()? {
        n += 1;
        *torn += u64::from(!imu_whole(&m, m.header().seq));
    }
    while let Some(m) = large.try_recv()? {
        n += 1;
        *torn += u64::from(!cloud_whole(m.elems(), m.header().seq));
    }
    Ok(n)
}
