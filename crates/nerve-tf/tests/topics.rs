//! Broadcasters and a listener over real topics: a small robot's tree, the static part
//! reaching a listener that joined late.

use nerve::{Config, Context};
use nerve_tf::*;

fn context(dir: &std::path::Path) -> Context {
    Context::new(Config::default().domain(876).unwrap().state_dir(dir)).unwrap()
}

fn xyz(x: f64, y: f64, z: f64) -> Transform {
    Transform::new(Vec3::new(x, y, z), Quat::IDENTITY)
}

#[test]
fn a_robot_tree_over_tf_and_tf_static() {
    let dir = std::env::temp_dir().join(format!("nerve-tf-topics-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ctx = context(&dir);
    let node = ctx.node("tf_robot").create().unwrap();
    let mut statics = StaticBroadcaster::new(&node).unwrap();
    statics
        .send(&[
            to_msg("base", "lidar", 0, xyz(0.2, 0.0, 0.5)).unwrap(),
            to_msg("base", "camera", 0, xyz(0.3, 0.0, 0.4)).unwrap(),
        ])
        .unwrap();
    // the listener joins after the static transforms were sent
    let listener_node = ctx.node("tf_listener").create().unwrap();
    let buffer = std::sync::Arc::new(TfBuffer::new(TreeLimits::default()));
    let mut listener = Listener::new(&listener_node, buffer.clone()).unwrap();
    statics.update_connections();
    let dynamic = Broadcaster::new(&node).unwrap();
    for k in 0..=10 {
        let stamp = k * 100_000_000;
        dynamic
            .send(&[
                to_msg("map", "odom", stamp, xyz(1.0, 2.0, 0.0)).unwrap(),
                to_msg("odom", "base", stamp, xyz(k as f64 * 0.1, 0.0, 0.0)).unwrap(),
            ])
            .unwrap();
    }
    let mut stored = 0;
    for _ in 0..200 {
        stored += listener.update().unwrap();
        if buffer.can_transform("map", "lidar", 500_000_000) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert!(stored >= 4, "stored {stored}");
    let t = buffer
        .lookup_transform("map", "lidar", 500_000_000)
        .unwrap();
    let p = t.translation;
    assert!(
        (p.x - 1.7).abs() < 1e-9 && (p.y - 2.0).abs() < 1e-9 && (p.z - 0.5).abs() < 1e-9,
        "{p:?}"
    );
    let frames = listener.buffer().frames();
    let lidar = frames.iter().find(|f| f.name == "lidar").unwrap();
    assert!(lidar.is_static && lidar.parent.as_deref() == Some("base"));
    // a bad transform is refused and counted, the rest go on
    let mut bad = to_msg("base", "imu", 0, xyz(0.0, 0.0, 0.0)).unwrap();
    bad.transform.rotation.w = f64::NAN;
    dynamic.send(&[bad]).unwrap();
    for _ in 0..200 {
        listener.update().unwrap();
        if listener.refused() > 0 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert_eq!(listener.refused(), 1);
    // a frame name too long for the message's field is an error naming it
    let e = to_msg("base", &"x".repeat(70), 0, Transform::IDENTITY).unwrap_err();
    assert!(e.to_string().contains("longer than 64 bytes"), "{e}");
}

#[test]
fn a_listener_thread_feeds_a_shared_buffer() {
    let dir = std::env::temp_dir().join(format!("nerve-tf-listener-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ctx = Context::new(Config::default().domain(877).unwrap().state_dir(&dir)).unwrap();
    let buffer = std::sync::Arc::new(TfBuffer::new(TreeLimits::default()));
    let listener = TransformListener::spawn(&ctx, "tf_buffer_listener", buffer.clone()).unwrap();
    let node = ctx.node("tf_robot2").create().unwrap();
    let mut statics = StaticBroadcaster::new(&node).unwrap();
    statics
        .send(&[to_msg("base_link", "lidar", 0, xyz(0.2, 0.0, 0.5)).unwrap()])
        .unwrap();
    let dynamic = Broadcaster::new(&node).unwrap();
    for k in 0..=10 {
        dynamic
            .send(&[to_msg(
                "odom",
                "base_link",
                k * 100_000_000,
                xyz(k as f64, 0.0, 0.0),
            )
            .unwrap()])
            .unwrap();
    }
    // another thread waits for the chain (the reader side of the buffer)
    let reader = {
        let buffer = buffer.clone();
        std::thread::spawn(move || {
            buffer.wait_for_transform(
                "odom",
                "lidar",
                1_000_000_000,
                std::time::Duration::from_secs(20),
            )
        })
    };
    let t = reader.join().unwrap().unwrap();
    assert!((t.translation.x - 10.2).abs() < 1e-9, "{t:?}");
    // a bad transform (sent once the connection is known to work) is refused, counted
    let mut bad = to_msg("base_link", "imu", 0, xyz(0.0, 0.0, 0.0)).unwrap();
    bad.transform.rotation.w = f64::NAN;
    dynamic.send(&[bad]).unwrap();
    for _ in 0..400 {
        if listener.refused() > 0 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert_eq!(listener.refused(), 1);
    assert!(listener.stored() >= 2, "{}", listener.stored());
    listener.stop();
}

/// A listener whose node follows a simulation clock clears the buffer's dynamic
/// transforms when that clock jumps back (a bag played again), and keeps static ones.
#[test]
fn a_clock_jump_back_clears_the_listeners_dynamic_transforms() {
    use std::time::{Duration, Instant};
    let dir = std::env::temp_dir().join(format!("nerve-tf-simjump-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = Config::default().domain(878).unwrap().state_dir(&dir);
    let plain = Context::new(cfg.clone()).unwrap();
    let sim = Context::new(Config {
        sim_time: true,
        ..cfg
    })
    .unwrap();
    let driver = plain.node("clock_driver").create().unwrap();
    let clock = driver
        .publisher::<nerve::time::wire::Clock>(nerve::time::CLOCK_TOPIC)
        .create()
        .unwrap();
    let set_clock = |t: i64| {
        let give_up = Instant::now() + Duration::from_secs(20);
        while sim.clock().now_ns() != t && Instant::now() < give_up {
            clock
                .publish(&nerve::time::wire::Clock {
                    clock: nerve::time::wire::Time { nanos: t },
                })
                .unwrap();
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(
            sim.clock().now_ns(),
            t,
            "the simulation clock follows /clock"
        );
    };
    let s = 1_000_000_000i64;
    set_clock(10 * s);
    let node = sim.node("tf_sim_listener").create().unwrap();
    let buffer = std::sync::Arc::new(TfBuffer::new(TreeLimits::default()));
    let mut listener = Listener::new(&node, buffer.clone()).unwrap();
    buffer
        .set_transform("base", "lidar", 0, xyz(0.2, 0.0, 0.5), true)
        .unwrap();
    buffer
        .set_transform("odom", "base", 10 * s, xyz(1.0, 0.0, 0.0), false)
        .unwrap();
    listener.update().unwrap();
    assert!(
        buffer.can_transform("odom", "base", 10 * s),
        "no jump: kept"
    );
    set_clock(5 * s);
    listener.update().unwrap();
    assert!(
        !buffer.can_transform("odom", "base", 10 * s),
        "cleared after the jump"
    );
    assert!(buffer.can_transform("base", "lidar", 0), "static kept");
    assert_eq!(buffer.time_jumps(), 1);
}
