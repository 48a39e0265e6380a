//! Serves `nerve_msgs/AddTwoInts` on /add (or --name) until interrupted: a Rust server for
//! clients in any language (`nerve service call /add AddTwoInts '{"a": 2, "b": 3}'`).

use clap::Parser;
use nerve::prelude::*;
use nerve_msgs::srv::{AddTwoInts, Int};

#[derive(Parser)]
struct Args {
    /// Service name.
    #[arg(long, default_value = "/add")]
    name: String,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    nerve::shutdown::install();
    let ctx = Context::from_env()?;
    let server = nerve::ServiceThread::spawn::<AddTwoInts, _>(
        &ctx,
        "add_server",
        &args.name,
        ServiceQos::default(),
        |req| {
            req.reply(&Int {
                value: req.a.wrapping_add(req.b),
            })?;
            Ok(())
        },
    )?;
    println!("add_server: serving {}", args.name);
    while !nerve::shutdown::requested() {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    server.stop()?;
    Ok(())
}
