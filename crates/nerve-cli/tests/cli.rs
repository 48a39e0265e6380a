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

    // a policy that names an unknown subject stops the plane, by file and line
    let policy = dir.join("policy.toml");
    std::fs::write(
        &policy,
        "[subjects]\nb = [\"hostb\"]\n[[rules]]\npermission = \"deny\"\nsubjects = [\"x\"]\n\
         actions = [\"publish\"]\nnames = [\"/a\"]\n",
    )
    .unwrap();
    let (code, err) = run_env(
        &["topic", "list"],
        &[
            ("NERVE_NETWORK", "on"),
            ("NERVE_POLICY", policy.to_str().unwrap()),
        ],
    );
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("policy.toml:5") && err.contains("unknown subject \"x\""),
        "{err}"
    );
    // a good policy over links that cannot name their peer (Zenoh's default: TCP)
    std::fs::write(&policy, "[subjects]\nb = [\"hostb\"]\n").unwrap();
    let (code, err) = run_env(
        &["topic", "list"],
        &[
            ("NERVE_NETWORK", "on"),
            ("NERVE_POLICY", policy.to_str().unwrap()),
        ],
    );
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("policy.toml") && err.contains("use tls/ endpoints"),
        "{err}"
    );
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

/// `nerve` in domain `domain` (a state directory of its own), stdin null, output piped.
fn nerve_in(domain: u32, args: &[&str]) -> Command {
    let dir = std::env::temp_dir().join(format!("nerve-cli-test-{domain}/"));
    let mut c = Command::new(env!("CARGO_BIN_EXE_nerve"));
    c.args(args)
        .env("NERVE_DOMAIN", domain.to_string())
        .env("NERVE_STATE_DIR", &dir)
        .env_remove("NERVE_CONFIG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// A folder of this test's own under the temporary directory.
fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("nerve-cli-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs `cmd` with `input` on its stdin; returns exit code, stdout and stderr.
fn with_stdin(mut cmd: Command, input: &[u8]) -> (i32, String, String) {
    use std::io::Write;
    let mut child = cmd.stdin(Stdio::piped()).spawn().expect("run nerve");
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_vec();
    // written from a thread of its own: the child may answer before reading it all
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A message whose JSON is larger than Linux takes as one argument (128 KiB) reaches a
/// subscriber exactly, given as `@FILE` and as `-` (stdin).
#[test]
fn topic_pub_reads_a_large_message_from_a_file_or_stdin() {
    const DOMAIN: u32 = 961;
    let data: Vec<u32> = (0..80_000u32).map(|i| (i * 7 + i / 300) % 256).collect();
    let msg = serde_json::json!({
        "header": {"frame_id": "cam"},
        "height": 200, "width": 400, "encoding": "mono8", "step": 400,
        "elems": data,
    });
    let text = serde_json::to_string_pretty(&msg).unwrap();
    assert!(text.len() > 200_000, "{} bytes", text.len());
    let dir = scratch("big-json");
    let file = dir.join("image.json");
    std::fs::write(&file, &text).unwrap();
    let at_file = format!("@{}", file.display());
    for (topic, source) in [("/cli/big/file", at_file.as_str()), ("/cli/big/stdin", "-")] {
        let echo = nerve_in(
            DOMAIN,
            &["topic", "echo", topic, "--count", "1", "--format", "json"],
        )
        .args(["--timeout", "60"])
        .spawn()
        .unwrap();
        let mut publisher = nerve_in(
            DOMAIN,
            &["topic", "pub", topic, "Image", source, "--rate", "20"],
        );
        publisher.args(["--wait-subscribers", "60"]);
        if source == "-" {
            publisher.stdin(Stdio::piped());
        }
        let mut publisher = publisher.spawn().unwrap();
        if let Some(mut stdin) = publisher.stdin.take() {
            use std::io::Write;
            stdin.write_all(text.as_bytes()).unwrap();
        }
        let out = echo.wait_with_output().unwrap();
        // SAFETY: kill with the pid of our own live child and a valid signal number.
        unsafe { libc::kill(publisher.id() as i32, libc::SIGINT) };
        let p = publisher.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&p.stderr);
        assert!(p.status.success(), "{source}: pub: {err}");
        assert!(
            out.status.success(),
            "{source}: echo: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let got: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(got["msg"]["elems"], msg["elems"], "{source}");
        for field in ["height", "width", "step"] {
            assert_eq!(got["msg"][field], msg[field], "{source}: {field}");
        }
        assert_eq!(got["msg"]["encoding"], "mono8", "{source}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `service call` takes its request from stdin, `action send_goal` its goal from a file.
#[test]
fn service_request_from_stdin_and_action_goal_from_a_file() {
    use nerve::action::{ActionServer, GoalState};
    use nerve_msgs::action::Fibonacci;
    use nerve_msgs::srv::{AddTwoInts, Int};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::time::Duration;
    const DOMAIN: u32 = 962;
    let dir = std::env::temp_dir().join(format!("nerve-cli-test-{DOMAIN}/"));
    let ctx = nerve::Context::new(
        nerve::Config::default()
            .domain(DOMAIN)
            .unwrap()
            .state_dir(dir),
    )
    .unwrap();
    let _adder = nerve::ServiceThread::spawn::<AddTwoInts, _>(
        &ctx,
        "adder",
        "/cli/add",
        nerve::ServiceQos::default(),
        |req| {
            req.reply(&Int {
                value: req.a + req.b,
            })?;
            Ok(())
        },
    )
    .unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let server = {
        let (ctx, done) = (ctx.clone(), done.clone());
        std::thread::spawn(move || {
            let node = ctx.node("cli_fib").create().unwrap();
            let server = ActionServer::<Fibonacci>::builder(&node, "/cli/fib")
                .create()
                .unwrap();
            while !done.load(Ordering::Relaxed) {
                server.wait(Duration::from_millis(20)).unwrap();
                server.handle_pending(|_| Ok(())).unwrap();
                for g in server.goals() {
                    let mut seq = vec![0i64, 1];
                    while seq.len() <= g.goal().order as usize {
                        seq.push(seq[seq.len() - 1] + seq[seq.len() - 2]);
                    }
                    g.end_with(GoalState::Succeeded, seq.len(), |h, e| {
                        h.len = e.len() as u64;
                        e.copy_from_slice(&seq);
                    })
                    .unwrap();
                }
            }
        })
    };

    let (code, out, err) = with_stdin(
        nerve_in(
            DOMAIN,
            &[
                "service",
                "call",
                "/cli/add",
                "AddTwoInts",
                "-",
                "--format",
                "json",
            ],
        ),
        br#"{"a": 2, "b": 40}"#,
    );
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["value"], 42, "{out}");

    let files = scratch("goal-file");
    let goal = files.join("goal.json");
    std::fs::write(&goal, "{\n  \"order\": 10\n}\n").unwrap();
    let at_goal = format!("@{}", goal.display());
    let out = nerve_in(
        DOMAIN,
        &[
            "action",
            "send_goal",
            "/cli/fib",
            "Fibonacci",
            &at_goal,
            "--format",
            "json",
        ],
    )
    .output()
    .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_str(text.trim()).unwrap();
    assert_eq!(v["state"], "succeeded", "{text}");
    assert_eq!(
        v["result"]["elems"].as_array().unwrap().last(),
        Some(&55.into()),
        "{text}"
    );
    done.store(true, Ordering::Relaxed);
    server.join().unwrap();
    std::fs::remove_dir_all(&files).unwrap();
}

/// A file that cannot be read is named; malformed JSON is placed by source, line and
/// column, from a file and from stdin, for every command that takes a message.
#[test]
fn json_from_a_file_or_stdin_errors_name_the_source() {
    let dir = scratch("bad-json");
    let missing = dir.join("missing.json");
    let at_missing = format!("@{}", missing.display());
    let bad = dir.join("bad.json");
    std::fs::write(&bad, "{\n  \"linear\": 0.5,\n  oops\n}\n").unwrap();
    let at_bad = format!("@{}", bad.display());
    let commands: [&[&str]; 3] = [
        &["topic", "pub", "/cli/bad", "CmdVel"],
        &["service", "call", "/cli/bad", "AddTwoInts"],
        &["action", "send_goal", "/cli/bad", "Fibonacci"],
    ];
    for cmd in commands {
        let (code, err) = run(&[cmd, &[at_missing.as_str()]].concat());
        assert_eq!(code, 1, "{cmd:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{cmd:?}: one line: {err}");
        assert!(
            err.contains(&format!("cannot read {}", missing.display())),
            "{cmd:?}: {err}"
        );
        let (code, err) = run(&[cmd, &[at_bad.as_str()]].concat());
        assert_eq!(code, 2, "{cmd:?}: {err}");
        assert!(
            err.contains(&format!("{}:3:3: key must be a string", bad.display())),
            "{cmd:?}: {err}"
        );
        let (code, _, err) = with_stdin(nerve_in(997, &[cmd, &["-"]].concat()), b"[1,\n 2,,]");
        assert_eq!(code, 2, "{cmd:?}: {err}");
        assert!(err.contains("in stdin:2:4: "), "{cmd:?}: {err}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `nerve doctor --format json`: every check with a status, value and purposes.
#[test]
fn doctor_reports_each_check() {
    let out = nerve_in(997, &["doctor", "--format", "json"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let v: serde_json::Value =
        serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("{e}: {text}"));
    let checks = v["checks"].as_array().unwrap();
    for name in [
        "/dev/shm",
        "futex_waitv",
        "leftovers",
        "cgroup v2",
        "cmake",
        "ddsperf",
        "ROS 2 Kilted venv",
    ] {
        assert!(checks.iter().any(|c| c["name"] == name), "{name}: {text}");
    }
    for c in checks {
        let status = c["status"].as_str().unwrap();
        assert!(["ok", "warn", "fail", "skip"].contains(&status), "{c}");
        assert!(
            c["value"].is_string() && !c["for"].as_array().unwrap().is_empty(),
            "{c}"
        );
        assert!(
            status == "ok" || c["hint"].is_string(),
            "a problem says how to fix it: {c}"
        );
    }
    assert_eq!(v["for"], serde_json::json!(["run"]), "{text}");
}

/// This machine runs Nerve: `--for run` (the default) exits 0, and so does the default
/// whatever else is missing.
#[test]
fn doctor_for_run_passes_here() {
    let out = nerve_in(997, &["doctor", "--for", "run"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let shm = text.lines().find(|l| l.contains("/dev/shm")).unwrap();
    assert!(shm.starts_with("ok") || shm.starts_with("warn"), "{text}");
    assert!(text.lines().next().unwrap().starts_with("STATUS"), "{text}");
}

/// A tool missing for a purpose asked for fails the command, naming it and its package;
/// the same tool for a purpose not asked for is a warning.
#[test]
fn doctor_names_a_missing_tool_and_its_package() {
    let empty = scratch("empty-path");
    let doctor = |args: &[&str]| {
        let mut c = nerve_in(997, &[&["doctor"], args].concat());
        c.env("PATH", &empty);
        c.output().unwrap()
    };
    let out = doctor(&["--for", "cpp"]);
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{text}{err}");
    let cmake = text.lines().find(|l| l.contains("cmake")).unwrap();
    assert!(cmake.starts_with("FAIL"), "{text}");
    assert!(
        cmake.contains("not found on PATH") && cmake.contains("apt-get install cmake"),
        "{text}"
    );
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    assert!(
        err.contains("failed for cpp,run: ") && err.contains("cmake"),
        "{err}"
    );

    let out = doctor(&[]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    let cmake = text.lines().find(|l| l.contains("cmake")).unwrap();
    assert!(cmake.starts_with("warn"), "{text}");
    std::fs::remove_dir_all(&empty).unwrap();
}

/// What a killed process left is counted (nothing removed) and named for `nerve clean`.
#[test]
fn doctor_counts_what_dead_processes_left() {
    const DOMAIN: u32 = 964;
    let leftovers = || {
        let out = nerve_in(DOMAIN, &["doctor", "--format", "json"])
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == "leftovers")
            .cloned()
            .unwrap()
    };
    let shm_files = || -> Vec<String> {
        std::fs::read_dir("/dev/shm")
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(&format!("nerve{DOMAIN}_")))
            .collect()
    };
    // what earlier runs left goes first
    assert!(nerve_in(DOMAIN, &["clean"]).status().unwrap().success());
    let publisher = nerve_in(
        DOMAIN,
        &[
            "topic",
            "pub",
            "/cli/left",
            "CmdVel",
            "{}",
            "--rate",
            "50",
            "--wait-subscribers",
            "0",
        ],
    )
    .spawn()
    .unwrap();
    let start = std::time::Instant::now();
    while shm_files().len() < 3 && start.elapsed() < std::time::Duration::from_secs(30) {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    let mut publisher = publisher;
    publisher.kill().unwrap();
    publisher.wait().unwrap();
    let before = shm_files();
    assert!(!before.is_empty(), "the killed publisher left files");

    let found = leftovers();
    assert_eq!(found["status"], "warn", "{found}");
    // "N file(s) of M dead node(s) in domain 964"
    let words: Vec<&str> = found["value"].as_str().unwrap().split(' ').collect();
    let (files, nodes) = (
        words[0].parse::<usize>().unwrap(),
        words[3].parse::<usize>().unwrap(),
    );
    assert!(files >= before.len() && nodes >= 1, "{found}");
    assert!(
        found["value"].as_str().unwrap().ends_with("in domain 964"),
        "{found}"
    );
    assert!(
        found["hint"]
            .as_str()
            .unwrap()
            .contains("nerve clean --domain 964"),
        "{found}"
    );
    assert_eq!(shm_files(), before, "doctor removes nothing");

    let out = nerve_in(DOMAIN, &["clean"]).output().unwrap();
    assert!(out.status.success());
    assert_eq!(leftovers()["status"], "ok");
}

/// `nerve policy check` names the file and line of a mistake (exit 1), passes a good
/// file, and `nerve policy zenoh` prints the access control Zenoh enforces.
#[test]
fn policy_check_and_zenoh() {
    let dir = std::env::temp_dir().join(format!("nerve-cli-policy-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.toml");
    std::fs::write(
        &bad,
        "default = \"deny\"\n[subjects]\nb = [\"hostb\"]\n[[rules]]\npermission = \"deny\"\n\
         subjects = [\"b\"]\nactions = [\"publish\"]\nnames = [\"/ok\", \"no_slash\"]\n",
    )
    .unwrap();
    let (c, err) = run(&["policy", "check", bad.to_str().unwrap()]);
    assert_eq!(c, 1, "{err}");
    assert!(
        err.contains("bad.toml:8") && err.contains("no_slash") && err.trim().lines().count() == 1,
        "{err}"
    );
    let good = dir.join("good.toml");
    std::fs::write(
        &good,
        "default = \"allow\"\n[subjects]\nb = [\"hostb\"]\n[[rules]]\nid = \"quiet\"\n\
         permission = \"deny\"\nsubjects = [\"b\"]\nactions = [\"publish\"]\nnames = [\"/ok\"]\n",
    )
    .unwrap();
    let (c, err) = run(&["policy", "check", good.to_str().unwrap()]);
    assert_eq!(c, 0, "{err}");
    let out = Command::new(env!("CARGO_BIN_EXE_nerve"))
        .args(["policy", "zenoh", good.to_str().unwrap(), "--host", "hostb"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("access_control")
            && text.contains("\"quiet.publish.0\"")
            && text.contains("nerve/*/t/ok")
            && text.contains("\"cert_common_names\""),
        "{text}"
    );
    std::fs::remove_dir_all(&dir).ok();
}
