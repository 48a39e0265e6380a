//! The fleet suite's one-host rows: robot scale on one machine (issue 46). One process
//! subscribes to `topics` topics from `nodes / 2` nodes, a second publishes them from as
//! many nodes; each reports how long its endpoints took to create and what they cost in
//! memory (the delta against the same process with its nodes and no endpoint), the
//! subscriber whether every subscription got a sample; then `nerve topic list` and
//! `nerve node list` are timed as a user runs them, while both processes live.

use crate::harness::child::{say, stdin_closed, Child};
use crate::harness::machine::{memory, Memory};
use crate::harness::PeerError;
use crate::report::{num, Section, Skipped, Verdict};
use crate::suite::{self, Env, Role};
use nerve::{Config, Context};
use nerve_msgs::Twist;
use serde::{Deserialize, Serialize};
use std::process::{Command, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// The child role: `nerve bench role fleet-one-host <spec>`.
pub const ROLES: &[Role] = &[Role {
    name: "fleet-one-host",
    run: |args| {
        let spec: EndpointSpec = suite::spec(args, "fleet-one-host")?;
        Ok(run_endpoints(&spec)?)
    },
}];

/// Creation must take at most this long (seconds), per process.
pub const CREATE_TARGET_S: f64 = 2.0;
/// Memory per subscription at most (bytes of RSS).
pub const SUB_BYTES_TARGET: f64 = 100_000.0;
/// `nerve topic list` and `nerve node list` at most (seconds).
pub const LIST_TARGET_S: f64 = 0.5;

/// One process of the one-host run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct EndpointSpec {
    /// Nerve domain.
    pub domain: u32,
    /// `true`: subscribe; `false`: publish.
    pub subscribe: bool,
    /// Topics (`/fleet/t<i>`), one endpoint each.
    pub topics: usize,
    /// Nodes of this process; topic `i` goes to node `i % nodes`.
    pub nodes: usize,
}

/// What one process reports after creating its endpoints.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Created {
    /// Seconds to create the nodes.
    pub nodes_s: f64,
    /// Seconds to create the endpoints.
    pub endpoints_s: f64,
    /// CPU seconds (user and system, every thread) spent creating the endpoints.
    pub endpoints_cpu_s: f64,
    /// Memory with the context and nodes, no endpoint.
    pub before: (u64, u64),
    /// Memory with every endpoint.
    pub after: (u64, u64),
}

/// One one-host row of the fleet suite.
#[derive(Clone, Debug, Serialize)]
pub struct OneHostRow {
    /// Always "fleet".
    pub suite: &'static str,
    /// Always "one-host".
    pub kind: &'static str,
    /// Always 1.
    pub hosts: usize,
    /// Whether the network plane was on (`NERVE_NETWORK=on`).
    pub network: bool,
    /// Topics (one publisher and one subscriber each).
    pub topics: usize,
    /// Nodes in all (half in each process).
    pub nodes: usize,
    /// Seconds the subscriber process took to create its nodes.
    pub sub_nodes_s: f64,
    /// Seconds the subscriber process took to create its subscriptions (it creates the
    /// topics).
    pub sub_create_s: f64,
    /// Seconds the publisher process took to create its publishers (topics exist).
    pub pub_create_s: f64,
    /// CPU seconds the subscriber process spent creating its subscriptions (wall time
    /// also holds waits for the disk and for other processes' CPU).
    pub sub_create_cpu_s: f64,
    /// CPU seconds the publisher process spent creating its publishers.
    pub pub_create_cpu_s: f64,
    /// The state directory's file system (`NERVE_STATE_DIR` or the default).
    pub state_dir: String,
    /// RSS bytes per subscription, connected and receiving (delta against the same
    /// process with its nodes and no endpoint).
    pub rss_per_sub: f64,
    /// RSS bytes per subscription right after creation, before any publisher existed.
    pub rss_per_sub_created: f64,
    /// RSS bytes per publisher right after creation (subscribers exist).
    pub rss_per_pub_created: f64,
    /// PSS bytes per subscription.
    pub pss_per_sub: f64,
    /// RSS bytes per publisher, after 20 rounds of publishing every topic.
    pub rss_per_pub: f64,
    /// PSS bytes per publisher.
    pub pss_per_pub: f64,
    /// RSS of the subscriber process before its endpoints.
    pub sub_rss_base: u64,
    /// RSS of the publisher process before its endpoints.
    pub pub_rss_base: u64,
    /// Bytes of /dev/shm the domain holds (allocated blocks).
    pub shm_bytes: u64,
    /// Files of the domain in /dev/shm.
    pub shm_files: usize,
    /// Seconds `nerve topic list` took.
    pub topic_list_s: Option<f64>,
    /// Seconds `nerve node list` took.
    pub node_list_s: Option<f64>,
    /// Why `nerve topic list` gave no time (it failed or hung), if it did not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub topic_list_error: Option<String>,
    /// Why `nerve node list` gave no time, if it did not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_list_error: Option<String>,
    /// Topics `nerve topic list` printed (lines with `/fleet/`).
    pub topics_listed: usize,
    /// Subscriptions that got a sample.
    pub received: usize,
    /// Whether every subscription got a sample.
    pub all_received: bool,
}

fn topic(i: usize) -> String {
    format!("/fleet/t{i}")
}

fn own_cpu_s() -> f64 {
    crate::harness::machine::cpu_ns(std::process::id()).unwrap_or(0) as f64 / 1e9
}

fn own_memory() -> (u64, u64) {
    memory(std::process::id()).map_or((0, 0), |m: Memory| (m.rss_bytes, m.pss_bytes))
}

/// The child: creates its nodes and endpoints, says `created {json}`; a subscriber then
/// says `received <n> <rss> <pss>` once every subscription has a sample (or after 30 s),
/// a publisher publishes every topic every 50 ms and says `steady <rss> <pss>` after 20
/// rounds; both until stdin closes.
pub fn run_endpoints(spec: &EndpointSpec) -> Result<(), PeerError> {
    let what = if spec.subscribe {
        "one-host subscriber"
    } else {
        "one-host publisher"
    };
    let fail = |e: &dyn std::fmt::Display| PeerError::setup(what, e);
    let stop = stdin_closed();
    let ctx = Context::new(
        Config::from_env()
            .and_then(|c| c.domain(spec.domain))
            .map_err(|e| fail(&e))?,
    )
    .map_err(|e| fail(&e))?;
    let side = if spec.subscribe { "sub" } else { "pub" };
    let t0 = Instant::now();
    let nodes = (0..spec.nodes.max(1))
        .map(|i| ctx.node(&format!("fleet_{side}_{i}")).create())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| fail(&e))?;
    let mut created = Created {
        nodes_s: t0.elapsed().as_secs_f64(),
        before: own_memory(),
        ..Created::default()
    };
    let t1 = Instant::now();
    let c1 = own_cpu_s();
    if spec.subscribe {
        let subs = (0..spec.topics)
            .map(|i| nodes[i % nodes.len()].subscriber::<Twist>(&topic(i)).create())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| fail(&e))?;
        created.endpoints_s = t1.elapsed().as_secs_f64();
        created.endpoints_cpu_s = own_cpu_s() - c1;
        created.after = own_memory();
        say(&format!(
            "created {}",
            serde_json::to_string(&created).unwrap_or_default()
        ));
        let mut got = vec![false; subs.len()];
        let mut n = 0;
        let deadline = Instant::now() + Duration::from_secs(30);
        while n < subs.len() && Instant::now() < deadline && !stop.load(Ordering::Relaxed) {
            for (s, g) in subs.iter().zip(got.iter_mut()) {
                while let Ok(Some(_)) = s.try_recv() {
                    if !*g {
                        *g = true;
                        n += 1;
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let (rss, pss) = own_memory();
        say(&format!("received {n} {rss} {pss}"));
        while !stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(20));
        }
    } else {
        let pubs = (0..spec.topics)
            .map(|i| nodes[i % nodes.len()].publisher::<Twist>(&topic(i)).create())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| fail(&e))?;
        created.endpoints_s = t1.elapsed().as_secs_f64();
        created.endpoints_cpu_s = own_cpu_s() - c1;
        created.after = own_memory();
        say(&format!(
            "created {}",
            serde_json::to_string(&created).unwrap_or_default()
        ));
        let msg = Twist::default();
        let mut round = 0u32;
        while !stop.load(Ordering::Relaxed) {
            for p in &pubs {
                // a sample that finds no room is not news here: the next round sends again
                let _ = p.publish(&msg);
            }
            round += 1;
            if round == 20 {
                let (rss, pss) = own_memory();
                say(&format!("steady {rss} {pss}"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    Ok(())
}

fn parse_created(line: &str) -> Result<Created, String> {
    serde_json::from_str(line.trim_start_matches("created ").trim())
        .map_err(|e| format!("bad created line {line:?}: {e}"))
}

/// The state directory the children use and the file system it is on (from
/// /proc/mounts: the longest mount point that holds it).
fn state_dir_fs() -> String {
    let dir = nerve::Config::from_env()
        .map(|c| c.state_dir.display().to_string())
        .unwrap_or_default();
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    let fs = mounts
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() > 2 && dir.starts_with(f[1])).then(|| (f[1].len(), f[2].to_string()))
        })
        .max()
        .map_or("?".into(), |m| m.1);
    format!("{dir} ({fs})")
}

/// Bytes allocated and files of the domain's files in /dev/shm.
fn shm_usage(domain: u32) -> (u64, usize) {
    use std::os::unix::fs::MetadataExt;
    let prefix = format!("nerve{domain}_");
    let mut bytes = 0;
    let mut files = 0;
    for e in std::fs::read_dir("/dev/shm").into_iter().flatten().flatten() {
        if e.file_name().to_string_lossy().starts_with(&prefix) {
            if let Ok(m) = e.metadata() {
                bytes += m.blocks() * 512;
                files += 1;
            }
        }
    }
    (bytes, files)
}

/// How long a `nerve … list` may take before the bench stops it (it hung at 1,000
/// topics with the network plane on before issue 46).
const CLI_LIMIT: Duration = Duration::from_secs(60);

/// Runs `nerve <args>` as a user would; seconds and stdout. One that runs past
/// [`CLI_LIMIT`] is killed and reported.
fn timed_cli(env: &Env, domain: u32, network: bool, args: &[&str]) -> Result<(f64, String), String> {
    use std::io::Read;
    let what = format!("nerve {}", args.join(" "));
    let t = Instant::now();
    let mut child = Command::new(&env.exe)
        .args(args)
        .env("NERVE_DOMAIN", domain.to_string())
        .env("NERVE_NETWORK", if network { "on" } else { "off" })
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {what}: {e}"))?;
    // read while it runs: a long list fills the pipe
    let mut out = child.stdout.take();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        if let Some(o) = out.as_mut() {
            let _ = o.read_to_string(&mut s);
        }
        s
    });
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if t.elapsed() < CLI_LIMIT => std::thread::sleep(Duration::from_millis(2)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("{what} did not finish within {CLI_LIMIT:?}"));
            }
        }
    };
    let s = t.elapsed().as_secs_f64();
    let stdout = reader.join().unwrap_or_default();
    if !status.success() {
        let mut err = String::new();
        if let Some(mut e) = child.stderr.take() {
            let _ = e.read_to_string(&mut err);
        }
        return Err(format!("{what} failed: {}", err.trim()));
    }
    Ok((s, stdout))
}

fn one_row(env: &Env, topics: usize, nodes: usize, network: bool) -> Result<OneHostRow, String> {
    let domain = crate::harness::interrupt::domain(950, 40);
    let spawn = |subscribe: bool| -> Result<Child, String> {
        let spec = EndpointSpec {
            domain,
            subscribe,
            topics,
            nodes: (nodes / 2).max(1),
        };
        let (exe, mut args) = env.role("fleet-one-host");
        args.push(serde_json::to_string(&spec).map_err(|e| e.to_string())?);
        let net = [(
            "NERVE_NETWORK",
            if network { "on" } else { "off" }.to_string(),
        )];
        let what = if subscribe {
            "one-host subscriber"
        } else {
            "one-host publisher"
        };
        Child::spawn(&exe, &args, &net, what).map_err(|e| e.to_string())
    };
    let err = |e: PeerError| e.to_string();
    let wait = Duration::from_secs(120);
    // the subscriber first: it creates the topics (what the issue measured)
    let mut sub = spawn(true)?;
    let s = parse_created(&sub.expect("created", wait).map_err(err)?)?;
    let mut publ = spawn(false)?;
    let p = parse_created(&publ.expect("created", wait).map_err(err)?)?;
    let words = |line: String| -> Vec<u64> {
        line.split_whitespace()
            .skip(1)
            .filter_map(|w| w.parse().ok())
            .collect()
    };
    let got = words(sub.expect("received", Duration::from_secs(60)).map_err(err)?);
    let steady = words(publ.expect("steady", Duration::from_secs(30)).map_err(err)?);
    let (Some(&received), Some(&sub_rss), Some(&sub_pss), Some(&pub_rss), Some(&pub_pss)) =
        (got.first(), got.get(1), got.get(2), steady.first(), steady.get(1))
    else {
        return Err(format!("bad received/steady lines: {got:?} {steady:?}"));
    };
    let received = received as usize;
    let (shm_bytes, shm_files) = shm_usage(domain);
    let topic_list = timed_cli(env, domain, network, &["topic", "list"]);
    let node_list = timed_cli(env, domain, network, &["node", "list"]);
    publ.stop();
    sub.stop();
    let per = |a: u64, b: u64| (a as f64 - b as f64) / topics.max(1) as f64;
    let topics_listed = topic_list
        .as_ref()
        .map_or(0, |(_, out)| out.lines().filter(|l| l.contains("/fleet/")).count());
    for r in [&topic_list, &node_list] {
        if let Err(e) = r {
            eprintln!("fleet one host: {e}");
        }
    }
    let topic_list_error = topic_list.as_ref().err().cloned();
    let node_list_error = node_list.as_ref().err().cloned();
    Ok(OneHostRow {
        suite: "fleet",
        kind: "one-host",
        hosts: 1,
        network,
        topics,
        nodes,
        sub_nodes_s: s.nodes_s,
        sub_create_s: s.endpoints_s,
        pub_create_s: p.endpoints_s,
        sub_create_cpu_s: s.endpoints_cpu_s,
        pub_create_cpu_s: p.endpoints_cpu_s,
        state_dir: state_dir_fs(),
        rss_per_sub: per(sub_rss, s.before.0),
        pss_per_sub: per(sub_pss, s.before.1),
        rss_per_pub: per(pub_rss, p.before.0),
        pss_per_pub: per(pub_pss, p.before.1),
        rss_per_sub_created: per(s.after.0, s.before.0),
        rss_per_pub_created: per(p.after.0, p.before.0),
        sub_rss_base: s.before.0,
        pub_rss_base: p.before.0,
        shm_bytes,
        shm_files,
        topic_list_s: topic_list.ok().map(|t| t.0),
        node_list_s: node_list.ok().map(|t| t.0),
        topic_list_error,
        node_list_error,
        topics_listed,
        received,
        all_received: received == topics,
    })
}

/// Measures `topics` topics between two processes with `nodes` nodes in all, with the
/// network plane off, then on (how fleets run). A row that cannot run is skipped with
/// the reason.
pub fn measure(env: &Env, topics: usize, nodes: usize) -> (Vec<OneHostRow>, Vec<Skipped>) {
    let mut rows = Vec::new();
    let mut skipped = Vec::new();
    for network in [false, true] {
        eprintln!(
            "fleet one host: {topics} topics, {nodes} nodes, network {}",
            if network { "on" } else { "off" }
        );
        match one_row(env, topics, nodes, network) {
            Ok(r) => rows.push(r),
            Err(reason) => skipped.push(Skipped {
                system: system(network),
                payload_bytes: None,
                reason,
            }),
        }
    }
    (rows, skipped)
}

fn system(network: bool) -> String {
    format!("nerve one host, network {}", if network { "on" } else { "off" })
}

/// The targets of issue 46 for one host, per row (network off and on); a row that did not
/// run is judged not met with its reason.
pub fn checks(rows: &[OneHostRow], skipped: &[Skipped]) -> Vec<Verdict> {
    let mut out = Vec::new();
    for network in [false, true] {
        let sys = system(network);
        let row = rows.iter().find(|r| r.network == network);
        let scope = |r: Option<&OneHostRow>| match r {
            Some(r) => format!("{sys}: {} topics, {} nodes", r.topics, r.nodes),
            None => sys.clone(),
        };
        let value = |f: fn(&OneHostRow) -> Option<f64>| -> crate::report::Measured {
            match row {
                Some(r) => Ok(f(r)),
                None => Err(crate::report::why_missing(skipped, &sys, |k| k.system == sys)),
            }
        };
        let v = |target: &str, f: fn(&OneHostRow) -> Option<f64>, ok: fn(f64) -> bool| {
            Verdict::judged("fleet", target, scope(row), value(f), ok)
        };
        out.push(v(
            "subscriptions created in <= 2 s",
            |r| Some(r.sub_create_s),
            |s| s <= CREATE_TARGET_S,
        ));
        out.push(v(
            "publishers created in <= 2 s",
            |r| Some(r.pub_create_s),
            |s| s <= CREATE_TARGET_S,
        ));
        out.push(v(
            "RSS per subscription <= 100 KB",
            |r| Some(r.rss_per_sub),
            |b| b <= SUB_BYTES_TARGET,
        ));
        // a list that failed or hung is not met, with the reason
        let list = |target: &str, secs: fn(&OneHostRow) -> (Option<f64>, Option<String>)| {
            let value = match row.map(secs) {
                Some((Some(s), _)) => Ok(Some(s)),
                Some((None, why)) => Err(why.unwrap_or_else(|| "no time".into())),
                None => value(|_| None),
            };
            Verdict::judged("fleet", target, scope(row), value, |s| s <= LIST_TARGET_S)
        };
        out.push(list("nerve topic list <= 0.5 s", |r| {
            (r.topic_list_s, r.topic_list_error.clone())
        }));
        out.push(list("nerve node list <= 0.5 s", |r| {
            (r.node_list_s, r.node_list_error.clone())
        }));
        out.push(v(
            "every subscription got a sample",
            |r| Some(r.received as f64 / r.topics.max(1) as f64),
            |f| f == 1.0,
        ));
    }
    out
}

fn kb(b: f64) -> String {
    num(b / 1000.0)
}

fn secs(s: Option<f64>) -> String {
    s.map_or("–".into(), |s| format!("{s:.3}"))
}

/// Adds the one-host table to `section`.
pub fn add_table(section: &mut Section, rows: &[OneHostRow]) {
    let head = [
        "network",
        "topics",
        "nodes",
        "create sub s",
        "create pub s",
        "CPU sub s",
        "CPU pub s",
        "RSS/sub KB",
        "RSS/sub KB created",
        "PSS/sub KB",
        "RSS/pub KB",
        "PSS/pub KB",
        "shm MB",
        "topic list s",
        "node list s",
        "got a sample",
    ];
    let lines: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                if r.network { "on" } else { "off" }.to_string(),
                r.topics.to_string(),
                r.nodes.to_string(),
                format!("{:.3}", r.sub_create_s),
                format!("{:.3}", r.pub_create_s),
                format!("{:.3}", r.sub_create_cpu_s),
                format!("{:.3}", r.pub_create_cpu_s),
                kb(r.rss_per_sub),
                kb(r.rss_per_sub_created),
                kb(r.pss_per_sub),
                kb(r.rss_per_pub),
                kb(r.pss_per_pub),
                format!("{:.1}", r.shm_bytes as f64 / 1e6),
                secs(r.topic_list_s),
                secs(r.node_list_s),
                format!("{}/{}", r.received, r.topics),
            ]
        })
        .collect();
    section.paragraph(
        "One host at robot scale: one process subscribes to every topic from half the \
         nodes, a second publishes them from the other half (small fixed-size messages, \
         default QoS). Creation is timed in each process; memory per endpoint is the RSS \
         and PSS delta against the same process with its nodes and no endpoint, once \
         connected and receiving (and, for subscriptions, also right after creation); `nerve \
         topic list` and `nerve node list` run as a user runs them while both live.",
    );
    section.table(Some("One host at robot scale"), &head, &lines);
    if let Some(r) = rows.first() {
        section.paragraph(&format!(
            "State directory (iceoryx2's records, written with fsync): {}.",
            r.state_dir
        ));
    }
}

/// One line per row for the suite's summary.
pub fn summary(rows: &[OneHostRow]) -> String {
    let mut s = String::new();
    for r in rows {
        s.push_str(&format!(
            "  one host, network {}: {} topics / {} nodes: create sub {:.2} s, pub {:.2} s; \
             {} KB RSS per sub; topic list {} s, node list {} s; {}/{} got a sample\n",
            if r.network { "on" } else { "off" },
            r.topics,
            r.nodes,
            r.sub_create_s,
            r.pub_create_s,
            kb(r.rss_per_sub),
            secs(r.topic_list_s),
            secs(r.node_list_s),
            r.received,
            r.topics
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(network: bool) -> OneHostRow {
        OneHostRow {
            suite: "fleet",
            kind: "one-host",
            hosts: 1,
            network,
            topics: 1000,
            nodes: 100,
            sub_nodes_s: 0.1,
            sub_create_s: 0.4,
            pub_create_s: 2.5,
            sub_create_cpu_s: 0.2,
            pub_create_cpu_s: 0.3,
            state_dir: "/dev/shm/nerve/ (tmpfs)".into(),
            rss_per_sub: 93_000.0,
            rss_per_sub_created: 79_000.0,
            rss_per_pub_created: 50_000.0,
            pss_per_sub: 80_000.0,
            rss_per_pub: 60_000.0,
            pss_per_pub: 50_000.0,
            sub_rss_base: 1,
            pub_rss_base: 1,
            shm_bytes: 0,
            shm_files: 0,
            topic_list_s: None,
            node_list_s: Some(0.2),
            topic_list_error: Some("nerve topic list did not finish within 60s".into()),
            node_list_error: None,
            topics_listed: 0,
            received: 999,
            all_received: false,
        }
    }

    #[test]
    fn targets_are_judged_per_row_and_a_missing_row_is_not_met() {
        let skipped = vec![Skipped {
            system: system(true),
            payload_bytes: None,
            reason: "no plane".into(),
        }];
        let v = checks(&[row(false)], &skipped);
        assert_eq!(v.len(), 12);
        let met = |target: &str, network: bool| {
            v.iter()
                .find(|c| c.target.starts_with(target) && c.scope.starts_with(&system(network)))
                .unwrap_or_else(|| panic!("no check {target}"))
                .met
        };
        assert_eq!(met("subscriptions created", false), Some(true));
        assert_eq!(met("publishers created", false), Some(false));
        assert_eq!(met("RSS per subscription", false), Some(true));
        // a list that did not finish is not met, and says why
        assert_eq!(met("nerve topic list", false), Some(false));
        assert!(v.iter().any(|c| c.target.contains("did not finish")));
        assert_eq!(met("nerve node list", false), Some(true));
        assert_eq!(met("every subscription", false), Some(false));
        // the row that did not run: every target not met, with the reason
        for c in v.iter().filter(|c| c.scope == system(true)) {
            assert_eq!(c.met, Some(false), "{c:?}");
            assert!(c.target.contains("no plane"), "{c:?}");
        }
    }
}
