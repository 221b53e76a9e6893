//! What `life` shows: every figure against the table's versions (`life.svg`), the table of
//! the figures per checkpoint and their flatness.

use std::collections::BTreeMap;
use std::fmt::Write;

use anyhow::Result;

use super::record::{Checkpoint, LifeResult};
use crate::chart::{Line, LinePanel, grid_svg};

const X: &str = "versions";
/// The flatness target: past the first retention window, no figure grows beyond this.
pub const FLAT: f64 = 1.25;

/// One figure of a checkpoint.
struct Figure {
    name: &'static str,
    value: fn(&Checkpoint) -> Option<f64>,
}

const FIGURES: &[Figure] = &[
    Figure {
        name: "checkpoint_kb",
        value: |c| Some(c.log.checkpoint_bytes as f64 / 1e3),
    },
    Figure {
        name: "log_files",
        value: |c| Some(c.log.files as f64),
    },
    Figure {
        name: "log_mb",
        value: |c| Some(c.log.bytes as f64 / 1e6),
    },
    Figure {
        name: "start_s",
        value: |c| Some(c.start.polled_s),
    },
    Figure {
        name: "start_requests",
        value: |c| Some(c.start.requests.total as f64),
    },
    Figure {
        name: "keys_per_poll_max",
        value: |c| Some(c.segment.landing_keys_max as f64),
    },
    Figure {
        name: "keys_per_poll_mean",
        value: |c| Some(c.segment.landing_keys_mean),
    },
    Figure {
        name: "idle_list_bytes",
        value: |c| Some(c.idle.landing_bytes_per_list),
    },
    Figure {
        name: "query_s",
        value: |c| Some(c.opens.query_s),
    },
    Figure {
        name: "deltars_s",
        value: |c| c.opens.deltars_s,
    },
    Figure {
        name: "polars_s",
        value: |c| c.opens.polars_s,
    },
    Figure {
        name: "rss_mb",
        value: |c| Some(c.idle.rss_mb),
    },
    Figure {
        name: "idle_cpu_ms_per_poll",
        value: |c| Some(c.idle.cpu_ms_per_poll),
    },
    Figure {
        name: "idle_requests_per_poll",
        value: |c| Some(c.idle.requests_per_poll),
    },
];

/// The checkpoints past the first retention window (the longest of the three).
fn past_window(doc: &LifeResult) -> Vec<&Checkpoint> {
    let p = &doc.params;
    let windows = [&p.files_window, &p.inputs_window, &p.log_window];
    let longest = (windows.iter())
        .filter_map(|w| super::seconds_of(w))
        .fold(0.0, f64::max);
    doc.checkpoints
        .iter()
        .filter(|c| c.at_s > longest)
        .collect()
}

/// Per figure, its largest value over its smallest past the first retention window (both
/// zero: 1).
pub fn flatness(doc: &LifeResult) -> BTreeMap<String, f64> {
    let past = past_window(doc);
    let mut out = BTreeMap::new();
    for f in FIGURES {
        let v: Vec<f64> = past.iter().filter_map(|c| (f.value)(c)).collect();
        if v.len() < 2 {
            continue;
        }
        let max = v.iter().copied().fold(f64::MIN, f64::max);
        let min = v.iter().copied().fold(f64::MAX, f64::min);
        let ratio = if max == 0.0 { 1.0 } else { max / min };
        out.insert(f.name.to_string(), ratio);
    }
    out
}

fn series(doc: &LifeResult, name: &str, value: fn(&Checkpoint) -> Option<f64>) -> Line {
    Line {
        name: name.into(),
        points: (doc.checkpoints.iter())
            .filter_map(|c| Some((c.version as f64, value(c)?)))
            .collect(),
    }
}

fn panel(caption: &str, y_desc: &'static str, lines: Vec<Line>) -> LinePanel {
    LinePanel {
        caption: caption.into(),
        x_desc: X,
        y_desc,
        lines,
    }
}

fn panels(doc: &LifeResult) -> Vec<LinePanel> {
    let l = |name: &str, value: fn(&Checkpoint) -> Option<f64>| series(doc, name, value);
    vec![
        panel(
            "newest checkpoint",
            "KB",
            vec![l("checkpoint", |c| {
                Some(c.log.checkpoint_bytes as f64 / 1e3)
            })],
        ),
        panel(
            "_delta_log objects",
            "objects",
            vec![l("files", |c| Some(c.log.files as f64))],
        ),
        panel(
            "_delta_log bytes",
            "MB",
            vec![l("bytes", |c| Some(c.log.bytes as f64 / 1e6))],
        ),
        panel(
            "a fresh service: to a status of the polled table",
            "seconds",
            vec![
                l("polled status", |c| Some(c.start.polled_s)),
                l("listening", |c| Some(c.start.listen_s)),
            ],
        ),
        panel(
            "a fresh service: S3 requests until polled",
            "requests",
            vec![
                l("all", |c| Some(c.start.requests.total as f64)),
                l("GET", |c| Some(c.start.requests.get as f64)),
                l("LIST", |c| Some(c.start.requests.list as f64)),
            ],
        ),
        panel(
            "landing keys listed per poll",
            "keys",
            vec![
                l("landing: max", |c| Some(c.segment.landing_keys_max as f64)),
                l("landing: mean", |c| Some(c.segment.landing_keys_mean)),
                l("idle: max", |c| Some(c.idle.landing_keys_max as f64)),
            ],
        ),
        panel(
            "open and count the rows",
            "seconds",
            vec![
                l("ravel-load query", |c| Some(c.opens.query_s)),
                l("delta-rs", |c| c.opens.deltars_s),
                l("polars", |c| c.opens.polars_s),
            ],
        ),
        panel(
            "service memory (idle)",
            "MB",
            vec![
                l("RSS", |c| Some(c.idle.rss_mb)),
                l("peak", |c| Some(c.idle.peak_rss_mb)),
            ],
        ),
        panel(
            "idle CPU per poll",
            "ms",
            vec![l("CPU", |c| Some(c.idle.cpu_ms_per_poll))],
        ),
        panel(
            "idle S3 requests per poll",
            "requests",
            vec![l("requests", |c| Some(c.idle.requests_per_poll))],
        ),
        panel(
            "versions per second while landing",
            "versions/s",
            vec![l("rate", |c| Some(c.segment.versions_per_s))],
        ),
        panel(
            "landing listing bytes (idle poll)",
            "KB",
            vec![l("bytes", |c| Some(c.idle.landing_bytes_per_list / 1e3))],
        ),
    ]
}

/// The chart as SVG text: one panel per figure, in a grid of three columns.
pub fn svg(doc: &LifeResult) -> Result<String> {
    let p = &doc.params;
    let title = format!(
        "{} · life: {} rows a file, {} files/s, poll {}, windows {}/{}/{}",
        doc.build.version,
        p.file_rows,
        p.rate,
        p.poll_interval,
        p.files_window,
        p.inputs_window,
        p.log_window
    );
    grid_svg(&panels(doc), 3, &title)
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or("-".into(), |v| format!("{v:.digits$}"))
}

/// One checkpoint as a line of the progress.
pub fn line(c: &Checkpoint) -> String {
    format!(
        "v{} at {:.0} s: {:.1} versions/s, log {} objects {:.2} MB, checkpoint {:.1} KB, start {:.2} s {} requests, query {:.2} s, delta-rs {} s, polars {} s, RSS {:.0} MB, idle {:.2} ms CPU/poll",
        c.version,
        c.at_s,
        c.segment.versions_per_s,
        c.log.files,
        c.log.bytes as f64 / 1e6,
        c.log.checkpoint_bytes as f64 / 1e3,
        c.start.polled_s,
        c.start.requests.total,
        c.opens.query_s,
        opt(c.opens.deltars_s, 2),
        opt(c.opens.polars_s, 2),
        c.idle.rss_mb,
        c.idle.cpu_ms_per_poll
    )
}

const HEADER: &str = "| versions | at s | versions/s | checkpoint KB | log objects | log MB | start s | start requests | keys/poll max (mean) | idle keys/poll | query s | delta-rs s | polars s | RSS MB | idle CPU ms/poll | idle requests/poll |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";

/// The figures per checkpoint as a Markdown table.
pub fn table(doc: &LifeResult) -> String {
    let mut out = HEADER.to_string();
    for c in &doc.checkpoints {
        let _ = writeln!(
            out,
            "| {} | {:.0} | {:.1} | {:.1} | {} | {:.2} | {:.2} | {} | {} ({:.1}) | {} | {:.2} | {} | {} | {:.0} | {:.2} | {:.2} |",
            c.version,
            c.at_s,
            c.segment.versions_per_s,
            c.log.checkpoint_bytes as f64 / 1e3,
            c.log.files,
            c.log.bytes as f64 / 1e6,
            c.start.polled_s,
            c.start.requests.total,
            c.segment.landing_keys_max,
            c.segment.landing_keys_mean,
            c.idle.landing_keys_max,
            c.opens.query_s,
            opt(c.opens.deltars_s, 2),
            opt(c.opens.polars_s, 2),
            c.idle.rss_mb,
            c.idle.cpu_ms_per_poll,
            c.idle.requests_per_poll
        );
    }
    out
}

/// The summary: the parameters, the table, the flatness of each figure.
pub fn summary(doc: &LifeResult) -> String {
    let p = &doc.params;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "life: {} versions, every {}; {} rows a file, {} files/s; poll {}, batch age {}, settle {}, lookback {}, gc {}; windows files {} inputs {} log {}; {}",
        p.versions,
        p.every,
        p.file_rows,
        p.rate,
        p.poll_interval,
        p.batch_age,
        p.settle,
        p.cursor_lookback,
        p.gc_interval,
        p.files_window,
        p.inputs_window,
        p.log_window,
        doc.python
    );
    out.push_str(&table(doc));
    let flat: Vec<String> = (doc.flatness.iter())
        .map(|(k, v)| {
            let mark = if *v <= FLAT { "" } else { " (over)" };
            format!("{k} {v:.2}×{mark}")
        })
        .collect();
    let _ = writeln!(
        out,
        "max/min past the first retention window: {}",
        flat.join(", ")
    );
    if let Some(e) = &doc.error {
        let _ = writeln!(out, "stopped: {}", e.lines().next().unwrap_or(""));
    }
    out
}
