//! The point statements `ingest` runs cold on both tables: a mid-sized counter without and with
//! a date range, ClickBench's Q37–Q43 (counter 62, July dates) and any extra statements.
//!
//! The counter is the one whose rows in the initial table come nearest 0.25 % of them (the
//! generator's Zipf(1) over 6000 counters puts it near rank 43); its id and share are in the
//! result. Statements use the name `hits`, the tables' own name, which `query` presents with
//! EventDate as a DATE.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use super::record::{Check, Counter, PointStatement, Ratio, StatementPair, Traffic};
use crate::exec;
use crate::result::StatementFigures;
use crate::steps::{self, TABLE, Temperature};

/// The share of the initial rows the chosen counter comes nearest.
const COUNTER_SHARE: f64 = 0.0025;
/// ClickBench's point statements: lines 37–43 (1-based) of its queries file.
const CLICKBENCH_POINTS: std::ops::RangeInclusive<usize> = 37..=43;

/// The statements file and what each of its lines is.
pub struct Points {
    pub file: PathBuf,
    pub counter: Counter,
    pub statements: Vec<PointStatement>,
}

/// Chooses the counter from the table in `store` (`rows` rows) and writes the statements to
/// `dir/points.sql`: the counter's two, ClickBench's from `clickbench` when that file exists
/// (a note says so when not), then the statements of `extra`.
pub fn prepare(
    bin: &Path,
    store: &Path,
    rows: u64,
    dir: &Path,
    clickbench: &Path,
    extra: Option<&Path>,
) -> Result<Points> {
    let counter = mid_counter(bin, store, rows)?;
    let mut list = counter_statements(counter.id);
    list.extend(clickbench_statements(clickbench)?);
    if let Some(extra) = extra {
        list.extend(extra_statements(extra)?);
    }
    let statements: Vec<PointStatement> = list
        .into_iter()
        .enumerate()
        .map(|(i, (label, sql))| PointStatement {
            number: i + 1,
            label,
            sql,
        })
        .collect();
    let file = dir.join("points.sql");
    let text: String = statements.iter().map(|s| format!("{}\n", s.sql)).collect();
    std::fs::write(&file, text).with_context(|| format!("writing {}", file.display()))?;
    Ok(Points {
        file,
        counter,
        statements,
    })
}

/// The counter whose row count comes nearest `COUNTER_SHARE` of `rows`.
fn mid_counter(bin: &Path, store: &Path, rows: u64) -> Result<Counter> {
    let target = (rows as f64 * COUNTER_SHARE).round() as u64;
    let sql = format!(
        "SELECT \"CounterID\", c FROM (SELECT \"CounterID\", COUNT(*) AS c FROM hits \
         GROUP BY \"CounterID\") AS t ORDER BY abs(c - {target}), \"CounterID\" LIMIT 1"
    );
    let m = exec::run(
        Command::new(bin)
            .args(["query", "--store", &store.to_string_lossy()])
            .args(["--table", TABLE, "--format", "csv", &sql]),
    )?;
    let line = m.stdout.lines().rfind(|l| !l.trim().is_empty());
    let parsed = line.and_then(|l| {
        let (id, c) = l.trim().split_once(',')?;
        Some((id.parse::<i64>().ok()?, c.parse::<u64>().ok()?))
    });
    let Some((id, count)) = parsed else {
        bail!(
            "choosing the counter: no \"id,count\" line in {:?}",
            m.stdout
        );
    };
    Ok(Counter {
        id,
        rows: count,
        share: count as f64 / rows.max(1) as f64,
    })
}

fn counter_statements(id: i64) -> Vec<(String, String)> {
    let select = format!("SELECT \"URL\", COUNT(*) AS c FROM hits WHERE \"CounterID\" = {id}");
    let tail = "GROUP BY \"URL\" ORDER BY c DESC LIMIT 10;";
    let week = "\"EventDate\" >= '2013-07-10' AND \"EventDate\" <= '2013-07-16'";
    vec![
        ("counter".into(), format!("{select} {tail}")),
        ("counter-week".into(), format!("{select} AND {week} {tail}")),
    ]
}

/// Lines 37–43 of ClickBench's queries file, named Q37–Q43; none, with a note, when the file
/// is not there.
fn clickbench_statements(path: &Path) -> Result<Vec<(String, String)>> {
    if !path.is_file() {
        eprintln!(
            "note: {} not found: ClickBench's Q37-Q43 left out",
            path.display()
        );
        return Ok(Vec::new());
    }
    numbered_lines(
        path,
        |n, _| CLICKBENCH_POINTS.contains(&n),
        |n| format!("Q{n}"),
    )
}

/// The statements of `path` as `bench-queries` reads them: one a line, blank lines and `--`
/// comments skipped; named by their line.
fn extra_statements(path: &Path) -> Result<Vec<(String, String)>> {
    numbered_lines(path, |_, l| !l.starts_with("--"), |n| format!("extra-{n}"))
}

/// The non-blank lines of `path` (trimmed) that `keep` keeps by their 1-based number and text,
/// each named by `name` of its number.
fn numbered_lines(
    path: &Path,
    keep: impl Fn(usize, &str) -> bool,
    name: impl Fn(usize) -> String,
) -> Result<Vec<(String, String)>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    Ok(text
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim()))
        .filter(|&(n, l)| !l.is_empty() && keep(n, l))
        .map(|(n, l)| (name(n), l.to_string()))
        .collect())
}

/// The cold figures of each statement on the table in `store`.
fn cold(bin: &Path, store: &Path, points: &Points) -> Result<Vec<StatementFigures>> {
    let (_, runs) = steps::bench_queries(bin, store, &points.file)?;
    Ok(steps::statement_figures(&runs, Temperature::Cold))
}

/// The statements cold on P and (when given) C after load `load`. A table whose statements
/// fail to run is recorded with the error; the check goes on.
pub fn check(bin: &Path, p: &Path, c: Option<&Path>, points: &Points, load: u32) -> Check {
    let mut errors = Vec::new();
    let mut run = |name: &str, store: &Path| {
        cold(bin, store, points)
            .map_err(|e| errors.push(format!("{name}: {e:#}")))
            .ok()
    };
    let p_runs = run("P", p).unwrap_or_default();
    let c_runs = c.and_then(|c| run("C", c));
    let find = |runs: &[StatementFigures], n: usize| runs.iter().find(|s| s.number == n).cloned();
    let statements = points
        .statements
        .iter()
        .map(|s| {
            pair(
                s,
                find(&p_runs, s.number),
                c_runs.as_ref().and_then(|r| find(r, s.number)),
            )
        })
        .collect();
    let p_sum = Traffic::sum(p_runs.iter());
    let c_sum = c_runs.as_ref().map(|r| Traffic::sum(r.iter()));
    Check {
        load,
        statements,
        p: p_sum,
        ratio: c_sum.as_ref().map(|c| Ratio::of(&p_sum, c)),
        c: c_sum,
        error: (!errors.is_empty()).then(|| errors.join("; ")),
    }
}

fn pair(
    s: &PointStatement,
    p: Option<StatementFigures>,
    c: Option<StatementFigures>,
) -> StatementPair {
    let ratio = match (&p, &c) {
        (Some(p), Some(c)) => Some(Ratio::of(&Traffic::of(p), &Traffic::of(c))),
        _ => None,
    };
    StatementPair {
        number: s.number,
        label: s.label.clone(),
        p,
        c,
        ratio,
    }
}
