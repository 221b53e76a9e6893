//! Every candidate costed from its simulation: the scale from the sample to the table, the
//! bytes each statement would fetch, and the bytes the table would store.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Instant;

use datafusion::arrow::datatypes::Schema;
use ravel_query::QueryTable;
use ravel_query::prune::Pruner;
use rayon::prelude::*;

use crate::estimate::{self, Scale, Simulated};
use crate::simulations::simulate_all;
use crate::{AdviseError, Advised, Candidate, Estimate, StatementEstimate, groups, sample};

/// Every candidate simulated and costed, the current layout's simulation scaling all, and a
/// candidate whose stream has a sample of whole groups sized by it (see [`groups`]).
pub(crate) fn estimate_all(
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
/// [`log::MAX_WEIGHT`](crate::log::MAX_WEIGHT) (a statement's product fits 94 bits), so that
/// no two candidates meet at a saturated figure.
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
