//! What `ingest` shows: the chart `ingest.svg` (four panels against the load number), the table
//! it prints and its progress lines.

use std::fmt::Write;

use anyhow::Result;

use super::record::{Check, IngestResult, LoadRecord, TableLoad};
use crate::chart::{Line, LinePanel, grid_svg};

const X: &str = "load";
const MB: f64 = 1e6;

/// A line of `f` of each load's P and C records.
fn per_load(doc: &IngestResult, name: &str, c: bool, f: fn(&TableLoad) -> Option<f64>) -> Line {
    let points = doc
        .loads
        .iter()
        .filter_map(|l| {
            let t = if c { l.c.as_ref()? } else { &l.p };
            Some((f64::from(l.load), f(t)?))
        })
        .collect();
    Line {
        name: name.into(),
        points,
    }
}

/// A line of `f` of each check's summed ratio P/C.
fn per_check(doc: &IngestResult, name: &str, f: fn(&Check) -> Option<f64>) -> Line {
    let points = doc
        .checks
        .iter()
        .filter_map(|c| Some((f64::from(c.load), f(c)?)))
        .collect();
    Line {
        name: name.into(),
        points,
    }
}

fn panels(doc: &IngestResult) -> Vec<LinePanel> {
    let depth = |t: &TableLoad| t.depth_after().map(|d| d as f64);
    let bound = |t: &TableLoad| {
        t.merge
            .as_ref()
            .and_then(|m| m.depth_bound)
            .map(|b| b as f64)
    };
    vec![
        LinePanel {
            caption: "cumulative write amplification".into(),
            x_desc: X,
            y_desc: "merge bytes written / bytes loaded",
            lines: vec![
                per_load(doc, "P (policy)", false, |t| Some(t.cumulative_wa)),
                per_load(doc, "C (compact)", true, |t| Some(t.cumulative_wa)),
            ],
        },
        LinePanel {
            caption: "overlap depth after the load".into(),
            x_desc: X,
            y_desc: "depth",
            lines: vec![
                per_load(doc, "P (policy)", false, depth),
                per_load(doc, "C (compact)", true, depth),
                per_load(doc, "P bound", false, bound),
            ],
        },
        LinePanel {
            caption: "point statements, cold: P / C (summed)".into(),
            x_desc: X,
            y_desc: "ratio",
            lines: vec![
                per_check(doc, "bytes P/C", |c| c.ratio.map(|r| r.bytes)),
                per_check(doc, "GETs P/C", |c| c.ratio.map(|r| r.gets)),
            ],
        },
        LinePanel {
            caption: "merge seconds per load".into(),
            x_desc: X,
            y_desc: "seconds",
            lines: vec![
                per_load(doc, "P maintenance", false, |t| Some(t.merge_s())),
                per_load(doc, "C compact", true, |t| Some(t.merge_s())),
            ],
        },
    ]
}

/// The chart as SVG text: a 2 × 2 grid of panels.
pub fn svg(doc: &IngestResult) -> Result<String> {
    let p = &doc.params;
    let title = format!(
        "{} · {} initial rows + {} loads of {} rows",
        doc.build.version,
        crate::chart::count_label(p.initial_rows as f64),
        p.loads,
        crate::chart::count_label(p.load_rows as f64)
    );
    grid_svg(&panels(doc), 2, &title)
}

fn depth(t: &TableLoad) -> String {
    t.depth_after().map_or("-".into(), |d| d.to_string())
}

/// One load's progress line.
pub fn load_line(r: &LoadRecord) -> String {
    let p = &r.p;
    let mut line = format!(
        "load {:>3}: P load {:.2} s, maintenance {:.2} s, wrote {:.1} MB, WA {:.2}, depth {}",
        r.load,
        p.load_s,
        p.merge_s(),
        p.written_bytes() as f64 / MB,
        p.cumulative_wa,
        depth(p)
    );
    if let Some(c) = &r.c {
        let _ = write!(
            line,
            " | C load {:.2} s, compact {:.2} s, WA {:.2}",
            c.load_s,
            c.merge_s(),
            c.cumulative_wa
        );
    }
    line
}

/// One check's progress line.
pub fn check_line(c: &Check) -> String {
    let mut line = format!(
        "check after load {}: P {} GETs, {} bytes",
        c.load, c.p.gets, c.p.bytes
    );
    if let (Some(t), Some(r)) = (&c.c, &c.ratio) {
        let _ = write!(
            line,
            "; C {} GETs, {} bytes; P/C GETs {:.2}, bytes {:.2}",
            t.gets, t.bytes, r.gets, r.bytes
        );
    }
    if let Some(e) = &c.error {
        let _ = write!(line, " (FAILED: {})", e.lines().next().unwrap_or(""));
    }
    line
}

/// The result as a short Markdown table: one row per load, then the totals.
pub fn table(doc: &IngestResult) -> String {
    let mut out = String::from(
        "| load | P load s | P maint s | P WA | P depth | C load s | C compact s | C WA | C depth | bytes P/C | GETs P/C |\n\
         |---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for l in &doc.loads {
        let check = doc.checks.iter().find(|c| c.load == l.load);
        let ratio = check.and_then(|c| c.ratio);
        let cell = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.2}"));
        let c = l.c.as_ref();
        let _ = writeln!(
            out,
            "| {} | {:.2} | {:.2} | {:.2} | {} | {} | {} | {} | {} | {} | {} |",
            l.load,
            l.p.load_s,
            l.p.merge_s(),
            l.p.cumulative_wa,
            depth(&l.p),
            cell(c.map(|c| c.load_s)),
            cell(c.map(|c| c.merge_s())),
            cell(c.map(|c| c.cumulative_wa)),
            c.map_or("-".into(), depth),
            cell(ratio.map(|r| r.bytes)),
            cell(ratio.map(|r| r.gets)),
        );
    }
    out + &totals(doc)
}

fn totals(doc: &IngestResult) -> String {
    let mut out = String::new();
    for (name, t) in [("P", &doc.totals.p), ("C", &doc.totals.c)] {
        let Some(t) = t else { continue };
        let _ = writeln!(
            out,
            "{name}: {} loads, load {:.1} s, merge {:.1} s ({:.2}× the loads), loaded {:.1} MB, \
             written {:.1} MB, write amplification {:.2}, max depth {}, peak RSS {:.0} MB",
            t.loads,
            t.load_s,
            t.merge_s,
            t.merge_over_load,
            t.loaded_bytes as f64 / MB,
            t.written_bytes as f64 / MB,
            t.write_amplification,
            t.max_depth,
            t.peak_rss_mb
        );
    }
    if let Some(e) = &doc.error {
        let _ = writeln!(out, "stopped: {}", e.lines().next().unwrap_or(""));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::record::{Merge, Params, Ratio, Totals, Traffic};
    use crate::result::{Build, Machine};

    fn table_load(loaded: u64, written: u64, depth: usize, wa: f64) -> TableLoad {
        TableLoad {
            loaded_bytes: loaded,
            load_s: 1.0,
            merge: Some(Merge {
                wall_s: 0.5,
                written_bytes: written,
                depth_after: depth,
                depth_bound: Some(8),
                ..Merge::default()
            }),
            process_s: 1.5,
            peak_rss_mb: 100.0,
            cumulative_wa: wa,
        }
    }

    fn doc() -> IngestResult {
        let load = |i: u32, p: TableLoad, c: TableLoad| LoadRecord {
            load: i,
            day: 30 + i,
            rows: 10,
            gen_s: 0.1,
            p,
            c: Some(c),
        };
        let traffic = |gets| Traffic {
            gets,
            bytes: gets * 10,
            ..Traffic::default()
        };
        let mut d = IngestResult {
            format: crate::ingest::record::FORMAT.into(),
            started: String::new(),
            build: Build {
                bin: String::new(),
                version: "ravel-load 0.1.0".into(),
                commit: String::new(),
            },
            machine: Machine {
                cores: 2,
                mem_total_kb: 0,
                cpu_model: String::new(),
                kernel: String::new(),
                hostname: String::new(),
            },
            params: Params {
                initial_rows: 1000,
                loads: 2,
                load_rows: 10,
                seed: 1,
                compare_every: 2,
                load_args: Vec::new(),
                extra_queries: None,
                rss_floor_mb: 0.0,
                counter: None,
                statements: Vec::new(),
            },
            initial: Default::default(),
            loads: vec![
                load(1, table_load(100, 0, 2, 0.0), table_load(100, 900, 1, 9.0)),
                load(
                    2,
                    table_load(100, 400, 1, 2.0),
                    table_load(100, 1000, 1, 9.5),
                ),
            ],
            checks: vec![Check {
                load: 2,
                statements: Vec::new(),
                p: traffic(30),
                c: Some(traffic(20)),
                ratio: Some(Ratio::of(&traffic(30), &traffic(20))),
                error: None,
            }],
            totals: Totals::default(),
            error: None,
        };
        d.total();
        d
    }

    #[test]
    fn totals_table_and_chart_of_two_loads() {
        let d = doc();
        let p = d.totals.p.as_ref().unwrap();
        assert_eq!(
            (p.loaded_bytes, p.written_bytes, p.max_depth),
            (200, 400, 2)
        );
        assert_eq!(p.write_amplification, 2.0);
        assert_eq!(p.merge_over_load, 0.5);
        let t = table(&d);
        assert!(
            t.contains("| 1 | 1.00 | 0.50 | 0.00 | 2 | 1.00 | 0.50 | 9.00 | 1 | - | - |"),
            "{t}"
        );
        assert!(
            t.contains("| 2 | 1.00 | 0.50 | 2.00 | 1 | 1.00 | 0.50 | 9.50 | 1 | 1.50 | 1.50 |"),
            "{t}"
        );
        assert!(t.contains("C: 2 loads"), "{t}");
        let svg = svg(&d).unwrap();
        for caption in [
            "cumulative write amplification",
            "P bound",
            "GETs P/C",
            "C compact",
        ] {
            assert!(svg.contains(caption), "{caption}");
        }
    }
}
