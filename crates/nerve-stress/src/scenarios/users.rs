//! T4: two Unix users on one domain. A publisher is SIGKILLed as one user and started
//! again under the same name as the other, both ways round (root and uid 65534,
//! `nobody`): the restart must work or end at once with an error that says why, never
//! hang or panic. No file of the domain may be writable by others, at any point. And a
//! subscriber must not be able to write into a publisher's samples: the mapping that
//! holds a received large sample must be read-only in the subscriber. (Shared rings of
//! small messages are mapped read-write by their readers, which keep their read
//! positions in them; that limit is reported as a figure, not hidden.)
//!
//! Needs root (it starts roles as another user with util-linux's `setpriv`). The state
//! directory is made shared like `/tmp` (mode 1777) so that both users can reach it.

use super::*;
use nerve_bench_harness::child::Child;

const SMALL: &str = "/stress/t4/small";
const LARGE: &str = "/stress/t4/large";
/// The second user: `nobody`.
const OTHER_UID: u32 = 65534;

/// How a start went.
enum Start {
    /// It publishes.
    Works,
    /// It ended with an error (its stderr's last lines).
    Refused(String),
    /// It neither published nor ended within [`WAIT`].
    Hung,
    /// It panicked (its stderr's last lines).
    Panicked(String),
}

/// Runs the scenario.
pub fn run(opts: &Options) -> Result<Outcome, StressError> {
    let name = Scenario::Users.name();
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Err(setup(
            name,
            "needs root: it starts roles as uid 65534 (nobody) through setpriv",
        ));
    }
    let d = Domain::new(name, opts)?;
    empty(&d).map_err(|e| setup(name, e))?;
    let mut out = Outcome::new(
        Scenario::Users,
        "a publisher killed as one user and restarted as another works or is refused at \
         once with a reason (both ways round); no file of the domain writable by others; \
         a subscriber maps a publisher's large samples read-only",
    );
    let mut seen = Vec::new();
    for (first, second, label) in [
        (
            None,
            Some(OTHER_UID),
            "killed as root, restarted as uid 65534",
        ),
        (
            Some(OTHER_UID),
            None,
            "killed as uid 65534, restarted as root",
        ),
    ] {
        let mut a = d.spawn_as(first, "publisher", spec("stress_t4_pub"))?;
        match start(&mut a) {
            Start::Works => {}
            other => {
                out.failures.push(format!(
                    "{label}: the first start failed: {}",
                    describe(&other)
                ));
                continue;
            }
        }
        a.kill();
        out.faults += 1;
        writable_by_others(&d, &mut out);
        let mut b = d.spawn_as(second, "publisher", spec("stress_t4_pub"))?;
        let s = start(&mut b);
        b.stop();
        out.inputs += 1;
        match &s {
            Start::Works | Start::Refused(_) => seen.push(format!("{label}: {}", describe(&s))),
            _ => out.failures.push(format!("{label}: {}", describe(&s))),
        }
        writable_by_others(&d, &mut out);
        // the next case starts from an empty domain (root may remove either user's files)
        empty(&d).map_err(|e| setup(name, e))?;
    }
    mappings(&d, &mut out)?;
    empty(&d).map_err(|e| setup(name, e))?;
    out.held = format!("{}; observed: {}", out.held, seen.join("; "));
    out.leftovers = d.leftovers();
    Ok(out.finish())
}

fn spec(node: &str) -> RoleSpec {
    RoleSpec {
        node: node.into(),
        small: Some(SMALL.into()),
        large: Some(LARGE.into()),
        large_bytes: 64 * 1024,
        depth: 4,
        rate_hz: 1_000.0,
        ..RoleSpec::default()
    }
}

/// Removes every file of the domain, whoever's (every process of it has ended), and
/// makes its state directory afresh.
fn empty(d: &Domain) -> std::io::Result<()> {
    for f in nerve::introspect::domain_files(&d.config) {
        if f.starts_with("/dev/shm/") {
            let _ = std::fs::remove_file(f);
        }
    }
    shared_state_dir(d)
}

/// Makes the state directory empty and reachable by both users, as `/tmp` is (sticky:
/// each user may remove only its own files); the folders iceoryx2 makes in it belong to
/// whoever made them first.
fn shared_state_dir(d: &Domain) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let _ = std::fs::remove_dir_all(&d.config.state_dir);
    std::fs::create_dir_all(&d.config.state_dir)?;
    std::fs::set_permissions(&d.config.state_dir, std::fs::Permissions::from_mode(0o1777))
}

/// Waits for `child` to publish, or to end.
fn start(child: &mut Child) -> Start {
    if child.try_expect("sending", WAIT).is_some() {
        return Start::Works;
    }
    let ended = child.wait_exit(Duration::from_millis(200));
    let tail = child.stop_and_tail();
    match (ended, tail.contains("panicked")) {
        (_, true) => Start::Panicked(tail),
        (true, false) => Start::Refused(tail),
        (false, false) => Start::Hung,
    }
}

fn describe(s: &Start) -> String {
    match s {
        Start::Works => "works".into(),
        Start::Refused(why) => format!("refused at once: {why}"),
        Start::Hung => format!("hung (neither published nor ended within {WAIT:?})"),
        Start::Panicked(why) => format!("panicked: {why}"),
    }
}

/// Records every file of the domain that others may write.
fn writable_by_others(d: &Domain, out: &mut Outcome) {
    use std::os::unix::fs::MetadataExt;
    for f in nerve::introspect::domain_files(&d.config) {
        let Ok(m) = std::fs::symlink_metadata(&f) else {
            continue;
        };
        if m.is_file() && m.mode() & 0o002 != 0 {
            out.failures.push(format!(
                "{f} is writable by others (mode {:o})",
                m.mode() & 0o7777
            ));
        }
    }
}

/// A subscriber reads a large sample and says how it maps it and the shared rings.
fn mappings(d: &Domain, out: &mut Outcome) -> Result<(), StressError> {
    let name = Scenario::Users.name();
    let mut p = d.spawn("publisher", spec("stress_t4_pub"))?;
    p.expect("sending", WAIT).map_err(|e| setup(name, e))?;
    let mut s = d.spawn(
        "subscriber",
        RoleSpec {
            show_mappings: true,
            ..spec("stress_t4_sub")
        },
    )?;
    let mut lines = Vec::new();
    while let Some(l) = s.try_expect("", WAIT) {
        if l == "mapped" {
            break;
        }
        if l.starts_with("sample ") || l.starts_with("ring ") {
            lines.push(l);
        }
    }
    s.stop();
    p.stop();
    let sample = lines.iter().find(|l| l.starts_with("sample "));
    match sample {
        None => out
            .failures
            .push("the subscriber did not say how it maps its samples".into()),
        Some(l) => {
            let perms = l.split_whitespace().nth(1).unwrap_or("");
            out.inputs += 1;
            out.check(!perms.contains('w'), || {
                format!("a subscriber maps the publisher's large samples writable: {l}")
            });
            out.figure(
                "large samples mapped read-only by the subscriber",
                f64::from(!perms.contains('w')),
            );
        }
    }
    let rings = lines.iter().filter(|l| l.starts_with("ring ")).count();
    let writable = lines
        .iter()
        .filter(|l| {
            l.starts_with("ring ") && l.split_whitespace().nth(1).unwrap_or("").contains('w')
        })
        .count();
    out.figure("shared rings mapped by the subscriber", rings as f64);
    out.figure(
        "shared rings mapped writable by the subscriber",
        writable as f64,
    );
    Ok(())
}
