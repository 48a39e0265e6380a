//! `nerve bench control`: parameters, actions and launch, measured beside a plain
//! service call.
//!
//! - **Round trips**, from this process to a server process (`bench role control-server`)
//!   that serves, each on a thread and node of its own: `nerve_msgs/Echo` (a service
//!   call: the request's bytes come back), `nerve_msgs/EchoAction` (send the goal, wait
//!   for its acceptance, wait for its result: the goal's bytes come back as the result),
//!   and a node's parameters (an atomic set of one integer through [`ParamClient`]: the
//!   node validates, applies and publishes the change event before it answers). The
//!   three are served by one node on one executor, as a robot node would serve them;
//!   calls alternate between the kinds in one loop, so drift of the machine hits all
//!   alike.
//! - **Idle CPU** of a node with parameters and an action server on one executor
//!   (`bench role control-idle`), over a window with no traffic.
//! - **Launch** ([`launch`]): 20 processes to all-ready and back down.

pub mod launch;
mod options;
pub use options::ControlOptions;

use crate::report::{json_rows, num, why_missing, Section, Skipped, SuiteOutput, Verdict};
use crate::harness::child::Child;
use crate::harness::PeerError;
use crate::harness::machine::{cpu_ns, Machine};
use crate::harness::stats::{Dist, Recorder};
use nerve::action::{ActionClient, ActionServer, GoalPolicy, GoalState};
use nerve::param::{ParamClient, ParamDescriptor, ParamValue, Parameters};
use nerve::prelude::*;
use nerve_msgs::action::EchoAction;
use nerve_msgs::srv::{Bytes, Echo};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::{Duration, Instant};

const SUITE: &str = "control";
/// Names of the suite's parts in skipped entries.
const ROUND_TRIPS: &str = "nerve round trips";
const IDLE_NODE: &str = "nerve idle node";
const LAUNCH: &str = "nerve launch";

/// The suite's settings.
#[derive(Clone, Debug)]
pub struct ControlSuite {
    /// Whether this is the quick variant.
    pub quick: bool,
    /// Measured round trips per kind and payload.
    pub calls: usize,
    /// Warm-up round trips per kind and payload.
    pub warmup: usize,
    /// Goal / request payloads in bytes.
    pub payloads: Vec<usize>,
    /// Seconds of the idle CPU window.
    pub idle_seconds: f64,
    /// Processes of the launch rows (0: none).
    pub launch_processes: usize,
    /// Runs of one process alone (its own start-up).
    pub launch_singles: usize,
    /// `(exe, args)` that runs `bench role`.
    pub role_command: (PathBuf, Vec<String>),
    /// Nerve domain of the runs.
    pub domain: u32,
}

impl ControlSuite {
    /// 10,000 round trips per kind after 1,000, 10 s idle.
    pub fn full(role_command: (PathBuf, Vec<String>)) -> ControlSuite {
        ControlSuite {
            quick: false,
            calls: 10_000,
            warmup: 1_000,
            payloads: vec![64, 4096, 1 << 20],
            idle_seconds: 10.0,
            launch_processes: 20,
            launch_singles: 5,
            role_command,
            domain: crate::harness::interrupt::domain(760, 9),
        }
    }

    /// 2,000 round trips per kind after 200, 3 s idle.
    pub fn quick(role_command: (PathBuf, Vec<String>)) -> ControlSuite {
        ControlSuite {
            quick: true,
            calls: 2_000,
            warmup: 200,
            idle_seconds: 3.0,
            ..ControlSuite::full(role_command)
        }
    }
}

/// What the server role serves.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ServerSpec {
    /// Nerve domain.
    pub domain: u32,
}

const SERVICE: &str = "/bench_control/echo";
const ACTION: &str = "/bench_control/echo_action";
const PARAM_NODE: &str = "bench_control_params";

/// One kind at one payload.
#[derive(Clone, Debug, Serialize)]
pub struct RoundTripRow {
    suite: &'static str,
    kind: &'static str,
    /// "service call", "action round trip" or "parameter set".
    pub what: &'static str,
    /// Payload bytes (the request or goal; 8 for a parameter).
    pub payload_bytes: usize,
    /// Round trip in µs, as measured.
    pub rtt_us: Dist,
    /// P50 over the service call's P50 at the same payload.
    pub ratio_p50: f64,
}

/// Idle CPU of a node with parameters and an action server.
#[derive(Clone, Debug, Serialize)]
pub struct IdleRow {
    suite: &'static str,
    kind: &'static str,
    /// Seconds observed.
    pub seconds: f64,
    /// CPU in % of one core.
    pub cpu_pct: f64,
}

fn context(domain: u32) -> Result<Context, String> {
    let cfg = nerve::Config::from_env()
        .and_then(|c| c.domain(domain))
        .map_err(|e| e.to_string())?;
    Context::new(cfg).map_err(|e| e.to_string())
}

/// `bench role control-server`: a node with the service, the action and parameters on
/// one executor, until stdin closes.
pub fn run_server(spec: &ServerSpec) -> Result<(), PeerError> {
    let fail = |e: &dyn std::fmt::Display| PeerError::setup("control server", e);
    let ctx = context(spec.domain).map_err(|e| fail(&e))?;
    let node = ctx.node(PARAM_NODE).create().map_err(|e| fail(&e))?;
    let mut exec = Executor::new();
    // a server answering back-to-back calls, configured as one: it looks for the next
    // request for 100 µs before it sleeps (the client's gaps between calls are a few µs;
    // a futex wake-up costs 10-15 µs on a 2-vCPU VM and fell on 1-90 % of the calls
    // without it, run to run)
    exec.spin_before_sleep(Duration::from_micros(100));
    let service = node
        .service::<Echo>(SERVICE)
        .create()
        .map_err(|e| fail(&e))?;
    exec.serve(service, |req| {
        let mut loan = req.loan_reply_slice(req.elems().len())?;
        loan.head_mut().tag = req.tag;
        loan.elems_mut().copy_from_slice(req.elems());
        loan.send()?;
        Ok(())
    })
    .map_err(|e| fail(&e))?;
    let server = ActionServer::<EchoAction>::builder(&node, ACTION)
        .policy(GoalPolicy::Parallel { max: 4 })
        .create()
        .map_err(|e| fail(&e))?;
    // echo: the goal's bytes, written in place into the result, as soon as it is accepted
    exec.action_server(
        &server,
        |_| Ok(()),
        |g| {
            let n = g.elems().len();
            let _ = g.end_with(GoalState::Succeeded, n, |h, e| {
                h.tag = g.goal().tag;
                e.copy_from_slice(g.elems());
            });
        },
    )
    .map_err(|e| fail(&e))?;
    let params = Parameters::builder(&node)
        .from_env(false)
        .create()
        .map_err(|e| fail(&e))?;
    params
        .declare("value", 0i64, ParamDescriptor::new().range(0.0, 1e12, 1.0))
        .map_err(|e| fail(&e))?;
    params.on_validate(|c| match c.iter().any(|c| c.new == ParamValue::Int(-1)) {
        true => Err("-1 is refused".into()),
        false => Ok(()),
    });
    exec.parameters(&params).map_err(|e| fail(&e))?;
    let handle = exec.handle();
    // stop when stdin closes: a blocked read, no polling
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink());
        handle.stop();
    });
    crate::harness::child::say("ready");
    exec.spin().map_err(|e| fail(&e))
}

/// `bench role control-idle`: a node with parameters and an action server on one
/// executor, idle until stdin closes.
pub fn run_idle_node(domain: u32) -> Result<(), PeerError> {
    let fail = |e: &dyn std::fmt::Display| PeerError::setup("control idle node", e);
    let ctx = context(domain).map_err(|e| fail(&e))?;
    let node = ctx
        .node("bench_control_idle")
        .create()
        .map_err(|e| fail(&e))?;
    let params = Parameters::builder(&node)
        .from_env(false)
        .create()
        .map_err(|e| fail(&e))?;
    params
        .declare("rate", 10.0, ParamDescriptor::new())
        .map_err(|e| fail(&e))?;
    let server = ActionServer::<EchoAction>::builder(&node, "/bench_control/idle_action")
        .create()
        .map_err(|e| fail(&e))?;
    let mut exec = Executor::new();
    exec.parameters(&params).map_err(|e| fail(&e))?;
    exec.action_server(&server, |_| Ok(()), |_| {})
        .map_err(|e| fail(&e))?;
    let handle = exec.handle();
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink());
        handle.stop();
    });
    crate::harness::child::say("ready");
    exec.spin().map_err(|e| fail(&e))
}

impl ControlSuite {
    fn role(&self, role: &str, spec: String, what: &'static str) -> Result<Child, String> {
        let (exe, base) = &self.role_command;
        let mut args = base.clone();
        args.push(role.into());
        args.push(spec);
        let mut c = Child::spawn(exe, &args, &[], what).map_err(|e| e.to_string())?;
        c.expect("ready", Duration::from_secs(20))
            .map_err(|e| e.to_string())?;
        Ok(c)
    }

    fn round_trips(&self) -> Result<Vec<RoundTripRow>, String> {
        let mut server = self.role(
            "control-server",
            serde_json::to_string(&ServerSpec {
                domain: self.domain,
            })
            .map_err(|e| e.to_string())?,
            "control server",
        )?;
        let ctx = context(self.domain)?;
        let node = ctx
            .node("bench_control_client")
            .create()
            .map_err(|e| e.to_string())?;
        let service = node
            .client::<Echo>(SERVICE)
            .create()
            .map_err(|e| e.to_string())?;
        let action =
            ActionClient::<EchoAction>::create(&node, ACTION).map_err(|e| e.to_string())?;
        let params = ParamClient::create(&node, PARAM_NODE).map_err(|e| e.to_string())?;
        let t = Duration::from_secs(10);
        if !service.wait_for_service(t) || !action.wait_for_server(t) || !params.wait_for_node(t) {
            return Err("the control server did not serve within 10 s".into());
        }
        let mut rows = Vec::new();
        for &size in &self.payloads {
            let body: Vec<u8> = (0..size).map(|i| (i * 31 + 7) as u8).collect();
            let (mut srv, mut act, mut par) = (Recorder::new(), Recorder::new(), Recorder::new());
            for k in 0..self.warmup + self.calls {
                let measured = k >= self.warmup;
                // the service call
                let t0 = Instant::now();
                let reply = service
                    .call_slice(&Bytes { tag: k as u64 }, &body, t)
                    .map_err(|e| e.to_string())?;
                let d = t0.elapsed();
                if reply.elems().len() != size || reply.tag != k as u64 {
                    return Err("the service echoed something else".into());
                }
                drop(reply);
                if measured {
                    srv.record(d);
                }
                // the action: goal, acceptance, result
                let t0 = Instant::now();
                let goal = action
                    .send_goal_with(size, |h, e| {
                        h.tag = k as u64;
                        e.copy_from_slice(&body);
                    })
                    .map_err(|e| e.to_string())?;
                let result = goal.result(t).map_err(|e| e.to_string())?;
                let d = t0.elapsed();
                if result.state() != GoalState::Succeeded
                    || result.elems().len() != size
                    || result.tag != k as u64
                {
                    return Err("the action echoed something else".into());
                }
                drop(result);
                if measured {
                    act.record(d);
                }
                // a parameter set (payload-independent: measured at the first size only)
                if rows.is_empty() {
                    let t0 = Instant::now();
                    params
                        .set_atomically(vec![("value".into(), ParamValue::Int(k as i64))])
                        .map_err(|e| e.to_string())?;
                    if measured {
                        par.record(t0.elapsed());
                    }
                }
            }
            let base = srv.dist();
            let row = |what, payload_bytes, d: Dist| RoundTripRow {
                suite: SUITE,
                kind: "round_trip",
                what,
                payload_bytes,
                rtt_us: d,
                ratio_p50: d.p50 / base.p50,
            };
            let first = rows.is_empty();
            rows.push(row("service call", size, base));
            rows.push(row("action round trip", size, act.dist()));
            if first {
                rows.push(row("parameter set", 8, par.dist()));
            }
        }
        // the refused value is an error and changes nothing
        let refused = params.set_atomically(vec![("value".into(), ParamValue::Int(-1))]);
        if refused.is_ok() {
            return Err("the parameter node accepted a refused value".into());
        }
        server.close_stdin();
        server.wait_exit(Duration::from_secs(5));
        Ok(rows)
    }

    fn idle(&self) -> Result<IdleRow, String> {
        let mut c = self.role("control-idle", self.domain.to_string(), "control idle node")?;
        // let start-up work settle, then count only the idle window
        std::thread::sleep(Duration::from_millis(500));
        let pid = c.pid();
        let before = cpu_ns(pid).ok_or("no CPU figures for the idle node")?;
        let t0 = Instant::now();
        std::thread::sleep(Duration::from_secs_f64(self.idle_seconds));
        let after = cpu_ns(pid).ok_or("no CPU figures for the idle node")?;
        let secs = t0.elapsed().as_secs_f64();
        c.close_stdin();
        c.wait_exit(Duration::from_secs(5));
        Ok(IdleRow {
            suite: SUITE,
            kind: "idle_node",
            seconds: secs,
            cpu_pct: (after - before) as f64 / 1e9 / secs * 100.0,
        })
    }

    /// Runs the suite.
    pub fn execute(&self, machine: &Machine) -> Result<SuiteOutput, String> {
        let _ = machine;
        let mut skipped = Vec::new();
        let round_trips = self.round_trips().unwrap_or_else(|e| {
            skipped.push(Skipped {
                system: ROUND_TRIPS.into(),
                payload_bytes: None,
                reason: e,
            });
            Vec::new()
        });
        let idle = self.idle().map_err(|e| {
            skipped.push(Skipped {
                system: IDLE_NODE.into(),
                payload_bytes: None,
                reason: e,
            })
        });
        let launch = if self.launch_processes == 0 {
            None
        } else {
            launch::measure(
                &self.role_command.0,
                self.domain,
                self.launch_processes,
                self.launch_singles,
            )
            .map_err(|e| {
                skipped.push(Skipped {
                    system: LAUNCH.into(),
                    payload_bytes: None,
                    reason: e,
                })
            })
            .ok()
        };
        Ok(self.output(round_trips, idle.ok(), launch, skipped))
    }

    fn output(
        &self,
        round_trips: Vec<RoundTripRow>,
        idle: Option<IdleRow>,
        launch: Option<launch::LaunchRow>,
        skipped: Vec<Skipped>,
    ) -> SuiteOutput {
        let mut s = Section::new(
            "Parameters, actions and launch",
            "Round trips from this process to a server process, one call of each kind in \
             turn: a service call (nerve_msgs/Echo: the request's bytes come back), an \
             action round trip (nerve_msgs/EchoAction: send the goal, wait for acceptance, \
             wait for the result, which carries the goal's bytes back) and an atomic \
             parameter set of one integer (validated, applied and published as an event \
             before the answer). One node serves all three on one executor (it sleeps \
             until a request comes); the client waits adaptively (its default). Every \
             figure as measured.",
        );
        let rows: Vec<Vec<String>> = round_trips
            .iter()
            .map(|r| {
                vec![
                    r.what.to_string(),
                    crate::report::human_bytes(r.payload_bytes),
                    num(r.rtt_us.p50),
                    num(r.rtt_us.p99),
                    num(r.rtt_us.p999),
                    num(r.rtt_us.max),
                    format!("{:.2}", r.ratio_p50),
                ]
            })
            .collect();
        s.table(
            Some("Round trips (µs)"),
            &[
                "kind",
                "payload",
                "P50",
                "P99",
                "P99.9",
                "max",
                "P50 / service P50",
            ],
            &rows,
        );
        let mut checks = Vec::new();
        let missing = |name: &str| why_missing(&skipped, name, |k| k.system == name);
        // every payload's action round trip, and the parameter set (measured once, 8 B)
        let planned = self
            .payloads
            .iter()
            .map(|&p| ("action round trip", p))
            .chain(self.payloads.first().map(|_| ("parameter set", 8)));
        for (what, payload) in planned {
            let row = round_trips
                .iter()
                .find(|r| r.what == what && r.payload_bytes == payload)
                .ok_or_else(|| missing(ROUND_TRIPS));
            checks.push(Verdict::judged(
                SUITE,
                format!("{what} P50 <= 2x a service call"),
                format!("{payload} B"),
                row.map(|r| Some(r.ratio_p50)),
                |v| v <= 2.0,
            ));
        }
        if let Some(i) = &idle {
            s.table(
                Some("Idle node with parameters and an action server (one executor)"),
                &["seconds", "CPU % of one core"],
                &[vec![num(i.seconds), format!("{:.3}", i.cpu_pct)]],
            );
        }
        checks.push(Verdict::judged(
            SUITE,
            "idle CPU <= 0.1 % of one core",
            "node with parameters and an action server",
            idle.as_ref()
                .map(|i| Some(i.cpu_pct))
                .ok_or_else(|| missing(IDLE_NODE)),
            |v| v <= 0.1,
        ));
        match &launch {
            Some(l) => launch::section(&mut s, l, &mut checks),
            None if self.launch_processes > 0 => {
                checks.extend(launch::launch_checks(Err(&missing(LAUNCH))))
            }
            None => {}
        }
        let mut json = json_rows(&round_trips);
        json.extend(json_rows(&idle.into_iter().collect::<Vec<_>>()));
        json.extend(json_rows(&launch.into_iter().collect::<Vec<_>>()));
        let summary = round_trips
            .iter()
            .filter(|r| r.payload_bytes <= 64 || r.what == "parameter set")
            .map(|r| format!("{} {:.1} µs", r.what, r.rtt_us.p50))
            .collect::<Vec<_>>()
            .join(", ");
        s.finish(SUITE, json, skipped, checks, summary)
    }
}
