//! `nerve types gen-cpp` and `nerve types gen-c`: C++ and C message headers from Nerve
//! schemas.

use crate::failure::{usage, CmdResult, Failure};
use anyhow::Context as _;
use nerve::message::schema::Schema;
use nerve_c::codegen::{self, Lang};
use std::path::{Path, PathBuf};

/// Options of `types gen-cpp` and `types gen-c`.
#[derive(clap::Args)]
pub struct GenArgs {
    /// Directory the headers go to (as `<dir>/nerve/msgs/imu.hpp` or `imu.h`,
    /// `<dir>/my_pkg/pose.hpp`).
    #[arg(long, value_name = "DIR", default_value = "include")]
    pub out: PathBuf,
    /// A schema text file: one `nerve-schema/1|…` line, as `nerve topic info --format json`
    /// shows it (a text whose hash is all zeros, as NERVE_MESSAGE writes it, gets the hash
    /// its layout computes to). Repeatable.
    #[arg(long = "schema", value_name = "FILE")]
    pub schemas: Vec<PathBuf>,
    /// A topic whose recorded schema to generate from (this host's, or another host's
    /// publishers'). Repeatable.
    #[arg(long = "topic", value_name = "NAME")]
    pub topics: Vec<String>,
}

/// Runs `types gen-cpp` (`lang` C++) or `types gen-c` (`lang` C): the selected schemas'
/// headers, or every built-in type's when none is selected. `ctx` makes a context, for
/// `--topic` only.
pub fn run(
    args: &GenArgs,
    lang: Lang,
    ctx: impl FnOnce() -> Result<nerve::Context, Failure>,
) -> CmdResult {
    let headers = if args.schemas.is_empty() && args.topics.is_empty() {
        codegen::builtin_headers_in(lang)
            .with_context(|| format!("generating the built-in {lang} headers"))?
    } else {
        let mut schemas = Vec::new();
        for file in &args.schemas {
            schemas.push(schema_file(file)?);
        }
        if !args.topics.is_empty() {
            let ctx = ctx()?;
            for topic in &args.topics {
                schemas.push(topic_schema(&ctx, topic)?);
            }
        }
        codegen::headers(lang, &schemas, &[], &[])
            .with_context(|| format!("generating {lang} headers"))?
    };
    write(&args.out, &headers)
}

/// Writes the headers under `out` (leaving unchanged files untouched, so that builds do
/// not redo their work) and says what it did with each.
fn write(out: &Path, headers: &[(PathBuf, String)]) -> CmdResult {
    let mut written = 0;
    for (rel, text) in headers {
        let path = out.join(rel);
        if std::fs::read_to_string(&path).is_ok_and(|old| old == *text) {
            println!("unchanged {}", path.display());
            continue;
        }
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("creating directory {}", dir.display()))?;
        }
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
        println!("wrote {}", path.display());
        written += 1;
    }
    println!(
        "{} headers in {} ({written} written)",
        headers.len(),
        out.display()
    );
    Ok(())
}

/// The schema in a text file: one `nerve-schema/1` line, checked (and sealed if it is
/// unsealed).
fn schema_file(file: &Path) -> Result<Schema, Failure> {
    let text = std::fs::read_to_string(file)
        .with_context(|| format!("reading schema file {}", file.display()))?;
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let [line] = lines[..] else {
        return Err(usage(format!(
            "schema file {}: expected one nerve-schema/1 line, found {}",
            file.display(),
            lines.len()
        )));
    };
    codegen::seal(line).map_err(|e| usage(format!("schema file {}: {e}", file.display())))
}

/// The schema of the type on `topic`: recorded on this host's topic, offered by another
/// host's publishers, or the built-in one of the type it carries.
fn topic_schema(ctx: &nerve::Context, topic: &str) -> Result<Schema, Failure> {
    nerve::name::validate_topic(topic).map_err(|e| usage(e.to_string()))?;
    let node = crate::topic::cli_node(ctx)?;
    let builtin = |name: &str, hash: u64| {
        nerve_msgs::schemas()
            .into_iter()
            .find(|s| s.name == name && s.layout_hash == hash)
    };
    match nerve::introspect::topic_info(&node, topic) {
        Ok(info) => match info.schema {
            Some(Ok(schema)) => Ok(schema),
            Some(Err(e)) => Err(Failure::Runtime(anyhow::anyhow!(
                "topic {topic}: its schema cannot be used: {e}"
            ))),
            None => builtin(&info.type_info.name, info.type_info.layout_hash).ok_or_else(|| {
                Failure::Runtime(anyhow::anyhow!(
                    "topic {topic}: it records no schema of its type {}",
                    info.type_info.name
                ))
            }),
        },
        Err(_) => match crate::topic::remote_type(ctx, topic)? {
            Some(crate::topic::Remote::Described(schema)) => Ok(schema),
            Some(crate::topic::Remote::Known(ty)) => {
                builtin(&ty.name, ty.layout_hash).ok_or_else(|| {
                    Failure::Runtime(anyhow::anyhow!(
                        "topic {topic}: no schema of its type {}",
                        ty.name
                    ))
                })
            }
            None => Err(Failure::Runtime(anyhow::anyhow!(
                "topic {topic} does not exist"
            ))),
        },
    }
}
