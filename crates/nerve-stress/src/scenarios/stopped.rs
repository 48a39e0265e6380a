//! T5: a subscriber, a server and a client stopped with SIGSTOP while the rest of the
//! system goes on.
//! - Subscribers: this process publishes on a drop-oldest and on a back-pressure topic;
//!   one subscriber runs, one is stopped for a while. The running one loses nothing; the
//!   stopped one counts every message it missed as lost (received + lost = sent); the
//!   back-pressure publisher fails with a named error within its timeout while the
//!   stopped one holds it back, never silently and never for longer.
//! - Servers: of two servers, one is stopped: calls to it end in a timeout error within
//!   the call's timeout, calls to the other keep being answered, and once it goes on
//!   again it answers again.
//! - Clients: a stopped client does not keep the server from answering another.

use super::*;
use nerve_msgs::srv::Bytes;
use nerve_msgs::srv::Echo;

const DROP: &str = "/stress/t5/drop";
const BP: &str = "/stress/t5/bp";
const TIMEOUT_MS: u64 = 50;
/// Queue depth on the back-pressure topic: a stopped subscriber fills it at once.
const BP_DEPTH: usize = 4;

/// Runs the scenario (`rounds` stops of each kind).
pub fn run(opts: &Options) -> Result<Outcome, StressError> {
    let name = Scenario::Stopped.name();
    let d = Domain::new(name, opts)?;
    let mut out = Outcome::new(
        Scenario::Stopped,
        "a stopped subscriber, server or client never stalls the others: the running \
         subscriber loses nothing, the stopped one counts what it missed, back-pressure \
         fails by name within its timeout, calls to a stopped server time out, others are \
         served",
    );
    let bar = progress(opts, 3 * opts.rounds, name);
    for _ in 0..opts.rounds {
        subscribers(&d, &mut out)?;
        bar.inc(1);
        servers(&d, &mut out)?;
        bar.inc(1);
        clients(&d, &mut out)?;
        bar.inc(1);
    }
    bar.finish_and_clear();
    out.leftovers = d.leftovers();
    Ok(out.finish())
}

fn subscribers(d: &Domain, out: &mut Outcome) -> Result<(), StressError> {
    let name = Scenario::Stopped.name();
    let ctx = d.context()?;
    let node = ctx
        .node("stress_t5_pub")
        .create()
        .map_err(|e| setup(name, e))?;
    let drop = node
        .publisher::<Imu>(DROP)
        .qos(Qos::sensor().depth(64))
        .create()
        .map_err(|e| setup(name, e))?;
    let bp = node
        .publisher::<Imu>(BP)
        .qos(
            Qos::sensor()
                .depth(BP_DEPTH)
                .overflow(Overflow::BackPressure {
                    timeout: Duration::from_millis(TIMEOUT_MS),
                }),
        )
        .create()
        .map_err(|e| setup(name, e))?;
    let sub = |node: &str, topic: &str, reliable: bool| RoleSpec {
        node: node.into(),
        small: Some(topic.into()),
        reliable,
        timeout_ms: TIMEOUT_MS,
        depth: if reliable { BP_DEPTH } else { 64 },
        ..RoleSpec::default()
    };
    let mut running = d.spawn("subscriber", sub("stress_t5_run", DROP, false))?;
    let mut stopped = d.spawn("subscriber", sub("stress_t5_stop", DROP, false))?;
    let mut bp_running = d.spawn("subscriber", sub("stress_t5_bprun", BP, true))?;
    let mut bp_stopped = d.spawn("subscriber", sub("stress_t5_bpstop", BP, true))?;
    for c in [&mut running, &mut stopped, &mut bp_running, &mut bp_stopped] {
        c.expect("ready", WAIT).map_err(|e| setup(name, e))?;
    }
    if !drop.wait_for_subscribers(2, WAIT) || !bp.wait_for_subscribers(2, WAIT) {
        out.failures.push("the subscribers did not appear".into());
        return Ok(());
    }
    let (mut sent, mut bp_attempts, mut bp_failed) = (0u64, 0u64, 0u64);
    let mut slowest = Duration::ZERO;
    // 2,000 messages at 1 kHz; the second half with two subscribers stopped (the
    // back-pressure topic then every 100th: each attempt waits out its timeout)
    for k in 1..=2_000u64 {
        if k == 1_000 {
            stopped.signal(libc::SIGSTOP);
            bp_stopped.signal(libc::SIGSTOP);
            out.faults += 2;
        }
        match drop.publish(&imu(k)) {
            Ok(()) => sent += 1,
            Err(e) => out
                .failures
                .push(format!("a drop-oldest publish failed: {e}")),
        }
        if k < 1_000 || k % 100 == 0 {
            // every attempt takes a sequence number, failed or not (subscribers count
            // the failed ones as gaps: lost, and said so to the publisher)
            bp_attempts += 1;
            let t = Instant::now();
            if let Err(e) = bp.publish(&imu(bp_attempts)) {
                bp_failed += 1;
                let text = e.to_string();
                out.check(text.contains(BP), || {
                    format!("an error that names no topic: {text}")
                });
            }
            slowest = slowest.max(t.elapsed());
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    stopped.signal(libc::SIGCONT);
    bp_stopped.signal(libc::SIGCONT);
    // let everyone read what is left, then collect the reports
    std::thread::sleep(Duration::from_millis(200));
    let r = report_of(&mut running, name)?;
    let s = report_of(&mut stopped, name)?;
    let bpr = report_of(&mut bp_running, name)?;
    let bps = report_of(&mut bp_stopped, name)?;
    out.inputs += r.received + s.received + bpr.received + bps.received;
    out.lost += r.lost + r.torn + s.torn + bpr.torn + bps.torn;
    // back-pressure is reliable: every publish the publisher was not told failed reaches
    // both subscribers (the stopped one once it goes on); the refused ones show at most
    // as gaps
    let accepted = bp_attempts - bp_failed;
    for (who, rep) in [("running", &bpr), ("stopped", &bps)] {
        out.check(rep.received == accepted && rep.lost <= bp_failed, || {
            format!(
                "the {who} back-pressure subscriber: received {} of {accepted} accepted, \
                 {} counted lost, {bp_failed} refused",
                rep.received, rep.lost
            )
        });
    }
    out.check(r.received == sent, || {
        format!("the running subscriber got {} of {sent}", r.received)
    });
    out.check(s.lost > 0 && s.received + s.lost == sent, || {
        format!(
            "the stopped subscriber: received {} + lost {} != sent {sent}",
            s.received, s.lost
        )
    });
    out.check(bp_failed > 0, || {
        "the back-pressure publisher never noticed the stopped subscriber".into()
    });
    out.check(slowest <= Duration::from_millis(TIMEOUT_MS + 100), || {
        format!("a back-pressure publish took {slowest:?} (timeout {TIMEOUT_MS} ms)")
    });
    out.figure("stopped subscriber: lost (counted)", s.lost as f64);
    out.figure("back-pressure publishes failed by name", bp_failed as f64);
    out.figure(
        "slowest back-pressure publish ms",
        slowest.as_secs_f64() * 1e3,
    );
    Ok(())
}

fn servers(d: &Domain, out: &mut Outcome) -> Result<(), StressError> {
    let name = Scenario::Stopped.name();
    let server = |node: &str, service: &str| RoleSpec {
        node: node.into(),
        service: Some(service.into()),
        ..RoleSpec::default()
    };
    let mut a = d.spawn("server", server("stress_t5_srv_a", "/stress/t5/a"))?;
    let mut b = d.spawn("server", server("stress_t5_srv_b", "/stress/t5/b"))?;
    a.expect("ready", WAIT).map_err(|e| setup(name, e))?;
    b.expect("ready", WAIT).map_err(|e| setup(name, e))?;
    let ctx = d.context()?;
    let node = ctx
        .node("stress_t5_cli")
        .create()
        .map_err(|e| setup(name, e))?;
    let ca = node
        .client::<Echo>("/stress/t5/a")
        .create()
        .map_err(|e| setup(name, e))?;
    let cb = node
        .client::<Echo>("/stress/t5/b")
        .create()
        .map_err(|e| setup(name, e))?;
    let call = |c: &nerve::Client<Echo>, tag: u64| {
        c.call_slice(
            &Bytes { tag },
            &[1, 2, 3],
            Duration::from_millis(TIMEOUT_MS * 4),
        )
        .map(|r| r.tag == tag)
    };
    let wait_up = |c: &nerve::Client<Echo>| {
        let until = Instant::now() + WAIT;
        while Instant::now() < until {
            if call(c, 0).unwrap_or(false) {
                return true;
            }
        }
        false
    };
    if !wait_up(&ca) || !wait_up(&cb) {
        out.failures.push("the servers did not answer".into());
        return Ok(());
    }
    a.signal(libc::SIGSTOP);
    out.faults += 1;
    for tag in 1..=5 {
        out.inputs += 2;
        match call(&ca, tag) {
            Err(nerve::CallError::Timeout { .. }) => {}
            other => out.failures.push(format!(
                "a call to the stopped server ended otherwise than in a timeout: {other:?}"
            )),
        }
        out.check(call(&cb, tag).unwrap_or(false), || {
            "the other server did not answer while one was stopped".into()
        });
    }
    a.signal(libc::SIGCONT);
    out.check(wait_up(&ca), || {
        "the server did not answer once it went on".into()
    });
    Ok(())
}

fn clients(d: &Domain, out: &mut Outcome) -> Result<(), StressError> {
    let name = Scenario::Stopped.name();
    let ctx = d.context()?;
    let node = ctx
        .node("stress_t5_srv")
        .create()
        .map_err(|e| setup(name, e))?;
    let server = node
        .service::<Echo>("/stress/t5/served")
        .create()
        .map_err(|e| setup(name, e))?;
    let client = |n: &str| RoleSpec {
        node: n.into(),
        service: Some("/stress/t5/served".into()),
        timeout_ms: 1_000,
        rate_hz: 500.0,
        ..RoleSpec::default()
    };
    let mut stopped = d.spawn("client", client("stress_t5_cli_stop"))?;
    let mut running = d.spawn("client", client("stress_t5_cli_run"))?;
    let serve_for = |t: Duration| -> Result<(), StressError> {
        let until = Instant::now() + t;
        while Instant::now() < until {
            if let Some(req) = server
                .take_timeout(Duration::from_millis(5))
                .map_err(|e| setup(name, e))?
            {
                let mut l = req
                    .loan_reply_slice(req.elems().len())
                    .map_err(|e| setup(name, e))?;
                l.head_mut().tag = req.tag;
                l.elems_mut().copy_from_slice(req.elems());
                // a reply to a client that stopped waiting is not an error of the server
                let _ = l.send();
            }
        }
        Ok(())
    };
    serve_for(Duration::from_millis(300))?;
    stopped.signal(libc::SIGSTOP);
    out.faults += 1;
    serve_for(Duration::from_millis(500))?;
    stopped.signal(libc::SIGCONT);
    serve_for(Duration::from_millis(100))?;
    running.close_stdin();
    stopped.close_stdin();
    serve_for(Duration::from_millis(100))?;
    let r = report_of(&mut running, name)?;
    let _ = report_of(&mut stopped, name)?;
    out.inputs += r.received;
    out.lost += r.torn;
    out.check(r.received > 0 && r.errors.is_empty(), || {
        format!(
            "the running client: {} answers, errors {:?}",
            r.received, r.errors
        )
    });
    Ok(())
}
