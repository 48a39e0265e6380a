//! `nerve param …`: read and set the parameters of running nodes.

use crate::failure::{usage, CmdResult, Failure};
use crate::output::{self, Format, FormatArg};
use clap::{Subcommand, ValueEnum};
use nerve::param::{ParamClient, ParamError, ParamFile, ParamValue, SERVICE_SUFFIX};
use serde_json::json;
use std::path::PathBuf;
use std::time::Duration;

/// Parameter commands.
#[derive(Subcommand)]
pub enum ParamCommand {
    /// List the nodes that have parameters, or one node's parameters.
    List {
        /// A node's full name, e.g. /robot1/driver (all nodes if left out).
        node: Option<String>,
        #[command(flatten)]
        format: FormatArg,
        #[command(flatten)]
        wait: WaitArg,
    },
    /// Print parameter values.
    Get {
        /// The node.
        node: String,
        /// Parameter names.
        #[arg(required = true)]
        names: Vec<String>,
        #[command(flatten)]
        format: FormatArg,
        #[command(flatten)]
        wait: WaitArg,
    },
    /// Set parameters: NAME VALUE pairs, values written as YAML (1, 1.5, true, text,
    /// [1, 2]).
    Set {
        /// The node.
        node: String,
        /// NAME VALUE [NAME VALUE ...]
        #[arg(required = true, num_args = 2.., value_names = ["NAME", "VALUE"])]
        pairs: Vec<String>,
        /// All or nothing: if one value is refused, none changes.
        #[arg(long)]
        atomic: bool,
        #[command(flatten)]
        wait: WaitArg,
    },
    /// Print parameters' types, values and declarations.
    Describe {
        /// The node.
        node: String,
        /// Parameter names.
        #[arg(required = true)]
        names: Vec<String>,
        #[command(flatten)]
        format: FormatArg,
        #[command(flatten)]
        wait: WaitArg,
    },
    /// Write all of a node's parameters as a parameter file (to stdout or a file).
    Dump {
        /// The node.
        node: String,
        /// The file to write (stdout if left out).
        #[arg(long, short)]
        output: Option<PathBuf>,
        /// File format.
        #[arg(long = "as", value_enum, default_value_t = DumpFormat::Yaml)]
        as_: DumpFormat,
        #[command(flatten)]
        wait: WaitArg,
    },
    /// Set a node's parameters from a parameter file (YAML or TOML), all or nothing.
    Load {
        /// The node.
        node: String,
        /// The file: entries matching the node (exactly or by wildcard) apply.
        file: PathBuf,
        /// Set them one by one instead (each may fail on its own).
        #[arg(long)]
        each: bool,
        #[command(flatten)]
        wait: WaitArg,
    },
}

/// How long to wait for a node.
#[derive(clap::Args, Clone, Copy)]
pub struct WaitArg {
    /// How long to wait for the node and its answer, in ms.
    #[arg(long, default_value_t = 3000)]
    timeout: u64,
}

/// Formats of `param dump`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum DumpFormat {
    /// A YAML parameter file.
    Yaml,
    /// JSON.
    Json,
}

fn client(node: &nerve::Node, target: &str, wait: WaitArg) -> Result<ParamClient, Failure> {
    let timeout = Duration::from_millis(wait.timeout);
    let c = ParamClient::create(node, target)
        .map_err(|e| match e {
            ParamError::Service(nerve::ServiceError::Name(_)) => usage(format!(
                "{target:?} is not a node name (/name or /namespace/name)"
            )),
            e => Failure::Runtime(e.into()),
        })?
        .timeout(timeout);
    if !c.wait_for_node(timeout) {
        return Err(Failure::Runtime(anyhow::anyhow!(
            "node {}: no parameter service within {timeout:?} (is it running, and does it \
             create Parameters?)",
            c.target()
        )));
    }
    Ok(c)
}

/// Runs a parameter command.
pub fn run(ctx: &nerve::Context, cmd: ParamCommand) -> CmdResult {
    let node = ctx
        .node(&format!("nerve_param_{}", std::process::id()))
        .create()?;
    match cmd {
        ParamCommand::List {
            node: None, format, ..
        } => {
            let nodes: Vec<String> = nerve::introspect::list_services(&node)
                .map_err(anyhow::Error::msg)?
                .into_iter()
                .filter(|s| s.servers > 0)
                .filter_map(|s| s.name.strip_suffix(SERVICE_SUFFIX).map(String::from))
                .collect();
            match format.format {
                Format::Json => output::json(&json!(nodes))?,
                Format::Human => nodes.iter().for_each(|n| println!("{n}")),
            }
        }
        ParamCommand::List {
            node: Some(target),
            format,
            wait,
        } => {
            let names = client(&node, &target, wait)?.list("")?;
            match format.format {
                Format::Json => output::json(&json!(names))?,
                Format::Human => names.iter().for_each(|n| println!("{n}")),
            }
        }
        ParamCommand::Get {
            node: target,
            names,
            format,
            wait,
        } => {
            let refs: Vec<&str> = names.iter().map(String::as_str).collect();
            let c = client(&node, &target, wait)?;
            let values = c.get(&refs)?;
            let missing: Vec<&str> = refs
                .iter()
                .zip(&values)
                .filter(|(_, v)| v.is_none())
                .map(|(n, _)| *n)
                .collect();
            match format.format {
                Format::Json => {
                    let m: serde_json::Map<String, serde_json::Value> = refs
                        .iter()
                        .zip(&values)
                        .map(|(n, v)| {
                            (
                                n.to_string(),
                                v.as_ref().map_or(json!(null), |v| v.to_json()),
                            )
                        })
                        .collect();
                    output::json(&json!(m))?
                }
                Format::Human => {
                    for (n, v) in refs.iter().zip(&values) {
                        if let Some(v) = v {
                            println!("{n}: {v}");
                        }
                    }
                }
            }
            if !missing.is_empty() {
                return Err(Failure::Runtime(anyhow::anyhow!(
                    "node {}: no parameter {}",
                    c.target(),
                    missing.join(", ")
                )));
            }
        }
        ParamCommand::Set {
            node: target,
            pairs,
            atomic,
            wait,
        } => {
            if pairs.len() % 2 != 0 {
                return Err(usage(format!(
                    "set takes NAME VALUE pairs; {:?} has no value",
                    pairs.last().map(String::as_str).unwrap_or("")
                )));
            }
            let mut values = Vec::new();
            for p in pairs.chunks(2) {
                nerve::param::check_name(&p[0]).map_err(|e| usage(e.to_string()))?;
                let v = ParamValue::parse(&p[1])
                    .map_err(|e| usage(format!("value of {}: {e}", p[0])))?;
                values.push((p[0].clone(), v));
            }
            let c = client(&node, &target, wait)?;
            if atomic {
                c.set_atomically(values.clone())?;
                for (n, v) in &values {
                    println!("{n} = {v}");
                }
            } else {
                let results = c.set_each(values.clone())?;
                let mut failed = 0;
                for ((n, v), r) in values.iter().zip(results) {
                    match r {
                        Ok(()) => println!("{n} = {v}"),
                        Err(e) => {
                            failed += 1;
                            eprintln!("{n}: {e}");
                        }
                    }
                }
                if failed > 0 {
                    return Err(Failure::Runtime(anyhow::anyhow!(
                        "{failed} of {} parameters refused",
                        values.len()
                    )));
                }
            }
        }
        ParamCommand::Describe {
            node: target,
            names,
            format,
            wait,
        } => {
            let refs: Vec<&str> = names.iter().map(String::as_str).collect();
            let c = client(&node, &target, wait)?;
            let infos = c.describe(&refs)?;
            let mut rows = Vec::new();
            let mut all = Vec::new();
            for (n, info) in refs.iter().zip(infos) {
                let Some(i) = info else {
                    return Err(Failure::Runtime(anyhow::anyhow!(
                        "node {}: no parameter {n}",
                        c.target()
                    )));
                };
                let d = &i.descriptor;
                let range = d.range.map_or(String::new(), |r| {
                    if r.step > 0.0 {
                        format!("{}..={} step {}", r.min, r.max, r.step)
                    } else {
                        format!("{}..={}", r.min, r.max)
                    }
                });
                let mut flags = Vec::new();
                if d.read_only {
                    flags.push("read-only");
                }
                if d.dynamic_typing {
                    flags.push("dynamic");
                }
                rows.push(vec![
                    i.name.clone(),
                    i.ty.to_string(),
                    i.value.to_string(),
                    range.clone(),
                    flags.join(","),
                    d.description.clone(),
                ]);
                all.push(json!({
                    "name": i.name, "type": i.ty.name(), "value": i.value.to_json(),
                    "range": d.range.map(|r| json!({"min": r.min, "max": r.max, "step": r.step})),
                    "read_only": d.read_only, "dynamic_typing": d.dynamic_typing,
                    "description": d.description,
                }));
            }
            match format.format {
                Format::Json => output::json(&json!(all))?,
                Format::Human => output::table(
                    &["NAME", "TYPE", "VALUE", "RANGE", "FLAGS", "DESCRIPTION"],
                    &rows,
                )?,
            }
        }
        ParamCommand::Dump {
            node: target,
            output: out,
            as_,
            wait,
        } => {
            let c = client(&node, &target, wait)?;
            let names = c.list("")?;
            let refs: Vec<&str> = names.iter().map(String::as_str).collect();
            let values: Vec<(String, ParamValue)> = names
                .iter()
                .cloned()
                .zip(c.get(&refs)?)
                .filter_map(|(n, v)| v.map(|v| (n, v)))
                .collect();
            let text = match as_ {
                DumpFormat::Yaml => nerve::param::to_yaml(c.target(), &values),
                DumpFormat::Json => {
                    let m: serde_json::Map<String, serde_json::Value> = values
                        .iter()
                        .map(|(n, v)| (n.clone(), v.to_json()))
                        .collect();
                    format!("{}\n", json!({ c.target(): m }))
                }
            };
            match out {
                Some(path) => std::fs::write(&path, text)
                    .map_err(|e| anyhow::anyhow!("writing {}: {e}", path.display()))?,
                None => print!("{text}"),
            }
        }
        ParamCommand::Load {
            node: target,
            file,
            each,
            wait,
        } => {
            // a bad file is the caller's mistake: exit 2, naming the file and line
            let f = ParamFile::load(&file).map_err(|e| usage(e.to_string()))?;
            let c = client(&node, &target, wait)?;
            let values = f.values_for(c.target());
            if values.is_empty() {
                return Err(usage(format!(
                    "{}: no entry matches node {}",
                    file.display(),
                    c.target()
                )));
            }
            if each {
                let results = c.set_each(values.clone())?;
                let failed = results.iter().filter(|r| r.is_err()).count();
                for ((n, _), r) in values.iter().zip(&results) {
                    if let Err(e) = r {
                        eprintln!("{n}: {e}");
                    }
                }
                println!(
                    "set {} of {} parameters",
                    values.len() - failed,
                    values.len()
                );
                if failed > 0 {
                    return Err(Failure::Runtime(anyhow::anyhow!(
                        "{failed} parameters refused"
                    )));
                }
            } else {
                c.set_atomically(values.clone())?;
                println!("set {} parameters", values.len());
            }
        }
    }
    Ok(())
}
