//! `nerve lifecycle list | get | set` against a managed node running in this test process.

use nerve::{Config, Context, Executor};
use nerve_lifecycle::{CallbackReturn, ManagedNode};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

const DOMAIN: u32 = 994;

fn state_dir() -> std::path::PathBuf {
    std::env::temp_dir().join("nerve-cli-lifecycle/")
}

fn nerve(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_nerve"))
        .args(args)
        .env("NERVE_DOMAIN", DOMAIN.to_string())
        .env("NERVE_STATE_DIR", state_dir())
        .env_remove("NERVE_CONFIG")
        .stdin(Stdio::null())
        .output()
        .expect("run nerve");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn list_get_and_set_drive_a_managed_node() {
    let (ready_tx, ready) = mpsc::channel();
    let (stop_tx, stop) = mpsc::channel::<()>();
    let t = std::thread::spawn(move || {
        let ctx = Context::new(
            Config::default()
                .domain(DOMAIN)
                .unwrap()
                .state_dir(state_dir()),
        )
        .unwrap();
        let node = ctx.node("cli_cam").create().unwrap();
        let managed = ManagedNode::create(&node).unwrap();
        managed.on_activate(|_| CallbackReturn::Failure);
        let mut exec = Executor::new();
        exec.handle_signals(false);
        managed.serve_on(&mut exec).unwrap();
        ready_tx.send(()).unwrap();
        while stop.try_recv().is_err() {
            exec.spin_once(Duration::from_millis(20)).unwrap();
        }
    });
    ready.recv().unwrap();

    let (c, out, err) = nerve(&["lifecycle", "list"]);
    assert_eq!(c, 0, "{err}");
    assert!(
        out.lines()
            .any(|l| l.split_whitespace().eq(["/cli_cam", "unconfigured"])),
        "{out}"
    );
    let (c, out, _) = nerve(&["lifecycle", "get", "/cli_cam"]);
    assert_eq!(c, 0);
    assert_eq!(
        out,
        "/cli_cam: unconfigured [1]\ntransitions: configure [1] -> inactive, shutdown [5] -> \
         finalized\n"
    );
    let (c, out, _) = nerve(&["lifecycle", "set", "cli_cam", "configure"]);
    assert_eq!(
        (c, out.as_str()),
        (0, "/cli_cam: configure: unconfigured -> inactive\n")
    );
    // the node refuses: its callback fails, and it stays inactive
    let (c, _, err) = nerve(&["lifecycle", "set", "/cli_cam", "activate"]);
    assert_eq!(c, 1);
    assert_eq!(
        err,
        "error: managed node /cli_cam: activate failed: now inactive\n"
    );
    let (c, _, err) = nerve(&["lifecycle", "set", "/cli_cam", "deactivate"]);
    assert_eq!(c, 1);
    assert_eq!(
        err,
        "error: managed node /cli_cam: transition deactivate is not valid from state inactive \
         (valid: cleanup, activate, shutdown)\n"
    );
    let (c, out, _) = nerve(&["lifecycle", "get", "/cli_cam", "--format", "json"]);
    assert_eq!(c, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["state"], "inactive");
    assert_eq!(v["transitions"][1]["label"], "activate");
    // bad input: an unknown transition is a usage error; an unknown node is named
    let (c, _, err) = nerve(&["lifecycle", "set", "/cli_cam", "explode"]);
    assert_eq!(c, 2);
    assert!(err.contains("unknown transition \"explode\""), "{err}");
    let (c, _, err) = nerve(&["lifecycle", "get", "/nobody", "--timeout", "200"]);
    assert_eq!(c, 1);
    assert!(err.contains("no managed node /nobody"), "{err}");
    let (c, _, err) = nerve(&["lifecycle", "get", "bad name"]);
    assert_eq!(c, 2);
    assert!(err.contains("is not a node name"), "{err}");
    stop_tx.send(()).unwrap();
    t.join().unwrap();
}
