//! Samples that lie, written straight into a topic's shared memory by a raw iceoryx2
//! writer that is not Nerve: a length beyond the payload, a length that breaks the
//! layout, another type's hash. A Nerve subscriber drops and counts every one and hands
//! only the honest samples to the application.

use iceoryx2::prelude::*;
use nerve::prelude::*;
use nerve::SampleHeader;
use std::time::Duration;

/// A slice message (it travels through iceoryx2's loans, not the small-message ring).
#[derive(Clone, Copy, Debug, Default, nerve::Message)]
#[repr(C)]
#[message(name = "test/Blob", elem = u8)]
struct Blob {
    id: u64,
}

fn config(domain: u32) -> nerve::Config {
    nerve::Config::default()
        .domain(domain)
        .unwrap()
        .state_dir(std::env::temp_dir().join(format!("nerve-lying-{}", std::process::id())))
}

/// The iceoryx2 configuration Nerve uses for `cfg` (its state directory and prefix).
fn iceoryx2_config(cfg: &nerve::Config) -> iceoryx2::config::Config {
    let mut iox = iceoryx2::config::Config::default();
    let mut dir = cfg.state_dir.display().to_string();
    if !dir.ends_with('/') {
        dir.push('/');
    }
    iox.global
        .set_root_path(&iceoryx2::prelude::Path::new(dir.as_bytes()).unwrap());
    iox.global.prefix = FileName::new(cfg.file_prefix().as_bytes()).unwrap();
    iox
}

#[test]
fn lying_length_fields_and_wrong_type_hashes_are_dropped_and_counted() {
    let cfg = config(615);
    let ctx = Context::new(cfg.clone()).unwrap();
    let node = ctx.node("lied_to").create().unwrap();
    let sub = node.subscriber::<Blob>("/lies").create().unwrap();
    let honest = node.publisher::<Blob>("/lies").create().unwrap();
    let ty = nerve::TypeInfo::of::<Blob>();

    // the liar: a raw iceoryx2 publisher on the topic's own service
    let iox = iceoryx2_config(&cfg);
    let raw = NodeBuilder::new()
        .config(&iox)
        .signal_handling_mode(SignalHandlingMode::Disabled)
        .create::<ipc::Service>()
        .unwrap();
    let service = raw
        .service_builder(&ServiceName::new("topic:/lies").unwrap())
        .publish_subscribe::<[u64]>()
        .user_header::<SampleHeader>()
        .open()
        .expect("Nerve created the topic's service");
    let liar = service
        .publisher_builder()
        .initial_max_slice_len(16)
        .create()
        .unwrap();
    let header = |payload_len: u64, type_hash: u64, seq: u64| SampleHeader {
        seq,
        payload_len,
        type_hash,
        publisher_id: 0xbad,
        ..SampleHeader::default()
    };
    let lies = [
        // a length beyond the 16 words sent
        header(16 * 8 + 1, ty.layout_hash, 1),
        // shorter than the message's head
        header(4, ty.layout_hash, 2),
        // another type's hash
        header(8 + 3, ty.layout_hash ^ 1, 3),
        // a length past anything a sample can hold
        header(u64::MAX, ty.layout_hash, 4),
    ];
    for h in lies {
        let mut s = liar.loan_slice(16).unwrap();
        *s.user_header_mut() = h;
        for (i, w) in s.payload_mut().iter_mut().enumerate() {
            *w = i as u64;
        }
        s.send().unwrap();
    }
    // then an honest sample through Nerve itself
    let mut l = honest.loan_slice(3).unwrap();
    l.head_mut().id = 42;
    l.elems_mut().copy_from_slice(&[1, 2, 3]);
    l.send().unwrap();

    let got = sub
        .recv_timeout(Duration::from_secs(5))
        .unwrap()
        .expect("the honest sample");
    assert_eq!((got.id, got.elems()), (42, &[1u8, 2, 3][..]));
    drop(got);
    assert!(sub.try_recv().unwrap().is_none(), "no lie is handed out");
    assert_eq!(
        sub.stats().malformed,
        lies.len() as u64,
        "every lie is counted"
    );
}
