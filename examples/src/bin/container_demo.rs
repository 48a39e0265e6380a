//! A container of composed nodes: `talker` and `listener` components in one process,
//! sharing one context (their topic takes the same-process path). Started by `nerve launch`
//! from a `[[container]]` (it reads the node list from `NERVE_COMPONENTS`).
//!
//! Parameters: `talker` takes `topic` (default `chatter`, relative: resolved in the node's
//! namespace) and `rate` (Hz, default 50); `listener` takes `topic`.

use nerve::prelude::*;
use nerve_launch::component::{ComponentSpec, Container};
use nerve_launch::BoxError;
use nerve_msgs::Imu;
use std::time::Duration;

fn talker(ctx: &Context, spec: &ComponentSpec) -> Result<(), BoxError> {
    let node = spec.node(ctx)?;
    let topic = spec.param_str("topic").unwrap_or("chatter");
    let rate = spec.param_f64("rate").unwrap_or(50.0);
    if !(rate > 0.0 && rate.is_finite()) {
        return Err(format!("{}: rate must be a positive number", spec.full_name()).into());
    }
    let publisher = node.publisher::<Imu>(topic).create()?;
    println!("{}: publishing on {}", node.full_name(), publisher.topic());
    let period = Duration::from_secs_f64(1.0 / rate);
    while !nerve::shutdown::requested() {
        let mut m = publisher.loan()?;
        m.stamp = nerve_msgs::Time::now();
        m.send()?;
        std::thread::sleep(period);
    }
    Ok(())
}

fn listener(ctx: &Context, spec: &ComponentSpec) -> Result<(), BoxError> {
    let node = spec.node(ctx)?;
    let topic = spec.param_str("topic").unwrap_or("chatter");
    let sub = node.subscriber::<Imu>(topic).create()?;
    println!("{}: listening on {}", node.full_name(), sub.topic());
    let mut n = 0u64;
    while !nerve::shutdown::requested() {
        if sub.recv_timeout(Duration::from_millis(100))?.is_some() {
            n += 1;
            if n == 1 || n.is_multiple_of(100) {
                println!("{}: received {n}", node.full_name());
            }
        }
    }
    Ok(())
}

fn main() -> std::process::ExitCode {
    let r = Container::new()
        .register("talker", talker)
        .register("listener", listener)
        .run();
    match r {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::ExitCode::from(1)
        }
    }
}
