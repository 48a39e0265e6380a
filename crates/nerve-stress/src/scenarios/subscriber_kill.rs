//! T2: subscribers SIGKILLed while they hold samples of large messages (iceoryx2 loans),
//! on a drop-oldest and on a back-pressure topic in turn. A drop-oldest publish must
//! never fail; a back-pressure publish may fail while its subscriber holds everything,
//! but never waits longer than its timeout; after the kill the publisher gets its samples
//! back and a living subscriber reads on, whole samples only.

use super::*;

/// Back-pressure timeout of the reliable topic.
const TIMEOUT_MS: u64 = 200;

/// Runs the scenario.
pub fn run(opts: &Options) -> Result<Outcome, StressError> {
    let name = Scenario::SubscriberKill.name();
    let d = Domain::new(name, opts)?;
    let mut out = Outcome::new(
        Scenario::SubscriberKill,
        "subscribers killed while holding samples: a drop-oldest publish never fails, a \
         back-pressure publish never waits past its timeout, the pool comes back, the living \
         subscriber reads on; nothing is left behind",
    );
    let topics = [("/stress/t2/drop", false), ("/stress/t2/bp", true)];
    let qos = |reliable: bool| {
        let q = Qos::sensor().depth(4);
        if reliable {
            q.overflow(Overflow::BackPressure {
                timeout: Duration::from_millis(TIMEOUT_MS),
            })
        } else {
            q
        }
    };
    let mut slowest = [Duration::ZERO; 2];
    let mut errors_while_held = 0u64;
    // the most publishes one round refused after its subscriber was killed
    let mut refused_after = 0u64;
    {
        let ctx = d.context()?;
        let node = ctx
            .node("stress_t2_pub")
            .create()
            .map_err(|e| setup(name, e))?;
        let pubs = topics
            .iter()
            .map(|(t, r)| node.publisher::<PointCloud>(t).qos(qos(*r)).create())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| setup(name, e))?;
        // a living subscriber in another context: reads everything, checks every sample
        let watch_ctx = d.context()?;
        let watch_node = watch_ctx
            .node("stress_t2_watch")
            .create()
            .map_err(|e| setup(name, e))?;
        let watchers = topics
            .iter()
            .map(|(t, r)| watch_node.subscriber::<PointCloud>(t).qos(qos(*r)).create())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| setup(name, e))?;
        // sends made per topic: every send takes a sequence number, delivered or not
        let mut sends = [0u64; 2];
        let mut send = |k: usize, out: &mut Outcome| -> Result<bool, StressError> {
            let started = Instant::now();
            let sent = pubs[k]
                .loan_slice(64 * 1024)
                .map_err(|e| e.to_string())
                .and_then(|mut l| {
                    sends[k] += 1;
                    l.elems_mut().fill(sends[k] as u8);
                    l.send().map_err(|e| e.to_string())
                });
            let took = started.elapsed();
            slowest[k] = slowest[k].max(took);
            out.inputs += 1;
            // the living subscriber drains after every publish (it never holds back)
            while let Some(m) = watchers[k].try_recv().map_err(|e| setup(name, e))? {
                out.lost += u64::from(!cloud_whole(m.elems(), m.header().seq));
            }
            Ok(sent.is_ok())
        };
        let bar = progress(opts, opts.rounds, name);
        for round in 0..opts.rounds {
            let k = (round % 2) as usize;
            let (topic, reliable) = topics[k];
            let mut child = d.spawn(
                "subscriber",
                RoleSpec {
                    node: "stress_t2_sub".into(),
                    large: Some(topic.into()),
                    reliable,
                    timeout_ms: TIMEOUT_MS,
                    depth: 4,
                    hold: 2,
                    ..RoleSpec::default()
                },
            )?;
            child.expect("ready", WAIT).map_err(|e| setup(name, e))?;
            if !pubs[k].wait_for_subscribers(2, WAIT) {
                out.failures
                    .push(format!("round {round}: the subscriber did not appear"));
                break;
            }
            // publish until it holds two samples, then kill it while it holds them
            let mut holding = false;
            for _ in 0..1_000 {
                if !send(k, &mut out)? {
                    if reliable {
                        errors_while_held += 1;
                    } else {
                        out.failures
                            .push(format!("round {round}: a drop-oldest publish failed"));
                    }
                }
                if child
                    .try_expect("holding", Duration::from_millis(2))
                    .is_some()
                {
                    holding = true;
                    break;
                }
            }
            if !holding {
                out.failures.push(format!(
                    "round {round}: the subscriber never held its samples"
                ));
            }
            child.kill();
            out.faults += 1;
            // the publisher goes on: drop-oldest at once, back-pressure once the dead
            // subscriber is reclaimed; every publish ends within the timeout
            let mut failed_after = 0u64;
            for _ in 0..20 {
                if !send(k, &mut out)? {
                    failed_after += 1;
                }
            }
            out.check(reliable || failed_after == 0, || {
                format!("round {round}: {failed_after} drop-oldest publishes failed after the kill")
            });
            // at most the first publish after the death waits out its timeout: that
            // failure reclaims the dead subscriber, so the next one is delivered
            out.check(!reliable || failed_after <= 1, || {
                format!(
                    "round {round}: {failed_after} back-pressure publishes failed after the \
                     kill (at most 1)"
                )
            });
            refused_after = refused_after.max(failed_after);
            bar.inc(1);
        }
        bar.finish_and_clear();
        for w in &watchers {
            out.lost += w.stats().malformed;
        }
        let limit = Duration::from_millis(TIMEOUT_MS + 100);
        out.check(slowest[1] <= limit, || {
            format!(
                "a back-pressure publish took {:?} (timeout {TIMEOUT_MS} ms)",
                slowest[1]
            )
        });
    }
    out.figure(
        "slowest drop-oldest publish ms",
        slowest[0].as_secs_f64() * 1e3,
    );
    out.figure(
        "slowest back-pressure publish ms",
        slowest[1].as_secs_f64() * 1e3,
    );
    out.figure(
        "back-pressure publishes refused while a subscriber held the pool",
        errors_while_held as f64,
    );
    out.figure(
        "back-pressure publishes refused after a kill, most in one round (of 20)",
        refused_after as f64,
    );
    out.leftovers = d.leftovers();
    Ok(out.finish())
}
