//! The report's summary: for every seed, Nerve beside the best peer measured in the same
//! run, ROS 2 measured in the same run (rclpy, where the suite runs it) and the best figure
//! the seed publishes (quoted, measured elsewhere), as ratios. Rows are picked from the suites'
//! JSON rows (`report.json`'s `results`), so the summary says exactly what the tables below
//! it say; a suite that did not run shows "not run".
//!
//! Every figure of the summary is a time, lower is better, and every ratio is Nerve's
//! figure over the other one (below 1: Nerve is faster).

use crate::report::human_bytes;
use crate::report::num;
use crate::report::published;
use serde::Serialize;
use serde_json::Value;

/// A figure of the summary and whose it is.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Labelled {
    /// System (and mode) the figure belongs to.
    pub label: String,
    /// The figure, in the row's unit.
    pub value: f64,
}

/// What one cell of the summary holds.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Cell {
    /// A figure.
    Figure(Labelled),
    /// The suite ran without this figure (skipped, or no such system in the suite); why.
    Missing(String),
    /// The suite did not run.
    NotRun,
}

impl Cell {
    fn value(&self) -> Option<f64> {
        match self {
            Cell::Figure(l) => Some(l.value),
            _ => None,
        }
    }

    fn text(&self) -> String {
        match self {
            Cell::Figure(l) => format!("{} ({})", num(l.value), l.label),
            Cell::Missing(why) => why.clone(),
            Cell::NotRun => "not run".into(),
        }
    }
}

/// One line of the summary: one measure of one seed.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SummaryRow {
    /// The seed ("000" … "004").
    pub seed: &'static str,
    /// The suite that reproduces it.
    pub suite: &'static str,
    /// What is compared, where (lower is better).
    pub what: String,
    /// Unit of every figure of the row.
    pub unit: &'static str,
    /// Nerve, as a user gets it by default.
    pub nerve: Cell,
    /// The best (lowest) peer of the same run at the same point.
    pub peer: Cell,
    /// ROS 2 measured in the same run at the same point (rclpy, its faster executor).
    pub ros2: Cell,
    /// The best (lowest) figure the seed publishes for that point, measured elsewhere.
    pub published: Cell,
}

impl SummaryRow {
    /// Nerve's figure over the best peer's.
    pub fn vs_peer(&self) -> Option<f64> {
        ratio(self.nerve.value()?, self.peer.value()?)
    }

    /// Nerve's figure over ROS 2's, measured in the same run.
    pub fn vs_ros2(&self) -> Option<f64> {
        ratio(self.nerve.value()?, self.ros2.value()?)
    }

    /// Nerve's figure over the published one.
    pub fn vs_published(&self) -> Option<f64> {
        ratio(self.nerve.value()?, self.published.value()?)
    }
}

fn ratio(a: f64, b: f64) -> Option<f64> {
    (a.is_finite() && b.is_finite() && b != 0.0).then(|| a / b)
}

/// A test on a row of `report.json`.
type RowTest = Box<dyn Fn(&Value) -> bool>;
/// A figure taken from a row of `report.json`.
type RowFigure = Box<dyn Fn(&Value) -> Option<f64>>;

/// One measure of a suite's rows: which rows are the point, which of them is Nerve's, and
/// the figure to take from a row.
struct Measure {
    seed: &'static str,
    suite: &'static str,
    what: String,
    unit: &'static str,
    /// Rows of the point (every system).
    at: RowTest,
    /// Nerve's row among them (its default configuration).
    nerve: RowTest,
    /// Rows that are not peers (Nerve's other modes, the futex floor).
    not_peer: RowTest,
    /// The figure of a row.
    figure: RowFigure,
    /// Whether the suite runs ROS 2 (rclpy rows).
    ros2: bool,
    /// The published figures (the best is taken), each with whose it is.
    published: Vec<(String, f64)>,
}

fn str_of<'a>(row: &'a Value, key: &str) -> &'a str {
    row.get(key).and_then(Value::as_str).unwrap_or("")
}

fn f64_of(row: &Value, path: &[&str]) -> Option<f64> {
    let mut v = row;
    for k in path {
        v = v.get(k)?;
    }
    v.as_f64().filter(|x| x.is_finite())
}

fn label(row: &Value) -> String {
    let (s, m) = (str_of(row, "system"), str_of(row, "mode"));
    if m.is_empty() {
        s.to_string()
    } else {
        format!("{s} {m}")
    }
}

fn is(row: &Value, system: &str, mode: &str) -> bool {
    str_of(row, "system") == system && str_of(row, "mode") == mode
}

fn measures() -> Vec<Measure> {
    let mut out = Vec::new();
    for payload in [256usize, 1 << 20] {
        let at =
            move |r: &Value| r.get("payload_bytes").and_then(Value::as_u64) == Some(payload as u64);
        let published = published::seed_000(payload)
            .map(|(segar, ros)| {
                [
                    (&published::SEGAR, segar[1]),
                    (&published::ROS2_SERVICE, ros[1]),
                ]
                .into_iter()
                .filter_map(|(src, v)| Some((src.system.to_string(), v?)))
                .collect()
            })
            .unwrap_or_default();
        out.push(Measure {
            seed: "000",
            suite: "service",
            what: format!("round trip mean, {}", human_bytes(payload)),
            unit: "µs",
            at: Box::new(at),
            nerve: Box::new(|r| is(r, "nerve", "adaptive")),
            not_peer: Box::new(|r| str_of(r, "system") == "nerve"),
            figure: Box::new(|r| f64_of(r, &["rtt_us", "avg"])),
            ros2: true,
            published,
        });
    }
    for name in ["normal sensor", "high-end sensor"] {
        let Some(s) = published::CYBERRT_SCENARIOS.iter().find(|s| s.name == name) else {
            continue;
        };
        let (bytes, rate) = (s.payload_bytes as u64, u64::from(s.rate_hz));
        out.push(Measure {
            seed: "001",
            suite: "topic",
            what: format!(
                "one-way latency mean, {name} ({} @ {rate} Hz)",
                human_bytes(s.payload_bytes)
            ),
            unit: "µs",
            at: Box::new(move |r| {
                r.get("payload_bytes").and_then(Value::as_u64) == Some(bytes)
                    && r.get("rate_hz").and_then(Value::as_u64) == Some(rate)
                    && r.get("cross_host").and_then(Value::as_bool) != Some(true)
            }),
            nerve: Box::new(|r| is(r, "nerve", "adaptive")),
            not_peer: Box::new(|r| {
                let s = str_of(r, "system");
                s == "floor" || s.starts_with("nerve")
            }),
            figure: Box::new(|r| f64_of(r, &["latency_us", "avg"])),
            ros2: true,
            published: vec![(published::CYBERRT.system.into(), s.latency_us)],
        });
    }
    let runs_at_10: Vec<&published::TimerRun> = published::SEED_002
        .iter()
        .filter(|r| r.timeout_ms == 10)
        .collect();
    let timer_published = |pick: fn(&published::TimerRun) -> f64| {
        runs_at_10
            .iter()
            .map(|r| {
                (
                    published::ROS_TRANSITIONS.system.to_string(),
                    pick(r).abs() * 1e3,
                )
            })
            .collect::<Vec<_>>()
    };
    let timer =
        |what: &str, figure: fn(&Value) -> Option<f64>, published: Vec<(String, f64)>| Measure {
            seed: "002",
            suite: "timer",
            what: format!("{what}, 10 ms one-shot timeout"),
            unit: "µs",
            at: Box::new(|r| r.get("timeout_ms").and_then(Value::as_u64) == Some(10)),
            nerve: Box::new(|r| str_of(r, "system") == "nerve"),
            not_peer: Box::new(|r| str_of(r, "system").starts_with("nerve")),
            figure: Box::new(figure),
            ros2: false,
            published,
        };
    out.push(timer(
        "δ max",
        |r| f64_of(r, &["delta_us", "max"]),
        timer_published(|r| r.max_ms),
    ));
    out.push(timer(
        "|δ mean|",
        |r| f64_of(r, &["delta_us", "mean"]).map(f64::abs),
        timer_published(|r| r.mean_ms),
    ));
    let tuned = published::SEED_003_TUNED;
    let mode = format!("{}x10", tuned.columns);
    out.push(Measure {
        seed: "003",
        suite: "lidar",
        what: format!("end-to-end latency median, {mode} OS1-64"),
        unit: "µs",
        at: Box::new(move |r| {
            str_of(r, "lidar_mode") == mode && r.get("beams").and_then(Value::as_u64) == Some(64)
        }),
        nerve: Box::new(|r| is(r, "nerve", "adaptive")),
        not_peer: Box::new(|r| {
            let s = str_of(r, "system");
            s == "floor" || s.starts_with("nerve")
        }),
        figure: Box::new(|r| f64_of(r, &["e2e_latency_us", "median"])),
        ros2: false,
        published: vec![(
            format!("{}, {}", published::OUSTER_ROS2.system, tuned.case),
            tuned.e2e_median_ms * 1e3,
        )],
    });
    let horus = published::SEED_004
        .iter()
        .find(|(route, topo, _)| *route == "cross-process" && *topo == "1:1")
        .map(|(_, _, ns)| *ns);
    out.push(Measure {
        seed: "004",
        suite: "paths",
        what: "one-way P50, CmdVel cross-process 1:1".into(),
        unit: "ns",
        at: Box::new(|r| {
            str_of(r, "route") == "cross-process"
                && str_of(r, "topology") == "1:1"
                && str_of(r, "message") == "CmdVel"
        }),
        nerve: Box::new(|r| str_of(r, "system") == "nerve"),
        // Nerve's own C++ API is Nerve, not a peer
        not_peer: Box::new(|r| str_of(r, "system").starts_with("nerve")),
        figure: Box::new(|r| f64_of(r, &["one_way_us", "p50"]).map(|us| us * 1e3)),
        ros2: false,
        published: horus
            .map(|ns| (published::HORUS.system.to_string(), ns))
            .into_iter()
            .collect(),
    });
    out
}

/// The summary of a run from its rows (`report.json`'s `results`): one line per measure of
/// every seed, in seed order.
pub fn summarize(results: &[&Value]) -> Vec<SummaryRow> {
    measures()
        .into_iter()
        .map(|m| {
            let suite_rows: Vec<&Value> = results
                .iter()
                .copied()
                .filter(|r| str_of(r, "suite") == m.suite)
                .collect();
            let published = m
                .published
                .iter()
                .min_by(|a, b| a.1.total_cmp(&b.1))
                .map_or(Cell::Missing("none published".into()), |(l, v)| {
                    Cell::Figure(Labelled {
                        label: l.clone(),
                        value: *v,
                    })
                });
            if suite_rows.is_empty() {
                return SummaryRow {
                    seed: m.seed,
                    suite: m.suite,
                    what: m.what,
                    unit: m.unit,
                    nerve: Cell::NotRun,
                    peer: Cell::NotRun,
                    ros2: Cell::NotRun,
                    published,
                };
            }
            let point: Vec<&Value> = suite_rows.into_iter().filter(|r| (m.at)(r)).collect();
            let nerve = point
                .iter()
                .find(|r| (m.nerve)(r))
                .and_then(|r| {
                    Some(Cell::Figure(Labelled {
                        label: label(r),
                        value: (m.figure)(r)?,
                    }))
                })
                .unwrap_or_else(|| Cell::Missing("not measured".into()));
            let peer = point
                .iter()
                .filter(|r| !(m.not_peer)(r))
                .filter_map(|r| Some((label(r), (m.figure)(r)?)))
                .min_by(|a, b| a.1.total_cmp(&b.1))
                .map_or(
                    Cell::Missing("no peer measured".into()),
                    |(label, value)| Cell::Figure(Labelled { label, value }),
                );
            let ros2 = if !m.ros2 {
                Cell::Missing(format!("not run by the {} suite", m.suite))
            } else {
                point
                    .iter()
                    .filter(|r| str_of(r, "system") == "rclpy")
                    .filter_map(|r| Some((label(r), (m.figure)(r)?)))
                    .min_by(|a, b| a.1.total_cmp(&b.1))
                    .map_or(
                        Cell::Missing("rclpy not measured".into()),
                        |(label, value)| Cell::Figure(Labelled { label, value }),
                    )
            };
            SummaryRow {
                seed: m.seed,
                suite: m.suite,
                what: m.what,
                unit: m.unit,
                nerve,
                peer,
                ros2,
                published,
            }
        })
        .collect()
}

/// The summary as table cells: seed, measure, Nerve, best peer, Nerve / peer, published,
/// Nerve / published, then ROS 2 measured in the same run and Nerve / ROS 2.
pub fn table(rows: &[SummaryRow]) -> (Vec<&'static str>, Vec<Vec<String>>) {
    let head = vec![
        "seed",
        "measure (lower is better)",
        "Nerve",
        "best peer, same run",
        "Nerve / peer",
        "seed's best published (quoted, other hardware)",
        "Nerve / published",
        "ROS 2 measured, same run (rclpy)",
        "Nerve / ROS 2",
    ];
    // a ratio far below 1 also as "1/n": Nerve n times faster
    let x = |r: Option<f64>| {
        r.map_or("–".into(), |r| {
            if r > 0.0 && r < 0.1 {
                format!("{r:.4}× (1/{})", num(1.0 / r))
            } else {
                format!("{}×", num(r))
            }
        })
    };
    let cells = rows
        .iter()
        .map(|r| {
            vec![
                format!("{} ({})", r.seed, r.suite),
                format!("{} ({})", r.what, r.unit),
                r.nerve.text(),
                r.peer.text(),
                x(r.vs_peer()),
                r.published.text(),
                x(r.vs_published()),
                r.ros2.text(),
                x(r.vs_ros2()),
            ]
        })
        .collect();
    (head, cells)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn service(system: &str, mode: &str, payload: u64, avg: f64) -> Value {
        json!({"suite": "service", "system": system, "mode": mode, "payload_bytes": payload,
               "rtt_us": {"avg": avg, "p50": avg}})
    }

    #[test]
    fn the_summary_picks_nerve_the_best_peer_and_the_best_published_figure() {
        let rows = [
            service("nerve", "adaptive", 256, 10.0),
            // faster, but another Nerve mode is not a peer
            service("nerve", "spin", 256, 1.0),
            service("iceoryx2", "busy-poll", 256, 5.0),
            service("zenoh", "peer-tcp", 256, 150.0),
            // another payload is another point
            service("uds", "blocking", 1024, 0.5),
            service("nerve", "adaptive", 1 << 20, 500.0),
            json!({"suite": "timer", "system": "nerve", "timeout_ms": 10,
                   "delta_us": {"min": -3.0, "mean": -2.0, "p99": 8.0, "max": 40.0}}),
            json!({"suite": "timer", "system": "tokio-interval", "timeout_ms": 10,
                   "delta_us": {"min": -900.0, "mean": 0.5, "p99": 990.0, "max": 1000.0}}),
            json!({"suite": "timer", "system": "std-sleep", "timeout_ms": 5,
                   "delta_us": {"min": 1.0, "mean": 0.1, "p99": 3.0, "max": 4.0}}),
        ];
        let refs: Vec<&Value> = rows.iter().collect();
        let s = summarize(&refs);
        let seeds: Vec<&str> = s.iter().map(|r| r.seed).collect();
        assert_eq!(
            seeds,
            ["000", "000", "001", "001", "002", "002", "003", "004"]
        );

        let small = &s[0];
        assert_eq!(small.what, "round trip mean, 256 B");
        assert_eq!(
            small.nerve,
            Cell::Figure(Labelled {
                label: "nerve adaptive".into(),
                value: 10.0
            })
        );
        assert_eq!(
            small.peer,
            Cell::Figure(Labelled {
                label: "iceoryx2 busy-poll".into(),
                value: 5.0
            })
        );
        assert_eq!(small.vs_peer(), Some(2.0));
        // seeds/000 at 256 B: Segar 95.6 µs, ROS 2 91.2 µs; the lower one is taken
        assert_eq!(
            small.published,
            Cell::Figure(Labelled {
                label: "ROS 2 Humble".into(),
                value: 91.2
            })
        );
        assert_eq!(small.vs_published(), Some(10.0 / 91.2));

        let big = &s[1];
        assert_eq!(big.peer, Cell::Missing("no peer measured".into()));
        assert_eq!(
            (big.vs_peer(), big.vs_published()),
            (None, Some(500.0 / 715.0))
        );

        // the topic suite did not run
        assert_eq!((&s[2].nerve, &s[2].peer), (&Cell::NotRun, &Cell::NotRun));
        assert_eq!(
            s[2].published,
            Cell::Figure(Labelled {
                label: "CyberRT (Apollo 10.0)".into(),
                value: 82.29
            })
        );

        let max = &s[4];
        assert_eq!(max.vs_peer(), Some(40.0 / 1000.0));
        // the best of the seed's four runs at 10 ms: 2.15 ms
        let near = |v: Option<f64>, want: f64| v.is_some_and(|v| (v - want).abs() < 1e-6);
        assert!(near(max.published.value(), 2150.0), "{max:?}");
        let mean = &s[5];
        assert_eq!(
            (mean.nerve.value(), mean.peer.value()),
            (Some(2.0), Some(0.5))
        );
        assert!(near(mean.published.value(), 1042.0), "{mean:?}");

        let (head, cells) = table(&s);
        assert_eq!(cells.len(), s.len());
        assert!(cells.iter().all(|c| c.len() == head.len()));
        assert_eq!(cells[0][4], "2.00×");
        assert_eq!(cells[2][2], "not run");
        assert_eq!(cells[1][3], "no peer measured");
    }

    #[test]
    fn ros2_measured_in_the_run_stands_beside_nerve_and_the_quotes() {
        let topic = |system: &str, mode: &str, bytes: u64, rate: u64, avg: f64| {
            json!({"suite": "topic", "system": system, "mode": mode, "payload_bytes": bytes,
                   "rate_hz": rate, "cross_host": false, "latency_us": {"avg": avg}})
        };
        let rows = [
            service("nerve", "adaptive", 256, 10.0),
            service("rclpy", "single-threaded", 256, 300.0),
            service("rclpy", "events", 256, 250.0),
            topic("nerve", "adaptive", 1 << 20, 10, 80.0),
            topic("rclpy", "events", 1 << 20, 10, 12_000.0),
            json!({"suite": "timer", "system": "nerve", "timeout_ms": 10,
                   "delta_us": {"mean": 1.0, "max": 4.0}}),
        ];
        let refs: Vec<&Value> = rows.iter().collect();
        let s = summarize(&refs);
        assert_eq!(
            s[0].ros2,
            Cell::Figure(Labelled {
                label: "rclpy events".into(),
                value: 250.0
            })
        );
        assert_eq!(s[0].vs_ros2(), Some(0.04));
        // rclpy is a peer too, but never the best one here
        assert_eq!(s[0].peer.value(), Some(250.0));
        assert_eq!(s[1].ros2, Cell::Missing("rclpy not measured".into()));
        assert_eq!(s[2].vs_ros2(), Some(80.0 / 12_000.0));
        assert_eq!(s[3].ros2, Cell::Missing("rclpy not measured".into()));
        assert_eq!(
            s[4].ros2,
            Cell::Missing("not run by the timer suite".into())
        );
        assert_eq!(s[6].ros2, Cell::NotRun);
        let (head, cells) = table(&s);
        assert_eq!(head[7], "ROS 2 measured, same run (rclpy)");
        assert!(head[5].contains("quoted"));
        assert_eq!(cells[0][7], "250 (rclpy events)");
        assert_eq!(cells[0][8], "0.0400× (1/25.0)");
        // the published figure stays a quote of the seed
        assert_eq!(cells[0][5], "91.2 (ROS 2 Humble)");
    }
}
