//! `nerve policy`: check an access-control policy file and show the Zenoh settings it
//! generates (a thin adapter over [`nerve::net::policy`]).

use crate::failure::{CmdResult, Failure};
use clap::Subcommand;
use nerve::net::policy::{Permission, Policy};
use std::path::PathBuf;

/// `nerve policy …`.
#[derive(Subcommand)]
pub enum PolicyCommand {
    /// Check a policy file: every error names the file and line (exit 1 when it has one).
    Check {
        /// The policy file (TOML).
        file: PathBuf,
    },
    /// Print the Zenoh configuration (JSON5) the policy adds for one host: exactly what
    /// Zenoh enforces.
    Zenoh {
        /// The policy file (TOML).
        file: PathBuf,
        /// The host (its certificate's common name); default: NERVE_HOST_NAME, the
        /// configuration's host_name, else the kernel's host name.
        #[arg(long)]
        host: Option<String>,
    },
}

/// Runs a `nerve policy` command; `host` is the configured host name, if any.
pub fn run(host: Option<String>, c: PolicyCommand) -> CmdResult {
    match c {
        PolicyCommand::Check { file } => {
            let p = load(&file)?;
            let hosts: usize = p.subjects.iter().map(|(_, h)| h.len()).sum();
            println!(
                "{}: ok: default {}, {} subject(s) naming {hosts} host(s), {} rule(s), {}",
                file.display(),
                match p.default {
                    Permission::Allow => "allow",
                    Permission::Deny => "deny",
                },
                p.subjects.len(),
                p.rules.len(),
                if p.tls.is_some() {
                    "mutual TLS from [tls]"
                } else {
                    "no [tls]: the Zenoh configuration must set mutual TLS (subjects are \
                     certificate common names)"
                }
            );
            Ok(())
        }
        PolicyCommand::Zenoh { file, host: named } => {
            let p = load(&file)?;
            let host = named.or(host).unwrap_or_else(|| {
                std::fs::read_to_string("/proc/sys/kernel/hostname")
                    .map(|s| s.trim().to_string())
                    .unwrap_or_else(|_| "host".into())
            });
            print!("{}", p.zenoh_json5(&host));
            Ok(())
        }
    }
}

fn load(file: &std::path::Path) -> Result<Policy, Failure> {
    Policy::load(file).map_err(|e| Failure::Runtime(e.into()))
}
