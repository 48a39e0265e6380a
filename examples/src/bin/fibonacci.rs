//! A node with parameters and an action server on one executor: serves
//! `nerve_msgs/Fibonacci` on /fibonacci (or --name), one number per `step_ms`, with
//! feedback after each. Try:
//!
//! ```text
//! nerve action send_goal /fibonacci Fibonacci '{"order": 10}' --feedback
//! nerve param set /fibonacci step_ms 5
//! ```

use clap::Parser;
use nerve::action::{ActionServer, GoalPolicy};
use nerve::param::{ParamDescriptor, ParamValue, Parameters};
use nerve::prelude::*;
use nerve_msgs::action::{Fibonacci, FibonacciSequence};
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::time::Duration;

#[derive(Parser)]
struct Args {
    /// Action name.
    #[arg(long, default_value = "/fibonacci")]
    name: String,
    /// Node name.
    #[arg(long, default_value = "fibonacci")]
    node: String,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let ctx = Context::from_env()?;
    let node = ctx.node(&args.node).create()?;
    let params = Parameters::create(&node)?;
    params.declare(
        "step_ms",
        10i64,
        ParamDescriptor::new()
            .description("time per Fibonacci number")
            .range(0.0, 1000.0, 1.0),
    )?;
    params.declare(
        "max_order",
        90i64,
        ParamDescriptor::new()
            .description("largest order accepted (i64 overflows past 92)")
            .range(0.0, 92.0, 1.0),
    )?;
    params.declare("gain", 1.0, ParamDescriptor::new().range(0.0, 10.0, 0.0))?;
    params.declare("frame", "base_link", ParamDescriptor::new().read_only())?;
    // a rule a range cannot say: 1 ms steps would starve the executor's other callbacks
    params.on_validate(|changes| {
        match changes
            .iter()
            .any(|c| c.name == "step_ms" && c.new == ParamValue::Int(1))
        {
            true => Err("step_ms 1 starves the other callbacks: use 0 or at least 2".into()),
            false => Ok(()),
        }
    });

    let server = ActionServer::<Fibonacci>::builder(&node, &args.name)
        .policy(GoalPolicy::Parallel { max: 4 })
        .create()?;
    let mut exec = Executor::new();
    exec.handle_signals(true);
    exec.parameters(&params)?;
    let p = params.clone();
    exec.action_server(
        &server,
        move |g| {
            let max = p.get::<i64>("max_order").unwrap_or(90);
            match g.goal().order {
                o if o < 0 || o > max => Err(format!("order {o} is outside 0 to {max}")),
                _ => Ok(()),
            }
        },
        |_| {},
    )?;
    // each goal's sequence so far, grown one number per step
    let progress: Rc<RefCell<HashMap<nerve::action::GoalId, Vec<i64>>>> = Rc::default();
    let (s, p) = (server.clone(), params.clone());
    let mut next_step = std::time::Instant::now();
    exec.timer("step", Duration::from_millis(1), Overrun::Skip, move |_| {
        let step = Duration::from_millis(p.get::<i64>("step_ms").unwrap_or(10) as u64);
        if std::time::Instant::now() < next_step {
            return;
        }
        next_step = std::time::Instant::now() + step;
        let mut progress = progress.borrow_mut();
        for g in s.goals() {
            let seq = progress.entry(g.id()).or_insert_with(|| vec![0, 1]);
            let order = g.goal().order as usize;
            let result = |state| {
                let done: Vec<i64> = seq.iter().copied().take(order + 1).collect();
                g.end_with(state, done.len(), |h, e| {
                    *h = FibonacciSequence {
                        len: done.len() as u64,
                    };
                    e.copy_from_slice(&done);
                })
            };
            if g.is_canceling() {
                let _ = result(nerve::action::GoalState::Canceled);
                progress.remove(&g.id());
                continue;
            }
            if seq.len() > order {
                let _ = result(nerve::action::GoalState::Succeeded);
                progress.remove(&g.id());
                continue;
            }
            let n = seq.len();
            seq.push(seq[n - 1].wrapping_add(seq[n - 2]));
            let _ = g.feedback_with(seq.len(), |h, e| {
                h.len = seq.len() as u64;
                e.copy_from_slice(seq);
            });
        }
    })?;
    println!(
        "fibonacci: serving {} on node {}",
        node.resolve_name(&args.name),
        node.full_name()
    );
    exec.spin()?;
    Ok(())
}
