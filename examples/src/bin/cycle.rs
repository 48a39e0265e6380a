//! A state machine from a TOML file on an executor, beside a periodic timer: the machine
//! cycles on its one-shot timeout, a 1 s timer prints progress and, at its first tick
//! after `--cycles` timeouts, halts the machine and stops the executor. While it runs,
//! `nerve sm show cycle` prints the machine and its current state.

use clap::Parser;
use nerve::prelude::*;
use std::cell::Cell;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::Duration;

#[derive(Parser)]
struct Args {
    /// The machine's TOML or YAML file.
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/machines/cycle.toml"))]
    spec: PathBuf,
    /// Timeouts before halting.
    #[arg(long, default_value_t = 500)]
    cycles: u64,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let ctx = Context::from_env()?;
    let node = ctx.node("cycle_example").create()?;
    let mut machine = Machine::new(MachineSpec::from_file(&args.spec)?)?;
    let timeouts = Rc::new(Cell::new(0u64));
    let t = timeouts.clone();
    machine.action("count", move |_| t.set(t.get() + 1));
    let mut exec = Executor::new();
    let (_, handle) = exec.machine(&node, machine)?;
    let stop = exec.handle();
    let (target, t) = (args.cycles, timeouts.clone());
    exec.timer(
        "progress",
        Duration::from_secs(1),
        Overrun::Skip,
        move |_| {
            println!("{} timeouts, state {}", t.get(), handle.current());
            if t.get() >= target {
                handle.trigger("halt").expect("halt is a known trigger");
                stop.stop();
            }
        },
    )?;
    exec.spin()?;
    println!("stopped after {} timeouts", timeouts.get());
    Ok(())
}
