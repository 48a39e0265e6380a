//! `nerve router`: a Zenoh router for fleets whose hosts meet through one (robots behind
//! a base station). A thin adapter over [`nerve::net::Router`].

use crate::failure::CmdResult;
use clap::Args;
use std::path::PathBuf;

/// Arguments of `nerve router`.
#[derive(Args)]
pub struct RouterArgs {
    /// Zenoh JSON5 file (endpoints, TLS, access control); its mode is set to router.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Endpoints to listen on, e.g. tcp/0.0.0.0:7447 (comma-separated; overrides the
    /// file's; Zenoh's default without either).
    #[arg(long, value_delimiter = ',')]
    listen: Vec<String>,
}

/// Runs `nerve router` until Ctrl-C or SIGTERM.
pub fn run(args: RouterArgs) -> CmdResult {
    let router = nerve::net::Router::open(args.config.as_deref(), &args.listen)?;
    println!(
        "router {} listening on {}",
        router.id(),
        router.locators().join(", ")
    );
    let seen = nerve::shutdown::requests();
    while nerve::shutdown::wait(seen, std::time::Duration::from_secs(3600)) == seen {}
    Ok(())
}
