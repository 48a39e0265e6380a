//! A managed (lifecycle) node named by its first argument: it starts unconfigured, says
//! what each transition callback does, and publishes a counter on `<node>/count` at
//! 10 Hz while active (the samples of other states are dropped and counted). Runs until
//! interrupted. `nerve lifecycle set NODE configure` (or `nerve launch` with
//! `ready = { lifecycle = "active" }`) drives it.
//!
//! `--stuck-in configure` makes that callback hang (to show a stuck node being
//! reported); `--fail-in activate` makes it return failure.

use clap::Parser;
use nerve_lifecycle::{CallbackReturn, ManagedNode, State};
use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

#[derive(Parser)]
struct Args {
    /// The node's name (in NERVE_NAMESPACE).
    name: String,
    /// A transition whose callback never returns.
    #[arg(long)]
    stuck_in: Option<String>,
    /// A transition whose callback returns failure.
    #[arg(long)]
    fail_in: Option<String>,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    nerve::shutdown::install();
    let ctx = nerve::Context::from_env()?;
    let node = ctx.node(&args.name).create()?;
    let managed = ManagedNode::create(&node)?;
    let name = managed.name().to_string();
    let count = Rc::new(
        managed
            .publisher::<nerve_msgs::srv::Int>(&format!("{name}/count"), nerve::Qos::default())?,
    );
    let hook = |label: &'static str| {
        let name = name.clone();
        let stuck = args.stuck_in.as_deref() == Some(label);
        let fail = args.fail_in.as_deref() == Some(label);
        move |from: State| {
            println!("{name}: on_{label} (from {from})");
            if stuck {
                println!("{name}: on_{label} hangs");
                loop {
                    std::thread::sleep(Duration::from_secs(3600));
                }
            }
            if fail {
                println!("{name}: on_{label} fails");
                return CallbackReturn::Failure;
            }
            CallbackReturn::Success
        }
    };
    managed.on_configure(hook("configure"));
    managed.on_activate(hook("activate"));
    managed.on_deactivate(hook("deactivate"));
    managed.on_cleanup(hook("cleanup"));
    managed.on_shutdown(hook("shutdown"));
    let mut exec = nerve::Executor::new();
    managed.serve_on(&mut exec)?;
    let n = Rc::new(Cell::new(0i64));
    let c = count.clone();
    exec.timer(
        "count",
        Duration::from_millis(100),
        nerve::Overrun::Skip,
        move |_| {
            n.set(n.get() + 1);
            let _ = c.publish(&nerve_msgs::srv::Int { value: n.get() });
        },
    )?;
    println!("{name}: up, {}", managed.state());
    exec.spin()?;
    println!(
        "{name}: exiting {} ({} samples dropped while not active)",
        managed.state(),
        count.dropped()
    );
    Ok(())
}
