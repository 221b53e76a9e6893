//! Choosing a table's layout from the statements its users run.
//!
//! [`advise`] reads a log of statements (one per line, an optional `count<TAB>` weighing each),
//! plans each against the table as `query` would, and generates candidate layouts from what
//! the statements compare and group by (see [`candidates`]). Each candidate is estimated on a
//! sample of the table: sorted in its order, cut into as many objects as the table has, and
//! pruned per statement by `ravel-query`'s own pruner (see [`estimate`]); a candidate streamed
//! by a column whose groups the sample holds thinly is sized on whole groups (see [`groups`]).
//! The answer ranks the candidates by the weighted bytes the statements would fetch, beside
//! what each would store and cost to load; [`apply`] stores the chosen layout as the table's
//! next generation, which `compact` then re-clusters the table by.

pub mod candidates;
pub mod estimate;
pub mod groups;
pub mod log;
pub mod sample;
pub mod statements;

mod applying;
mod costing;
mod simulations;
mod spans;

use std::collections::BTreeSet;
use std::time::Instant;

use datafusion::arrow::datatypes::Schema;
use ravel_layout::{Layout, LayoutError, LayoutStore};
use ravel_query::{QueryError, QueryOptions, QueryTable};
use ravel_store::Store;
use serde::Serialize;

pub use candidates::{Candidate, CandidateKind, Span, Weighted};
pub use estimate::StatementEstimate;
pub use log::{MAX_WEIGHT, Statement, log_text, parse_log};
pub use statements::Skipped;

pub use applying::{Applied, applied_to, apply, reorders};
pub use costing::weighted_bytes;

use crate::costing::estimate_all;
use crate::spans::{range_spans, time_span};
use crate::statements::{Planned, Scan};

/// Why advice could not be given.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AdviseError {
    #[error("the statement log is empty: give one statement per line")]
    EmptyLog,
    #[error("line {line}, column {column}: a byte that is not UTF-8: the log must be UTF-8 text")]
    NotUtf8 { line: usize, column: usize },
    #[error("line {line}: the leading count {text:?} is not a whole number from 1 to {max}", max = log::MAX_WEIGHT)]
    BadWeight { line: usize, text: String },
    #[error(
        "no statement of the log reads table {table:?} ({skipped} left out; the first: line {line}: {error})"
    )]
    NoStatement {
        table: String,
        skipped: usize,
        line: usize,
        error: String,
    },
    #[error("the log's statements touch no column of table {0:?}: nothing to choose a layout by")]
    NoColumn(String),
    #[error("a sample of 0 rows: give --sample-rows of at least 1")]
    NoSampleRows,
    #[error("table {0:?} holds no rows to sample")]
    EmptyTable(String),
    #[error(transparent)]
    Query(#[from] QueryError),
    #[error(transparent)]
    Layout(#[from] LayoutError),
    #[error(transparent)]
    Store(#[from] ravel_store::StoreError),
    #[error(transparent)]
    Log(#[from] ravel_log::LogError),
    /// DataFusion's message holds its causes, so it is part of this one rather than its
    /// source (as `ravel_query::QueryError` keeps it).
    #[error("hashing the sample's values to draw whole groups: {0}")]
    Hash(datafusion::error::DataFusionError),
    #[error("reading the sample")]
    Parquet(#[from] parquet::errors::ParquetError),
    #[error("estimating a layout")]
    Arrow(#[from] arrow::error::ArrowError),
    #[error("a task reading the sample failed")]
    Task(#[from] tokio::task::JoinError),
}

impl From<datafusion::error::DataFusionError> for AdviseError {
    fn from(e: datafusion::error::DataFusionError) -> Self {
        AdviseError::Hash(e)
    }
}

impl AdviseError {
    /// True when the error is about the user's input (exit 2).
    pub fn is_invalid_input(&self) -> bool {
        use AdviseError::*;
        match self {
            EmptyLog
            | NotUtf8 { .. }
            | BadWeight { .. }
            | NoStatement { .. }
            | NoColumn(_)
            | NoSampleRows
            | EmptyTable(_) => true,
            Query(e) => e.is_invalid_input(),
            Layout(e) => e.is_invalid_input(),
            Store(e) => e.is_invalid_input(),
            _ => false,
        }
    }
}

/// How to advise.
#[derive(Debug, Clone)]
pub struct AdviseOptions {
    /// Generated candidates to estimate, besides the current layout and arrival order.
    pub candidates: usize,
    /// Rows of the sample.
    pub sample_rows: usize,
    /// The name statements use for the table (default: its own).
    pub sql_name: Option<String>,
    /// A candidate is recommended over the current layout only when it reads less than this
    /// share of the current layout's bytes (a change costs a re-clustering).
    pub margin: f64,
}

impl Default for AdviseOptions {
    fn default() -> Self {
        AdviseOptions {
            candidates: 10,
            sample_rows: 40_000,
            sql_name: None,
            margin: 0.95,
        }
    }
}

/// One candidate's estimate.
#[derive(Debug, Clone, Serialize)]
pub struct Estimate {
    pub name: String,
    pub kind: CandidateKind,
    pub layout: Layout,
    /// Bytes the log's statements would fetch, each times its weight (see [`weighted_bytes`]).
    pub bytes: u128,
    /// `bytes` over the current layout's.
    pub relative: f64,
    /// Bytes the table would take stored.
    pub stored_bytes: u64,
    /// Whether its sizes come from a sample of whole groups of its stream (see [`groups`]).
    pub whole_groups: bool,
    /// Sorting and encoding the sample in this order (at the simulation's zstd level) and
    /// building its filters, over the same for the current layout.
    pub load_cost: f64,
    pub statements: Vec<StatementEstimate>,
}

/// The answer: candidates ranked by the bytes the log would fetch, fewest first.
#[derive(Debug, Clone, Serialize)]
pub struct Advice {
    pub table: String,
    pub table_rows: u64,
    pub table_objects: usize,
    pub table_bytes: u64,
    pub sample_rows: usize,
    /// Statements advised on, and their total weight.
    pub statements: usize,
    pub weight: u64,
    pub skipped: Vec<Skipped>,
    /// The streams whose candidates are sized by a sample of whole groups (see [`groups`]).
    pub whole_groups: Vec<WholeGroups>,
    pub candidates: Vec<Estimate>,
    /// Index into `candidates` of the layout recommended: the first, unless the current
    /// layout reads within the margin of it.
    pub recommended: usize,
    pub seconds: f64,
    /// Where the time went.
    pub stages: Stages,
}

/// A sample of whole groups of a stream column.
#[derive(Debug, Clone, Serialize)]
pub struct WholeGroups {
    pub column: String,
    pub rows: usize,
}

/// Seconds of each stage of [`advise`].
#[derive(Debug, Clone, Default, Serialize)]
pub struct Stages {
    /// Opening the table and planning the statements.
    pub plan_s: f64,
    /// Reading the sample, generating the candidates, and reading any sample of whole groups.
    pub sample_s: f64,
    /// Simulating and costing the candidates.
    pub estimate_s: f64,
}

impl Advice {
    /// The recommended candidate.
    pub fn best(&self) -> &Estimate {
        &self.candidates[self.recommended]
    }

    /// The table's current layout, as estimated.
    pub fn current(&self) -> &Estimate {
        self.candidates
            .iter()
            .find(|e| e.kind == CandidateKind::Current)
            .expect("the current layout is a candidate")
    }
}

/// Advises on `table`'s layout from the statements of `log` (see the crate docs).
#[tracing::instrument(skip_all, fields(table = %table))]
pub async fn advise(
    store: &Store,
    table: &str,
    log: &str,
    opts: &AdviseOptions,
) -> Result<Advice, AdviseError> {
    let started = Instant::now();
    if opts.sample_rows == 0 {
        return Err(AdviseError::NoSampleRows);
    }
    let statements = parse_log(log)?;
    let q = QueryTable::open(
        store,
        table,
        &QueryOptions {
            sql_name: opts.sql_name.clone(),
            ..QueryOptions::default()
        },
    )
    .await?;
    let schema = q.file_schema().clone();
    let planned = statements::plan_all(&q, &schema, &statements);
    let Split {
        advised: scans,
        skipped,
    } = split(table, &planned)?;
    let current = LayoutStore::new(store, table)?.load().await?;
    let columns = sampled_columns(&scans, &current, &schema);
    tracing::debug!(columns = ?columns, "sampled columns");
    let mut stages = Stages {
        plan_s: started.elapsed().as_secs_f64(),
        ..Stages::default()
    };
    let sample = sample::read(
        store,
        table,
        &schema,
        &columns,
        opts.sample_rows,
        sample::Draw::Blocks,
    )
    .await?;
    if sample.batch.num_rows() == 0 {
        return Err(AdviseError::EmptyTable(table.to_string()));
    }
    let weighted: Vec<Weighted> = scans
        .iter()
        .map(|a| Weighted {
            weight: a.statement.weight,
            scan: a.scan,
        })
        .collect();
    let time = time_column(&current, &weighted, &schema);
    let candidates = candidates::candidates(&candidates::Inputs {
        current: &current,
        schema: sample.batch.schema_ref(),
        scans: &weighted,
        time_span: time
            .as_deref()
            .and_then(|t| time_span(&sample.batch, t, None)),
        range_spans: &range_spans(&sample.batch, time.as_deref(), &weighted),
        max: opts.candidates,
    });
    let just_scans: Vec<&Scan> = scans.iter().map(|a| a.scan).collect();
    let draws = groups::Draws {
        store,
        table,
        schema: &schema,
        scans: &just_scans,
        sampled: &columns,
        target_rows: opts.sample_rows,
    };
    let groups = groups::read_all(&draws, &candidates, &sample).await?;
    stages.sample_s = started.elapsed().as_secs_f64() - stages.plan_s;
    let estimates = estimate_all(&candidates, &sample, &groups, &scans, &schema, &q)?;
    stages.estimate_s = started.elapsed().as_secs_f64() - stages.plan_s - stages.sample_s;
    Ok(rank(
        Advice {
            table: table.to_string(),
            table_rows: sample.table_rows,
            table_objects: sample.objects,
            table_bytes: sample.table_bytes,
            sample_rows: sample.batch.num_rows(),
            statements: scans.len(),
            weight: scans
                .iter()
                .fold(0u64, |w, a| w.saturating_add(a.statement.weight)),
            skipped,
            whole_groups: groups
                .iter()
                .map(|g| WholeGroups {
                    column: g.column.clone(),
                    rows: g.batch.num_rows(),
                })
                .collect(),
            candidates: estimates,
            recommended: 0,
            seconds: 0.0,
            stages,
        },
        opts.margin,
        started,
    ))
}

/// A statement advised on, with its scans.
#[derive(Clone, Copy)]
struct Advised<'a> {
    statement: &'a Statement,
    scan: &'a Scan,
}

/// The statements that planned and read the table, and the others with why.
struct Split<'a> {
    advised: Vec<Advised<'a>>,
    skipped: Vec<Skipped>,
}

fn split<'a>(table: &str, planned: &'a [Planned]) -> Result<Split<'a>, AdviseError> {
    let mut scans = Vec::new();
    let mut skipped = Vec::new();
    for p in planned {
        match &p.scan {
            Ok(scan) => scans.push(Advised {
                statement: &p.statement,
                scan,
            }),
            Err(e) => skipped.push(Skipped {
                line: p.statement.line,
                sql: p.statement.sql.clone(),
                error: e.clone(),
            }),
        }
    }
    if scans.is_empty() {
        let first = &skipped[0];
        return Err(AdviseError::NoStatement {
            table: table.to_string(),
            skipped: skipped.len(),
            line: first.line,
            error: first.error.clone(),
        });
    }
    if scans
        .iter()
        .all(|a| a.scan.columns.is_empty() && a.scan.predicates.is_empty())
    {
        return Err(AdviseError::NoColumn(table.to_string()));
    }
    Ok(Split {
        advised: scans,
        skipped,
    })
}

/// The columns the sample needs: those the statements read, compare and group by, and the
/// current layout's.
fn sampled_columns(scans: &[Advised<'_>], current: &Layout, schema: &Schema) -> Vec<String> {
    let mut set = BTreeSet::new();
    // The columns whose order matters (compared, filtered, grouped by, or a layout's), and
    // those a point lookup reads: it fetches a page or two of each, beside its dictionary page,
    // and both follow the order (another order can make the loader's trial choose a dictionary
    // of an object's distinct values). Other columns only read keep their stored sizes: a scan
    // fetches most of their bytes in any order.
    for s in scans.iter().map(|a| a.scan) {
        if s.predicates
            .iter()
            .any(|p| matches!(p.test, ravel_query::prune::Test::Equal { .. }))
        {
            set.extend(s.columns.iter().cloned());
        }
        set.extend(s.filtered.iter().cloned());
        set.extend(s.group_by.iter().cloned());
        set.extend(s.predicates.iter().map(|p| p.column.clone()));
    }
    set.extend(
        current
            .sort_columns()
            .into_iter()
            .map(|(_, c)| c.to_string()),
    );
    set.extend(current.time.clone());
    schema
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .filter(|c| set.contains(c))
        .collect()
}

/// The time column candidates use: the current layout's, else the time-typed column that
/// ranges name most (as [`candidates`] picks it).
fn time_column(current: &Layout, scans: &[Weighted<'_>], schema: &Schema) -> Option<String> {
    candidates::time_column(current, scans, schema)
}

/// Ranks the estimates (fewest bytes first, then fewest stored bytes) and picks the one to
/// recommend.
fn rank(mut advice: Advice, margin: f64, started: Instant) -> Advice {
    let current_bytes = advice.candidates[0].bytes.max(1) as f64;
    for e in &mut advice.candidates {
        e.relative = e.bytes as f64 / current_bytes;
    }
    advice.candidates.sort_by(|a, b| {
        a.bytes
            .cmp(&b.bytes)
            .then(a.stored_bytes.cmp(&b.stored_bytes))
    });
    let current = advice
        .candidates
        .iter()
        .position(|e| e.kind == CandidateKind::Current)
        .expect("the current layout is a candidate");
    advice.recommended = if advice.candidates[0].relative < margin {
        0
    } else {
        current
    };
    advice.seconds = started.elapsed().as_secs_f64();
    advice
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Statements at the largest weight, fetching `bytes` each.
    fn at_most_weight(bytes: &[u64]) -> Vec<StatementEstimate> {
        let statement = |(i, &bytes)| StatementEstimate {
            line: i + 1,
            weight: MAX_WEIGHT,
            kept: 1,
            read: 1,
            objects: 1,
            bytes,
        };
        bytes.iter().enumerate().map(statement).collect()
    }

    #[test]
    fn weighted_bytes_at_the_largest_weights_stay_exact_and_apart() {
        // Full scans of a 20 GB table, a billion times each: far past u64.
        let table: u64 = 20_000_000_000;
        let more = weighted_bytes(&at_most_weight(&[table, table]));
        let less = weighted_bytes(&at_most_weight(&[table, table - 1]));
        assert_eq!(more, 2 * u128::from(table) * u128::from(MAX_WEIGHT));
        assert!(more > u128::from(u64::MAX));
        assert_eq!(more - less, u128::from(MAX_WEIGHT));
    }
}
