//! Joining trace events into hops, stages and chains.
//!
//! For a sample of topic A published at `p`, taken at `t` by a subscriber that asked for
//! a sample at `r`:
//! - **wait** = `max(0, r - p)`: the sample waited for its subscriber to ask (the
//!   subscriber was busy, or polls);
//! - **transport** = `t - max(p, r)`: from the moment both were ready to delivery (the
//!   queue, the wake-up, the copy if any).
//!
//! A **stage** turns a taken sample into a published one on the same thread: its
//! **callback** time runs from the take to that publish. A **chain** starts at a sample
//! published with no cause (a driver) and follows takes and the publishes they caused to
//! each final take; its **end-to-end** time runs from the first publish to the last take.

use super::{Event, Kind};
use std::collections::{BTreeMap, HashMap};

/// A distribution in ns, every value kept.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct Stats {
    /// Values.
    pub count: usize,
    /// Median.
    pub p50: u64,
    /// 99th percentile.
    pub p99: u64,
    /// Largest.
    pub max: u64,
}

impl Stats {
    fn of(mut v: Vec<u64>) -> Stats {
        if v.is_empty() {
            return Stats::default();
        }
        v.sort_unstable();
        let q = |x: f64| v[((v.len() - 1) as f64 * x).round() as usize];
        Stats {
            count: v.len(),
            p50: q(0.5),
            p99: q(0.99),
            max: v[v.len() - 1],
        }
    }
}

/// What a part of a chain was.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum SegmentKind {
    /// Waiting for the subscriber to ask.
    Wait,
    /// Publish to delivery.
    Transport,
    /// Take to the publish it caused.
    Callback,
}

/// One part of a chain on the timeline.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Segment {
    /// What it was.
    pub kind: SegmentKind,
    /// The topic (wait, transport) or the stage `A -> B` (callback).
    pub label: String,
    /// Start, ns from the chain's first publish.
    pub start_ns: u64,
    /// End, ns from the chain's first publish.
    pub end_ns: u64,
}

/// One sample's way from its origin to one final take.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Chain {
    /// Topics in order, `A -> B -> C`.
    pub path: String,
    /// When the origin was published (monotonic ns).
    pub origin_ns: u64,
    /// End to end, ns.
    pub total_ns: u64,
    /// Its parts in order.
    pub segments: Vec<Segment>,
}

/// Per-hop, per-stage and end-to-end latency of a trace.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Report {
    /// Per topic: (topic, wait, transport).
    pub hops: Vec<(String, Stats, Stats)>,
    /// Per stage `A -> B`: callback time.
    pub stages: Vec<(String, Stats)>,
    /// Per path `A -> B -> C`: end to end.
    pub paths: Vec<(String, Stats)>,
    /// The last chains of each path (at most `keep` each), for the timeline.
    pub chains: Vec<Chain>,
    /// Events read.
    pub events: usize,
    /// Takes whose publish is not in the trace (a publisher that did not trace).
    pub unmatched_takes: usize,
}

type Key = (u64, u64);

/// Analyses `events`, keeping the last `keep` chains of each path for a timeline.
pub fn analyze(events: &[Event], keep: usize) -> Report {
    let mut publishes: HashMap<Key, &Event> = HashMap::new();
    let mut takes: HashMap<Key, Vec<&Event>> = HashMap::new();
    // publishes caused by a sample, by the thread that took it
    let mut caused: HashMap<(Key, u32, u32), Vec<&Event>> = HashMap::new();
    for e in events {
        let key = (e.publisher_id, e.seq);
        match e.kind {
            Kind::Publish => {
                publishes.insert(key, e);
                if let Some(c) = e.cause {
                    caused.entry((c, e.pid, e.tid)).or_default().push(e);
                }
            }
            Kind::Take => takes.entry(key).or_default().push(e),
        }
    }
    let mut report = Report {
        events: events.len(),
        ..Report::default()
    };
    let mut hop_wait: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    let mut hop_transport: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    for list in takes.values() {
        for t in list {
            let published = publishes
                .get(&(t.publisher_id, t.seq))
                .map_or(t.published_ns, |p| p.at_ns);
            if !publishes.contains_key(&(t.publisher_id, t.seq)) {
                report.unmatched_takes += 1;
            }
            hop_wait
                .entry(&t.topic)
                .or_default()
                .push(t.ready_ns.saturating_sub(published));
            hop_transport
                .entry(&t.topic)
                .or_default()
                .push(t.at_ns.saturating_sub(published.max(t.ready_ns)));
        }
    }
    report.hops = hop_wait
        .into_iter()
        .map(|(topic, w)| {
            let tr = hop_transport.remove(topic).unwrap_or_default();
            (topic.to_string(), Stats::of(w), Stats::of(tr))
        })
        .collect();

    let mut stage: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for list in takes.values() {
        for t in list {
            for p in caused
                .get(&((t.publisher_id, t.seq), t.pid, t.tid))
                .into_iter()
                .flatten()
            {
                stage
                    .entry(format!("{} -> {}", t.topic, p.topic))
                    .or_default()
                    .push(p.at_ns.saturating_sub(t.at_ns));
            }
        }
    }
    report.stages = stage.into_iter().map(|(k, v)| (k, Stats::of(v))).collect();

    // chains from every origin, in publish order
    let mut origins: Vec<&Event> = publishes
        .values()
        .copied()
        .filter(|p| p.cause.is_none())
        .collect();
    origins.sort_by_key(|p| p.at_ns);
    let mut by_path: BTreeMap<String, Vec<Chain>> = BTreeMap::new();
    for o in origins {
        let mut out = Vec::new();
        follow(
            o,
            o.at_ns,
            vec![o.topic.clone()],
            Vec::new(),
            &takes,
            &caused,
            &mut out,
            0,
        );
        for c in out {
            by_path.entry(c.path.clone()).or_default().push(c);
        }
    }
    for (path, chains) in by_path {
        report
            .paths
            .push((path, Stats::of(chains.iter().map(|c| c.total_ns).collect())));
        let skip = chains.len().saturating_sub(keep);
        report.chains.extend(chains.into_iter().skip(skip));
    }
    report
}

/// Most stages a chain is followed through (a cycle of topics ends there).
const MAX_DEPTH: usize = 32;

#[allow(clippy::too_many_arguments)]
fn follow(
    p: &Event,
    origin: u64,
    path: Vec<String>,
    segments: Vec<Segment>,
    takes: &HashMap<Key, Vec<&Event>>,
    caused: &HashMap<(Key, u32, u32), Vec<&Event>>,
    out: &mut Vec<Chain>,
    depth: usize,
) {
    let Some(list) = takes.get(&(p.publisher_id, p.seq)) else {
        return;
    };
    for t in list {
        let rel = |ns: u64| ns.saturating_sub(origin);
        let ready = t.ready_ns.max(p.at_ns);
        let mut segs = segments.clone();
        if ready > p.at_ns {
            segs.push(Segment {
                kind: SegmentKind::Wait,
                label: t.topic.clone(),
                start_ns: rel(p.at_ns),
                end_ns: rel(ready),
            });
        }
        segs.push(Segment {
            kind: SegmentKind::Transport,
            label: t.topic.clone(),
            start_ns: rel(ready),
            end_ns: rel(t.at_ns),
        });
        let next = caused
            .get(&((t.publisher_id, t.seq), t.pid, t.tid))
            .filter(|_| depth < MAX_DEPTH);
        match next {
            Some(ps) if !ps.is_empty() => {
                for n in ps {
                    let mut s = segs.clone();
                    s.push(Segment {
                        kind: SegmentKind::Callback,
                        label: format!("{} -> {}", t.topic, n.topic),
                        start_ns: rel(t.at_ns),
                        end_ns: rel(n.at_ns),
                    });
                    let mut path = path.clone();
                    path.push(n.topic.clone());
                    follow(n, origin, path, s, takes, caused, out, depth + 1);
                }
            }
            _ => out.push(Chain {
                path: path.join(" -> "),
                origin_ns: origin,
                total_ns: rel(t.at_ns),
                segments: segs,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn publish(topic: &str, id: u64, seq: u64, at: u64, cause: Option<Key>, tid: u32) -> Event {
        Event {
            kind: Kind::Publish,
            topic: topic.into(),
            publisher_id: id,
            seq,
            published_ns: at,
            ready_ns: 0,
            at_ns: at,
            cause,
            pid: 1,
            tid,
        }
    }

    fn take(topic: &str, id: u64, seq: u64, pub_at: u64, ready: u64, at: u64, tid: u32) -> Event {
        Event {
            kind: Kind::Take,
            topic: topic.into(),
            publisher_id: id,
            seq,
            published_ns: pub_at,
            ready_ns: ready,
            at_ns: at,
            cause: None,
            pid: 1,
            tid,
        }
    }

    #[test]
    fn a_three_stage_chain_is_split_into_its_parts() {
        // driver (tid 1) -> /raw -> filter (tid 2) -> /filtered -> app (tid 3)
        let events = vec![
            publish("/raw", 10, 1, 1_000, None, 1),
            // the filter was waiting: no wait, 50 ns transport
            take("/raw", 10, 1, 1_000, 900, 1_050, 2),
            publish("/filtered", 20, 1, 1_450, Some((10, 1)), 2),
            // the app asked 100 ns after the publish: 100 wait, 30 transport
            take("/filtered", 20, 1, 1_450, 1_550, 1_580, 3),
        ];
        let r = analyze(&events, 10);
        assert_eq!(r.hops.len(), 2);
        let raw = &r.hops.iter().find(|h| h.0 == "/raw").unwrap();
        assert_eq!((raw.1.p50, raw.2.p50), (0, 50));
        let filtered = &r.hops.iter().find(|h| h.0 == "/filtered").unwrap();
        assert_eq!((filtered.1.p50, filtered.2.p50), (100, 30));
        assert_eq!(
            r.stages,
            vec![(
                "/raw -> /filtered".to_string(),
                Stats {
                    count: 1,
                    p50: 400,
                    p99: 400,
                    max: 400
                }
            )]
        );
        assert_eq!(r.paths.len(), 1);
        assert_eq!(r.paths[0].0, "/raw -> /filtered");
        assert_eq!(r.paths[0].1.max, 580);
        let kinds: Vec<SegmentKind> = r.chains[0].segments.iter().map(|s| s.kind).collect();
        assert_eq!(
            kinds,
            [
                SegmentKind::Transport,
                SegmentKind::Callback,
                SegmentKind::Wait,
                SegmentKind::Transport
            ]
        );
        assert_eq!(r.unmatched_takes, 0);
    }
}
