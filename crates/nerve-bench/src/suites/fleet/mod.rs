//! TEMPORARY (branch issue46-scale only): a minimal `nerve bench fleet` that runs the
//! one-host rows, so they can be run before the integrator's fleet suite replaces this.

pub mod one_host;

use crate::report::{json_rows, Section, SuiteOutput};
use crate::suite::{Env, Role, Suite, SuiteError, Variant};
use std::path::{Path, PathBuf};

/// Options of `nerve bench fleet` (temporary).
#[derive(clap::Args)]
pub struct FleetOptions {
    /// Quick settings.
    #[arg(long)]
    quick: bool,
    /// Output directory for report.json, report.md and index.html.
    #[arg(long, default_value = "nerve-report")]
    out: PathBuf,
    /// Topics of the one-host rows.
    #[arg(long, default_value_t = 1000)]
    topics: usize,
    /// Nodes of the one-host rows.
    #[arg(long, default_value_t = 100)]
    nodes: usize,
}

impl crate::suite::Options for FleetOptions {
    fn out(&self) -> &Path {
        &self.out
    }
}

/// The fleet suite (temporary: its one-host rows only).
pub struct FleetSuite {
    quick: bool,
    topics: usize,
    nodes: usize,
}

impl Suite for FleetSuite {
    type Options = FleetOptions;
    const NAME: &'static str = "fleet";
    const ABOUT: &'static str = "A fleet of hosts (temporary: one host at robot scale)";
    const SEED: Option<&'static str> = None;
    const ROLES: &'static [Role] = one_host::ROLES;

    fn preset(variant: Variant, _env: &Env) -> FleetSuite {
        let (topics, nodes) = if variant == Variant::Smoke {
            (50, 10)
        } else {
            (1000, 100)
        };
        FleetSuite {
            quick: variant.quick(),
            topics,
            nodes,
        }
    }

    fn from_options(o: FleetOptions, _env: &Env) -> Result<FleetSuite, SuiteError> {
        if o.topics == 0 || o.nodes < 2 {
            return Err(SuiteError::Invalid(
                "--topics at least 1, --nodes at least 2".into(),
            ));
        }
        Ok(FleetSuite {
            quick: o.quick,
            topics: o.topics,
            nodes: o.nodes,
        })
    }

    fn quick(&self) -> bool {
        self.quick
    }

    fn run(&self, env: &Env) -> Result<SuiteOutput, SuiteError> {
        let (rows, skipped) = one_host::measure(env, self.topics, self.nodes);
        let checks = one_host::checks(&rows, &skipped);
        let mut section = Section::new("fleet", "One host at robot scale.");
        one_host::add_table(&mut section, &rows);
        let summary = format!("fleet\n{}", one_host::summary(&rows));
        Ok(section.finish("fleet", json_rows(&rows), skipped, checks, summary))
    }
}
