//! The traced three-stage lidar pipeline of `nerve bench lidar`: a driver process
//! publishes clouds at 10 Hz, a filter process keeps every other point and republishes,
//! an application process takes the result. All three run with `NERVE_TRACE`, and the
//! trace tells per hop how long each sample waited, travelled and was worked on
//! (see `nerve::trace`).

use crate::harness::child::Child;
use crate::peers::stream::OUSTER_POINT_STEP;
use nerve::prelude::*;
use nerve::trace::{Report, Stats};
use nerve_msgs::PointCloud;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// One stage's settings (the hidden `nerve bench role pipeline-stage` takes it as JSON).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StageSpec {
    /// driver, filter, filter-cpp (the filter written in C++) or app.
    pub stage: String,
    /// Domain.
    pub domain: u32,
    /// Topic it takes (filter, app).
    pub input: Option<String>,
    /// Topic it publishes (driver, filter).
    pub output: Option<String>,
    /// Frames.
    pub frames: u64,
    /// Points per frame at the driver.
    pub points: usize,
}

/// Runs one stage; prints `ready` once its endpoints exist, `done` at the end.
pub fn run_stage(spec: &StageSpec) -> Result<(), String> {
    let err = |e: &dyn std::fmt::Display| e.to_string();
    if spec.stage == "filter-cpp" {
        let (input, output) = (
            spec.input.as_deref().ok_or("no input topic")?,
            spec.output.as_deref().ok_or("no output topic")?,
        );
        crate::peers::cpp::lidar_filter(input, output, spec.frames, OUSTER_POINT_STEP, &mut || {
            use std::io::Write;
            println!("ready");
            let _ = std::io::stdout().flush();
        })?;
        nerve::trace::flush();
        println!("done");
        return Ok(());
    }
    let cfg = nerve::Config::default()
        .domain(spec.domain)
        .map_err(|e| err(&e))?;
    let ctx = Context::new(cfg).map_err(|e| err(&e))?;
    let node = ctx
        .node(&format!("pipeline_{}", spec.stage))
        .create()
        .map_err(|e| err(&e))?;
    let wait = Duration::from_secs(20);
    let publisher = |t: &Option<String>| -> Result<Publisher<PointCloud>, String> {
        let t = t.as_ref().ok_or("no output topic")?;
        node.publisher::<PointCloud>(t)
            .create()
            .map_err(|e| err(&e))
    };
    let subscriber = |t: &Option<String>| -> Result<Subscriber<PointCloud>, String> {
        let t = t.as_ref().ok_or("no input topic")?;
        node.subscriber::<PointCloud>(t)
            .qos(Qos::sensor().depth(8))
            .create()
            .map_err(|e| err(&e))
    };
    match spec.stage.as_str() {
        "driver" => {
            let out = publisher(&spec.output)?;
            println!("ready");
            if !out.wait_for_subscribers(1, wait) {
                return Err("no filter subscribed".into());
            }
            std::thread::sleep(Duration::from_millis(200));
            let sleeper = nerve::timer::PreciseSleep::new(nerve::Precision::default());
            let t0 = nerve::mono_ns();
            let bytes = spec.points * OUSTER_POINT_STEP;
            for k in 0..spec.frames {
                let mut loan = out.loan_slice(bytes).map_err(|e| err(&e))?;
                {
                    let h = loan.head_mut();
                    h.width = spec.points as u32;
                    h.height = 1;
                    h.point_step = OUSTER_POINT_STEP as u32;
                    h.row_step = bytes as u32;
                }
                // the sweep: one word per point changes, as a driver writes it
                for (i, p) in loan
                    .elems_mut()
                    .chunks_exact_mut(OUSTER_POINT_STEP)
                    .enumerate()
                {
                    p[..8].copy_from_slice(&(k ^ i as u64).to_le_bytes());
                }
                sleeper.sleep_until(t0 + k * 100_000_000);
                loan.send().map_err(|e| err(&e))?;
            }
        }
        "filter" => {
            let sub = subscriber(&spec.input)?;
            let out = publisher(&spec.output)?;
            println!("ready");
            if !out.wait_for_subscribers(1, wait) {
                return Err("no application subscribed".into());
            }
            for _ in 0..spec.frames {
                let Some(c) = sub.recv_timeout(wait).map_err(|e| err(&e))? else {
                    break;
                };
                // keep every other point
                let kept = c.elems().len() / OUSTER_POINT_STEP / 2;
                let mut loan = out
                    .loan_slice(kept * OUSTER_POINT_STEP)
                    .map_err(|e| err(&e))?;
                *loan.head_mut() = *c;
                loan.head_mut().width = kept as u32;
                loan.head_mut().row_step = (kept * OUSTER_POINT_STEP) as u32;
                for (dst, src) in loan
                    .elems_mut()
                    .chunks_exact_mut(OUSTER_POINT_STEP)
                    .zip(c.elems().chunks_exact(OUSTER_POINT_STEP * 2))
                {
                    dst.copy_from_slice(&src[..OUSTER_POINT_STEP]);
                }
                drop(c);
                loan.send().map_err(|e| err(&e))?;
            }
        }
        "app" => {
            let sub = subscriber(&spec.input)?;
            println!("ready");
            let mut got = 0;
            while got < spec.frames {
                match sub.recv_timeout(wait).map_err(|e| err(&e))? {
                    Some(_) => got += 1,
                    None => break,
                }
            }
        }
        other => return Err(format!("unknown stage {other:?}")),
    }
    nerve::trace::flush();
    println!("done");
    Ok(())
}

/// The language of the pipeline's filter stage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FilterLang {
    /// Rust (`nerve::Subscriber`, `nerve::Publisher`).
    Rust,
    /// C++ (`nerve.hpp`, the C ABI).
    Cpp,
}

impl FilterLang {
    /// Name in reports.
    pub fn name(self) -> &'static str {
        match self {
            FilterLang::Rust => "Rust filter",
            FilterLang::Cpp => "C++ filter",
        }
    }
}

/// The pipeline's result: the trace's report and where it was written.
pub struct PipelineResult {
    /// The filter stage's language.
    pub filter: FilterLang,
    /// Per hop, stage and path.
    pub report: Report,
    /// Frames the application took.
    pub frames: u64,
}

/// Runs the three stages as processes (`role_command pipeline-stage <spec>`) with tracing
/// into `dir`, and analyses the trace.
pub fn run_pipeline(
    role_command: &(PathBuf, Vec<String>),
    filter_lang: FilterLang,
    domain: u32,
    frames: u64,
    points: usize,
    dir: &Path,
) -> Result<PipelineResult, String> {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let tag = std::process::id();
    let (raw, filtered) = (
        format!("/bench/pipe_raw_{tag}"),
        format!("/bench/pipe_filtered_{tag}"),
    );
    let spec = |stage: &str, input: Option<&String>, output: Option<&String>| StageSpec {
        stage: stage.into(),
        domain,
        input: input.cloned(),
        output: output.cloned(),
        frames,
        points,
    };
    let env = vec![
        ("NERVE_DOMAIN", domain.to_string()),
        (nerve::trace::ENV, dir.display().to_string()),
    ];
    let start = |s: StageSpec| -> Result<Child, String> {
        let mut args = role_command.1.clone();
        args.push("pipeline-stage".into());
        args.push(serde_json::to_string(&s).map_err(|e| e.to_string())?);
        let mut c = Child::spawn(&role_command.0, &args, &env, "pipeline stage")
            .map_err(|e| e.to_string())?;
        c.expect("ready", Duration::from_secs(20))
            .map_err(|e| e.to_string())?;
        Ok(c)
    };
    let mut app = start(spec("app", Some(&filtered), None))?;
    let filter_stage = match filter_lang {
        FilterLang::Rust => "filter",
        FilterLang::Cpp => "filter-cpp",
    };
    let mut filter = start(spec(filter_stage, Some(&raw), Some(&filtered)))?;
    let mut driver = start(spec("driver", None, Some(&raw)))?;
    let limit = Duration::from_secs(frames / 10 + 30);
    for c in [&mut driver, &mut filter, &mut app] {
        c.expect("done", limit).map_err(|e| e.to_string())?;
        c.wait_exit(Duration::from_secs(5));
    }
    let events = nerve::trace::read_dir(dir).map_err(|e| e.to_string())?;
    let report = nerve::trace::analyze(&events, 10);
    let frames = report.paths.first().map_or(0, |p| p.1.count as u64);
    let _ = std::fs::remove_dir_all(dir);
    Ok(PipelineResult {
        filter: filter_lang,
        report,
        frames,
    })
}

/// Rows of the pipeline table: part, where, count, P50, P99, max (µs).
pub fn rows(r: &Report) -> Vec<Vec<String>> {
    let us = |ns: u64| format!("{:.1}", ns as f64 / 1e3);
    let row = |what: &str, at: &str, s: &Stats| {
        vec![
            what.into(),
            at.into(),
            s.count.to_string(),
            us(s.p50),
            us(s.p99),
            us(s.max),
        ]
    };
    let mut out = Vec::new();
    for (topic, wait, transport) in &r.hops {
        out.push(row("wait", topic, wait));
        out.push(row("transport", topic, transport));
    }
    for (stage, cb) in &r.stages {
        out.push(row("callback", stage, cb));
    }
    for (path, total) in &r.paths {
        out.push(row("end to end", path, total));
    }
    out
}
