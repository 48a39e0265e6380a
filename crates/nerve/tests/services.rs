//! In-process behaviour of services: calls, slices up to 16 MB, pipelining, several
//! clients, type identity and every failure a caller can meet.

use nerve::prelude::*;
use nerve::{CallError, Config, ServiceError, ServiceThread};
use std::time::{Duration, Instant};

/// A context in a domain of its own per test (tests run in parallel threads).
fn ctx(tag: &str) -> Context {
    let h = nerve::message::layout::hash_str(nerve::message::layout::FNV_OFFSET, tag);
    let domain = 300 + (h % 250) as u32;
    let dir = std::env::temp_dir().join("nerve-tests/");
    Context::new(Config::default().domain(domain).unwrap().state_dir(dir)).unwrap()
}

#[derive(Clone, Copy, Debug, PartialEq, nerve::Message)]
#[repr(C)]
#[message(name = "test/Pair")]
struct Pair {
    a: i64,
    b: i64,
}

#[derive(Clone, Copy, Debug, PartialEq, nerve::Message)]
#[repr(C)]
#[message(name = "test/Sum")]
struct Sum {
    sum: i64,
}

#[derive(Clone, Copy, Debug, PartialEq, nerve::Message)]
#[repr(C)]
#[message(name = "test/Data", elem = u8)]
struct Data {
    tag: u64,
}

struct Add;
impl Service for Add {
    const TYPE_NAME: &'static str = "test/Add";
    type Request = Pair;
    type Response = Sum;
}

/// Same name, other layout.
struct AddV2;
impl Service for AddV2 {
    const TYPE_NAME: &'static str = "test/Add";
    type Request = Pair;
    type Response = Pair;
}

struct Echo;
impl Service for Echo {
    const TYPE_NAME: &'static str = "test/Echo";
    type Request = Data;
    type Response = Data;
}

const T: Duration = Duration::from_secs(5);

fn adder(ctx: &Context, name: &str) -> ServiceThread {
    ServiceThread::spawn::<Add, _>(ctx, "adder", name, ServiceQos::default(), |req| {
        if req.a == i64::MIN {
            return Err("a must not be i64::MIN".into());
        }
        if req.a == -13 {
            return Ok(()); // forgets to reply
        }
        req.reply(&Sum { sum: req.a + req.b })?;
        Ok(())
    })
    .unwrap()
}

fn echo_server(ctx: &Context, name: &str) -> ServiceThread {
    ServiceThread::spawn::<Echo, _>(ctx, "echo", name, ServiceQos::default(), |req| {
        let mut out = req.loan_reply_slice(req.elems().len())?;
        out.tag = req.tag;
        out.elems_mut().copy_from_slice(req.elems());
        out.send()?;
        Ok(())
    })
    .unwrap()
}

#[test]
fn call_returns_the_handlers_response_with_matching_header() {
    let c = ctx("svc_call");
    let server = adder(&c, "/add");
    let node = c.node("caller").create().unwrap();
    let client = node.client::<Add>("/add").create().unwrap();
    assert!(client.wait_for_service(T));
    for i in 0..100 {
        let r = client.call(&Pair { a: i, b: 2 * i }, T).unwrap();
        assert_eq!(r.sum, 3 * i);
        assert_eq!(
            r.header().seq,
            i as u64 + 1,
            "response carries its request's number"
        );
    }
    server.stop().unwrap();
}

#[test]
fn slices_up_to_16_mb_are_echoed_intact() {
    let c = ctx("svc_slices");
    let _server = echo_server(&c, "/echo");
    let node = c.node("caller").create().unwrap();
    let client = node.client::<Echo>("/echo").create().unwrap();
    assert!(client.wait_for_service(T));
    for (i, len) in [0usize, 1, 100, 4096, 1 << 20, 16 << 20]
        .into_iter()
        .enumerate()
    {
        let mut req = client.loan_slice(len).unwrap();
        req.tag = i as u64;
        for (j, b) in req.elems_mut().iter_mut().enumerate() {
            *b = (j * 31 + i) as u8;
        }
        let r = req.call(T).unwrap();
        assert_eq!(r.tag, i as u64);
        assert_eq!(r.elems().len(), len);
        assert!(r
            .elems()
            .iter()
            .enumerate()
            .all(|(j, &b)| b == (j * 31 + i) as u8));
    }
}

#[test]
fn pipelined_calls_match_responses_to_requests() {
    let c = ctx("svc_pipeline");
    let _server = adder(&c, "/add");
    let node = c.node("caller").create().unwrap();
    let client = node.client::<Add>("/add").create().unwrap();
    assert!(client.wait_for_service(T));
    let calls: Vec<_> = (0..8)
        .map(|i| client.send(&Pair { a: i, b: 100 }).unwrap())
        .collect();
    assert!(matches!(
        client.send(&Pair { a: 0, b: 0 }),
        Err(CallError::TooManyInFlight { max: 8, .. })
    ));
    // take them in reverse order: each gets its own response
    for (i, call) in calls.into_iter().enumerate().rev() {
        let seq = call.seq();
        let r = call.wait(T).unwrap();
        assert_eq!(r.sum, i as i64 + 100);
        assert_eq!(r.header().seq, seq);
    }
}

#[test]
fn several_clients_call_one_server() {
    let c = ctx("svc_clients");
    let _server = adder(&c, "/add");
    let threads: Vec<_> = (0..3)
        .map(|t| {
            let c = c.clone();
            std::thread::spawn(move || {
                let node = c.node(&format!("caller{t}")).create().unwrap();
                let client = node.client::<Add>("/add").create().unwrap();
                assert!(client.wait_for_service(T));
                for i in 0..200 {
                    assert_eq!(client.call(&Pair { a: t, b: i }, T).unwrap().sum, t + i);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

#[test]
fn handler_errors_and_missing_replies_reach_the_client_typed() {
    let c = ctx("svc_handler_err");
    let _server = adder(&c, "/add");
    let node = c.node("caller").create().unwrap();
    let client = node.client::<Add>("/add").create().unwrap();
    assert!(client.wait_for_service(T));
    match client.call(&Pair { a: i64::MIN, b: 0 }, T) {
        Err(CallError::Handler { service, message }) => {
            assert_eq!(service, "/add");
            assert_eq!(message, "a must not be i64::MIN");
        }
        other => panic!("expected a handler error, got {:?}", other.map(|r| r.sum)),
    }
    assert!(matches!(
        client.call(&Pair { a: -13, b: 0 }, T),
        Err(CallError::Rejected { .. })
    ));
    // the service still works afterwards
    assert_eq!(client.call(&Pair { a: 1, b: 1 }, T).unwrap().sum, 2);
}

#[test]
fn no_server_is_a_clear_error_not_a_hang() {
    let c = ctx("svc_no_server");
    let node = c.node("caller").create().unwrap();
    let client = node.client::<Add>("/nobody").create().unwrap();
    let t0 = Instant::now();
    assert!(!client.wait_for_service(Duration::from_millis(50)));
    let err = client.call(&Pair { a: 1, b: 2 }, T).err().unwrap();
    assert!(matches!(err, CallError::NoServer { .. }), "{err}");
    assert!(err.to_string().contains("/nobody"));
    assert!(t0.elapsed() < Duration::from_secs(2));
}

#[test]
fn oversized_request_fails_before_sending() {
    let c = ctx("svc_oversized");
    let node = c.node("n").create().unwrap();
    let qos = ServiceQos::default().max_payload(1024, 1024);
    let server = node
        .service::<Echo>("/small")
        .qos(qos.clone())
        .create()
        .unwrap();
    let client = node.client::<Echo>("/small").qos(qos).create().unwrap();
    let err = client.loan_slice(2000).err().unwrap();
    assert!(
        matches!(
            err,
            CallError::PayloadTooLarge {
                requested: 2008,
                max: 1024,
                ..
            }
        ),
        "{err}"
    );
    assert!(server.try_take().unwrap().is_none(), "nothing was sent");
}

#[test]
fn types_are_checked_on_both_sides() {
    let c = ctx("svc_types");
    let node = c.node("n").create().unwrap();
    let _server = node.service::<Add>("/typed").create().unwrap();
    let err = node.client::<AddV2>("/typed").create().err().unwrap();
    assert!(matches!(err, ServiceError::TypeMismatch { .. }), "{err}");
    assert!(err.to_string().contains("test/Sum"), "{err}");
    let err = node.client::<Echo>("/typed").create().err().unwrap();
    assert!(err.to_string().contains("test/Echo"), "{err}");
    // a topic of the same name is another thing entirely
    assert!(node.service::<Add>("/bad name").create().is_err());
}

#[test]
fn one_live_server_per_service() {
    let c = ctx("svc_one_server");
    let node = c.node("n").create().unwrap();
    let first = node.service::<Add>("/single").create().unwrap();
    let err = node.service::<Add>("/single").create().err().unwrap();
    assert!(matches!(err, ServiceError::AlreadyServed { .. }), "{err}");
    drop(first);
    node.service::<Add>("/single").create().unwrap();
}

#[test]
fn server_that_goes_away_mid_call_fails_the_call_promptly() {
    let c = ctx("svc_gone");
    let node = c.node("caller").create().unwrap();
    let client = node.client::<Add>("/gone").create().unwrap();
    let c2 = c.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    let server = std::thread::spawn(move || {
        let node = c2.node("server").create().unwrap();
        let server = node.service::<Add>("/gone").create().unwrap();
        tx.send(()).unwrap();
        // take the request, then go away without answering
        let req = server.take_timeout(T).unwrap().expect("a request");
        drop(req);
        drop(server);
    });
    rx.recv().unwrap();
    let t0 = Instant::now();
    let err = client
        .call(&Pair { a: 1, b: 1 }, Duration::from_secs(30))
        .err()
        .unwrap();
    server.join().unwrap();
    // the dropped request was answered as "no response" or the server was seen gone
    assert!(
        matches!(
            err,
            CallError::ServerGone { .. } | CallError::Rejected { .. }
        ),
        "{err}"
    );
    assert!(
        t0.elapsed() < Duration::from_secs(5),
        "took {:?}",
        t0.elapsed()
    );
}

#[test]
fn idle_server_thread_stops_promptly() {
    let c = ctx("svc_stop");
    let server = adder(&c, "/idle");
    std::thread::sleep(Duration::from_millis(50));
    let t0 = Instant::now();
    server.stop().unwrap();
    assert!(t0.elapsed() < Duration::from_millis(500));
}
