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
