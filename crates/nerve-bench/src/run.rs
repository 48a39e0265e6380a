//! Running suites: `nerve bench all` and `nerve bench <suite>` run their suites on a
//! thread of their own under [`interrupt::supervise`], so that SIGINT or SIGTERM stops
//! the run: the running point's children are killed, the report of the suites that
//! finished is written marked as interrupted, what the run left in `/dev/shm` is removed,
//! and the command exits with status 130 ([`interrupt::EXIT_STATUS`]).

use crate::harness::interrupt::{self, Outcome, Pattern};
use crate::registry::{self, Plan};
use crate::report::{versions, Bundle, Interruption, SuiteOutput};
use crate::suite::{Env, SuiteError, Variant};
use clap::ArgMatches;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

/// What a command leaves for the terminal.
#[derive(Debug)]
pub struct Ran {
    /// The summary and where the report went.
    pub text: String,
    /// Whether SIGINT or SIGTERM stopped it (exit with [`interrupt::EXIT_STATUS`]).
    pub interrupted: bool,
}

/// `nerve bench all`: every suite of the registry at `variant`, one report in `out`.
pub fn all(variant: Variant, out: &Path) -> Result<Ran, SuiteError> {
    let env = Env::new(out)?;
    let plans: Vec<Plan> = registry::all().map(|s| s.preset(variant, &env)).collect();
    eprintln!(
        "nerve bench all ({}): {}",
        match variant {
            Variant::Full => "full",
            Variant::Quick => "quick",
            Variant::Smoke => "smoke",
        },
        plans.iter().map(|p| p.name).collect::<Vec<_>>().join(", ")
    );
    supervised(env, plans, variant.quick())
}

/// `nerve bench <name>` with its parsed options.
pub fn one(name: &str, matches: &ArgMatches) -> Result<Ran, SuiteError> {
    let suite = registry::command(name)
        .ok_or_else(|| SuiteError::Invalid(format!("unknown suite {name:?}")))?;
    let (env, plan) = suite.parse(matches)?;
    let quick = plan.quick;
    supervised(env, vec![plan], quick)
}

/// Where a run stands: what finished and what runs.
#[derive(Default)]
struct Progress {
    finished: Vec<SuiteOutput>,
    running: Option<&'static str>,
}

fn lock(p: &Mutex<Progress>) -> MutexGuard<'_, Progress> {
    p.lock().unwrap_or_else(|e| e.into_inner())
}

/// Names in /dev/shm that are the run's besides its Nerve domains: Zenoh's shared-memory
/// segments, the raw iceoryx2 peers' files, the Python peers' blocks.
fn mark_shm_files() {
    interrupt::remove_also(Pattern::Suffix(".zenoh".into()));
    interrupt::remove_also(Pattern::Prefix(crate::peers::iceoryx2::PREFIX.into()));
    // iceoryx2's default prefix (its Python binding) and pybench's shared_memory blocks
    interrupt::remove_also(Pattern::Prefix("iox2_".into()));
    interrupt::remove_also(Pattern::Prefix("pyb_".into()));
}

/// Runs `plans` in order under [`interrupt::supervise`] and writes the report.
fn supervised(env: Env, plans: Vec<Plan>, quick: bool) -> Result<Ran, SuiteError> {
    mark_shm_files();
    let names: Vec<&'static str> = plans.iter().map(|p| p.name).collect();
    let own_report = plans.len() == 1 && plans[0].own_report;
    let progress = Arc::new(Mutex::new(Progress::default()));
    let env = Arc::new(env);
    let work = {
        let (progress, env) = (progress.clone(), env.clone());
        move || -> Result<(), SuiteError> {
            let n = plans.len();
            for (i, plan) in plans.into_iter().enumerate() {
                if n > 1 {
                    eprintln!("[{}/{n}] {}", i + 1, plan.name);
                }
                lock(&progress).running = Some(plan.name);
                let started = std::time::Instant::now();
                let name = plan.name;
                let out = plan.run(&env);
                let mut p = lock(&progress);
                if interrupt::stopping() {
                    // it may have ended because its children were killed: not finished
                    return Ok(());
                }
                if n > 1 {
                    // where a run's time goes, suite by suite
                    let took = started.elapsed().as_secs_f64();
                    eprintln!("[{}/{n}] {name}: {took:.0} s", i + 1);
                }
                p.finished.push(out?);
                p.running = None;
            }
            Ok(())
        }
    };
    match interrupt::supervise(work) {
        Outcome::Finished(result) => {
            result?;
            let suites = std::mem::take(&mut lock(&progress).finished);
            if own_report {
                let text = suites.into_iter().map(|s| s.summary).collect();
                return Ok(Ran {
                    text,
                    interrupted: false,
                });
            }
            let text = write(&env, quick, suites, None)?;
            Ok(Ran {
                text,
                interrupted: false,
            })
        }
        Outcome::Interrupted(stopped) => {
            let (suites, running) = {
                let p = lock(&progress);
                (p.finished.clone(), p.running)
            };
            let finished: Vec<String> = suites.iter().map(|s| s.suite.clone()).collect();
            let done = finished.len() + usize::from(running.is_some());
            let interruption = Interruption {
                running: running.map(str::to_string),
                finished,
                not_run: names.iter().skip(done).map(|s| s.to_string()).collect(),
            };
            let written = write(&env, quick, suites, Some(interruption));
            let removed = stopped.finish();
            let mut text = written?;
            if !removed.is_empty() {
                text.push_str(&format!(
                    "removed {} files the run left in /dev/shm\n",
                    removed.len()
                ));
            }
            Ok(Ran {
                text,
                interrupted: true,
            })
        }
    }
}

/// Writes the bundle of `suites` into the report directory; returns its summary and
/// where it went.
fn write(
    env: &Env,
    quick: bool,
    suites: Vec<SuiteOutput>,
    interrupted: Option<Interruption>,
) -> Result<String, SuiteError> {
    let bundle = Bundle {
        machine: env.machine.clone(),
        versions: versions(),
        quick,
        suites,
        interrupted,
    };
    bundle.write(&env.out).map_err(|source| SuiteError::Write {
        path: env.out.display().to_string(),
        source,
    })?;
    Ok(format!(
        "{}report: {1}/index.html, {1}/report.md and {1}/report.json\n",
        bundle.summary(),
        env.out.display()
    ))
}
