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

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Instant;

use datafusion::arrow::datatypes::Schema;
use ravel_layout::{Layout, LayoutError, LayoutStore};
use ravel_query::prune::Pruner;
use ravel_query::{QueryError, QueryOptions, QueryTable};
use ravel_store::Store;
use rayon::prelude::*;
use serde::Serialize;

pub use candidates::{Candidate, CandidateKind, Span, Weighted};
pub use estimate::StatementEstimate;
pub use log::{MAX_WEIGHT, Statement, log_text, parse_log};
pub use statements::Skipped;

use crate::estimate::{Scale, Simulated};
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
    #[error("hashing the sample's values to draw whole groups: {0}")]
    Hash(#[from] datafusion::error::DataFusionError),
    #[error("reading the sample: {0}")]
    Parquet(#[from] parquet::errors::ParquetError),
    #[error("estimating a layout: {0}")]
    Arrow(#[from] arrow::error::ArrowError),
    #[error("a task reading the sample failed: {0}")]
    Task(#[from] tokio::task::JoinError),
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

/// Seconds between the oldest and newest time of the sample's rows (of those `rows` selects).
fn time_span(
    batch: &arrow::array::RecordBatch,
    time: &str,
    rows: Option<&arrow::array::BooleanArray>,
) -> Option<u64> {
    use arrow::array::AsArray;
    use arrow::datatypes::Int64Type;
    let secs = ravel_layout::time_bucket(batch.column_by_name(time)?.as_ref(), 1).ok()?;
    let secs = match rows {
        Some(r) => arrow::compute::filter(&secs, r).ok()?,
        None => secs,
    };
    let secs = secs.as_primitive_opt::<Int64Type>()?;
    let lo = arrow::compute::min(secs)?;
    let hi = arrow::compute::max(secs)?;
    Some((hi - lo).max(0) as u64)
}

/// For each range with both bounds, the time its rows in the sample cover, with its weight:
/// what a bucket should hold for the range to read few buckets.
fn range_spans(
    batch: &arrow::array::RecordBatch,
    time: Option<&str>,
    scans: &[Weighted<'_>],
) -> Vec<Span> {
    use ravel_query::prune::Test;
    let Some(time) = time else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for Weighted { weight, scan } in scans {
        let mut bounds: std::collections::BTreeMap<&str, (Option<f64>, Option<f64>)> =
            Default::default();
        for p in &scan.predicates {
            if let Test::Range { low, high, .. } = &p.test {
                let b = bounds.entry(p.column.as_str()).or_default();
                b.0 = b.0.or(*low);
                b.1 = b.1.or(*high);
            }
        }
        for (column, (low, high)) in bounds {
            let (Some(low), Some(high)) = (low, high) else {
                continue;
            };
            let Some(rows) = in_range(batch, column, low, high) else {
                continue;
            };
            if let Some(span) = time_span(batch, time, Some(&rows)) {
                out.push(Span {
                    seconds: span.max(1),
                    weight: *weight,
                });
            }
        }
    }
    out
}

/// The rows whose `column` lies within `[low, high]`, compared as numbers.
fn in_range(
    batch: &arrow::array::RecordBatch,
    column: &str,
    low: f64,
    high: f64,
) -> Option<arrow::array::BooleanArray> {
    use arrow::array::AsArray;
    use arrow::datatypes::{DataType, Float64Type};
    let a = batch.column_by_name(column)?;
    let a = match a.data_type() {
        DataType::Date32 | DataType::Date64 | DataType::Timestamp(_, _) => arrow::compute::cast(
            &arrow::compute::cast(a, &DataType::Int64).ok()?,
            &DataType::Float64,
        ),
        _ => arrow::compute::cast(a, &DataType::Float64),
    }
    .ok()?;
    let values = a.as_primitive_opt::<Float64Type>()?;
    Some(
        values
            .iter()
            .map(|v| v.map(|v| low <= v && v <= high))
            .collect(),
    )
}

/// Every candidate simulated and costed, the current layout's simulation scaling all, and a
/// candidate whose stream has a sample of whole groups sized by it (see [`groups`]).
fn estimate_all(
    candidates: &[Candidate],
    sample: &sample::Sample,
    groups: &[groups::GroupSample],
    scans: &[Advised<'_>],
    schema: &Schema,
    q: &QueryTable,
) -> Result<Vec<Estimate>, AdviseError> {
    let started = Instant::now();
    let lookups = lookups(scans);
    let dictionaries = dictionary_columns(sample);
    let table = estimate::Table {
        objects: sample.objects,
        dictionaries: &dictionaries,
        lookups: &lookups,
    };
    let (sims, ratios) = rayon::join(
        || simulate_all(candidates, sample, &table),
        || groups::ratios(candidates, groups, &table),
    );
    let (sims, ratios) = (sims?, ratios?);
    tracing::debug!(seconds = started.elapsed().as_secs_f64(), "simulated");
    let started = Instant::now();
    let columns: Vec<String> = sample
        .batch
        .schema_ref()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect();
    let costing = Costing {
        scans,
        pruner: Pruner::new(schema),
        scale: scale(&sims[0], sample, &columns, schema, q),
        current: sims[0].column_totals(),
        current_seconds: sims[0].seconds,
        columns,
        sample,
    };
    let mut costed = Vec::new();
    let out = candidates
        .iter()
        .zip(&sims)
        .zip(&ratios)
        .map(|((c, sim), ratio)| costing.estimate(c, sim, ratio.as_ref(), &mut costed))
        .collect();
    tracing::debug!(seconds = started.elapsed().as_secs_f64(), "costed");
    Ok(out)
}

/// The columns any object stores with a dictionary: a compacted table is one run, whose trial
/// chose for every object alike.
fn dictionary_columns(sample: &sample::Sample) -> BTreeSet<String> {
    sample
        .dictionary_bytes
        .iter()
        .filter(|(_, b)| **b > 0)
        .map(|(c, _)| c.clone())
        .collect()
}

/// What costing a simulated candidate needs.
struct Costing<'a, 'b> {
    scans: &'a [Advised<'b>],
    pruner: Pruner,
    scale: Scale,
    /// The current layout's simulation: its column totals and seconds.
    current: Vec<estimate::ChunkSize>,
    current_seconds: f64,
    /// The sample's columns.
    columns: Vec<String>,
    sample: &'a sample::Sample,
}

impl Costing<'_, '_> {
    /// Candidate `c`'s estimate from its simulation, resized by its group sample's `ratios` if
    /// any; `costed` keeps the statements' costs of each simulation and sizing met so far.
    fn estimate(
        &self,
        c: &Candidate,
        sim: &Arc<Simulated>,
        ratios: Option<&groups::Ratios>,
        costed: &mut Vec<Costed>,
    ) -> Estimate {
        let totals = sim.column_totals();
        let resize = ratios.map_or_else(Vec::new, |r| {
            groups::resize(r, &self.scale.file_columns, &self.current, &totals)
        });
        let sizing = estimate::Sizing {
            scale: &self.scale,
            resize: &resize,
        };
        let same = costed
            .iter()
            .find(|c| Arc::ptr_eq(&c.sim, sim) && c.resize == resize)
            .map(|c| c.statements.clone());
        let statements = match same {
            Some(st) => st,
            None => cost_all(sim, self.scans, &self.pruner, sizing, &self.columns),
        };
        let objects = estimate::object_count(sim);
        let stored_bytes = stored_bytes(&totals, sizing, self.sample, objects);
        costed.push(Costed {
            sim: sim.clone(),
            resize,
            statements: statements.clone(),
        });
        Estimate {
            name: c.name.clone(),
            kind: c.kind,
            layout: c.layout.clone(),
            bytes: weighted_bytes(&statements),
            relative: 0.0,
            whole_groups: ratios.is_some(),
            stored_bytes,
            load_cost: sim.seconds / self.current_seconds.max(1e-9),
            statements,
        }
    }
}

/// The bytes `statements` fetch, each times its weight: exact for weights up to
/// [`log::MAX_WEIGHT`] (a statement's product fits 94 bits), so that no two candidates meet at a
/// saturated figure.
pub fn weighted_bytes(statements: &[StatementEstimate]) -> u128 {
    statements.iter().fold(0u128, |b, s| {
        b.saturating_add(u128::from(s.bytes) * u128::from(s.weight))
    })
}

/// A simulation costed at one sizing: candidates of the same simulation and sizing share its
/// statements' costs.
struct Costed {
    sim: Arc<Simulated>,
    resize: Vec<estimate::Resize>,
    statements: Vec<StatementEstimate>,
}

/// The scale from the sample's encoded sizes to the table's, by the current layout's
/// simulation (`current`) against the table's stored bytes.
fn scale(
    current: &Simulated,
    sample: &sample::Sample,
    columns: &[String],
    schema: &Schema,
    q: &QueryTable,
) -> Scale {
    Scale {
        per_column: current
            .column_totals()
            .into_iter()
            .zip(columns)
            .map(|(sim, c)| {
                let of = |m: &BTreeMap<String, u64>| m.get(c).copied().unwrap_or(0);
                let stored = estimate::ChunkSize {
                    bytes: of(&sample.column_bytes),
                    dictionary: of(&sample.dictionary_bytes),
                };
                estimate::PartScale::new(sim, stored)
            })
            .collect(),
        page_rows: columns
            .iter()
            .map(|c| {
                let rows = sample
                    .page_rows
                    .get(c)
                    .copied()
                    .unwrap_or(sample.table_rows as f64);
                rows * sample.fraction()
            })
            .collect(),
        bloom_bytes: sample.bloom_bytes.clone(),
        open_object: open_object(q, sample),
        open_table: q.opened().traffic.bytes,
        file_columns: file_columns(schema, columns, sample),
    }
}

/// Bytes the table would store under a candidate whose sample encodes to `totals` per sampled
/// column: those scaled and resized, the other columns at their stored bytes resized, and a
/// page index per object.
fn stored_bytes(
    totals: &[estimate::ChunkSize],
    sizing: estimate::Sizing<'_>,
    sample: &sample::Sample,
    objects: usize,
) -> u64 {
    let of = |m: &BTreeMap<String, u64>, c: &str| m.get(c).copied().unwrap_or(0) as f64;
    let columns: f64 = sizing
        .scale
        .file_columns
        .iter()
        .enumerate()
        .map(|(f, fc)| {
            let chunk = match fc.sampled {
                Some(c) => sizing.scale.per_column[c].scaled(totals[c]),
                None => estimate::ScaledChunk {
                    bytes: of(&sample.column_bytes, &fc.name),
                    dictionary: of(&sample.dictionary_bytes, &fc.name),
                },
            };
            sizing.of(f).apply(chunk).bytes
        })
        .sum();
    (columns + sample.page_index_bytes * objects as f64).round() as u64
}

/// Each candidate's simulation, in the candidates' order: candidates of one
/// [`estimate::Signature`] share a simulation, those that put the sample in the same order
/// share its encoding, and the distinct ones run in parallel.
fn simulate_all(
    candidates: &[Candidate],
    sample: &sample::Sample,
    table: &estimate::Table<'_>,
) -> Result<Vec<Arc<Simulated>>, AdviseError> {
    let ordered: Vec<(estimate::Ordered, f64)> = candidates
        .par_iter()
        .map(|c| {
            let started = Instant::now();
            let o = estimate::ordered(&sample.batch, c)?;
            Ok((o, started.elapsed().as_secs_f64()))
        })
        .collect::<Result<_, AdviseError>>()?;
    // The first candidate of each signature stands for the others.
    let first: Vec<usize> = (0..candidates.len())
        .map(|i| {
            (0..=i)
                .find(|&j| ordered[j].0.signature == ordered[i].0.signature)
                .unwrap_or(i)
        })
        .collect();
    let distinct: Vec<usize> = (0..candidates.len()).filter(|&i| first[i] == i).collect();
    // Signatures that differ only in what the manifest and the filters record, or in being
    // arrival order, share the encoding of their order.
    let same_order =
        |i: usize, j: usize| ordered[i].0.signature.same_order(&ordered[j].0.signature);
    let orders: Vec<usize> = distinct
        .iter()
        .copied()
        .filter(|&i| distinct.iter().find(|&&j| same_order(i, j)) == Some(&i))
        .collect();
    let encoded = encode_orders(&orders, &ordered, sample, table)?;
    let simulated: Vec<(usize, Arc<Simulated>)> = distinct
        .par_iter()
        .map(|&i| {
            let (_, e) = encoded
                .iter()
                .find(|(j, _)| same_order(i, *j))
                .expect("every order is encoded");
            let mut sim = estimate::simulate(e, &candidates[i], table)?;
            sim.seconds += ordered[i].1;
            Ok((i, Arc::new(sim)))
        })
        .collect::<Result<_, AdviseError>>()?;
    tracing::debug!(
        candidates = candidates.len(),
        simulations = distinct.len(),
        orders = orders.len(),
        "candidates simulated"
    );
    Ok(first
        .iter()
        .map(|f| {
            simulated
                .iter()
                .find(|(i, _)| i == f)
                .map(|(_, s)| s.clone())
                .expect("every signature's first candidate is simulated")
        })
        .collect())
}

/// The sample encoded in the order of each candidate of `orders` (indices into `ordered`),
/// in parallel, with the index of the candidate it stands for.
fn encode_orders(
    orders: &[usize],
    ordered: &[(estimate::Ordered, f64)],
    sample: &sample::Sample,
    table: &estimate::Table<'_>,
) -> Result<Vec<(usize, estimate::Encoded)>, AdviseError> {
    let seen = estimate::as_seen(&sample.batch)?;
    orders
        .par_iter()
        .map(|&i| {
            let e = estimate::encode(&sample.batch, &seen, &ordered[i].0.order, table)?;
            Ok((i, e))
        })
        .collect()
}

/// Every statement's cost under one simulated candidate, the statements costed in parallel.
fn cost_all(
    sim: &Simulated,
    scans: &[Advised<'_>],
    pruner: &Pruner,
    sizing: estimate::Sizing<'_>,
    columns: &[String],
) -> Vec<StatementEstimate> {
    scans
        .par_iter()
        .map(|a| {
            let cost = estimate::cost(sim, a.scan, pruner, sizing, columns);
            StatementEstimate {
                line: a.statement.line,
                weight: a.statement.weight,
                kept: cost.kept,
                read: cost.read,
                objects: estimate::object_count(sim),
                bytes: cost.bytes,
            }
        })
        .collect()
}

/// The table's columns in file order, with what the sample and the objects tell of each.
fn file_columns(
    schema: &Schema,
    sampled: &[String],
    sample: &sample::Sample,
) -> Vec<estimate::FileColumn> {
    let objects = sample.objects.max(1) as f64;
    schema
        .fields()
        .iter()
        .map(|f| {
            let name = f.name();
            let bytes = sample.column_bytes.get(name).copied().unwrap_or(0) as f64;
            let dictionary = sample.dictionary_bytes.get(name).copied().unwrap_or(0) as f64;
            let page_rows = sample
                .page_rows
                .get(name)
                .copied()
                .unwrap_or(sample.table_rows as f64);
            estimate::FileColumn {
                name: name.clone(),
                sampled: sampled.iter().position(|c| c == name),
                bytes: bytes / objects,
                page_rows: page_rows * sample.fraction(),
                dictionary_share: if bytes > 0.0 { dictionary / bytes } else { 0.0 },
            }
        })
        .collect()
}

/// The strings the statements compare columns with for equality.
fn lookups(scans: &[Advised<'_>]) -> estimate::Lookups {
    let mut out = estimate::Lookups::new();
    for scan in scans.iter().map(|a| a.scan) {
        for p in &scan.predicates {
            if let ravel_query::prune::Test::Equal { strings, .. } = &p.test {
                out.entry(p.column.clone())
                    .or_default()
                    .extend(strings.iter().cloned());
            }
        }
    }
    out
}

/// How many times the query path reads an object's footer (the file's last
/// `metadata_size_hint` bytes): once to plan and once to open it with its page index, as its
/// store traffic shows.
const FOOTER_READS: f64 = 1.0;

/// The bytes opening one object costs the query path: its footer reads and its page index.
fn open_object(q: &QueryTable, sample: &sample::Sample) -> f64 {
    let hint = q
        .context()
        .state()
        .config()
        .options()
        .execution
        .parquet
        .metadata_size_hint
        .unwrap_or(0) as f64;
    FOOTER_READS * hint.min(sample.object_bytes) + sample.page_index_bytes
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

/// What [`apply`] stored.
#[derive(Debug, Clone, Serialize)]
pub struct Applied {
    /// The table's layout generation after it (the one before when nothing changed).
    pub generation: u64,
    /// Whether a new generation was stored; `false`: the layout was the table's already.
    pub changed: bool,
    /// Whether the clustering order changed, so that `compact` re-clusters every object.
    pub reorders: bool,
    /// Bytes `compact` will rewrite to re-cluster the table.
    pub rewrite_bytes: u64,
}

/// `base` with `layout`'s stream, time, clustering key and Bloom scope: the layout [`apply`]
/// stores (maintenance policy and fence stay as they are).
pub fn applied_to(base: &Layout, layout: &Layout) -> Layout {
    Layout {
        stream: layout.stream.clone(),
        time: layout.time.clone(),
        clustering_key: layout.clustering_key.clone(),
        bloom: layout.bloom.clone(),
        ..base.clone()
    }
}

/// Whether `next` over `base` gives the stored objects a new order for `compact` to restore.
/// A layout with no key leaves them as they are (compact has no order to restore), so only a
/// new, non-empty key does.
pub fn reorders(base: &Layout, next: &Layout) -> bool {
    !next.sort_key_names().is_empty() && next.sort_key_names() != base.sort_key_names()
}

/// Stores `layout`'s stream, time, clustering key and Bloom scope as `table`'s next layout
/// generation (see [`applied_to`]); stores nothing when they are the table's already.
pub async fn apply(
    store: &Store,
    table: &str,
    layout: &Layout,
    table_bytes: u64,
) -> Result<Applied, AdviseError> {
    let layouts = LayoutStore::new(store, table)?;
    let base = layouts.load().await?;
    let next = applied_to(&base, layout);
    let reorders = reorders(&base, &next);
    let updated = layouts.update_from(&base, next).await?;
    Ok(Applied {
        generation: updated.layout.generation,
        changed: updated.changed,
        reorders,
        rewrite_bytes: if reorders { table_bytes } else { 0 },
    })
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
