//! The registry: every [`Suite`] behind one table ([`crate::suites::ALL`], in the order
//! `nerve bench all` runs them) that `bench all`, `bench <suite>`, the child roles and the
//! command line iterate over.

use crate::report::SuiteOutput;
use crate::suite::{Env, Options, Role, Suite, SuiteError, Variant};
use clap::{ArgMatches, FromArgMatches};

/// One suite as the registry holds it.
pub struct Registered {
    /// `nerve bench <name>`, and the name of its part of the report.
    pub name: &'static str,
    /// One line for `nerve bench --help`.
    pub about: &'static str,
    /// The seed report it reproduces, if any.
    pub seed: Option<&'static str>,
    /// Whether `nerve bench <name>` exists.
    pub command: bool,
    /// The child roles it starts.
    pub roles: &'static [Role],
    options: fn() -> clap::Command,
    parse: fn(&ArgMatches) -> Result<(Env, Plan), SuiteError>,
    preset: fn(Variant, &Env) -> Plan,
}

impl Registered {
    /// The entry of suite `S`.
    pub const fn of<S: Suite>() -> Registered {
        Registered {
            name: S::NAME,
            about: S::ABOUT,
            seed: S::SEED,
            command: S::COMMAND,
            roles: S::ROLES,
            options: options::<S>,
            parse: parse::<S>,
            preset: preset::<S>,
        }
    }

    /// `nerve bench <name>` with its options, for the command line (clap).
    pub fn options(&self) -> clap::Command {
        (self.options)()
    }

    /// The suite `nerve bench <name>` asked for, from its parsed options, and what it
    /// runs with.
    pub fn parse(&self, matches: &ArgMatches) -> Result<(Env, Plan), SuiteError> {
        (self.parse)(matches)
    }

    /// The suite as `nerve bench all` runs it.
    pub fn preset(&self, variant: Variant, env: &Env) -> Plan {
        (self.preset)(variant, env)
    }
}

fn options<S: Suite>() -> clap::Command {
    // the options' own doc comment would be the subcommand's help: the suite's line is
    <S::Options as clap::Args>::augment_args(clap::Command::new(S::NAME))
        .about(S::ABOUT)
        .long_about(None)
}

fn parse<S: Suite>(matches: &ArgMatches) -> Result<(Env, Plan), SuiteError> {
    let options = S::Options::from_arg_matches(matches)
        .map_err(|e| SuiteError::Invalid(first_line(&e.to_string())))?;
    let env = Env::new(options.out())?;
    let suite = S::from_options(options, &env)?;
    Ok((env, Plan::of(suite)))
}

fn preset<S: Suite>(variant: Variant, env: &Env) -> Plan {
    Plan::of(S::preset(variant, env))
}

/// The first line of a clap error, without its `error: `.
fn first_line(text: &str) -> String {
    text.lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("invalid arguments")
        .trim_start_matches("error: ")
        .to_string()
}

/// A suite's run, boxed: whatever the suite's type.
type BoxedRun = Box<dyn FnOnce(&Env) -> Result<SuiteOutput, SuiteError> + Send>;

/// A suite built from its options or preset, ready to run.
pub struct Plan {
    /// The suite's name.
    pub name: &'static str,
    /// Whether it runs with its quick settings.
    pub quick: bool,
    /// Whether it writes a report of its own ([`Suite::own_report`]).
    pub own_report: bool,
    run: BoxedRun,
}

impl Plan {
    /// The plan of `suite`.
    pub fn of<S: Suite>(suite: S) -> Plan {
        Plan {
            name: S::NAME,
            quick: suite.quick(),
            own_report: suite.own_report(),
            run: Box::new(move |env| suite.run(env)),
        }
    }

    /// Runs the suite.
    pub fn run(self, env: &Env) -> Result<SuiteOutput, SuiteError> {
        (self.run)(env)
    }
}

/// Every suite, in the order `nerve bench all` runs them.
pub fn all() -> impl Iterator<Item = &'static Registered> {
    crate::suites::ALL.iter()
}

/// The suites that have a `nerve bench <name>` of their own.
pub fn commands() -> impl Iterator<Item = &'static Registered> {
    all().filter(|s| s.command)
}

/// The suite `nerve bench <name>` runs.
pub fn command(name: &str) -> Option<&'static Registered> {
    commands().find(|s| s.name == name)
}

/// The role `name` of any suite.
pub fn role(name: &str) -> Option<&'static Role> {
    all().flat_map(|s| s.roles.iter()).find(|r| r.name == name)
}

/// Runs child role `name` with `args` (`nerve bench role <name> <args…>`).
pub fn run_role(name: &str, args: &[String]) -> Result<(), SuiteError> {
    match role(name) {
        Some(r) => (r.run)(args),
        None => Err(SuiteError::Invalid(format!(
            "unknown role {name:?}; known: {}",
            all()
                .flat_map(|s| s.roles.iter().map(|r| r.name))
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn names_and_roles_are_unique_and_every_command_has_out() {
        let names: BTreeSet<&str> = all().map(|s| s.name).collect();
        assert_eq!(names.len(), all().count());
        let roles: Vec<&str> = all().flat_map(|s| s.roles.iter().map(|r| r.name)).collect();
        let unique: BTreeSet<&str> = roles.iter().copied().collect();
        assert_eq!(unique.len(), roles.len(), "{roles:?}");
        for s in commands() {
            let cmd = s.options();
            assert_eq!(cmd.get_name(), s.name);
            let out = cmd
                .get_arguments()
                .find(|a| a.get_id() == "out")
                .unwrap_or_else(|| panic!("{} has no --out", s.name));
            assert_eq!(out.get_default_values(), ["nerve-report"], "{}", s.name);
            assert!(cmd.get_arguments().any(|a| a.get_id() == "quick"));
        }
    }

    #[test]
    fn an_unknown_role_names_the_known_ones() {
        let e = run_role("juggler", &[]).unwrap_err().to_string();
        assert!(
            e.contains("unknown role \"juggler\"") && e.contains("timer-cycle"),
            "{e}"
        );
    }
}
