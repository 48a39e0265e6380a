//! The checks of `nerve doctor`, each a function returning an [`Outcome`].

use super::probe::{self, Ran};
use super::{Outcome, Status};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Free space in /dev/shm below which it warns: a few topics with large samples (point
/// clouds, images) and the tests' domains fill less.
const SHM_LOW: u64 = 1 << 30;
/// How long a program may take to say its version.
const VERSION_LIMIT: Duration = Duration::from_secs(10);
/// How long `import rclpy` may take (a cold start of its wheels).
const IMPORT_LIMIT: Duration = Duration::from_secs(60);

/// The Debian install command for `packages`.
fn apt(packages: &str) -> String {
    format!("apt-get install {packages}")
}

/// `/dev/shm`: there, tmpfs, writable, its size and free space.
pub fn shm() -> Outcome {
    const SHM: &str = "/dev/shm";
    let remount = "mount -o remount,size=2G /dev/shm (a container: docker run --shm-size=2g)";
    if !Path::new(SHM).is_dir() {
        return Outcome::problem(
            Status::Fail,
            "missing",
            "mount -t tmpfs -o size=2G tmpfs /dev/shm (a container: docker run --shm-size=2g)",
        );
    }
    if let Err(e) = rustix::fs::access(
        SHM,
        rustix::fs::Access::WRITE_OK | rustix::fs::Access::EXEC_OK,
    ) {
        return Outcome::problem(
            Status::Fail,
            format!("not writable: {e}"),
            "chmod 1777 /dev/shm, or mount it read-write",
        );
    }
    let kind = probe::fs_type(SHM).unwrap_or_else(|| "unknown file system".into());
    let space = match rustix::fs::statvfs(SHM) {
        Ok(s) => (s.f_blocks * s.f_frsize, s.f_bavail * s.f_frsize),
        Err(e) => {
            return Outcome::problem(Status::Warn, format!("{kind}, size unknown: {e}"), remount)
        }
    };
    let value = format!(
        "{kind}, {} total, {} free",
        probe::bytes(space.0),
        probe::bytes(space.1)
    );
    if kind != "tmpfs" {
        return Outcome::problem(
            Status::Warn,
            value,
            "mount -t tmpfs -o size=2G tmpfs /dev/shm (shared memory on disk is slow)",
        );
    }
    if space.1 < SHM_LOW {
        return Outcome::problem(Status::Warn, format!("{value} (under 1 GiB)"), remount);
    }
    Outcome::ok(value)
}

/// The kernel's `futex_waitv` (Linux 5.16+), probed with no waiters: a kernel that has
/// it refuses that with EINVAL, one without it says ENOSYS, a seccomp filter EPERM.
pub fn futex_waitv() -> Outcome {
    use rustix::io::Errno;
    use rustix::thread::futex;
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map_or_else(|_| "unknown".into(), |r| r.trim().to_string());
    let fallback = "Nerve falls back to waking every 1 ms to look at the other words";
    if std::env::var("NERVE_FUTEX_WAITV").is_ok_and(|v| v == "off") {
        return Outcome::problem(
            Status::Warn,
            format!("turned off by NERVE_FUTEX_WAITV=off (kernel {kernel})"),
            format!("unset NERVE_FUTEX_WAITV ({fallback})"),
        );
    }
    match futex::waitv(
        &[],
        futex::WaitvFlags::empty(),
        None,
        futex::ClockId::Monotonic,
    ) {
        Err(Errno::INVAL) | Ok(_) => Outcome::ok(format!("available (kernel {kernel})")),
        Err(Errno::NOSYS) => Outcome::problem(
            Status::Warn,
            format!("missing: kernel {kernel} is older than 5.16"),
            format!("a Linux kernel 5.16 or newer ({fallback})"),
        ),
        Err(Errno::PERM) => Outcome::problem(
            Status::Warn,
            format!("refused by a seccomp filter (kernel {kernel})"),
            format!("allow futex_waitv in the container's seccomp profile ({fallback})"),
        ),
        Err(e) => Outcome::problem(
            Status::Warn,
            format!("probe failed: {e} (kernel {kernel})"),
            fallback,
        ),
    }
}

/// What `nerve clean` would remove in the domain, removing nothing.
pub fn leftovers(cfg: &nerve::Config) -> Outcome {
    let domain = cfg.domain;
    let clean = if domain == nerve::Config::default().domain {
        "run nerve clean to remove them".to_string()
    } else {
        format!("run nerve clean --domain {domain} to remove them")
    };
    match nerve::introspect::stale(cfg) {
        Ok(r) if r.dead_nodes.is_empty() && r.files.is_empty() => {
            Outcome::ok(format!("none in domain {domain}"))
        }
        Ok(r) => Outcome::problem(
            Status::Warn,
            format!(
                "{} file(s) of {} dead node(s) in domain {domain}{}",
                r.files.len(),
                r.dead_nodes.len(),
                if r.domain_in_use {
                    " (in use by live processes)"
                } else {
                    ""
                }
            ),
            clean,
        ),
        Err(e) => Outcome::problem(
            Status::Warn,
            format!("cannot tell for domain {domain}: {e}"),
            "check NERVE_STATE_DIR and NERVE_CONFIG",
        ),
    }
}

/// cgroup v2 for `nerve launch`: a launch cgroup made (and removed) as a launch makes it.
pub fn cgroup() -> Outcome {
    match nerve_launch::probe_containment() {
        nerve_launch::ContainmentMode::Cgroup { path } => Outcome::ok(format!(
            "writable: launches get a cgroup in {}",
            path.parent().unwrap_or(&path).display()
        )),
        nerve_launch::ContainmentMode::ProcessGroups { reason, .. } => {
            let kind = probe::fs_type("/sys/fs/cgroup").unwrap_or_else(|| "nothing".into());
            let hint = if probe::mounted("cgroup2") {
                "run as root, or in a delegated cgroup (systemd-run --user --scope -p Delegate=yes …)"
            } else {
                "boot with systemd.unified_cgroup_hierarchy=1 (cgroup v2 at /sys/fs/cgroup)"
            };
            Outcome::problem(
                Status::Warn,
                format!("{kind} at /sys/fs/cgroup: {reason}; launches use process groups"),
                hint,
            )
        }
    }
}

/// Root with the capabilities of network namespaces (the cross-host tests and bench
/// build simulated hosts from them).
pub fn root() -> Outcome {
    let uid = rustix::process::geteuid().as_raw();
    // CapEff: the effective capabilities, in hex
    let caps = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("CapEff:"))
                .and_then(|h| u64::from_str_radix(h.trim(), 16).ok())
        })
        .unwrap_or(0);
    const SYS_ADMIN: u64 = 1 << 21;
    const NET_ADMIN: u64 = 1 << 12;
    let missing: Vec<&str> = [(SYS_ADMIN, "CAP_SYS_ADMIN"), (NET_ADMIN, "CAP_NET_ADMIN")]
        .iter()
        .filter(|(bit, _)| caps & bit == 0)
        .map(|(_, name)| *name)
        .collect();
    if missing.is_empty() {
        return Outcome::ok(format!("uid {uid}, CAP_SYS_ADMIN and CAP_NET_ADMIN"));
    }
    let hint = if uid == 0 {
        "a container: run it with --privileged (or --cap-add SYS_ADMIN --cap-add NET_ADMIN)"
    } else {
        "run as root (sudo); without it the bench lists the cross-host runs as skipped"
    };
    Outcome::problem(
        Status::Fail,
        format!("uid {uid}, without {}", missing.join(" and ")),
        hint,
    )
}

/// A program to look for: its names, its Debian package and how it says its version.
pub struct Program {
    names: Vec<String>,
    package: &'static str,
    /// Arguments that make it say its version (`None`: found, not run).
    version: Option<&'static [&'static str]>,
    /// Whether it must run those successfully (a module of Python) to be ready.
    must_run: bool,
}

impl Program {
    /// Any of `names` (on PATH, or a path), from Debian's `package`; `--version` says its
    /// version.
    pub fn new(names: &[&str], package: &'static str) -> Program {
        Program {
            names: names.iter().map(|n| n.to_string()).collect(),
            package,
            version: Some(&["--version"]),
            must_run: false,
        }
    }
    /// Says its version with `args`.
    pub fn version(mut self, args: &'static [&'static str]) -> Program {
        self.version = Some(args);
        self
    }
    /// Not run: only found.
    pub fn quiet(mut self) -> Program {
        self.version = None;
        self
    }
    /// Ready only if its version arguments run successfully.
    pub fn must_run(mut self) -> Program {
        self.must_run = true;
        self
    }
}

/// A program on PATH: where, and what it says of its version.
pub fn program(p: &Program) -> Outcome {
    let Some(path) = probe::find_program(&p.names) else {
        return Outcome::problem(
            Status::Fail,
            format!("{} not found on PATH", p.names.join(" or ")),
            apt(p.package),
        );
    };
    let Some(args) = p.version else {
        return Outcome::ok(path.display().to_string());
    };
    let ran = probe::run_bounded(&path, args, VERSION_LIMIT);
    match (&ran, ran.first_line()) {
        (_, Some(_)) if p.must_run => {
            Outcome::ok(format!("{} {} works", path.display(), args.join(" ")))
        }
        (_, Some(line)) => Outcome::ok(format!("{} ({line})", path.display())),
        (Ran::TimedOut, _) => Outcome::problem(
            Status::Warn,
            format!(
                "{}: `{}` did not end within {VERSION_LIMIT:?}",
                path.display(),
                args.join(" ")
            ),
            format!("check the installation ({})", apt(p.package)),
        ),
        _ if p.must_run => Outcome::problem(
            Status::Fail,
            format!(
                "{} {} failed: {}",
                path.display(),
                args.join(" "),
                failure(&ran)
            ),
            apt(p.package),
        ),
        _ => Outcome::ok(path.display().to_string()),
    }
}

/// Why a command did not succeed, in a few words.
fn failure(ran: &Ran) -> String {
    match ran {
        Ran::NotStarted(e) => format!("cannot start: {e}"),
        Ran::TimedOut => "timed out".into(),
        Ran::Exited { .. } => ran.last_line().unwrap_or("no output").to_string(),
    }
}

/// A file a package installs.
pub fn file(path: &str, package: &str) -> Outcome {
    if Path::new(path).is_file() {
        Outcome::ok(path)
    } else {
        Outcome::problem(Status::Fail, format!("{path} missing"), apt(package))
    }
}

/// A ROS 2 virtual environment of the tests (`$var`, else `folder` in the target
/// directory, as `scripts/test` makes it): whether its rclpy imports.
pub fn ros2_venv(var: &str, folder: &str) -> Outcome {
    let venv = match std::env::var_os(var) {
        Some(v) if !v.is_empty() => PathBuf::from(v),
        _ => target_dir().join(folder),
    };
    let python = venv.join("bin/python");
    if !python.exists() {
        return Outcome::problem(
            Status::Skip,
            format!("no {} (${var})", venv.display()),
            "bash scripts/test makes it (needs python3.11)",
        );
    }
    let ran = probe::run_bounded(&python, &["-c", "import rclpy"], IMPORT_LIMIT);
    match ran {
        Ran::Exited { success: true, .. } => {
            Outcome::ok(format!("rclpy imports in {}", venv.display()))
        }
        _ => Outcome::problem(
            Status::Fail,
            format!("import rclpy in {}: {}", venv.display(), failure(&ran)),
            format!(
                "rm -rf {} and rerun bash scripts/test (installs the wheels)",
                venv.display()
            ),
        ),
    }
}

/// The target directory the tests use: `$CARGO_TARGET_DIR`, else `target` here.
fn target_dir() -> PathBuf {
    let here = std::env::current_dir().unwrap_or_default();
    nerve_bench_harness::machine::target_dir(&here)
}
