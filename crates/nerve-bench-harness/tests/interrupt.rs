//! Stopping a supervised run (a test binary of its own: a shutdown request and `stop` are
//! for the whole process).

use nerve_bench_harness::child::Child;
use nerve_bench_harness::interrupt::{self, Outcome, Pattern};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn alive(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let state = stat
        .rfind(')')
        .and_then(|i| stat[i + 1..].split_whitespace().next());
    matches!(state, Some(s) if s != "Z")
}

#[test]
fn a_request_stops_the_work_its_children_and_cleans_up() {
    // work that ends by itself
    match interrupt::supervise(|| 7) {
        Outcome::Finished(v) => assert_eq!(v, 7),
        Outcome::Interrupted(_) => panic!("not interrupted"),
    }

    // files of the run: a domain's and a pattern's, created after the run starts
    let domain = interrupt::domain(40_000, 1);
    interrupt::remove_also(Pattern::Suffix(".nerve-harness-test".into()));
    let ours = format!("/dev/shm/nerve{domain}_harness_test_{}", std::process::id());
    let marked = format!("/dev/shm/{}.nerve-harness-test", std::process::id());
    let foreign = format!("/dev/shm/nerve-harness-foreign-{}", std::process::id());
    let ran_hook = Arc::new(AtomicBool::new(false));

    let (tx, rx) = std::sync::mpsc::channel();
    let hook_flag = ran_hook.clone();
    let files = (ours.clone(), marked.clone(), foreign.clone());
    let outcome = interrupt::supervise(move || {
        for f in [&files.0, &files.1, &files.2] {
            std::fs::write(f, b"x").unwrap();
        }
        let child = Child::spawn(Path::new("sleep"), &["30".into()], &[], "sleeper").unwrap();
        let _hook = interrupt::on_stop(move || hook_flag.store(true, Ordering::SeqCst));
        tx.send(child.pid()).unwrap();
        // as SIGINT would; the child is killed by `stop`, not by this thread, which waits
        nerve::shutdown::request();
        std::thread::sleep(Duration::from_secs(60));
        drop(child);
    });
    let Outcome::Interrupted(stopped) = outcome else {
        panic!("the work finished");
    };
    let pid = rx.recv().unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while alive(pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(!alive(pid), "the child survived");
    assert!(ran_hook.load(Ordering::SeqCst), "the clean-up did not run");
    assert!(interrupt::interrupted());
    assert!(
        Child::spawn(Path::new("sleep"), &["1".into()], &[], "late").is_err(),
        "a child started after the interruption"
    );
    let removed = stopped.finish();
    assert!(!Path::new(&ours).exists() && !Path::new(&marked).exists());
    assert!(
        Path::new(&foreign).exists(),
        "a file not of the run was removed"
    );
    assert_eq!(removed.len(), 2, "{removed:?}");
    std::fs::remove_file(&foreign).unwrap();
}
