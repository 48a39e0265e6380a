//! T3: a small system (a publisher of small and large messages, a subscriber, a server,
//! a client) SIGKILLed all at once and started again, round after round. Each restart
//! must work (the subscriber reads, the client gets answers); after a last round that
//! ends cleanly, shared memory, the state directory and this process's descriptors are
//! as they were.

use super::*;
use nerve_bench_harness::child::Child;

const SMALL: &str = "/stress/t3/small";
const LARGE: &str = "/stress/t3/large";
const SERVICE: &str = "/stress/t3/echo";

/// Runs the scenario.
pub fn run(opts: &Options) -> Result<Outcome, StressError> {
    let name = Scenario::RestartAll.name();
    let d = Domain::new(name, opts)?;
    let mut out = Outcome::new(
        Scenario::RestartAll,
        "every process of a system killed and restarted: each restart works at once, and \
         once the system ends cleanly /dev/shm, the state directory and descriptors are as \
         before",
    );
    let mut restart = nerve_bench_harness::stats::Recorder::new();
    let bar = progress(opts, opts.rounds, name);
    for round in 0..=opts.rounds {
        let started = Instant::now();
        let mut system = start(&d)?;
        if let Err(e) = working(&mut system) {
            out.failures.push(format!("round {round}: {e}"));
            break;
        }
        restart.record(started.elapsed());
        if round == opts.rounds {
            // the last round ends cleanly: every role reports what it saw
            // (calls made before the server was up fail: the client counts them, and
            // they are not losses)
            for k in [0, 1, 3] {
                let r = report_of(&mut system[k], name)?;
                out.inputs += r.received;
                out.lost += r.torn + r.malformed;
            }
            for c in &mut system {
                c.stop();
            }
        } else {
            // in a random order, as a power cut does not
            fastrand::shuffle(&mut system);
            for c in &mut system {
                c.kill();
                out.faults += 1;
            }
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    let r = restart.rtt();
    out.figure("restart to working P50 ms", r.p50 / 1000.0);
    out.figure("restart to working max ms", r.max / 1000.0);
    out.leftovers = d.leftovers();
    Ok(out.finish())
}

/// Starts the system: publisher, subscriber, server, client (in that order in the vec).
fn start(d: &Domain) -> Result<Vec<Child>, StressError> {
    let base = RoleSpec {
        small: Some(SMALL.into()),
        large: Some(LARGE.into()),
        large_bytes: 64 * 1024,
        depth: 16,
        rate_hz: 1_000.0,
        timeout_ms: 1_000,
        service: Some(SERVICE.into()),
        ..RoleSpec::default()
    };
    let spec = |node: &str| RoleSpec {
        node: node.into(),
        ..base.clone()
    };
    Ok(vec![
        d.spawn("publisher", spec("stress_t3_pub"))?,
        d.spawn("subscriber", spec("stress_t3_sub"))?,
        d.spawn("server", spec("stress_t3_server"))?,
        d.spawn(
            "client",
            RoleSpec {
                rate_hz: 100.0,
                ..spec("stress_t3_client")
            },
        )?,
    ])
}

/// Waits until the subscriber reads and the client has an answer.
fn working(system: &mut [Child]) -> Result<(), String> {
    system[1]
        .expect("first", WAIT)
        .map_err(|e| format!("the subscriber read nothing: {e}"))?;
    system[3]
        .expect("ok", WAIT)
        .map_err(|e| format!("the client got no answer: {e}"))?;
    Ok(())
}
