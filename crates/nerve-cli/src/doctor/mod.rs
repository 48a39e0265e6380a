//! `nerve doctor`: checks the machine for what Nerve and its tests need, and says how to
//! fix what is missing. One table of checks ([`checks`]), each with the purposes it
//! serves; a check of a purpose not asked for never fails the command (a failure of it
//! shows as a warning).

mod checks;
mod probe;

use crate::failure::{CmdResult, Failure};
use crate::output::{self, Format};
use clap::{Args, ValueEnum};
use serde_json::json;

/// Arguments of `nerve doctor`.
#[derive(Args)]
pub struct DoctorArgs {
    /// What the machine must be ready for (repeat or comma-separate; default: run).
    /// Every purpose includes `run`. Checks of other purposes still show, a failure as a
    /// warning, and do not change the exit status.
    #[arg(
        long = "for",
        value_enum,
        value_name = "PURPOSE",
        value_delimiter = ','
    )]
    purposes: Vec<Purpose>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    format: Format,
}

/// What a machine is checked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Purpose {
    /// Running Nerve: /dev/shm, futex_waitv, what dead processes left.
    Run,
    /// Everything `bash scripts/test` (and `.ci/run`) needs.
    Tests,
    /// `nerve bench`'s peers: ddsperf, rclpy, root and network namespaces.
    Bench,
    /// The C/C++ API: CMake, a C++ compiler, Ninja, pkg-config, GoogleTest.
    Cpp,
    /// The ROS 2 bridge tests: python3.11 and the rclpy wheels.
    Ros2,
    /// `nerve launch` containing its processes in a cgroup (cgroup v2).
    Launch,
}

impl Purpose {
    fn name(self) -> &'static str {
        match self {
            Purpose::Run => "run",
            Purpose::Tests => "tests",
            Purpose::Bench => "bench",
            Purpose::Cpp => "cpp",
            Purpose::Ros2 => "ros2",
            Purpose::Launch => "launch",
        }
    }
}

/// How a check came out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Ready.
    Ok,
    /// Works, worse than it could, or a failure of a purpose not asked for.
    Warn,
    /// Missing or broken for a purpose asked for.
    Fail,
    /// Not looked at (what it needs is absent; the hint says how to get it).
    Skip,
}

impl Status {
    fn word(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Warn => "warn",
            Status::Fail => "FAIL",
            Status::Skip => "skip",
        }
    }
}

/// What a check found: its status, the value it measured and how to fix a problem.
pub struct Outcome {
    status: Status,
    value: String,
    hint: Option<String>,
}

impl Outcome {
    /// Ready; `value` says what was found.
    pub fn ok(value: impl Into<String>) -> Outcome {
        Outcome {
            status: Status::Ok,
            value: value.into(),
            hint: None,
        }
    }
    /// A problem of this status, with how to fix it.
    pub fn problem(status: Status, value: impl Into<String>, hint: impl Into<String>) -> Outcome {
        Outcome {
            status,
            value: value.into(),
            hint: Some(hint.into()),
        }
    }
}

/// One check: its name, the purposes it serves and how it looks.
pub struct Check {
    name: String,
    purposes: &'static [Purpose],
    probe: Box<dyn Fn() -> Outcome + Send + Sync>,
}

/// A check of `name` for `purposes`, found by `probe`.
fn check(
    name: impl Into<String>,
    purposes: &'static [Purpose],
    probe: impl Fn() -> Outcome + Send + Sync + 'static,
) -> Check {
    Check {
        name: name.into(),
        purposes,
        probe: Box::new(probe),
    }
}

/// Every check, in the order shown.
fn checks(cfg: &nerve::Config) -> Vec<Check> {
    use checks::{program, Program};
    use Purpose::*;
    let cfg = cfg.clone();
    let cxx = std::env::var("CXX")
        .ok()
        .and_then(|c| c.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "g++".into());
    let tools: [(&str, Program, &'static [Purpose]); 13] = [
        (
            "ip",
            Program::new(&["ip"], "iproute2").version(&["-V"]),
            &[Bench, Tests],
        ),
        (
            "unshare",
            Program::new(&["unshare"], "util-linux"),
            &[Bench, Tests],
        ),
        ("nft", Program::new(&["nft"], "nftables"), &[Bench, Tests]),
        // ddsperf has no version flag, and without arguments it starts measuring
        (
            "ddsperf",
            Program::new(&["ddsperf"], "cyclonedds-tools").quiet(),
            &[Bench, Tests],
        ),
        (
            "python3.11",
            Program::new(&["python3.11"], "python3.11 python3.11-venv"),
            &[Ros2, Bench, Tests],
        ),
        (
            "python3 venv",
            Program::new(&["python3"], "python3 python3-venv python3-pip")
                .version(&["-m", "venv", "--help"])
                .must_run(),
            &[Tests],
        ),
        ("cmake", Program::new(&["cmake"], "cmake"), &[Cpp, Tests]),
        (
            "c++ compiler",
            Program::new(&[cxx.as_str()], "g++"),
            &[Cpp, Tests],
        ),
        (
            "ninja",
            Program::new(&["ninja"], "ninja-build"),
            &[Cpp, Tests],
        ),
        (
            "pkg-config",
            Program::new(&["pkg-config"], "pkg-config"),
            &[Cpp, Tests],
        ),
        ("node", Program::new(&["node"], "nodejs"), &[Tests]),
        ("npm", Program::new(&["npm"], "npm"), &[Tests]),
        (
            "chromium",
            Program::new(
                &["chromium", "chromium-browser", "/usr/bin/chromium"],
                "chromium",
            ),
            &[Tests],
        ),
    ];
    let mut all = vec![
        check("/dev/shm", &[Run], checks::shm),
        check("futex_waitv", &[Run], checks::futex_waitv),
        check("leftovers", &[Run], move || checks::leftovers(&cfg)),
        check("cgroup v2", &[Launch, Tests], checks::cgroup),
        check("root, namespaces", &[Bench, Tests], checks::root),
    ];
    all.extend(
        tools
            .into_iter()
            .map(|(name, p, purposes)| check(name, purposes, move || program(&p))),
    );
    all.extend([
        check("gtest headers", &[Cpp, Tests], || {
            checks::file("/usr/include/gtest/gtest.h", "libgtest-dev")
        }),
        check("ROS 2 Kilted venv", &[Ros2, Bench, Tests], || {
            checks::ros2_venv("NERVE_ROS2_VENV", "ros2-venv")
        }),
        check("ROS 2 Jazzy venv", &[Ros2, Tests], || {
            checks::ros2_venv("NERVE_ROS2_JAZZY_VENV", "ros2-jazzy-venv")
        }),
    ]);
    all
}

/// One check's row: its outcome for the purposes asked.
struct Row<'a> {
    check: &'a Check,
    outcome: Outcome,
}

/// Runs `nerve doctor`.
pub fn run(cfg: &nerve::Config, args: DoctorArgs) -> CmdResult {
    let mut asked = args.purposes;
    if asked.is_empty() || !asked.contains(&Purpose::Run) {
        asked.push(Purpose::Run);
    }
    let list = checks(cfg);
    // each check in a thread of its own: the slow ones (a Python import, a browser's
    // version) run side by side, each bounded by its own time limit
    let outcomes: Vec<Outcome> = std::thread::scope(|s| {
        let running: Vec<_> = list.iter().map(|c| s.spawn(|| (c.probe)())).collect();
        running
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Outcome::problem(Status::Warn, "the check itself failed", "report a bug")
                })
            })
            .collect()
    });
    let rows: Vec<Row> = list
        .iter()
        .zip(outcomes)
        .map(|(check, mut outcome)| {
            // a failure of a purpose not asked for is a warning
            if outcome.status == Status::Fail && !check.purposes.iter().any(|p| asked.contains(p)) {
                outcome.status = Status::Warn;
            }
            Row { check, outcome }
        })
        .collect();
    let failed: Vec<&str> = rows
        .iter()
        .filter(|r| r.outcome.status == Status::Fail)
        .map(|r| r.check.name.as_str())
        .collect();
    let for_ = |purposes: &[Purpose]| {
        purposes
            .iter()
            .map(|p| p.name())
            .collect::<Vec<_>>()
            .join(",")
    };
    match args.format {
        Format::Json => output::json(&json!({
            "for": asked.iter().map(|p| p.name()).collect::<Vec<_>>(),
            "checks": rows.iter().map(|r| json!({
                "name": r.check.name,
                "for": r.check.purposes.iter().map(|p| p.name()).collect::<Vec<_>>(),
                "status": r.outcome.status.word().to_lowercase(),
                "value": r.outcome.value,
                "hint": r.outcome.hint,
            })).collect::<Vec<_>>(),
            "failed": failed,
        }))?,
        Format::Human => {
            let table: Vec<Vec<String>> = rows
                .iter()
                .map(|r| {
                    vec![
                        r.outcome.status.word().to_string(),
                        r.check.name.clone(),
                        for_(r.check.purposes),
                        r.outcome.value.clone(),
                        r.outcome
                            .hint
                            .as_ref()
                            .map_or_else(String::new, |h| format!("fix: {h}")),
                    ]
                })
                .collect();
            output::table(&["STATUS", "CHECK", "FOR", "FOUND", "FIX"], &table)?;
        }
    }
    if failed.is_empty() {
        return Ok(());
    }
    Err(Failure::Runtime(anyhow::anyhow!(
        "{} check(s) failed for {}: {}",
        failed.len(),
        for_(&asked),
        failed.join(", ")
    )))
}
