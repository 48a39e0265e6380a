//! The `nerve` binary's argument handling: exit codes and one-line errors on bad input.

use std::process::{Command, Stdio};

/// Runs the CLI in a domain of its own; returns exit code and stderr.
fn run(args: &[&str]) -> (i32, String) {
    let dir = std::env::temp_dir().join("nerve-cli-test/");
    let out = Command::new(env!("CARGO_BIN_EXE_nerve"))
        .args(args)
        .env("NERVE_DOMAIN", "997")
        .env("NERVE_STATE_DIR", &dir)
        .env_remove("NERVE_CONFIG")
        .stdin(Stdio::null())
        .output()
        .expect("run nerve");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn cli_bad_input_exit_codes() {
    for (args, code, needle) in [
        (
            vec!["topic", "pub", "/x", "NoSuchType", "{}"],
            2,
            "unknown message type",
        ),
        (
            vec!["topic", "pub", "/x", "CmdVel", "{oops"],
            2,
            "invalid JSON",
        ),
        (
            vec!["topic", "pub", "/x", "CmdVel", r#"{"linaer": 1}"#],
            2,
            "no field",
        ),
        (
            vec!["topic", "pub", "bad name", "CmdVel", "{}"],
            2,
            "invalid name",
        ),
        (
            vec!["--domain", "70000", "topic", "list"],
            2,
            "invalid domain",
        ),
        (vec!["topic", "frobnicate"], 2, "unrecognized subcommand"),
        (
            vec!["topic", "echo", "/missing", "--timeout", "0.2"],
            1,
            "does not exist",
        ),
    ] {
        let (c, err) = run(&args);
        assert_eq!(c, code, "{args:?}: {err}");
        assert_eq!(
            err.trim().lines().count(),
            1,
            "{args:?}: one-line error expected: {err}"
        );
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

#[test]
fn help_and_version_exit_zero() {
    for a in ["--help", "--version"] {
        let out = Command::new(env!("CARGO_BIN_EXE_nerve"))
            .arg(a)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{a}");
        assert!(!out.stdout.is_empty(), "{a}");
    }
}

#[test]
fn config_file_errors_are_usage_errors() {
    let dir = std::env::temp_dir().join(format!("nerve-cli-cfg-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("bad.toml");
    std::fs::write(&f, "domain = \"seven\"\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_nerve"))
        .args(["topic", "list"])
        .env("NERVE_CONFIG", &f)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("bad.toml"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Runs the CLI with extra environment; returns exit code and stderr.
fn run_env(args: &[&str], env: &[(&str, &str)]) -> (i32, String) {
    let dir = std::env::temp_dir().join("nerve-cli-test/");
    let out = Command::new(env!("CARGO_BIN_EXE_nerve"))
        .args(args)
        .env("NERVE_DOMAIN", "997")
        .env("NERVE_STATE_DIR", &dir)
        .env_remove("NERVE_CONFIG")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .expect("run nerve");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_missing_bag_is_named_once() {
    for verb in ["play", "info"] {
        let (code, err) = run(&["bag", verb, "/nonexistent/run.mcap"]);
        assert_eq!(code, 1, "{err}");
        assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
        assert!(
            err.contains("/nonexistent/run.mcap"),
            "names the file: {err}"
        );
        assert_eq!(
            err.matches("No such file").count(),
            1,
            "the reason once: {err}"
        );
    }
}

#[test]
fn bad_network_settings_are_named() {
    let (code, err) = run_env(&["topic", "list"], &[("NERVE_NETWORK", "maybe")]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("NERVE_NETWORK") && err.contains("on or off"),
        "{err}"
    );

    let missing = "/nonexistent/zenoh.json5";
    let (code, err) = run_env(&["topic", "list"], &[("NERVE_ZENOH_CONFIG", missing)]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains(missing), "names the file: {err}");
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");

    let dir = std::env::temp_dir().join(format!("nerve-bad-zenoh-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("z.json5");
    std::fs::write(&bad, "{ mode: \"emperor\" }").unwrap();
    let (code, err) = run_env(
        &["topic", "list"],
        &[("NERVE_ZENOH_CONFIG", bad.to_str().unwrap())],
    );
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("z.json5"), "names the file: {err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `topic pub` publishes at its rate until interrupted (as `ros2 topic pub`), `--count N`
/// publishes N, `--once` one; Ctrl-C ends the endless form with exit code 0.
#[test]
fn topic_pub_repeats_until_interrupted_or_counted() {
    let dir = std::env::temp_dir().join("nerve-cli-test/");
    let nerve = |args: &[&str]| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_nerve"));
        c.args(args)
            .env("NERVE_DOMAIN", "996")
            .env("NERVE_STATE_DIR", &dir)
            .env_remove("NERVE_CONFIG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        c
    };
    let published = |stderr: &[u8]| -> u64 {
        let text = String::from_utf8_lossy(stderr);
        text.split_whitespace()
            .skip_while(|w| *w != "published")
            .nth(1)
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no count in {text:?}"))
    };
    let common = [
        "topic",
        "pub",
        "/cli/repeat",
        "CmdVel",
        "{}",
        "--wait-subscribers",
        "0",
    ];
    let out = nerve(&[&common[..], &["--rate", "200", "--count", "3"]].concat())
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(published(&out.stderr), 3);
    let out = nerve(&[&common[..], &["--once"]].concat())
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(published(&out.stderr), 1);
    // no count: it keeps publishing until SIGINT
    let child = nerve(&[&common[..], &["--rate", "200"]].concat())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(500));
    // SAFETY: kill with a valid pid of our own child and a valid signal number.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "Ctrl-C ends it cleanly");
    assert!(published(&out.stderr) > 1, "more than one message");
}
