//! The README's code example, kept compiling and passing.

use nerve::prelude::*;
use nerve_msgs::Imu;
use std::time::Duration;

#[test]
fn readme_example() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::temp_dir().join("nerve-readme/");
    let ctx = Context::new(nerve::Config::default().domain(998)?.state_dir(dir))?;
    let node = ctx.node("imu_driver").create()?;
    let imu = node.publisher::<Imu>("/imu").qos(Qos::sensor()).create()?;
    let sub = node.subscriber::<Imu>("/imu").create()?;
    let mut m = imu.loan()?;
    m.linear_acceleration.z = 9.81;
    m.send()?;
    let s = sub
        .recv_timeout(Duration::from_millis(100))?
        .expect("sample");
    assert_eq!((s.header().seq, s.linear_acceleration.z), (1, 9.81));
    Ok(())
}

#[test]
fn readme_service_example() -> Result<(), Box<dyn std::error::Error>> {
    use nerve_msgs::srv::{AddTwoInts, Int, TwoInts};
    let dir = std::env::temp_dir().join("nerve-readme/");
    let ctx = Context::new(nerve::Config::default().domain(996)?.state_dir(dir))?;
    let _server = nerve::ServiceThread::spawn::<AddTwoInts, _>(
        &ctx,
        "adder",
        "/add",
        ServiceQos::default(),
        |req| {
            req.reply(&Int {
                value: req.a + req.b,
            })?;
            Ok(())
        },
    )?;
    let node = ctx.node("caller").create()?;
    let client = node.client::<AddTwoInts>("/add").create()?;
    assert!(client.wait_for_service(Duration::from_secs(1)));
    let sum = client.call(&TwoInts { a: 2, b: 40 }, Duration::from_secs(5))?;
    assert_eq!(sum.value, 42);
    Ok(())
}
