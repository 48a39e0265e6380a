//! Rough throughput numbers (ignored by default):
//! `cargo test -p nerve-ros2-types --release --test perf -- --ignored --nocapture`

mod common;

use std::time::Instant;

use nerve_ros2_types::{decode, encode, validate, Array, Value};

#[test]
#[ignore]
fn throughput() {
    let reg = common::registry(&["sensor_msgs/msg/PointCloud2", "sensor_msgs/msg/Imu"]);
    let mut pc = Value::default_for(&reg, "sensor_msgs/msg/PointCloud2").unwrap();
    pc.as_struct_mut()
        .unwrap()
        .set("data", Value::Array(Array::UInt8(vec![7; 1 << 20])));
    let mut bytes = Vec::new();
    encode(&reg, "sensor_msgs/msg/PointCloud2", &pc, &mut bytes).unwrap();
    let n = 200;
    let t = Instant::now();
    for _ in 0..n {
        let mut b = Vec::with_capacity(bytes.len());
        encode(&reg, "sensor_msgs/msg/PointCloud2", &pc, &mut b).unwrap();
    }
    println!("encode 1 MB PointCloud2: {:?}/msg", t.elapsed() / n);
    let t = Instant::now();
    for _ in 0..n {
        decode(&reg, "sensor_msgs/msg/PointCloud2", &bytes).unwrap();
    }
    println!("decode 1 MB PointCloud2: {:?}/msg", t.elapsed() / n);
    let t = Instant::now();
    for _ in 0..n {
        validate(&reg, "sensor_msgs/msg/PointCloud2", &bytes).unwrap();
    }
    println!("validate 1 MB PointCloud2: {:?}/msg", t.elapsed() / n);

    let imu = Value::default_for(&reg, "sensor_msgs/msg/Imu").unwrap();
    let mut ib = Vec::new();
    encode(&reg, "sensor_msgs/msg/Imu", &imu, &mut ib).unwrap();
    let n = 200_000;
    let t = Instant::now();
    for _ in 0..n {
        validate(&reg, "sensor_msgs/msg/Imu", &ib).unwrap();
    }
    println!(
        "validate Imu ({} bytes): {:?}/msg",
        ib.len(),
        t.elapsed() / n
    );
    let t = Instant::now();
    for _ in 0..n {
        decode(&reg, "sensor_msgs/msg/Imu", &ib).unwrap();
    }
    println!("decode Imu: {:?}/msg", t.elapsed() / n);
}
