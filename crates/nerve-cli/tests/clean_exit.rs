//! Every long-running `nerve` command, as the last process of its domain, leaves nothing
//! in /dev/shm when it ends cleanly: by Ctrl-C (SIGINT), by SIGTERM or by its own
//! `--duration`. The domain's last context removes the domain's files
//! (docs/reliability.md); a context kept alive past `main` (a reference held by a thread
//! or a library's runtime) skips that silently, as the Foxglove bridge's did.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Each case has a domain of its own in this range, so the cases run in parallel.
const FIRST_DOMAIN: u32 = 840;

fn state_dir(domain: u32) -> PathBuf {
    std::env::temp_dir().join(format!("nerve-cli-clean-exit-{domain}/"))
}

/// The domain's files in /dev/shm (Nerve's and iceoryx2's carry the `nerve<d>_` prefix).
fn files_of(domain: u32) -> Vec<String> {
    let prefix = format!("nerve{domain}_");
    std::fs::read_dir("/dev/shm")
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(&prefix))
                .collect()
        })
        .unwrap_or_default()
}

fn start(domain: u32, args: &[&str], out: &std::path::Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_nerve"))
        .args(args)
        .current_dir(out)
        .env("NERVE_DOMAIN", domain.to_string())
        .env("NERVE_STATE_DIR", state_dir(domain))
        .env_remove("NERVE_CONFIG")
        .env_remove("NERVE_NETWORK")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start nerve")
}

/// Waits until the command has joined its domain (its doorbell exists), at most 20 s.
fn wait_joined(domain: u32, child: &mut Child) {
    let end = Instant::now() + Duration::from_secs(20);
    let doorbell = format!("nerve{domain}_doorbell");
    while !files_of(domain).iter().any(|f| f.starts_with(&doorbell)) {
        if let Some(status) = child.try_wait().expect("poll") {
            panic!("nerve ended before it joined domain {domain}: {status}");
        }
        assert!(Instant::now() < end, "nerve never joined domain {domain}");
        std::thread::sleep(Duration::from_millis(20));
    }
    // let it settle into its loop (subscriptions, servers, workers started)
    std::thread::sleep(Duration::from_millis(500));
}

/// Waits for the command's exit (at most 20 s) and returns its status code and stderr.
fn finish(mut child: Child) -> (Option<i32>, String) {
    let end = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(s) = child.try_wait().expect("poll") {
            break s;
        }
        if Instant::now() > end {
            let _ = child.kill();
            panic!("nerve did not stop within 20 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        use std::io::Read;
        let _ = e.read_to_string(&mut err);
    }
    (status.code(), err)
}

fn signal(child: &Child, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &child.id().to_string()])
        .status()
        .expect("run kill")
        .success();
    assert!(ok, "kill {sig} failed");
}

/// How the case ends the command.
#[derive(Clone, Copy, Debug)]
enum End {
    Sigint,
    Sigterm,
    /// The command's own `--duration` (already among its arguments).
    Itself,
}

fn case(offset: u32, args: &[&str], end: End) {
    case_with(offset, args, end, None)
}

/// A case whose command needs `topic` to exist when it starts: this test publishes it
/// until the command has joined, then leaves, so the command is the domain's last process.
fn case_with(offset: u32, args: &[&str], end: End, topic: Option<&str>) {
    let domain = FIRST_DOMAIN + offset;
    // nothing of an earlier run may count against this one
    for f in files_of(domain) {
        let _ = std::fs::remove_file(format!("/dev/shm/{f}"));
    }
    let out = state_dir(domain).join("out");
    std::fs::create_dir_all(&out).expect("make the output folder");
    let feeder = topic.map(|t| {
        let ctx = nerve::Context::new(
            nerve::Config::default()
                .domain(domain)
                .unwrap()
                .state_dir(state_dir(domain)),
        )
        .expect("context");
        let node = ctx.node("clean_exit_feeder").create().expect("node");
        let publisher = node
            .publisher::<nerve_msgs::CmdVel>(t)
            .create()
            .expect("publisher");
        (ctx, node, publisher)
    });
    let mut child = start(domain, args, &out);
    wait_joined(domain, &mut child);
    drop(feeder);
    match end {
        End::Sigint => signal(&child, "-INT"),
        End::Sigterm => signal(&child, "-TERM"),
        End::Itself => {}
    }
    let (code, err) = finish(child);
    assert!(
        matches!(code, Some(0) | Some(130) | Some(143)),
        "nerve {args:?} ended by {end:?} exited with {code:?}: {err}"
    );
    let left = files_of(domain);
    assert!(
        left.is_empty(),
        "nerve {args:?} ended by {end:?} left in /dev/shm: {left:?} (stderr: {err})"
    );
    let _ = std::fs::remove_dir_all(state_dir(domain));
}

#[test]
fn topic_echo_leaves_nothing() {
    case_with(
        0,
        &["topic", "echo", "/clean/echo"],
        End::Sigint,
        Some("/clean/echo"),
    );
}

#[test]
fn topic_hz_leaves_nothing() {
    case_with(
        1,
        &["topic", "hz", "/clean/hz"],
        End::Sigterm,
        Some("/clean/hz"),
    );
}

#[test]
fn topic_bw_leaves_nothing() {
    case_with(
        2,
        &["topic", "bw", "/clean/bw"],
        End::Sigint,
        Some("/clean/bw"),
    );
}

#[test]
fn topic_pub_at_a_rate_leaves_nothing() {
    case(
        3,
        &["topic", "pub", "/clean/pub", "CmdVel", "{}", "--rate", "20"],
        End::Sigint,
    );
}

#[test]
fn foxglove_bridge_leaves_nothing_after_its_duration() {
    case(
        4,
        &["bridge", "foxglove", "--port", "0", "--duration", "1.5"],
        End::Itself,
    );
}

#[test]
fn foxglove_bridge_leaves_nothing_after_ctrl_c() {
    case(5, &["bridge", "foxglove", "--port", "0"], End::Sigint);
}

#[test]
fn foxglove_bridge_leaves_nothing_after_sigterm() {
    case(6, &["bridge", "foxglove", "--port", "0"], End::Sigterm);
}

#[test]
fn bag_record_leaves_nothing() {
    case(
        7,
        &["bag", "record", "-o", "clean.mcap", "/clean/rec"],
        End::Sigint,
    );
}

#[test]
fn tf_monitor_leaves_nothing() {
    case(8, &["tf", "monitor"], End::Sigint);
}

#[test]
fn tf_echo_leaves_nothing() {
    case(9, &["tf", "echo", "map", "base_link"], End::Sigterm);
}

#[test]
fn log_echo_leaves_nothing() {
    case(10, &["log", "echo"], End::Sigint);
}
