//! Parameters through a real context: local and remote sets, events, files.

use super::*;
use crate::config::Config;
use crate::context::Context;
use std::time::Duration;

fn ctx() -> Context {
    // the tests share a domain: each names its own node and ignores the others' events
    let dir = std::env::temp_dir().join("nerve-tests/");
    Context::new(Config::default().domain(611).unwrap().state_dir(dir)).unwrap()
}

#[test]
fn a_rejected_atomic_set_changes_nothing_remote_or_local() {
    let ctx = ctx();
    let node = ctx.node("p_atomic").create().unwrap();
    let params = Parameters::create(&node).unwrap();
    params.declare("a", 1i64, ParamDescriptor::new()).unwrap();
    params
        .declare("b", 0.5, ParamDescriptor::new().range(0.0, 1.0, 0.0))
        .unwrap();
    params.declare("c", "x", ParamDescriptor::new()).unwrap();
    params.on_validate(
        |ch| match ch.iter().any(|c| c.new == ParamValue::Str("veto".into())) {
            true => Err("c may not be veto".into()),
            false => Ok(()),
        },
    );
    let events = node
        .subscriber::<Serde<ParamEvent>>(EVENTS_TOPIC)
        .qos(events_qos())
        .create()
        .unwrap();

    // a thread of its own calls remotely; this thread serves
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop2 = stop.clone();
    let ctx2 = ctx.clone();
    let caller = std::thread::spawn(move || {
        let node = ctx2.node("p_caller").create().unwrap();
        let c = ParamClient::create(&node, "p_atomic").unwrap();
        assert!(c.wait_for_node(Duration::from_secs(5)));
        let bad = c
            .set_atomically(vec![
                ("a".into(), 2i64.into()),
                ("b".into(), 0.25.into()),
                ("c".into(), "veto".into()),
            ])
            .unwrap_err()
            .to_string();
        assert!(bad.contains("c may not be veto"), "{bad}");
        let range = c
            .set_atomically(vec![("a".into(), 2i64.into()), ("b".into(), 7.into())])
            .unwrap_err()
            .to_string();
        assert!(range.contains("outside 0 to 1"), "{range}");
        assert_eq!(
            c.get(&["a", "b", "c", "nope"]).unwrap(),
            vec![Some(1i64.into()), Some(0.5.into()), Some("x".into()), None]
        );
        // one by one: the good value lands, the bad one is refused
        let each = c
            .set_each(vec![("a".into(), 5i64.into()), ("b".into(), "no".into())])
            .unwrap();
        assert!(each[0].is_ok() && each[1].is_err());
        c.set_atomically(vec![("b".into(), 1i64.into()), ("c".into(), "y".into())])
            .unwrap();
        assert_eq!(c.list("").unwrap(), vec!["a", "b", "c"]);
        let d = c.describe(&["b"]).unwrap().pop().flatten().unwrap();
        assert_eq!(d.ty, ParamType::Float);
        stop2.store(true, std::sync::atomic::Ordering::Relaxed);
    });
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        params.handle_pending().unwrap();
        std::thread::sleep(Duration::from_micros(200));
    }
    caller.join().unwrap();
    assert_eq!(params.get::<i64>("a").unwrap(), 5);
    assert_eq!(params.get::<f64>("b").unwrap(), 1.0);
    assert_eq!(params.get::<String>("c").unwrap(), "y");

    // events: only the sets that happened (after the subscriber joined)
    let mut seen = Vec::new();
    while let Some(s) = events.try_recv().unwrap() {
        let e = s.decode().unwrap();
        if e.node == "/p_atomic" {
            seen.push(e);
        }
    }
    let changed: Vec<Vec<&str>> = seen
        .iter()
        .map(|e| e.changes.iter().map(|c| c.name.as_str()).collect())
        .collect();
    assert_eq!(changed, vec![vec!["a"], vec!["b", "c"]]);
}

#[test]
fn files_override_defaults_at_declaration() {
    let ctx = ctx();
    let dir = std::env::temp_dir().join(format!("nerve-param-file-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("p.yaml");
    std::fs::write(&f, "/p_file:\n  speed: 2\n  ro: 7\n\"/**\":\n  speed: 9\n").unwrap();
    let node = ctx.node("p_file").create().unwrap();
    let params = Parameters::builder(&node)
        .from_env(false)
        .file(&f)
        .create()
        .unwrap();
    assert_eq!(
        params
            .declare("speed", 1.0, ParamDescriptor::new())
            .unwrap(),
        ParamValue::Float(2.0)
    );
    params
        .declare("ro", 1i64, ParamDescriptor::new().read_only())
        .unwrap();
    assert_eq!(params.get::<i64>("ro").unwrap(), 7);
    assert!(matches!(
        params.set("ro", 8i64),
        Err(ParamError::ReadOnly { .. })
    ));

    let bad = dir.join("bad.yaml");
    std::fs::write(&bad, "/p_file2:\n  speed: [1, true]\n").unwrap();
    let node2 = ctx.node("p_file2").create().unwrap();
    let e = Parameters::builder(&node2)
        .from_env(false)
        .file(&bad)
        .create()
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("bad.yaml:2:"), "{e}");
}

#[test]
fn callbacks_cannot_reenter_a_set() {
    let ctx = ctx();
    let node = ctx.node("p_reenter").create().unwrap();
    let params = Parameters::create(&node).unwrap();
    params.declare("a", 1i64, ParamDescriptor::new()).unwrap();
    let p2 = params.clone();
    let seen = std::rc::Rc::new(std::cell::Cell::new(None));
    let seen2 = seen.clone();
    params.on_validate(move |_| {
        seen2.set(Some(matches!(
            p2.set("a", 3i64),
            Err(ParamError::Reentrant)
        )));
        // reading is fine
        assert!(p2.get::<i64>("a").is_ok());
        Ok(())
    });
    params.set("a", 2i64).unwrap();
    assert_eq!(seen.get(), Some(true));
    assert_eq!(params.get::<i64>("a").unwrap(), 2);

    // after a set too; and a callback added from inside a callback joins later
    let p3 = params.clone();
    let later = std::rc::Rc::new(std::cell::Cell::new(0));
    let later2 = later.clone();
    params.on_set(move |_| {
        assert!(matches!(p3.set("a", 9i64), Err(ParamError::Reentrant)));
        let l = later2.clone();
        p3.on_set(move |_| l.set(l.get() + 1));
    });
    params.set("a", 3i64).unwrap();
    assert_eq!(later.get(), 0);
    params.set("a", 4i64).unwrap();
    assert_eq!(
        later.get(),
        1,
        "the callback added during the first set ran in the second"
    );
    assert_eq!(params.get::<i64>("a").unwrap(), 4);
}
