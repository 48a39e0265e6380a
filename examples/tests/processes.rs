//! Process-level tests: real processes exchanging samples through shared memory, crash
//! recovery, stalled subscribers, domain isolation and the CLI against a running talker.
//! Every test uses its own domain and state directory; every child is killed on drop.

use serde_json::Value;
use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

static NEXT: AtomicU32 = AtomicU32::new(0);

/// An isolated domain: unique id and state directory, empty when the test starts.
struct Domain {
    id: u32,
    dir: PathBuf,
}

impl Domain {
    fn new() -> Domain {
        let mut last = String::new();
        for _ in 0..64 {
            let id = 100 + (std::process::id() % 80) * 10 + NEXT.fetch_add(1, Ordering::SeqCst);
            let dir = std::env::temp_dir().join(format!("nerve-proc-{}-{id}/", std::process::id()));
            let d = Domain { id, dir };
            // other suites and earlier runs use these ids too: what dead processes left
            // goes first, and a domain that a live process uses is passed over
            match nerve::introspect::clean(&d.config()) {
                Ok(r) if !r.domain_in_use => return d,
                Ok(_) => last = format!("domain {id} is in use"),
                Err(e) => last = format!("domain {id}: {e}"),
            }
        }
        panic!("no free test domain in 64 tries; the last: {last}");
    }

    fn cmd(&self, exe: &str) -> Command {
        let mut c = Command::new(exe);
        c.env("NERVE_DOMAIN", self.id.to_string())
            .env("NERVE_STATE_DIR", &self.dir)
            .env_remove("NERVE_CONFIG")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    }

    fn spawn(&self, exe: &str, args: &[&str]) -> Proc {
        let child = self.cmd(exe).args(args).spawn().expect("spawn");
        Proc::new(child)
    }

    fn run(&self, exe: &str, args: &[&str]) -> (i32, String, String) {
        let out = self.cmd(exe).args(args).output().expect("run");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    fn config(&self) -> nerve::Config {
        nerve::Config::default()
            .domain(self.id)
            .unwrap()
            .state_dir(self.dir.clone())
    }

    /// This domain's files in /dev/shm and its state directory.
    fn files(&self) -> BTreeSet<String> {
        nerve::introspect::domain_files(&self.config())
    }

    /// The kernel's locks on this domain's doorbell (`/proc/locks` lines: the pid that
    /// took each), for failures that find the domain still in use.
    fn doorbell_locks(&self) -> Vec<String> {
        use std::os::unix::fs::MetadataExt;
        let bell = nerve::introspect::doorbell_path(&self.config());
        let Ok(ino) = std::fs::metadata(bell).map(|m| m.ino()) else {
            return Vec::new();
        };
        std::fs::read_to_string("/proc/locks")
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains(&format!(":{ino} ")))
            .map(str::to_string)
            .collect()
    }
}

impl Drop for Domain {
    /// Leaves the machine as it was: reclaims whatever killed children left behind.
    fn drop(&mut self) {
        let _ = nerve::introspect::clean(&self.config());
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A child process with line-wise stdout; killed on drop.
struct Proc {
    child: Child,
    lines: std::sync::mpsc::Receiver<String>,
}

impl Proc {
    fn new(mut child: Child) -> Proc {
        let out = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        Proc { child, lines: rx }
    }

    /// Waits for a line equal to `marker`; panics with the child's stderr on timeout.
    fn expect_line(&mut self, marker: &str, timeout: Duration) {
        self.expect_where(marker, timeout, |l| l == marker)
    }

    /// Waits for a line starting with `prefix`; panics with the child's stderr on timeout.
    fn expect_prefix(&mut self, prefix: &str, timeout: Duration) {
        self.expect_where(prefix, timeout, |l| l.starts_with(prefix))
    }

    fn expect_where(&mut self, marker: &str, timeout: Duration, found: impl Fn(&str) -> bool) {
        let deadline = Instant::now() + timeout;
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.lines.recv_timeout(left) {
                Ok(l) if found(&l) => return,
                Ok(_) => {}
                Err(_) => break,
            }
        }
        self.kill();
        let mut err = String::new();
        use std::io::Read;
        if let Some(mut e) = self.child.stderr.take() {
            let _ = e.read_to_string(&mut err);
        }
        panic!("no line {marker:?} within {timeout:?}; stderr: {err}");
    }

    /// Waits for the process to exit and returns its last JSON line.
    fn json(mut self, timeout: Duration) -> Value {
        let deadline = Instant::now() + timeout;
        let mut last = None;
        loop {
            match self.lines.recv_timeout(Duration::from_millis(50)) {
                Ok(l) => {
                    if l.starts_with('{') {
                        last = Some(l);
                    }
                }
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
                Err(_) => {}
            }
            if Instant::now() > deadline {
                self.kill();
                panic!("process did not finish within {timeout:?}");
            }
        }
        let status = self.child.wait().unwrap();
        let mut err = String::new();
        use std::io::Read;
        if let Some(mut e) = self.child.stderr.take() {
            let _ = e.read_to_string(&mut err);
        }
        assert!(status.success(), "exit {status}: {err}");
        serde_json::from_str(&last.unwrap_or_else(|| panic!("no JSON output; stderr: {err}")))
            .unwrap()
    }

    /// Waits for the process to exit; its exit code and everything it wrote to stderr.
    fn exit_and_stderr(&mut self) -> (Option<i32>, String) {
        let status = self.child.wait().unwrap();
        let mut err = String::new();
        use std::io::Read;
        if let Some(mut e) = self.child.stderr.take() {
            let _ = e.read_to_string(&mut err);
        }
        (status.code(), err)
    }

    fn signal(&self, sig: i32) {
        // SAFETY: sending a signal to our own child process.
        unsafe { libc::kill(self.child.id() as i32, sig) };
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Proc {
    /// Asks the child to stop (SIGTERM, honoured by the examples), then kills it.
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.signal(libc::SIGCONT);
            self.signal(libc::SIGTERM);
            let deadline = Instant::now() + Duration::from_secs(2);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = self.child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            self.kill();
        }
    }
}

const PEER: &str = env!("CARGO_BIN_EXE_peer");
const T: Duration = Duration::from_secs(60);

fn nerve_cli() -> String {
    // the CLI is a binary of another workspace package; `cargo test --workspace` builds it
    // because nerve-cli has integration tests of its own (crates/nerve-cli/tests)
    let dir = PathBuf::from(PEER).parent().unwrap().to_path_buf();
    let p = dir.join("nerve");
    assert!(
        p.exists(),
        "build the CLI first (cargo test --workspace builds it): {}",
        p.display()
    );
    p.display().to_string()
}

#[test]
fn ten_thousand_imu_reliable_no_loss_in_order() {
    let d = Domain::new();
    let mut sub = d.spawn(
        PEER,
        &[
            "sub", "--topic", "/imu", "--count", "10000", "--qos", "reliable",
        ],
    );
    sub.expect_line("ready", T);
    let publisher = d.spawn(
        PEER,
        &[
            "pub", "--topic", "/imu", "--count", "10000", "--qos", "reliable",
        ],
    );
    let p = publisher.json(T);
    assert_eq!(p["errors"].as_array().unwrap().len(), 0, "{p}");
    let s = sub.json(T);
    assert_eq!(s["received"], 10000, "{s}");
    assert_eq!(s["lost"], 0, "{s}");
    assert_eq!(s["last_seq"], 10000, "{s}");
    assert_eq!(s["in_order"], true, "{s}");
    assert_eq!(s["payload_ok"], true, "{s}");
}

#[test]
fn ten_megabyte_clouds_arrive_intact() {
    let d = Domain::new();
    let sub_exe = env!("CARGO_BIN_EXE_pointcloud_sub");
    let pub_exe = env!("CARGO_BIN_EXE_pointcloud_pub");
    let sub = d.spawn(
        sub_exe,
        &["--count", "20", "--json", "--idle-timeout", "30"],
    );
    let p = d.spawn(
        pub_exe,
        &["--count", "20", "--rate", "10", "--wait-subscribers", "1"],
    );
    let s = sub.json(T);
    drop(p);
    assert_eq!(s["received"], 20, "{s}");
    assert_eq!(s["bad_checksum"], 0, "{s}");
    assert_eq!(s["bytes"], 10_000_000, "{s}");
}

#[test]
fn stopped_subscriber_drop_oldest_counts_and_others_keep_receiving() {
    let d = Domain::new();
    // the publisher exists first, so subscribers attach to it when they are created
    let mut p = d.spawn(
        PEER,
        &[
            "pub", "--topic", "/s", "--count", "2000", "--qos", "sensor", "--subs", "2", "--rate",
            "1000",
        ],
    );
    p.expect_line("ready", T);
    let mut slow = d.spawn(
        PEER,
        &[
            "sub", "--topic", "/s", "--count", "2000", "--qos", "shallow", "--idle", "5",
        ],
    );
    slow.expect_line("ready", T);
    let mut fast = d.spawn(
        PEER,
        &["sub", "--topic", "/s", "--count", "2000", "--qos", "sensor"],
    );
    fast.expect_line("ready", T);
    // losses are counted from the first sample seen of each publisher: stop the slow one
    // once it has seen the stream start
    slow.expect_line("first", T);
    slow.signal(libc::SIGSTOP);
    let pr = p.json(T);
    assert_eq!(pr["errors"].as_array().unwrap().len(), 0, "{pr}");
    let f = fast.json(T);
    assert_eq!(
        f["received"], 2000,
        "the running subscriber misses nothing: {f}"
    );
    assert_eq!(f["lost"], 0, "{f}");
    slow.signal(libc::SIGCONT);
    let s = slow.json(T);
    let (received, lost) = (s["received"].as_u64().unwrap(), s["lost"].as_u64().unwrap());
    assert!(lost > 0, "drops must be counted: {s}");
    assert_eq!(
        received + lost,
        2000,
        "every sample is received or counted lost: {s}"
    );
    assert_eq!(s["last_seq"], 2000, "drop-oldest keeps the newest: {s}");
}

#[test]
fn stopped_subscriber_back_pressure_times_out_with_error() {
    let d = Domain::new();
    let mut p = d.spawn(
        PEER,
        &["pub", "--topic", "/bp", "--count", "100", "--qos", "tight"],
    );
    p.expect_line("ready", T);
    let mut slow = d.spawn(
        PEER,
        &[
            "sub", "--topic", "/bp", "--count", "100", "--qos", "tight", "--idle", "5",
        ],
    );
    slow.expect_line("ready", T);
    slow.signal(libc::SIGSTOP);
    let pr = p.json(T);
    let errors = pr["errors"].as_array().unwrap();
    assert_eq!(errors.len(), 1, "{pr}");
    let e = errors[0].as_str().unwrap();
    assert!(e.contains("/bp") && e.contains("back-pressure"), "{e}");
}

#[test]
fn sigkill_mid_loan_and_while_holding_then_restart_and_clean() {
    let d = Domain::new();
    let start = d.files();
    let mut sub = d.spawn(
        PEER,
        &[
            "sub", "--topic", "/crash", "--count", "10", "--qos", "sensor", "--hold", "3",
        ],
    );
    sub.expect_line("ready", T);
    let mut publisher = d.spawn(
        PEER,
        &[
            "pub",
            "--topic",
            "/crash",
            "--count",
            "10",
            "--qos",
            "sensor",
            "--hold-loan",
        ],
    );
    sub.expect_line("holding", T);
    publisher.expect_line("loaned", T);
    assert!(
        d.files().len() > start.len(),
        "the topic lives in shared memory"
    );
    publisher.signal(libc::SIGKILL);
    sub.signal(libc::SIGKILL);
    publisher.kill();
    sub.kill();

    // restart both with the same names at once: the topic is created again and works
    let mut sub = d.spawn(
        PEER,
        &[
            "sub", "--topic", "/crash", "--count", "100", "--qos", "reliable",
        ],
    );
    sub.expect_line("ready", T);
    let p = d.spawn(
        PEER,
        &[
            "pub", "--topic", "/crash", "--count", "100", "--qos", "reliable",
        ],
    );
    let pr = p.json(T);
    assert_eq!(pr["errors"].as_array().unwrap().len(), 0, "{pr}");
    let s = sub.json(T);
    assert_eq!(s["received"], 100, "{s}");

    // clean exits of the new processes already removed everything
    assert_eq!(d.files(), start, "files left after clean exits");
    let (code, out, err) = d.run(&nerve_cli(), &["clean", "--format", "json"]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["domain_in_use"], false, "{v}");
    assert_eq!(d.files(), start);
}

/// A subscriber holding samples and a publisher holding a loan on `topic`, both
/// SIGKILLed: what they leave is for the next user of the domain or `nerve clean`.
fn kill_holding_peers(d: &Domain, topic: &str) {
    let mut sub = d.spawn(
        PEER,
        &[
            "sub", "--topic", topic, "--count", "10", "--qos", "sensor", "--hold", "2",
        ],
    );
    sub.expect_line("ready", T);
    let mut publisher = d.spawn(
        PEER,
        &[
            "pub",
            "--topic",
            topic,
            "--count",
            "5",
            "--qos",
            "sensor",
            "--hold-loan",
        ],
    );
    sub.expect_line("holding", T);
    publisher.expect_line("loaned", T);
    sub.kill();
    publisher.kill();
}

#[test]
fn clean_removes_what_killed_processes_left() {
    let d = Domain::new();
    let start = d.files();
    kill_holding_peers(&d, "/left");
    assert_ne!(d.files(), start, "killed processes leave files behind");
    let (code, out, err) = d.run(&nerve_cli(), &["clean"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("reclaimed dead node peer_sub"), "{out}");
    assert!(out.contains("removed "), "{out}");
    assert_eq!(d.files(), start, "{out}");
}

/// What killed processes left goes once the domain is next used, also when their node
/// records went with their state directory (as a test's temporary directory does), which
/// iceoryx2's own cleanup needs to find them; a second user leaves a live one's files be.
#[test]
fn the_next_user_of_a_domain_removes_what_killed_processes_left() {
    use nerve::prelude::*;
    let d = Domain::new();
    kill_holding_peers(&d, "/debris");
    let bell = nerve::introspect::doorbell_path(&d.config());
    let debris: BTreeSet<String> = d
        .files()
        .into_iter()
        .filter(|f| f.starts_with("/dev/shm/") && *f != bell)
        .collect();
    assert!(!debris.is_empty(), "killed processes leave files behind");
    std::fs::remove_dir_all(&d.dir).unwrap();
    {
        let first = Context::new(d.config()).unwrap();
        let kept: Vec<_> = debris.intersection(&d.files()).cloned().collect();
        assert!(kept.is_empty(), "the first user kept {kept:?}");
        let _node = first.node("first").create().unwrap();
        let live = d.files();
        drop(Context::new(d.config()).unwrap());
        assert!(
            live.is_subset(&d.files()),
            "a second user removed files of a live one"
        );
    }
    assert_eq!(
        d.files(),
        BTreeSet::new(),
        "files left once the domain emptied"
    );
}

#[test]
fn domains_are_isolated() {
    let a = Domain::new();
    let b = Domain::new();
    let mut sub_b = b.spawn(
        PEER,
        &[
            "sub", "--topic", "/iso", "--count", "1", "--qos", "sensor", "--idle", "1",
        ],
    );
    sub_b.expect_line("ready", T);
    let mut sub_a = a.spawn(
        PEER,
        &[
            "sub", "--topic", "/iso", "--count", "50", "--qos", "reliable",
        ],
    );
    sub_a.expect_line("ready", T);
    let p = a.spawn(
        PEER,
        &[
            "pub", "--topic", "/iso", "--count", "50", "--qos", "reliable",
        ],
    );
    p.json(T);
    assert_eq!(sub_a.json(T)["received"], 50);
    assert_eq!(
        sub_b.json(T)["received"],
        0,
        "domain b saw domain a's traffic"
    );
    let (_, out, _) = b.run(&nerve_cli(), &["topic", "list", "--format", "json"]);
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    assert!(
        v.as_array().unwrap().iter().all(|t| t["publishers"] == 0),
        "{v}"
    );
}

#[test]
fn cli_against_a_running_talker() {
    let d = Domain::new();
    let nerve = nerve_cli();
    let talker = d.spawn(env!("CARGO_BIN_EXE_talker"), &["--rate", "100"]);
    // wait for the topic to appear
    let deadline = Instant::now() + T;
    let list = loop {
        let (code, out, err) = d.run(&nerve, &["topic", "list", "--format", "json"]);
        assert_eq!(code, 0, "{err}");
        let v: Value = serde_json::from_str(out.trim()).unwrap();
        // (the topic exists a moment before its publisher does: wait for both)
        if v.as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "/imu" && t["publishers"] == 1)
        {
            break v;
        }
        assert!(Instant::now() < deadline, "talker's topic never listed");
        std::thread::sleep(Duration::from_millis(50));
    };
    let imu = list
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "/imu")
        .unwrap();
    assert_eq!(imu["type"], "nerve_msgs/Imu");
    assert_eq!(imu["publishers"], 1);
    {
        use std::os::unix::fs::PermissionsExt;
        for f in d.files() {
            // files may vanish while we look (the CLI's own nodes exit)
            if let Ok(meta) = std::fs::metadata(&f) {
                let mode = meta.permissions().mode() & 0o777;
                assert_eq!(mode & 0o077, 0, "{f} is {mode:o}, not owner-only");
            }
        }
    }
    assert!(imu["subscribers"].is_number());

    let (code, out, err) = d.run(
        &nerve,
        &[
            "topic",
            "echo",
            "/imu",
            "--count",
            "3",
            "--format",
            "json",
            "--timeout",
            "20",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let msgs: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(msgs.len(), 3);
    assert_eq!(msgs[0]["type"], "nerve_msgs/Imu");
    assert_eq!(msgs[0]["msg"]["linear_acceleration"]["z"], 9.81);
    assert!(msgs[1]["header"]["seq"].as_u64() > msgs[0]["header"]["seq"].as_u64());

    let (code, out, err) = d.run(
        &nerve,
        &[
            "topic",
            "hz",
            "/imu",
            "--duration",
            "2",
            "--format",
            "json",
            "--timeout",
            "20",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let hz: Value = serde_json::from_str(out.trim()).unwrap();
    assert!(hz["messages"].as_u64().unwrap() > 10, "{hz}");
    assert!(hz["rate_hz"].as_f64().unwrap() > 0.0, "{hz}");

    let (code, out, err) = d.run(&nerve, &["node", "list", "--format", "json"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("\"talker\""), "{out}");

    // pub: a listener receives what the CLI publishes
    let mut listener = d.spawn(
        PEER,
        &[
            "sub", "--topic", "/cli_imu", "--count", "3", "--qos", "sensor", "--idle", "10",
        ],
    );
    listener.expect_line("ready", T);
    let (code, _, err) = d.run(
        &nerve,
        &[
            "topic",
            "pub",
            "/cli_imu",
            "Imu",
            r#"{"angular_velocity": {"x": 1.0}}"#,
            "--count",
            "3",
            "--rate",
            "50",
            "--wait-subscribers",
            "10",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(listener.json(T)["received"], 3);
    drop(talker);
}

#[test]
fn publisher_recovers_samples_held_by_a_killed_subscriber() {
    use nerve::prelude::*;
    let d = Domain::new();
    let ctx = Context::new(
        nerve::Config::default()
            .domain(d.id)
            .unwrap()
            .state_dir(d.dir.clone()),
    )
    .unwrap();
    let node = ctx.node("recovering_pub").create().unwrap();
    // the smallest budget: it would cap a back-pressure pool at 4 samples, which the
    // subscriber below could hold; a sensor pool holds the worst case regardless
    let p = node
        .publisher::<nerve_msgs::Imu>("/pool")
        .qos(Qos::sensor().depth(8).shm_budget(1))
        .create()
        .unwrap();
    let mut sub = d.spawn(
        PEER,
        &[
            "sub", "--topic", "/pool", "--count", "100", "--qos", "shallow", "--hold", "2",
        ],
    );
    sub.expect_line("ready", T);
    assert!(p.wait_for_subscribers(1, T));
    for i in 0..20 {
        let mut m = nerve_msgs::Imu::default();
        m.angular_velocity.x = (i + 1) as f64;
        p.publish(&m)
            .expect("a subscriber holding samples never fails a sensor publisher");
        std::thread::sleep(Duration::from_millis(5));
    }
    sub.expect_line("holding", T);
    // the subscriber dies holding its samples: they come back and publishing goes on
    sub.kill();
    for _ in 0..20 {
        p.publish(&nerve_msgs::Imu::default())
            .expect("publishing goes on after the subscriber died");
    }
}

/// The Imu a peer publisher sends as message `seq`: every 8-byte word is `seq`.
fn imu_pattern(seq: u64) -> nerve_msgs::Imu {
    let bytes: Vec<u8> = std::iter::repeat_n(
        seq.to_ne_bytes(),
        std::mem::size_of::<nerve_msgs::Imu>() / 8,
    )
    .flatten()
    .collect();
    nerve::message::read_pod(&bytes).unwrap()
}

/// Small fixed-size messages cross processes in the publisher's shared-memory ring. A
/// publisher SIGKILLed while it writes flat out (so some kills land inside a slot's write)
/// never hands a torn sample to a reader in another process, a new publisher on the same
/// topic is read at once, and the rings of the killed ones do not outlive the domain.
#[test]
fn inline_ring_writer_killed_mid_write_never_hands_out_a_torn_sample() {
    use nerve::prelude::*;
    let d = Domain::new();
    let start = d.files();
    {
        let ctx = Context::new(d.config()).unwrap();
        let node = ctx.node("torn_watch").create().unwrap();
        let sub = node
            .subscriber::<nerve_msgs::Imu>("/flood")
            .qos(Qos::sensor().depth(256))
            .create()
            .unwrap();
        let mut total = 0u64;
        let check = |m: &nerve::Sample<nerve_msgs::Imu>| {
            let seq = m.header().seq;
            assert_eq!(
                nerve::message::as_bytes(&**m),
                nerve::message::as_bytes(&imu_pattern(seq)),
                "a torn sample (seq {seq})"
            );
        };
        for round in 0..20u64 {
            let mut p = d.spawn(
                PEER,
                &[
                    "pub", "--topic", "/flood", "--count", "0", "--qos", "sensor",
                ],
            );
            p.expect_line("sending", T);
            // read while it writes flat out (the reader is lapped: overwritten slots are
            // skipped), then kill it at a moment that varies from round to round
            let until = Instant::now() + Duration::from_millis(2 + 7 * round);
            let mut got = 0u64;
            while Instant::now() < until || got == 0 {
                let m = sub
                    .recv_timeout(T)
                    .unwrap()
                    .unwrap_or_else(|| panic!("round {round}: the new publisher is not read"));
                check(&m);
                got += 1;
            }
            p.signal(libc::SIGKILL);
            p.kill();
            while let Some(m) = sub.try_recv().unwrap() {
                check(&m);
                got += 1;
            }
            total += got;
        }
        assert_eq!(sub.stats().malformed, 0);
        assert!(total >= 20);
    }
    assert_eq!(
        d.files(),
        start,
        "files left once the domain emptied; locks on its doorbell: {:?}",
        d.doorbell_locks()
    );
}

/// A reader of a back-pressure ring SIGKILLed while the ring is full never blocks the
/// writer: its entry is reaped and the writer goes on with the living reader, which gets
/// every sample in order.
#[test]
fn inline_ring_reader_killed_never_blocks_the_writer() {
    use nerve::prelude::*;
    let d = Domain::new();
    let ctx = Context::new(d.config()).unwrap();
    let node = ctx.node("bp_writer").create().unwrap();
    // a generous timeout: a writer held by the dead reader would fail with it
    let qos = Qos::reliable().depth(4).overflow(Overflow::BackPressure {
        timeout: Duration::from_secs(30),
    });
    let p = node
        .publisher::<nerve_msgs::Imu>("/bpkill")
        .qos(qos.clone())
        .create()
        .unwrap();
    let mut doomed = d.spawn(
        PEER,
        &[
            "sub", "--topic", "/bpkill", "--count", "100", "--qos", "tight", "--hold", "1",
            "--idle", "60",
        ],
    );
    doomed.expect_line("ready", T);
    assert!(p.wait_for_subscribers(1, T));
    p.publish(&imu_pattern(1)).unwrap();
    doomed.expect_line("holding", T);
    // the ring fills behind the stalled reader: four more and it is full
    for seq in 2..=5 {
        p.publish(&imu_pattern(seq)).unwrap();
    }
    doomed.signal(libc::SIGKILL);
    doomed.kill();
    // a living reader in another context takes everything from here on
    let n = 200u64;
    let cfg = d.config();
    let reader = std::thread::spawn(move || {
        let ctx = Context::new(cfg).unwrap();
        let node = ctx.node("bp_reader").create().unwrap();
        let sub = node
            .subscriber::<nerve_msgs::Imu>("/bpkill")
            .qos(qos)
            .create()
            .unwrap();
        println!("reader ready");
        let mut seqs = Vec::new();
        while (seqs.len() as u64) < n {
            match sub.recv_timeout(T).unwrap() {
                Some(m) => seqs.push(m.header().seq),
                None => break,
            }
        }
        seqs
    });
    assert!(p.wait_for_subscribers(1, T));
    let mut failed = Vec::new();
    for seq in 6..6 + n {
        if let Err(e) = p.publish(&imu_pattern(seq)) {
            failed.push(e.to_string());
        }
    }
    assert!(
        failed.iter().all(|e| !e.contains("back-pressure")),
        "the dead reader held the writer: {failed:?}"
    );
    let seqs = reader.join().unwrap();
    assert_eq!(seqs.len() as u64, n, "the living reader gets every sample");
    assert!(
        seqs.windows(2).all(|w| w[1] == w[0] + 1),
        "in order: {seqs:?}"
    );
}

#[test]
fn service_failures_with_real_processes() {
    use nerve::{CallError, ServiceQos};
    use nerve_msgs::srv::{AddTwoInts, Echo, TwoInts};
    let d = Domain::new();
    let ctx = nerve::Context::new(d.config()).unwrap();
    let node = ctx.node("caller").create().unwrap();
    let add = node.client::<AddTwoInts>("/add").create().unwrap();
    let call = |a, b| add.call(&TwoInts { a, b }, T);

    // no server: a clear error at once, and wait_for_service gives up
    assert!(matches!(call(1, 2), Err(CallError::NoServer { .. })));
    assert!(!add.wait_for_service(Duration::from_millis(100)));

    let mut server = d.spawn(PEER, &["serve"]);
    server.expect_line("ready", T);
    assert!(add.wait_for_service(T));
    assert_eq!(call(2, 3).unwrap().value, 5);

    // a handler error reaches the client typed, with its message
    match call(i64::MIN, 0) {
        Err(CallError::Handler { message, .. }) => assert_eq!(message, "a must not be i64::MIN"),
        other => panic!("expected a handler error, got {:?}", other.map(|r| r.value)),
    }

    // an oversized request fails before sending; the service keeps working
    let echo = node
        .client::<Echo>("/echo")
        .qos(ServiceQos::default().max_payload(1 << 20, 1 << 20))
        .create()
        .unwrap();
    assert!(matches!(
        echo.loan_slice(2 << 20),
        Err(CallError::PayloadTooLarge { .. })
    ));
    let mut req = echo.loan_slice(1000).unwrap();
    req.elems_mut().fill(7);
    req.tag = 42;
    let r = req.call(T).unwrap();
    assert_eq!((r.tag, r.elems().len()), (42, 1000));
    assert!(r.elems().iter().all(|&b| b == 7));
    drop(r);

    // the server dies mid-call: the call fails well within its timeout
    let pending = add.send(&TwoInts { a: 99, b: 0 }).unwrap();
    server.expect_line("got", T);
    server.signal(libc::SIGKILL);
    let t0 = Instant::now();
    let err = pending.wait(Duration::from_secs(30)).err().unwrap();
    assert!(matches!(err, CallError::ServerGone { .. }), "{err}");
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    server.kill();

    // a restarted server is found by the existing client
    let mut again = d.spawn(PEER, &["serve"]);
    again.expect_line("ready", T);
    assert!(add.wait_for_service(T));
    assert_eq!(call(40, 2).unwrap().value, 42);
}

#[test]
fn cli_lists_and_calls_services() {
    let d = Domain::new();
    let cli = nerve_cli();
    let (code, _, err) = d.run(
        &cli,
        &[
            "service",
            "call",
            "/add",
            "AddTwoInts",
            "{}",
            "--timeout",
            "100",
        ],
    );
    assert_eq!(code, 1, "no server is a runtime error: {err}");
    assert!(err.contains("/add") && err.contains("no server"), "{err}");

    let mut server = d.spawn(PEER, &["serve"]);
    server.expect_line("ready", T);
    let (code, out, err) = d.run(&cli, &["service", "list", "--format", "json"]);
    assert_eq!(code, 0, "{err}");
    let list: Value = serde_json::from_str(out.trim()).unwrap();
    let add = list
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "/add")
        .unwrap();
    assert_eq!(add["type"], "nerve_msgs/AddTwoInts");
    assert_eq!(add["servers"], 1);

    let (code, out, err) = d.run(
        &cli,
        &[
            "service",
            "call",
            "/add",
            "AddTwoInts",
            r#"{"a": 40, "b": 2}"#,
            "--format",
            "json",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        serde_json::from_str::<Value>(out.trim()).unwrap()["value"],
        42
    );

    let min = format!(r#"{{"a": {}}}"#, i64::MIN);
    let (code, _, err) = d.run(&cli, &["service", "call", "/add", "AddTwoInts", &min]);
    assert_eq!(code, 1);
    assert!(
        err.contains("handler failed: a must not be i64::MIN"),
        "{err}"
    );

    for (args, what) in [
        (
            vec!["service", "call", "/add", "NoSuchType", "{}"],
            "unknown service type",
        ),
        (
            vec!["service", "call", "/add", "AddTwoInts", "{\"c\": 1}"],
            "no field \"c\"",
        ),
        (
            vec!["service", "call", "/add", "AddTwoInts", "not json"],
            "invalid JSON for the request",
        ),
        (
            vec!["service", "call", "bad name", "AddTwoInts", "{}"],
            "invalid name",
        ),
    ] {
        let (code, _, err) = d.run(&cli, &args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(what), "{args:?}: {err}");
    }
}

const TALKER: &str = env!("CARGO_BIN_EXE_talker");

#[test]
fn bag_recorder_killed_mid_run_leaves_a_readable_file_and_ctrl_c_a_complete_one() {
    let d = Domain::new();
    let nerve = nerve_cli();
    let dir = d.dir.join("bags");
    std::fs::create_dir_all(&dir).unwrap();
    let _talker = d.spawn(TALKER, &["--topic", "/imu_bag", "--rate", "500"]);
    let killed = dir.join("killed.mcap");
    let done = dir.join("done.mcap");
    let mut rec = d.spawn(&nerve, &["bag", "record", "-o", killed.to_str().unwrap()]);
    let clean = d.spawn(
        &nerve,
        &[
            "bag",
            "record",
            "/imu_bag",
            "-o",
            done.to_str().unwrap(),
            "--format",
            "json",
        ],
    );
    // the writer flushes whole chunks at least every second
    std::thread::sleep(Duration::from_millis(3500));
    rec.signal(libc::SIGKILL);
    let _ = rec.child.wait();
    clean.signal(libc::SIGINT);
    let report = clean.json(T);
    let topic = &report["topics"][0];
    assert_eq!(topic["topic"], "/imu_bag");
    assert!(topic["written"].as_u64().unwrap() > 500, "{report}");
    assert_eq!(topic["dropped"], 0);

    // the killed recorder's file: incomplete, so `info` refuses it naming the damage
    // (exit 1) unless asked to keep going; readable up to its last whole chunk
    let (code, _, err) = d.run(
        &nerve,
        &["bag", "info", killed.to_str().unwrap(), "--format", "json"],
    );
    assert_eq!(code, 1, "a damaged bag is an error: {err}");
    assert!(
        err.contains("killed.mcap"),
        "the error names the file: {err}"
    );
    let (code, out, err) = d.run(
        &nerve,
        &[
            "bag",
            "info",
            killed.to_str().unwrap(),
            "--format",
            "json",
            "--tolerate-damage",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let info: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(info["complete"], false, "{info}");
    assert!(info["damage"]["what"].as_str().is_some(), "{info}");
    let saved = info["messages"].as_u64().unwrap();
    assert!(
        saved >= 500,
        "at least the chunks flushed before the kill: {info}"
    );
    let fixed = dir.join("fixed.mcap");
    let (code, _, err) = d.run(
        &nerve,
        &[
            "bag",
            "recover",
            killed.to_str().unwrap(),
            "-o",
            fixed.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 0, "{err}");
    let (_, out, _) = d.run(
        &nerve,
        &["bag", "info", fixed.to_str().unwrap(), "--format", "json"],
    );
    let info: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(info["complete"], true);
    assert_eq!(info["messages"].as_u64().unwrap(), saved);

    // the Ctrl-C'd recorder's file is complete and counts its losses (none)
    let (_, out, _) = d.run(
        &nerve,
        &["bag", "info", done.to_str().unwrap(), "--format", "json"],
    );
    let info: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(info["complete"], true, "{info}");
    assert_eq!(info["topics"][0]["losses"], 0, "{info}");

    // bad input: clear errors, exit codes 1 (runtime) and 2 (usage)
    let (code, _, err) = d.run(
        &nerve,
        &["bag", "info", dir.join("none.mcap").to_str().unwrap()],
    );
    assert_eq!(code, 1);
    assert!(err.contains("none.mcap"), "{err}");
    // an existing bag is never replaced unless asked
    let before = std::fs::read(&done).unwrap();
    let (code, _, err) = d.run(
        &nerve,
        &[
            "bag",
            "record",
            "-o",
            done.to_str().unwrap(),
            "--duration",
            "1",
        ],
    );
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("done.mcap") && err.contains("exists"), "{err}");
    assert!(
        std::fs::read(&done).unwrap() == before,
        "the bag is untouched"
    );
    // recover onto its own input under another name, a clock of 0 Hz, a zero call
    // timeout: refused by name, nothing touched
    let same = format!("{}/./done.mcap", dir.display());
    let (code, _, err) = d.run(
        &nerve,
        &["bag", "recover", done.to_str().unwrap(), "-o", &same],
    );
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("damaged bag itself"), "{err}");
    assert!(
        std::fs::read(&done).unwrap() == before,
        "the bag is untouched"
    );
    let (code, _, err) = d.run(
        &nerve,
        &["bag", "play", done.to_str().unwrap(), "--clock", "0"],
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--clock"), "{err}");
    let (code, _, err) = d.run(&nerve, &["bridge", "foxglove", "--call-timeout", "0"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--call-timeout"), "{err}");
    let (code, _, err) = d.run(&nerve, &["bag", "record", "-e", "(", "-o", "/dev/null"]);
    assert_eq!(code, 2);
    assert!(err.contains("--regex"), "{err}");
    let (code, _, err) = d.run(&nerve, &["bag", "record", "--split-size", "12Q"]);
    assert_eq!(code, 2);
    assert!(err.contains("--split-size"), "{err}");
    let (code, _, err) = d.run(
        &nerve,
        &["bag", "play", done.to_str().unwrap(), "--remap", "/a"],
    );
    assert_eq!(code, 2);
    assert!(err.contains("FROM:=TO"), "{err}");
}

const FIBONACCI: &str = env!("CARGO_BIN_EXE_fibonacci");

/// Parameters of a running node through the CLI: list, describe, set one by one and
/// atomically (a refused value leaves every value unchanged), dump and load back, bad
/// files named with their line, and a parameter file given at start-up.
#[test]
fn cli_reads_and_sets_parameters_of_a_running_node() {
    let d = Domain::new();
    std::fs::create_dir_all(&d.dir).unwrap();
    let start_file = d.dir.join("start.yaml");
    // an integer for a float parameter widens (rclcpp#1009)
    std::fs::write(
        &start_file,
        "/fibonacci:\n  gain: 2\n\"/**\":\n  step_ms: 3\n",
    )
    .unwrap();
    let mut node = Proc::new(
        d.cmd(FIBONACCI)
            .env("NERVE_PARAM_FILES", &start_file)
            .spawn()
            .unwrap(),
    );
    node.expect_line("fibonacci: serving /fibonacci on node /fibonacci", T);
    let cli = nerve_cli();
    let get = |names: &[&str]| -> Value {
        let mut args = vec!["param", "get", "/fibonacci", "--format", "json"];
        args.extend_from_slice(names);
        let (rc, out, err) = d.run(&cli, &args);
        assert_eq!(rc, 0, "{err}");
        serde_json::from_str(out.trim()).unwrap()
    };
    assert_eq!(
        get(&["gain", "step_ms", "frame"]),
        serde_json::json!({"gain": 2.0, "step_ms": 3, "frame": "base_link"})
    );
    let (rc, out, _) = d.run(&cli, &["param", "list"]);
    assert_eq!((rc, out.trim()), (0, "/fibonacci"));

    // atomic: step_ms 1 fails the node's validator, so gain stays too
    let (rc, _, err) = d.run(
        &cli,
        &[
            "param",
            "set",
            "/fibonacci",
            "gain",
            "4",
            "step_ms",
            "1",
            "--atomic",
        ],
    );
    assert_eq!(rc, 1);
    assert!(
        err.contains("step_ms 1 starves the other callbacks"),
        "{err}"
    );
    assert_eq!(
        get(&["gain", "step_ms"]),
        serde_json::json!({"gain": 2.0, "step_ms": 3})
    );
    // one by one: the good one lands, the bad ones are named
    let (rc, _, err) = d.run(
        &cli,
        &[
            "param",
            "set",
            "/fibonacci",
            "gain",
            "4",
            "frame",
            "x",
            "step_ms",
            "1.5",
        ],
    );
    assert_eq!(rc, 1);
    assert!(
        err.contains("read-only") && err.contains("is of type int"),
        "{err}"
    );
    assert_eq!(get(&["gain"]), serde_json::json!({"gain": 4.0}));
    let (rc, _, err) = d.run(&cli, &["param", "set", "/fibonacci", "gain", "11"]);
    assert_eq!(rc, 1);
    assert!(err.contains("outside 0 to 10"), "{err}");

    let (rc, out, _) = d.run(
        &cli,
        &[
            "param",
            "describe",
            "/fibonacci",
            "step_ms",
            "--format",
            "json",
        ],
    );
    assert_eq!(rc, 0);
    let desc: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(desc[0]["type"], "int");
    assert_eq!(desc[0]["range"]["step"], 1.0);

    // dump, change, load back: all or nothing
    let dump = d.dir.join("dump.yaml");
    let (rc, _, err) = d.run(
        &cli,
        &["param", "dump", "/fibonacci", "-o", dump.to_str().unwrap()],
    );
    assert_eq!(rc, 0, "{err}");
    let text = std::fs::read_to_string(&dump).unwrap();
    assert!(text.contains("gain: 4.0"), "{text}");
    std::fs::write(
        &dump,
        text.replace("gain: 4.0", "gain: 5")
            .replace("  frame: base_link\n", ""),
    )
    .unwrap();
    let (rc, out, err) = d.run(
        &cli,
        &["param", "load", "/fibonacci", dump.to_str().unwrap()],
    );
    assert_eq!(rc, 0, "{err}");
    assert!(out.contains("set 3 parameters"), "{out}");
    assert_eq!(get(&["gain"]), serde_json::json!({"gain": 5.0}));

    // a bad file: exit 2, file and line, nothing set
    let bad = d.dir.join("bad.yaml");
    std::fs::write(&bad, "/fibonacci:\n  gain: 6\n  step_ms: [1, x]\n").unwrap();
    let (rc, _, err) = d.run(
        &cli,
        &["param", "load", "/fibonacci", bad.to_str().unwrap()],
    );
    assert_eq!(rc, 2, "{err}");
    assert!(err.contains("bad.yaml:3:"), "{err}");
    assert_eq!(get(&["gain"]), serde_json::json!({"gain": 5.0}));
    // a missing node: a clear runtime error
    let (rc, _, err) = d.run(&cli, &["param", "get", "/nobody", "x", "--timeout", "200"]);
    assert_eq!(rc, 1);
    assert!(err.contains("node /nobody: no parameter service"), "{err}");
}

/// Goals through the CLI against a real server: feedback then the result, a rejection,
/// Ctrl-C cancels the goal, and a server killed mid-goal is a prompt error.
#[test]
fn cli_sends_goals_and_survives_a_killed_server() {
    let d = Domain::new();
    let mut node = d.spawn(FIBONACCI, &[]);
    node.expect_line("fibonacci: serving /fibonacci on node /fibonacci", T);
    let cli = nerve_cli();
    let (rc, out, err) = d.run(
        &cli,
        &[
            "action",
            "send_goal",
            "/fibonacci",
            "Fibonacci",
            r#"{"order": 6}"#,
            "--feedback",
            "--format",
            "json",
        ],
    );
    assert_eq!(rc, 0, "{err}");
    let lines: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let result = lines.last().unwrap();
    assert_eq!(result["state"], "succeeded");
    assert_eq!(
        result["result"]["elems"],
        serde_json::json!([0, 1, 1, 2, 3, 5, 8])
    );
    // feedback grew one number at a time, all of it before the result
    let lens: Vec<u64> = lines[..lines.len() - 1]
        .iter()
        .map(|f| f["feedback"]["len"].as_u64().unwrap())
        .collect();
    assert_eq!(lens, [3, 4, 5, 6, 7]);

    let (rc, _, err) = d.run(
        &cli,
        &[
            "action",
            "send_goal",
            "/fibonacci",
            "Fibonacci",
            r#"{"order": 500}"#,
        ],
    );
    assert_eq!(rc, 1);
    assert!(
        err.contains("goal rejected: order 500 is outside 0 to 90"),
        "{err}"
    );
    let (rc, _, err) = d.run(&cli, &["action", "send_goal", "/fibonacci", "Nope", "{}"]);
    assert_eq!(rc, 2);
    assert!(err.contains("unknown action type"), "{err}");

    let (rc, out, _) = d.run(&cli, &["action", "list", "--format", "json"]);
    assert_eq!(rc, 0);
    assert!(out.contains(r#""name":"/fibonacci""#), "{out}");

    // Ctrl-C cancels the goal: the server ends it canceled (sent once the goal runs: its
    // first feedback came)
    let long_goal = [
        "action",
        "send_goal",
        "/fibonacci",
        "Fibonacci",
        r#"{"order": 90}"#,
        "--feedback",
        "--format",
        "json",
    ];
    let mut slow = d.spawn(&cli, &long_goal);
    slow.expect_prefix("{", T);
    slow.signal(libc::SIGINT);
    let (code, err) = slow.exit_and_stderr();
    assert_eq!(code, Some(1));
    assert!(err.contains("canceled"), "{err}");

    // the server dies mid-goal: the client says so at once, not at its 30 s timeout
    let mut waiting = d.spawn(&cli, &long_goal);
    waiting.expect_prefix("{", T);
    node.signal(libc::SIGKILL);
    // "went away", not the "no result after 30 s" of its timeout: the liveness check
    let (code, err) = waiting.exit_and_stderr();
    assert_eq!(code, Some(1));
    assert!(err.contains("the server went away"), "{err}");
}
