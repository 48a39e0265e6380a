use nerve::message::schema::Schema;
use nerve_c::*;
use nerve_msgs::CmdVel;
use std::ffi::{c_void, CString};

#[test]
#[ignore]
fn probe() {
    let n = 1_000_000u64;
    let ctx = nerve::Context::new(nerve::Config::default().domain(881).unwrap()).unwrap();
    let node = ctx.node("probe").create().unwrap();
    let sub = node.subscriber::<CmdVel>("/probe/t").create().unwrap();
    let p = node.publisher::<CmdVel>("/probe/t").create().unwrap();
    let t = std::time::Instant::now();
    for i in 0..n {
        let mut l = p.loan().unwrap();
        l.linear = i as f32;
        l.send().unwrap();
        let _ = sub.try_recv().unwrap().unwrap();
    }
    eprintln!("typed {:.1} ns", t.elapsed().as_nanos() as f64 / n as f64);
    let schema = Schema::of::<CmdVel>();
    let rsub = nerve::RawSubscriber::with_schema(&node, "/probe/r", &schema, nerve::Qos::default())
        .unwrap();
    let rp =
        nerve::RawPublisher::create(&node, "/probe/r", &schema, nerve::Qos::default()).unwrap();
    let t = std::time::Instant::now();
    for i in 0..n {
        let mut l = rp.loan(16).unwrap();
        l.bytes_mut()[8] = i as u8;
        rp.send(l).unwrap();
        let _ = rsub.try_recv().unwrap().unwrap();
    }
    eprintln!("raw {:.1} ns", t.elapsed().as_nanos() as f64 / n as f64);
    let opts = nerve_context_options_t {
        config_path: std::ptr::null(),
        domain: 881,
        set_domain: true,
        state_dir: std::ptr::null(),
        network: -1,
    };
    let (mut c, mut nd, mut cp, mut cs) = Default::default();
    let topic = CString::new("/probe/c").unwrap();
    let sc = CString::new(schema.encode()).unwrap();
    unsafe {
        nerve_context_create(&opts, &mut c);
        nerve_node_create(c, c"probe_c".as_ptr(), &mut nd);
        nerve_subscriber_create(
            nd,
            topic.as_ptr(),
            sc.as_ptr(),
            0,
            std::ptr::null(),
            &mut cs,
        );
        nerve_publisher_create(
            nd,
            topic.as_ptr(),
            sc.as_ptr(),
            0,
            std::ptr::null(),
            &mut cp,
        );
    }
    let t = std::time::Instant::now();
    for i in 0..n {
        let mut loan = nerve_loan_t::default();
        let mut data: *mut c_void = std::ptr::null_mut();
        let mut s = nerve_sample_t::default();
        let mut v = std::mem::MaybeUninit::uninit();
        unsafe {
            nerve_publisher_loan(cp, 16, &mut loan, &mut data);
            *(data as *mut u8).add(8) = i as u8;
            nerve_sample_send(loan);
            nerve_subscriber_take(cs, 0, &mut s, v.as_mut_ptr());
            nerve_sample_release(s);
        }
    }
    eprintln!("C {:.1} ns", t.elapsed().as_nanos() as f64 / n as f64);
    let t = std::time::Instant::now();
    let mut k = 0usize;
    for _ in 0..n {
        let mut c2 = 0usize;
        unsafe { nerve_publisher_subscriber_count(cp, &mut c2) };
        k += c2;
    }
    eprintln!(
        "C call floor {:.1} ns ({k})",
        t.elapsed().as_nanos() as f64 / n as f64
    );
    let t = std::time::Instant::now();
    for _ in 0..n {
        k += std::hint::black_box(&rp).subscriber_count();
    }
    eprintln!(
        "Rust subscriber_count {:.1} ns ({k})",
        t.elapsed().as_nanos() as f64 / n as f64
    );
    let _: (
        nerve_context_t,
        nerve_node_t,
        nerve_publisher_t,
        nerve_subscriber_t,
    ) = (c, nd, cp, cs);
}
