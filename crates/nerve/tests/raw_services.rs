//! Type-erased services: `RawServer` and `RawClient` talk with typed endpoints, check
//! payloads against the service's layouts by name, and give every request exactly one
//! answer; their calls and requests are owned and outlive the handles that made them.

use nerve::message::schema::Schema;
use nerve::prelude::*;
use nerve::{
    CallError, Config, RawClient, RawPendingCall, RawServer, ServeError, ServiceType, TypeInfo,
};
use std::time::Duration;

/// A context in a domain of its own per test (tests run in parallel threads).
fn ctx(domain: u32) -> Context {
    let dir = std::env::temp_dir().join("nerve-tests/");
    Context::new(Config::default().domain(domain).unwrap().state_dir(dir)).unwrap()
}

#[derive(Clone, Copy, Debug, PartialEq, nerve::Message)]
#[repr(C)]
#[message(name = "raw_srv/Pair")]
struct Pair {
    a: i64,
    b: i64,
}

#[derive(Clone, Copy, Debug, PartialEq, nerve::Message)]
#[repr(C)]
#[message(name = "raw_srv/Sum")]
struct Sum {
    sum: i64,
}

#[derive(Clone, Copy, Debug, PartialEq, nerve::Message)]
#[repr(C)]
#[message(name = "raw_srv/Samples", elem = u32)]
struct Samples {
    id: u64,
}

struct AddTwoInts;
impl Service for AddTwoInts {
    const TYPE_NAME: &'static str = "raw_srv/AddTwoInts";
    type Request = Pair;
    type Response = Sum;
}

struct Scale;
impl Service for Scale {
    const TYPE_NAME: &'static str = "raw_srv/Scale";
    type Request = Samples;
    type Response = Samples;
}

const T: Duration = Duration::from_secs(5);

/// The service type as bindings build it: a name and the schemas' type identities.
fn runtime_type(name: &str, request: TypeInfo, response: TypeInfo) -> ServiceType {
    ServiceType::new(name, request, response)
}

fn add_type() -> ServiceType {
    runtime_type(
        "raw_srv/AddTwoInts",
        Schema::of::<Pair>().type_info(),
        Schema::of::<Sum>().type_info(),
    )
}

fn scale_type() -> ServiceType {
    runtime_type(
        "raw_srv/Scale",
        Schema::of::<Samples>().type_info(),
        Schema::of::<Samples>().type_info(),
    )
}

fn pair_bytes(a: i64, b: i64) -> Vec<u8> {
    [a.to_ne_bytes(), b.to_ne_bytes()].concat()
}

fn samples_bytes(id: u64, elems: &[u32]) -> Vec<u8> {
    let mut v = id.to_ne_bytes().to_vec();
    elems.iter().for_each(|e| v.extend(e.to_ne_bytes()));
    v
}

fn raw_client(node: &Node, name: &str, ty: &ServiceType) -> RawClient {
    RawClient::create(node, name, ty, ServiceQos::default(), WaitMode::Block).unwrap()
}

fn raw_server(node: &Node, name: &str, ty: &ServiceType) -> RawServer {
    RawServer::create(node, name, ty, ServiceQos::default(), WaitMode::Block).unwrap()
}

#[test]
fn service_type_of_matches_the_schemas() {
    assert_eq!(ServiceType::of::<AddTwoInts>(), add_type());
    assert_eq!(ServiceType::of::<Scale>(), scale_type());
}

#[test]
fn raw_server_answers_a_typed_client() {
    let c = ctx(861);
    let node = c.node("n").create().unwrap();
    let server = raw_server(&node, "/raw/add", &add_type());
    assert_eq!(server.name(), "/raw/add");
    assert_eq!(server.request_type().name, "raw_srv/Pair");
    let client = node.client::<AddTwoInts>("/raw/add").create().unwrap();
    assert!(client.wait_for_service(T));
    assert_eq!(server.client_count(), 1);
    for i in 0..10 {
        let call = client.send(&Pair { a: i, b: 2 * i }).unwrap();
        let req = server.take_timeout(T).unwrap().expect("a request");
        assert_eq!(req.bytes(), pair_bytes(i, 2 * i));
        assert_eq!((req.elems(), req.header().seq), (0, call.seq()));
        assert!(req.client_waits());
        req.reply_bytes(&(3 * i).to_ne_bytes()).unwrap();
        let reply = call.wait(T).unwrap();
        assert_eq!(reply.sum, 3 * i);
        assert_eq!(reply.header().seq, i as u64 + 1);
    }
    assert_eq!(server.rejected(), 0);

    // slices: the raw side sees the element count and answers with elements of its own
    let server = raw_server(&node, "/raw/scale", &scale_type());
    let client = node.client::<Scale>("/raw/scale").create().unwrap();
    let call = client.send_slice(&Samples { id: 7 }, &[1, 2, 3]).unwrap();
    let req = server.take_timeout(T).unwrap().unwrap();
    assert_eq!(req.elems(), 3);
    assert_eq!(req.bytes(), samples_bytes(7, &[1, 2, 3]));
    req.reply_bytes(&samples_bytes(8, &[10, 20, 30, 40]))
        .unwrap();
    let reply = call.wait(T).unwrap();
    assert_eq!((reply.id, reply.elems()), (8, &[10u32, 20, 30, 40][..]));
}

#[test]
fn typed_server_answers_a_raw_client() {
    let c = ctx(862);
    let node = c.node("n").create().unwrap();
    let server = node.service::<Scale>("/raw/typed").create().unwrap();
    let client = raw_client(&node, "/raw/typed", &scale_type());
    assert_eq!(client.name(), "/raw/typed");
    assert_eq!(client.request_type().name, "raw_srv/Samples");
    assert_eq!(client.response_type(), &TypeInfo::of::<Samples>());
    assert!(client.wait_for_service(T));
    assert_eq!(client.server_count(), 1);
    let call = client.send_bytes(&samples_bytes(5, &[1, 2, 3])).unwrap();
    let req = server.take_timeout(T).unwrap().unwrap();
    assert_eq!((req.id, req.elems()), (5, &[1u32, 2, 3][..]));
    let doubled: Vec<u32> = req.elems().iter().map(|e| 2 * e).collect();
    req.reply_slice(&Samples { id: req.id + 1 }, &doubled)
        .unwrap();
    assert!(call.is_done());
    let reply = call.wait(T).unwrap();
    assert_eq!(reply.header().seq, 1);
    assert_eq!(reply.elems(), 3);
    assert_eq!(reply.bytes(), samples_bytes(6, &[2, 4, 6]));

    // a fixed-size service too, with the typed server's own answer
    let server = node
        .service::<AddTwoInts>("/raw/typed_add")
        .create()
        .unwrap();
    let client = raw_client(&node, "/raw/typed_add", &add_type());
    let call = client.send_bytes(&pair_bytes(40, 2)).unwrap();
    let req = server.take_timeout(T).unwrap().unwrap();
    req.reply(&Sum { sum: req.a + req.b }).unwrap();
    let reply = call.wait(T).unwrap();
    assert_eq!(reply.bytes(), 42i64.to_ne_bytes());
    assert_eq!(reply.elems(), 0);
}

#[test]
fn a_raw_type_that_differs_is_refused_by_name() {
    let c = ctx(863);
    let node = c.node("n").create().unwrap();
    let _server = node
        .service::<AddTwoInts>("/raw/mismatch")
        .create()
        .unwrap();
    let other = runtime_type(
        "raw_srv/AddTwoInts",
        TypeInfo::of::<Pair>(),
        TypeInfo::of::<Pair>(),
    );
    let err = RawClient::create(
        &node,
        "/raw/mismatch",
        &other,
        ServiceQos::default(),
        WaitMode::Block,
    )
    .err()
    .unwrap();
    assert!(
        matches!(err, nerve::ServiceError::TypeMismatch { .. }),
        "{err}"
    );
    assert!(err.to_string().contains("raw_srv/Sum"), "{err}");
}

#[test]
fn wrong_request_lengths_are_refused_by_name_and_nothing_is_sent() {
    let c = ctx(864);
    let node = c.node("n").create().unwrap();
    let add = node.service::<AddTwoInts>("/raw/bad_add").create().unwrap();
    let client = raw_client(&node, "/raw/bad_add", &add_type());
    for len in [0, 8, 15, 17, 32] {
        let e = client.send_bytes(&vec![0u8; len]).err().unwrap();
        assert!(
            matches!(&e, CallError::BadPayload { len: l, .. } if *l == len),
            "{len}: {e}"
        );
        let text = e.to_string();
        for part in ["/raw/bad_add", "raw_srv/Pair", &format!("{len} bytes")] {
            assert!(text.contains(part), "{text} lacks {part}");
        }
    }
    assert!(add.try_take().unwrap().is_none(), "nothing was sent");

    let scale = node.service::<Scale>("/raw/bad_scale").create().unwrap();
    let client = raw_client(&node, "/raw/bad_scale", &scale_type());
    for len in [0, 7, 9, 10, 13] {
        let e = client.send_bytes(&vec![0u8; len]).err().unwrap();
        assert!(matches!(e, CallError::BadPayload { .. }), "{len}: {e}");
        assert!(e.to_string().contains("raw_srv/Samples"), "{e}");
    }
    assert!(scale.try_take().unwrap().is_none(), "nothing was sent");
    // the head alone and whole elements fit
    for elems in [&[][..], &[9u32][..], &[1, 2][..]] {
        let call = client.send_bytes(&samples_bytes(1, elems)).unwrap();
        let req = scale.take_timeout(T).unwrap().unwrap();
        assert_eq!(req.elems(), elems);
        req.reply_slice(&Samples { id: 0 }, &[]).unwrap();
        drop(req);
        call.wait(T).unwrap();
    }
}

#[test]
fn oversized_raw_request_fails_before_sending() {
    let c = ctx(865);
    let node = c.node("n").create().unwrap();
    let qos = ServiceQos::default().max_payload(1024, 1024);
    let server = RawServer::create(
        &node,
        "/raw/small",
        &scale_type(),
        qos.clone(),
        WaitMode::Block,
    )
    .unwrap();
    let client =
        RawClient::create(&node, "/raw/small", &scale_type(), qos, WaitMode::Block).unwrap();
    let big = samples_bytes(1, &[0; 500]);
    let err = client.send_bytes(&big).err().unwrap();
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
    // and a response over the limit is refused, after which the request is still open
    let call = client.send_bytes(&samples_bytes(1, &[])).unwrap();
    let req = server.take_timeout(T).unwrap().unwrap();
    let err = req.reply_bytes(&big).err().unwrap();
    assert!(matches!(err, ServeError::PayloadTooLarge { .. }), "{err}");
    req.reply_bytes(&samples_bytes(2, &[])).unwrap();
    assert_eq!(call.wait(T).unwrap().bytes(), samples_bytes(2, &[]));
}

#[test]
fn wrong_response_lengths_are_refused_by_name_and_nothing_is_sent() {
    let c = ctx(866);
    let node = c.node("n").create().unwrap();
    let server = raw_server(&node, "/raw/bad_reply", &scale_type());
    let client = node.client::<Scale>("/raw/bad_reply").create().unwrap();
    let call = client.send_slice(&Samples { id: 3 }, &[]).unwrap();
    let req = server.take_timeout(T).unwrap().unwrap();
    for len in [0, 4, 9, 14] {
        let e = req.reply_bytes(&vec![0u8; len]).err().unwrap();
        assert!(
            matches!(&e, ServeError::BadPayload { len: l, .. } if *l == len),
            "{len}: {e}"
        );
        let text = e.to_string();
        for part in ["/raw/bad_reply", "raw_srv/Samples", &format!("{len} bytes")] {
            assert!(text.contains(part), "{text} lacks {part}");
        }
    }
    assert!(call.try_take().unwrap().is_none(), "nothing was sent");
    req.reply_bytes(&samples_bytes(4, &[5])).unwrap();
    let err = req.reply_bytes(&samples_bytes(4, &[5])).err().unwrap();
    assert!(
        matches!(err, ServeError::AlreadyReplied { seq: 1, .. }),
        "{err}"
    );
    let reply = call.wait(T).unwrap();
    assert_eq!((reply.id, reply.elems()), (4, &[5u32][..]));
}

#[test]
fn a_dropped_raw_request_is_rejected() {
    let c = ctx(867);
    let node = c.node("n").create().unwrap();
    let server = raw_server(&node, "/raw/drop", &add_type());
    let client = raw_client(&node, "/raw/drop", &add_type());
    let call = client.send_bytes(&pair_bytes(1, 2)).unwrap();
    drop(server.take_timeout(T).unwrap().unwrap());
    match call.wait(T) {
        Err(CallError::Rejected { service, reason }) => {
            assert_eq!(service, "/raw/drop");
            assert!(reason.contains("dropped"), "{reason}");
        }
        other => panic!(
            "expected Rejected, got {:?}",
            other.map(|r| r.bytes().to_vec())
        ),
    }
    // one answer only: a request answered before it is dropped is not answered again
    let call = client.send_bytes(&pair_bytes(1, 2)).unwrap();
    let req = server.take_timeout(T).unwrap().unwrap();
    req.reply_bytes(&3i64.to_ne_bytes()).unwrap();
    drop(req);
    assert_eq!(call.wait(T).unwrap().bytes(), 3i64.to_ne_bytes());
    let again = client.send_bytes(&pair_bytes(0, 0)).unwrap();
    drop(server.take_timeout(T).unwrap());
    assert!(matches!(again.wait(T), Err(CallError::Rejected { .. })));
    // a typed request wraps a raw one: dropped unanswered, it is rejected too
    let typed = node
        .service::<AddTwoInts>("/raw/drop_typed")
        .create()
        .unwrap();
    let client = node
        .client::<AddTwoInts>("/raw/drop_typed")
        .create()
        .unwrap();
    let call = client.send(&Pair { a: 1, b: 1 }).unwrap();
    drop(typed.take_timeout(T).unwrap().unwrap());
    assert!(matches!(call.wait(T), Err(CallError::Rejected { .. })));
}

#[test]
fn fail_reaches_the_client_as_a_handler_error() {
    let c = ctx(868);
    let node = c.node("n").create().unwrap();
    let server = raw_server(&node, "/raw/fail", &add_type());
    let client = node.client::<AddTwoInts>("/raw/fail").create().unwrap();
    let call = client.send(&Pair { a: 1, b: 2 }).unwrap();
    let req = server.take_timeout(T).unwrap().unwrap();
    req.fail("no sums today").unwrap();
    assert!(matches!(
        req.reply_bytes(&3i64.to_ne_bytes()),
        Err(ServeError::AlreadyReplied { .. })
    ));
    match call.wait(T) {
        Err(CallError::Handler { service, message }) => {
            assert_eq!(service, "/raw/fail");
            assert_eq!(message, "no sums today");
        }
        other => panic!("expected Handler, got {:?}", other.map(|r| r.sum)),
    }
}

#[test]
fn wait_for_times_out_without_giving_up_the_call() {
    let c = ctx(869);
    let node = c.node("n").create().unwrap();
    let server = raw_server(&node, "/raw/slices", &add_type());
    let client = raw_client(&node, "/raw/slices", &add_type());
    let call = client.send_bytes(&pair_bytes(20, 22)).unwrap();
    // waiting in slices: nothing yet, and the call stays in flight
    for _ in 0..3 {
        assert!(call.wait_for(Duration::from_millis(50)).unwrap().is_none());
        assert!(!call.is_done());
        assert!(call.try_take().unwrap().is_none());
    }
    let req = server
        .try_take()
        .unwrap()
        .expect("the request is still there");
    req.reply_bytes(&42i64.to_ne_bytes()).unwrap();
    let reply = call.wait_for(T).unwrap().expect("the response");
    assert_eq!(reply.bytes(), 42i64.to_ne_bytes());
    assert_eq!(reply.header().seq, call.seq());
    // a plain wait that times out is a named error
    let call = client.send_bytes(&pair_bytes(0, 0)).unwrap();
    assert!(matches!(
        call.wait(Duration::from_millis(20)),
        Err(CallError::Timeout { .. })
    ));
    // slices shorter than the liveness check still notice a server that went away
    let call = client.send_bytes(&pair_bytes(0, 0)).unwrap();
    // a held response keeps its server's connection alive in iceoryx2 (typed ones too),
    // and the request holds the server itself
    drop(reply);
    drop(req);
    drop(server);
    let t0 = std::time::Instant::now();
    let err = loop {
        match call.wait_for(Duration::from_millis(10)) {
            Ok(None) => assert!(t0.elapsed() < T, "no end to the call"),
            Ok(Some(_)) => panic!("a response from a dropped server"),
            Err(e) => break e,
        }
    };
    assert!(matches!(err, CallError::ServerGone { .. }), "{err}");
}

#[test]
fn calls_and_requests_outlive_their_handles() {
    let c = ctx(870);
    let (call, req): (RawPendingCall, _) = {
        let node = c.node("n").create().unwrap();
        let server = raw_server(&node, "/raw/owned", &add_type());
        let client = raw_client(&node, "/raw/owned", &add_type());
        let call = client.send_bytes(&pair_bytes(2, 3)).unwrap();
        let req = server.take_timeout(T).unwrap().unwrap();
        (call, req) // client, server and node handles are dropped here
    };
    assert_eq!(req.bytes(), pair_bytes(2, 3));
    assert!(req.client_waits());
    req.reply_bytes(&5i64.to_ne_bytes()).unwrap();
    let reply = call.wait(T).unwrap();
    assert_eq!(reply.bytes(), 5i64.to_ne_bytes());
    // the request holds the last reference to the server: a response is taken before its
    // server port goes away (iceoryx2 drops what a dropped server sent, as for typed ones)
    drop(req);
    assert_eq!(reply.bytes(), 5i64.to_ne_bytes());
}

#[test]
fn typed_endpoints_record_their_schemas_for_tools() {
    let ctx = ctx(878);
    let node = ctx.node("recorder").create().unwrap();
    let req = TypeInfo::of::<Samples>();
    // nothing recorded before an endpoint of the type exists
    assert!(nerve::introspect::recorded_schema(&node, &req).is_none());
    let _server = node.service::<Scale>("/record_scale").create().unwrap();
    let got = nerve::introspect::recorded_schema(&node, &req)
        .expect("the server recorded its request type")
        .unwrap();
    assert_eq!(got, Schema::of::<Samples>());
    // a record of another type under this type's hash is refused, naming the type
    let mut other = TypeInfo::of::<Sum>();
    other.layout_hash = req.layout_hash;
    let err = nerve::introspect::recorded_schema(&node, &other)
        .unwrap()
        .unwrap_err();
    assert!(err.to_string().contains("raw_srv/Sum"), "{err}");
}

#[test]
fn a_raw_request_loan_is_written_in_place_and_sent_once() {
    let c = ctx(879);
    let node = c.node("n").create().unwrap();
    let server = raw_server(&node, "/raw/loan", &scale_type());
    let client = raw_client(&node, "/raw/loan", &scale_type());
    assert!(client.wait_for_service(T));

    // a dropped loan sends nothing
    {
        let mut l = client.loan_request(samples_bytes(1, &[9]).len()).unwrap();
        l.bytes_mut().copy_from_slice(&samples_bytes(1, &[9]));
    }
    let want = samples_bytes(7, &[1, 2, 3]);
    let mut l = client.loan_request(want.len()).unwrap();
    assert_eq!(l.len(), want.len());
    assert!(l.bytes().iter().all(|b| *b == 0), "a loan is zeroed");
    l.bytes_mut().copy_from_slice(&want);
    let call = l.send().unwrap();
    let req = server.take_timeout(T).unwrap().expect("the loaned request");
    assert_eq!(
        req.bytes(),
        want,
        "the first request is the sent loan, not the dropped one"
    );
    assert_eq!((req.elems(), req.header().seq), (3, call.seq()));
    req.reply_bytes(&samples_bytes(8, &[])).unwrap();
    assert_eq!(call.wait(T).unwrap().bytes(), samples_bytes(8, &[]));
    assert!(server.take_timeout(Duration::ZERO).unwrap().is_none());

    // a length that is no request of the type is refused before anything is loaned
    match client.loan_request(want.len() + 1) {
        Err(CallError::BadPayload { len, .. }) => assert_eq!(len, want.len() + 1),
        Err(e) => panic!("expected BadPayload, got {e}"),
        Ok(_) => panic!("expected BadPayload"),
    }
}
