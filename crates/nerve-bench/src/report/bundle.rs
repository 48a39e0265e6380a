//! One report directory for one or several suites: `report.json` (every suite's rows in
//! one `results` array), `report.md` and a self-contained `index.html` with SVG plots.

use super::output::{SuiteOutput, Verdict};
use super::plot::escape;
use super::published;
use super::section::Section;
use super::summary::{self, SummaryRow};
use crate::harness::machine::Machine;
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

/// Several suites measured in one run on one machine.
pub struct Bundle {
    /// The machine.
    pub machine: Machine,
    /// Versions of Nerve, the peers and the compiler.
    pub versions: BTreeMap<String, String>,
    /// Whether this was a `--quick` run.
    pub quick: bool,
    /// The suites, in run order.
    pub suites: Vec<SuiteOutput>,
    /// Set where SIGINT or SIGTERM stopped the run: only the suites that finished are in
    /// `suites`.
    pub interrupted: Option<Interruption>,
}

/// A run stopped by SIGINT or SIGTERM before every suite finished.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Interruption {
    /// The suite that was running (nothing of it is in the report).
    pub running: Option<String>,
    /// The suites that finished, in run order (all of them are in the report).
    pub finished: Vec<String>,
    /// The suites that never started.
    pub not_run: Vec<String>,
}

impl Interruption {
    /// One line: what was running, what finished, what did not run.
    pub fn line(&self) -> String {
        let list = |v: &[String]| {
            if v.is_empty() {
                "none".to_string()
            } else {
                v.join(", ")
            }
        };
        format!(
            "interrupted (SIGINT or SIGTERM){}; finished: {}; not run: {}",
            self.running
                .as_ref()
                .map_or(String::new(), |r| format!(" while {r} ran")),
            list(&self.finished),
            list(&self.not_run)
        )
    }
}

#[derive(Serialize)]
struct JsonReport<'a> {
    suites: Vec<&'a str>,
    machine: &'a Machine,
    versions: &'a BTreeMap<String, String>,
    quick: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    interrupted: Option<&'a Interruption>,
    results: Vec<&'a Value>,
    skipped: Vec<Value>,
    checks: Vec<&'a Verdict>,
    summary: Vec<SummaryRow>,
    published: Vec<published::Figure>,
}

impl Bundle {
    /// Writes `report.json`, `report.md` and `index.html` into `dir` (created if needed).
    pub fn write(&self, dir: &Path) -> std::io::Result<()> {
        std::fs::create_dir_all(dir)?;
        let skipped = self
            .suites
            .iter()
            .flat_map(|s| {
                s.skipped.iter().map(move |k| {
                    let mut v = serde_json::to_value(k).unwrap_or(Value::Null);
                    if let Some(o) = v.as_object_mut() {
                        o.insert("suite".into(), Value::String(s.suite.clone()));
                    }
                    v
                })
            })
            .collect();
        let json = JsonReport {
            suites: self.suites.iter().map(|s| s.suite.as_str()).collect(),
            machine: &self.machine,
            versions: &self.versions,
            quick: self.quick,
            interrupted: self.interrupted.as_ref(),
            results: self.suites.iter().flat_map(|s| s.rows.iter()).collect(),
            skipped,
            checks: self.suites.iter().flat_map(|s| s.checks.iter()).collect(),
            summary: self.seed_summary(),
            published: published::figures(),
        };
        std::fs::write(
            dir.join("report.json"),
            serde_json::to_string_pretty(&json).map_err(std::io::Error::other)?,
        )?;
        std::fs::write(dir.join("report.md"), self.markdown())?;
        std::fs::write(dir.join("index.html"), self.html())
    }

    fn machine_line(&self) -> String {
        let m = &self.machine;
        format!(
            "{} · {} logical CPUs · {} GiB · Linux {} · {}",
            m.cpu,
            m.cores,
            m.memory_gib,
            m.kernel,
            if m.pinned {
                "processes pinned to separate cores"
            } else {
                "not pinned"
            }
        )
    }

    fn versions_line(&self) -> String {
        self.versions
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Per seed, Nerve beside the best peer of this run and the seed's published figure,
    /// from the rows of every suite (`report.json`'s `results`).
    pub fn seed_summary(&self) -> Vec<SummaryRow> {
        let results: Vec<&Value> = self.suites.iter().flat_map(|s| s.rows.iter()).collect();
        summary::summarize(&results)
    }

    /// The summary at the top of the report: the machine, then one table.
    fn summary_section(&self) -> Section {
        let mut section = Section::new(
            SUMMARY_TITLE,
            &format!(
                "Measured here: {}. Every figure is a time, lower is better; a ratio is \
                 Nerve's figure over the other one (below 1: Nerve is faster). Nerve runs as \
                 configured by default; the best peer is the fastest other system measured in \
                 this run at the same point (the futex floor and Nerve's other modes are not \
                 peers); the published figure is the best the seed reports for that point, \
                 quoted as published: measured elsewhere on other hardware (see the table of \
                 published figures at the end). ROS 2 measured: rclpy over Fast DDS run on \
                 this machine in the same run (its faster executor), where the suite runs it \
                 (service and topic). The full tables follow.",
                self.machine_line()
            ),
        );
        let (head, rows) = summary::table(&self.seed_summary());
        section.table(None, &head, &rows);
        section
    }

    /// The whole report as Markdown.
    pub fn markdown(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "# Nerve benchmark report\n");
        let _ = writeln!(s, "- Machine: {}", self.machine_line());
        let _ = writeln!(s, "- Versions: {}", self.versions_line());
        let _ = writeln!(
            s,
            "- Run: {}; every figure as measured (HDR histograms, nothing filtered)\n",
            if self.quick { "--quick" } else { "full" }
        );
        if let Some(i) = &self.interrupted {
            let _ = writeln!(
                s,
                "**Run {}.** Only the suites that finished are in this report.\n",
                i.line()
            );
        }
        let _ = writeln!(s, "Targets met: {}.\n", self.tally());
        s.push_str(self.summary_section().markdown());
        for suite in &self.suites {
            s.push_str(&suite.markdown);
            s.push('\n');
            if !suite.checks.is_empty() {
                let _ = writeln!(s, "### Targets ({})\n", suite.suite);
                let _ = writeln!(s, "| target | where | value | met |\n|---|---|---|---|");
                for c in &suite.checks {
                    let _ = writeln!(
                        s,
                        "| {} | {} | {} | {} |",
                        c.target,
                        c.scope,
                        c.value.map_or("–".into(), |v| format!("{v:.3}")),
                        match c.met {
                            Some(true) => "yes",
                            Some(false) => "**no**",
                            None => "n/a",
                        }
                    );
                }
                s.push('\n');
            }
            if !suite.skipped.is_empty() {
                let _ = writeln!(s, "Skipped ({}):\n", suite.suite);
                for k in &suite.skipped {
                    let _ = writeln!(s, "- {}: {}", k.system, k.reason);
                }
                s.push('\n');
            }
        }
        s.push_str(published_section().markdown());
        s
    }

    /// "N of M checked": a check whose system or peer did not run is in M, not met; one
    /// whose figure this machine cannot give is counted apart as not measurable.
    fn tally(&self) -> String {
        let all: Vec<Option<bool>> = self
            .suites
            .iter()
            .flat_map(|s| s.checks.iter().map(|c| c.met))
            .collect();
        let met = all.iter().filter(|m| **m == Some(true)).count();
        let checked = all.iter().filter(|m| m.is_some()).count();
        let unmeasurable = all.len() - checked;
        let mut s = format!("{met} of {checked} checked");
        if unmeasurable > 0 {
            let _ = write!(s, ", {unmeasurable} not measurable on this machine");
        }
        s
    }

    /// The whole report as one self-contained HTML page (inline SVG, no external files).
    pub fn html(&self) -> String {
        let mut s = String::new();
        s.push_str(
            "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
             <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
             <title>Nerve benchmark report</title>\n<style>\n",
        );
        s.push_str(STYLE);
        s.push_str("</style>\n</head>\n<body>\n<h1>Nerve benchmark report</h1>\n");
        let _ = writeln!(
            s,
            "<p class=\"meta\">{}<br>{}<br>{} run; every figure as measured (HDR \
             histograms, nothing filtered). Figures labelled <em>published</em> come from \
             the seed reports, measured elsewhere on other hardware.</p>",
            escape(&self.machine_line()),
            escape(&self.versions_line()),
            if self.quick { "--quick" } else { "Full" }
        );
        if let Some(i) = &self.interrupted {
            let _ = writeln!(
                s,
                "<p class=\"miss\">Run {}. Only the suites that finished are in this \
                 report.</p>",
                escape(&i.line())
            );
        }
        let _ = writeln!(s, "<p>Targets met: {}.</p>", escape(&self.tally()));
        let _ = writeln!(
            s,
            "<section id=\"summary\">\n<h2>{}</h2>\n{}</section>",
            escape(SUMMARY_TITLE),
            self.summary_section().html
        );
        s.push_str("<nav><ul>");
        for suite in &self.suites {
            let _ = write!(s, "<li><a href=\"#{0}\">{0}</a></li>", escape(&suite.suite));
        }
        s.push_str("</ul></nav>\n");
        for suite in &self.suites {
            let _ = writeln!(
                s,
                "<section id=\"{0}\">\n<h2>{0}</h2>",
                escape(&suite.suite)
            );
            s.push_str(&suite.html);
            if !suite.checks.is_empty() {
                s.push_str("<h3>Targets</h3>\n<table><tr><th>target</th><th>where</th><th>value</th><th>met</th></tr>\n");
                for c in &suite.checks {
                    let (cls, txt) = match c.met {
                        Some(true) => ("ok", "yes"),
                        Some(false) => ("miss", "no"),
                        None => ("na", "n/a"),
                    };
                    let _ = writeln!(
                        s,
                        "<tr><td>{}</td><td>{}</td><td>{}</td><td class=\"{cls}\">{txt}</td></tr>",
                        escape(&c.target),
                        escape(&c.scope),
                        c.value.map_or("–".into(), |v| format!("{v:.3}"))
                    );
                }
                s.push_str("</table>\n");
            }
            if !suite.skipped.is_empty() {
                s.push_str("<h3>Skipped</h3>\n<ul>\n");
                for k in &suite.skipped {
                    let _ = writeln!(s, "<li>{}: {}</li>", escape(&k.system), escape(&k.reason));
                }
                s.push_str("</ul>\n");
            }
            s.push_str("</section>\n");
        }
        s.push_str("<section id=\"published\">\n<h2>Published figures (not measured here)</h2>\n");
        s.push_str(&published_section().html);
        s.push_str("</section>\n");
        s.push_str(SCRIPT);
        s.push_str("</body>\n</html>\n");
        s
    }

    /// The terminal summary of every suite.
    pub fn summary(&self) -> String {
        let mut s = String::new();
        for suite in &self.suites {
            s.push_str(&suite.summary);
        }
        s.push_str(
            "seeds: Nerve, best peer (Nerve / peer), published, quoted (Nerve / published), \
             ROS 2 measured here (Nerve / ROS 2)\n",
        );
        let (_, rows) = summary::table(&self.seed_summary());
        for r in rows {
            let _ = writeln!(
                s,
                "  {} {}: {}; {} ({}); {} ({}); {} ({})",
                r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8]
            );
        }
        let _ = writeln!(s, "targets met: {}", self.tally());
        if let Some(i) = &self.interrupted {
            let _ = writeln!(s, "{}", i.line());
        }
        s
    }
}

/// Versions of Nerve, the peers it links and the compiler.
pub fn versions() -> BTreeMap<String, String> {
    let mut versions = BTreeMap::new();
    versions.insert("nerve".into(), env!("CARGO_PKG_VERSION").into());
    versions.insert("iceoryx2".into(), env!("NERVE_BENCH_ICEORYX2").into());
    versions.insert("zenoh".into(), env!("NERVE_BENCH_ZENOH").into());
    versions.insert(
        "rustc".into(),
        env!("NERVE_BENCH_RUSTC")
            .trim_start_matches("rustc ")
            .into(),
    );
    versions
}

/// Heading of the report's summary.
const SUMMARY_TITLE: &str = "Summary: Nerve, the best peer and the published figure per seed";

/// Every figure published elsewhere that the suites show or compare with, in one labelled
/// table ([`published::figures`]).
fn published_section() -> Section {
    let mut section = Section::new(
        "Published figures (not measured here)",
        "Figures from the seed reports, from other tools' own harnesses and from other \
         projects' issues, as published: measured elsewhere (the source names the hardware), \
         never in this run. The suites show them beside their own rows; a target that names \
         one takes it from this table.",
    );
    let rows: Vec<Vec<String>> = published::figures()
        .into_iter()
        .map(|f| {
            vec![
                f.seed.unwrap_or("–").to_string(),
                f.system.to_string(),
                f.what,
                // as published, every digit kept
                match f.to {
                    Some(to) => format!("{}–{to}", f.value),
                    None => f.value.to_string(),
                },
                f.unit.to_string(),
                f.source.to_string(),
            ]
        })
        .collect();
    section.table(
        None,
        &["seed", "system", "what", "value", "unit", "source"],
        &rows,
    );
    section
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1100px;\
padding:0 1em;color:#222}h1{font-size:1.6em}h2{border-bottom:1px solid #ccc;margin-top:2em}\
table{border-collapse:collapse;margin:1em 0;font-size:.85em}td,th{border:1px solid #ddd;\
padding:3px 7px;text-align:right}th{background:#f4f4f4}td:first-child,th:first-child{text-align:left}\
.meta{color:#555;font-size:.9em}.ok{color:#060}.miss{color:#b00;font-weight:bold}.na{color:#888}\
figure{margin:1em 0}figcaption{font-size:.85em;color:#555}nav ul{display:flex;gap:1em;\
list-style:none;padding:0}svg{max-width:100%;height:auto}\n";

/// Records script errors and marks the page as rendered (checked by the headless
/// browser test).
const SCRIPT: &str = "<script>\nwindow.nerveErrors=[];\
window.addEventListener('error',function(e){window.nerveErrors.push(String(e.message));});\
document.addEventListener('DOMContentLoaded',function(){\
document.body.setAttribute('data-plots',String(document.querySelectorAll('svg').length));\
document.body.setAttribute('data-errors',String(window.nerveErrors.length));});\n</script>\n";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{figure, why_missing, Skipped};

    fn bundle() -> Bundle {
        Bundle {
            machine: Machine::detect(),
            versions: BTreeMap::from([("nerve".to_string(), "0.1.0".to_string())]),
            quick: true,
            interrupted: None,
            suites: vec![SuiteOutput {
                suite: "topic".into(),
                rows: vec![serde_json::json!({"suite": "topic", "system": "nerve"})],
                skipped: vec![Skipped {
                    system: "zenoh <shm>".into(),
                    payload_bytes: None,
                    reason: "a & b".into(),
                }],
                checks: vec![Verdict::new("topic", "x <= 1", "nerve", Some(0.5), |v| {
                    v <= 1.0
                })],
                markdown: "## topic\n".into(),
                html: figure(
                    &crate::report::plot::line_chart(
                        "t",
                        &crate::report::plot::Axis::log("x"),
                        &crate::report::plot::Axis::log("y"),
                        &[],
                    ),
                    "caption",
                ),
                summary: "topic ok\n".into(),
            }],
        }
    }

    #[test]
    fn a_check_whose_system_did_not_run_counts_as_not_met() {
        let skipped = [
            Skipped {
                system: "cyclonedds".into(),
                payload_bytes: None,
                reason: "ddsperf not found".into(),
            },
            Skipped {
                system: "iceoryx2 busy-poll".into(),
                payload_bytes: Some(64),
                reason: "timeout".into(),
            },
        ];
        assert!(skipped[0].covers("cyclonedds ddsperf", Some(1024)));
        assert!(!skipped[0].covers("cyclonedds2 ddsperf", None));
        assert!(skipped[1].covers("iceoryx2 busy-poll", Some(64)));
        assert!(!skipped[1].covers("iceoryx2 busy-poll", Some(128)));
        let why = why_missing(&skipped, "iceoryx2 busy-poll at 64 B", |k| {
            k.covers("iceoryx2 busy-poll", Some(64))
        });
        assert_eq!(why, "iceoryx2 busy-poll at 64 B skipped: timeout");
        let zenoh = why_missing(&skipped, "zenoh", |k| k.covers("zenoh", None));
        assert_eq!(zenoh, "zenoh not run");

        let v = Verdict::judged("service", "ratio <= 1.5", "nerve 64 B", Err(why), |r| {
            r <= 1.5
        });
        assert_eq!((v.value, v.met), (None, Some(false)));
        assert_eq!(
            v.target,
            "ratio <= 1.5 (not met: iceoryx2 busy-poll at 64 B skipped: timeout)"
        );
        let unmeasurable = Verdict::judged("topic", "CPU <= 1 %", "nerve", Ok(None), |c| c <= 1.0);
        assert_eq!(unmeasurable.met, None);

        let mut b = bundle();
        b.suites[0].checks.extend([v, unmeasurable]);
        assert!(
            b.summary()
                .contains("targets met: 1 of 2 checked, 1 not measurable on this machine"),
            "{}",
            b.summary()
        );
        assert!(b.markdown().contains(
            "| ratio <= 1.5 (not met: iceoryx2 busy-poll at 64 B skipped: timeout) | \
             nerve 64 B | – | **no** |"
        ));
    }

    #[test]
    fn an_interrupted_run_says_so_and_lists_what_finished() {
        let dir = std::env::temp_dir().join(format!("nerve-bundle-int-{}", std::process::id()));
        let mut b = bundle();
        b.write(&dir).unwrap();
        let json: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap())
                .unwrap();
        assert!(json.get("interrupted").is_none(), "a whole run has no mark");
        b.interrupted = Some(Interruption {
            running: Some("timer".into()),
            finished: vec!["topic".into()],
            not_run: vec!["bag".into()],
        });
        let line = "interrupted (SIGINT or SIGTERM) while timer ran; finished: topic; not run: bag";
        assert!(b.markdown().contains(line), "{}", b.markdown());
        assert!(b.html().contains(line));
        assert!(b.summary().contains(line));
        b.write(&dir).unwrap();
        let json: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap())
                .unwrap();
        assert_eq!(
            json["interrupted"]["finished"],
            serde_json::json!(["topic"])
        );
        assert_eq!(json["interrupted"]["running"], "timer");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn report_files_carry_rows_checks_and_escaped_html() {
        let dir = std::env::temp_dir().join(format!("nerve-bundle-{}", std::process::id()));
        let b = bundle();
        b.write(&dir).unwrap();
        let json: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap())
                .unwrap();
        assert_eq!(json["results"][0]["suite"], "topic");
        assert_eq!(json["skipped"][0]["suite"], "topic");
        assert_eq!(json["checks"][0]["met"], true);
        let html = std::fs::read_to_string(dir.join("index.html")).unwrap();
        assert!(html.contains("zenoh &lt;shm&gt;: a &amp; b"));
        assert!(html.contains("<svg") && html.ends_with("</html>\n"));
        assert!(b.summary().contains("targets met: 1 of 1"));
        assert_eq!(json["published"][0]["system"], "Segar 2.0.0");
        // the summary: a suite not run says so, one that ran without the point too
        assert_eq!(json["summary"][0]["seed"], "000");
        assert_eq!(json["summary"][0]["nerve"], "not_run");
        assert_eq!(json["summary"][2]["suite"], "topic");
        assert_eq!(json["summary"][2]["nerve"]["missing"], "not measured");
        assert!(html
            .contains("<h2>Summary: Nerve, the best peer and the published figure per seed</h2>"));
        let md = b.markdown();
        assert!(md.contains("## Published figures (not measured here)"));
        let summary = md
            .find("## Summary: Nerve, the best peer and the published figure per seed")
            .unwrap();
        assert!(summary < md.find("## topic").unwrap(), "{md}");
        assert!(md.contains(
            "| 000 (service) | round trip mean, 256 B (µs) | not run | not run | – | \
             91.2 (ROS 2 Humble) | – |"
        ));
        assert!(b
            .summary()
            .contains("  000 (service) round trip mean, 256 B (µs): not run;"));
        assert!(
            md.contains("| 000 | ROS 2 Humble | TPS, 1 MiB | 116 | calls/s |"),
            "{md}"
        );
        assert!(html.contains("<h2>Published figures (not measured here)</h2>"));
        std::fs::remove_dir_all(dir).unwrap();
    }
}
