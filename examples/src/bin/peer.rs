//! Test peer for the process-level test suite: one role per run, results as JSON on
//! stdout, progress markers (`ready`, `holding`, `loaned`) on their own lines.

use clap::{Parser, Subcommand};
use nerve::prelude::*;
use nerve_msgs::Imu;
use std::io::Write;
use std::time::{Duration, Instant};

#[derive(Parser)]
struct Args {
    #[command(subcommand)]
    role: Role,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum QosArg {
    Sensor,
    Reliable,
    /// back-pressure with a 300 ms timeout and depth 4
    Tight,
    /// drop-oldest with depth 8
    Shallow,
}

impl QosArg {
    fn qos(self) -> Qos {
        match self {
            QosArg::Sensor => Qos::sensor().depth(256),
            QosArg::Reliable => Qos::reliable(),
            QosArg::Tight => Qos::reliable().depth(4).overflow(Overflow::BackPressure {
                timeout: Duration::from_millis(300),
            }),
            QosArg::Shallow => Qos::sensor().depth(8),
        }
    }
}

#[derive(Subcommand)]
enum Role {
    /// Publish `count` Imu messages (every 8-byte word of message k is k, the sequence
    /// number) after `subs` subscribers joined; `count` 0: until killed, printing `sending`
    /// after the first.
    Pub {
        #[arg(long)]
        topic: String,
        #[arg(long)]
        count: u64,
        #[arg(long, value_enum)]
        qos: QosArg,
        #[arg(long, default_value_t = 1)]
        subs: usize,
        /// Messages per second (0: as fast as possible).
        #[arg(long, default_value_t = 0.0)]
        rate: f64,
        /// Loan one more sample at the end and hold it (print `loaned`), then sleep.
        #[arg(long)]
        hold_loan: bool,
    },
    /// Receive Imu messages until `count` arrived or `idle` seconds pass without one;
    /// `payload_ok` says whether every word of every message equalled its sequence number.
    Sub {
        #[arg(long)]
        topic: String,
        #[arg(long)]
        count: u64,
        #[arg(long, value_enum)]
        qos: QosArg,
        #[arg(long, default_value_t = 10.0)]
        idle: f64,
        /// Keep the first N samples (do not drop them) and print `holding` once N arrived,
        /// then sleep until killed.
        #[arg(long, default_value_t = 0)]
        hold: usize,
    },
    /// Serve /add (AddTwoInts: a = i64::MIN fails in the handler, a = 99 prints `got` and
    /// hangs) and /echo (Echo, requests up to 1 MiB) until SIGTERM.
    Serve,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let ctx = Context::from_env()?;
    match args.role {
        Role::Serve => {
            use nerve_msgs::srv::{AddTwoInts, Echo, Int};
            let _add = nerve::ServiceThread::spawn::<AddTwoInts, _>(
                &ctx,
                "peer_add",
                "/add",
                ServiceQos::default(),
                |req| {
                    if req.a == i64::MIN {
                        return Err("a must not be i64::MIN".into());
                    }
                    if req.a == 99 {
                        println!("got");
                        std::io::stdout().flush()?;
                        std::thread::sleep(Duration::from_secs(3600));
                    }
                    req.reply(&Int {
                        value: req.a.wrapping_add(req.b),
                    })?;
                    Ok(())
                },
            )?;
            let _echo = nerve::ServiceThread::spawn::<Echo, _>(
                &ctx,
                "peer_echo",
                "/echo",
                ServiceQos::default().max_payload(1 << 20, 1 << 20),
                |req| {
                    let mut out = req.loan_reply_slice(req.elems().len())?;
                    out.tag = req.tag;
                    out.elems_mut().copy_from_slice(req.elems());
                    out.send()?;
                    Ok(())
                },
            )?;
            nerve::shutdown::install();
            println!("ready");
            std::io::stdout().flush()?;
            while !nerve::shutdown::requested() {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        Role::Pub {
            topic,
            count,
            qos,
            subs,
            rate,
            hold_loan,
        } => {
            let node = ctx.node("peer_pub").create()?;
            let p = node.publisher::<Imu>(&topic).qos(qos.qos()).create()?;
            println!("ready");
            if !p.wait_for_subscribers(subs, Duration::from_secs(20)) {
                anyhow::bail!("subscribers did not join");
            }
            let start = Instant::now();
            let mut errors = Vec::new();
            let mut k = 0;
            while count == 0 || k < count {
                if let Err(e) = p.publish(&pattern(k + 1)) {
                    errors.push(e.to_string());
                    break;
                }
                if count == 0 && k == 0 {
                    println!("sending");
                    std::io::stdout().flush()?;
                }
                k += 1;
                if rate > 0.0 {
                    nerve_examples::sleep_until_tick(
                        start,
                        Duration::from_secs_f64(1.0 / rate),
                        k + 1,
                    );
                }
            }
            println!(
                "{}",
                serde_json::json!({"sent": count, "errors": errors, "elapsed_s": start.elapsed().as_secs_f64()})
            );
            if hold_loan {
                let _loan = p.loan()?;
                println!("loaned");
                std::io::stdout().flush()?;
                std::thread::sleep(Duration::from_secs(3600));
            }
        }
        Role::Sub {
            topic,
            count,
            qos,
            idle,
            hold,
        } => {
            let node = ctx.node("peer_sub").create()?;
            let s = node.subscriber::<Imu>(&topic).qos(qos.qos()).create()?;
            println!("ready");
            std::io::stdout().flush()?;
            let mut held = Vec::new();
            let (mut n, mut in_order, mut last, mut payload_ok) = (0u64, true, 0u64, true);
            while n < count {
                let Some(m) = s.recv_timeout(Duration::from_secs_f64(idle))? else {
                    break;
                };
                n += 1;
                if n == 1 {
                    println!("first");
                    std::io::stdout().flush()?;
                }
                let seq = m.header().seq;
                in_order &= seq > last;
                last = seq;
                payload_ok &=
                    nerve::message::as_bytes(&*m) == nerve::message::as_bytes(&pattern(seq));
                if held.len() < hold {
                    held.push(m);
                    if held.len() == hold {
                        println!("holding");
                        std::io::stdout().flush()?;
                        std::thread::sleep(Duration::from_secs(3600));
                    }
                }
            }
            let st = s.stats();
            println!(
                "{}",
                serde_json::json!({
                    "received": n, "lost": st.lost, "malformed": st.malformed,
                    "in_order": in_order, "last_seq": last, "payload_ok": payload_ok,
                })
            );
        }
    }
    Ok(())
}

/// The Imu message number `seq` of a peer publisher: every 8-byte word is `seq`, so a
/// sample mixing two messages (torn) is told apart from a whole one.
fn pattern(seq: u64) -> Imu {
    let bytes: Vec<u8> = std::iter::repeat_n(seq.to_ne_bytes(), std::mem::size_of::<Imu>() / 8)
        .flatten()
        .collect();
    nerve::message::read_pod(&bytes).expect("an Imu is a whole number of words")
}
