//! Entities of other hosts, for the list commands (the network plane must be on:
//! `NERVE_NETWORK=on` or `NERVE_ZENOH_CONFIG`).

use nerve::net::{EntityKind, RemoteEntity};
use std::collections::BTreeMap;
use std::time::Duration;

/// How long a list command listens for other hosts' entities.
pub const DISCOVERY_WINDOW: Duration = Duration::from_millis(1500);

/// This host's name and the other hosts' entities (none while the network plane is off).
pub fn discover(ctx: &nerve::Context) -> anyhow::Result<(String, Vec<RemoteEntity>)> {
    let Some(host) = nerve::net::local_host(ctx.config())? else {
        return Ok(("local".into(), Vec::new()));
    };
    Ok((
        host,
        nerve::net::remote_entities(ctx.config(), DISCOVERY_WINDOW)?,
    ))
}

/// Endpoints of one name on one remote host.
#[derive(Debug, Default)]
pub struct Endpoints {
    /// Type name.
    pub type_name: String,
    /// Publishers (or servers).
    pub senders: usize,
    /// Subscribers (or clients).
    pub receivers: usize,
}

/// Remote endpoints of `senders`/`receivers` kinds grouped by (name, host).
pub fn group(
    entities: &[RemoteEntity],
    senders: EntityKind,
    receivers: EntityKind,
) -> BTreeMap<(String, String), Endpoints> {
    let mut out: BTreeMap<(String, String), Endpoints> = BTreeMap::new();
    for e in entities {
        if e.kind != senders && e.kind != receivers {
            continue;
        }
        let g = out.entry((e.name.clone(), e.host.clone())).or_default();
        g.type_name = e.type_name.clone();
        if e.kind == senders {
            g.senders += 1;
        } else {
            g.receivers += 1;
        }
    }
    out
}

/// Table rows of grouped remote endpoints: name, type, host, senders, receivers.
pub fn table_rows(groups: &BTreeMap<(String, String), Endpoints>) -> Vec<Vec<String>> {
    groups
        .iter()
        .map(|((name, host), e)| {
            vec![
                name.clone(),
                e.type_name.clone(),
                host.clone(),
                e.senders.to_string(),
                e.receivers.to_string(),
            ]
        })
        .collect()
}

/// JSON objects of grouped remote endpoints, counts under the given keys.
pub fn json_rows(
    groups: &BTreeMap<(String, String), Endpoints>,
    (senders, receivers): (&str, &str),
) -> Vec<serde_json::Value> {
    groups
        .iter()
        .map(|((name, host), e)| {
            serde_json::json!({"name": name, "type": e.type_name, "host": host,
                senders: e.senders, receivers: e.receivers, "remote": true})
        })
        .collect()
}
