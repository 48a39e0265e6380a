//! Opens the tensors a producer (e.g. `crates/nerve-py/examples/tensor_producer.py`)
//! publishes as descriptors, zero-copy, and prints their shape and mean.

use clap::Parser;
use nerve::prelude::*;
use nerve::tensor::{DType, TensorDescriptor, TensorPool};
use std::time::Duration;

#[derive(Parser)]
struct Args {
    /// Topic of the descriptors.
    #[arg(long, default_value = "/tensors")]
    topic: String,
    /// Stop after N tensors.
    #[arg(long)]
    count: Option<u64>,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    nerve::shutdown::install();
    let ctx = Context::from_env()?;
    let node = ctx.node("tensor_consumer").create()?;
    let sub = node
        .subscriber::<TensorDescriptor>(&args.topic)
        .qos(Qos::sensor().depth(8))
        .create()?;
    let mut pool: Option<TensorPool> = None;
    let mut n = 0u64;
    while !nerve::shutdown::requested() && args.count.is_none_or(|c| n < c) {
        let Some(desc) = sub.recv_timeout(Duration::from_millis(200))? else {
            continue;
        };
        let name = desc.pool_name().unwrap_or_default().to_string();
        if pool.as_ref().is_none_or(|p| p.name() != name) {
            pool = Some(TensorPool::open(&ctx, &name)?);
        }
        let tensor = match pool.as_ref().expect("opened above").open_tensor(&desc) {
            Ok(t) => t,
            Err(e) => {
                println!("skipped: {e}");
                continue;
            }
        };
        let mean = match tensor.dtype() {
            DType::F32 => {
                let v: Vec<f32> = tensor
                    .bytes()
                    .chunks_exact(4)
                    .map(|c| f32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
                    .collect();
                v.iter().map(|x| *x as f64).sum::<f64>() / v.len().max(1) as f64
            }
            _ => f64::NAN,
        };
        println!(
            "tensor {}: shape {:?} {} mean {mean:.1}",
            slot_of(&desc),
            tensor.shape(),
            tensor.dtype()
        );
        n += 1;
    }
    Ok(())
}

fn slot_of(desc: &TensorDescriptor) -> String {
    format!("slot {} gen {}", desc.slot, desc.generation)
}
