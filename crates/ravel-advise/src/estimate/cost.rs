//! One statement's cost under a simulated candidate: the objects its manifest and footers
//! keep, and the pages and bytes it fetches of them.

use std::sync::Arc;

use arrow::array::Array;
use ravel_bloom::Filter;
use ravel_query::prune::Pruner;
use serde::Serialize;

use super::{Scale, ScaledChunk, SimObject, Simulated, Sizing, entry};
use crate::statements::Scan;

/// What one statement would cost under a candidate.
#[derive(Debug, Clone, Serialize)]
pub struct StatementEstimate {
    pub line: usize,
    pub weight: u64,
    /// Objects the manifest keeps (opened).
    pub kept: usize,
    /// Objects whose chunks are read.
    pub read: usize,
    pub objects: usize,
    /// Bytes fetched, opening the table included.
    pub bytes: u64,
}

/// The cost of `scan` under the simulated candidate: objects kept by the manifest are opened;
/// of those the footer's statistics keep, the pages that the page index keeps (by the
/// filters' columns) are read, of each column the statement reads, at the sizes `sizing`
/// gives.
pub fn cost(
    sim: &Simulated,
    scan: &Scan,
    pruner: &Pruner,
    sizing: Sizing<'_>,
    columns: &[String],
) -> Cost {
    let scale = sizing.scale;
    let equality = pruner.equality_columns(&scan.filters);
    let read_columns: Vec<usize> = scale
        .file_columns
        .iter()
        .enumerate()
        .filter(|(_, f)| scan.columns.contains(&f.name))
        .map(|(i, _)| i)
        .collect();
    let filter_columns: Vec<usize> = columns
        .iter()
        .enumerate()
        .filter(|(_, c)| scan.filtered.contains(*c))
        .map(|(i, _)| i)
        .collect();
    let predicate = predicate(&scan.filters, sim);
    let mut kept = 0;
    let mut read = 0;
    let mut bytes = scale.open_table as f64 + sidecar_bytes(sim, scan, pruner, scale, &equality);
    for o in &sim.objects {
        let blooms: Vec<(&str, &Filter)> = o
            .blooms
            .iter()
            .filter(|(c, _)| equality.contains(c))
            .map(|(c, f)| (c.as_str(), f))
            .collect();
        if !pruner.may_match_with(&o.manifest, &blooms, &scan.filters) {
            continue;
        }
        kept += 1;
        bytes += scale.open_object;
        if !pruner.may_match_with(&o.stats, &blooms, &scan.filters) {
            continue;
        }
        read += 1;
        let selected = selected_rows(o, &filter_columns, pruner, scale, &scan.filters);
        let matching = matching_rows(o, predicate.as_ref(), &selected);
        // Filter columns are read first, where the page index keeps rows, each in a request
        // of its own; the others then only where rows pass the filters (the query path pushes
        // filters into the scan), in one request.
        let (first, then): (Vec<usize>, Vec<usize>) = read_columns.iter().partition(|&&f| {
            scale.file_columns[f]
                .sampled
                .is_some_and(|c| filter_columns.contains(&c))
        });
        // Each filter column is its own predicate, fetched on its own.
        bytes += first
            .iter()
            .map(|&f| fetched(o, sizing, &[f], &selected))
            .sum::<f64>();
        bytes += match &scan.top_k {
            None => fetched(o, sizing, &then, &matching),
            // A top-k reads its sort columns where rows pass; its bound then skips the rows
            // of the rest but a few (left out).
            Some(keys) => {
                let sort: Vec<usize> = then
                    .iter()
                    .copied()
                    .filter(|&f| keys.contains(&scale.file_columns[f].name))
                    .collect();
                fetched(o, sizing, &sort, &matching)
            }
        };
    }
    Cost {
        kept,
        read,
        bytes: bytes.round() as u64,
    }
}

/// Bytes of the sidecar sections a statement reads: of each column it looks up that has
/// filters, every object's filter, when any object is in play by its ranges.
fn sidecar_bytes(
    sim: &Simulated,
    scan: &Scan,
    pruner: &Pruner,
    scale: &Scale,
    equality: &std::collections::BTreeSet<String>,
) -> f64 {
    let Some(first) = sim.objects.first() else {
        return 0.0;
    };
    let columns: Vec<&String> = first
        .blooms
        .iter()
        .map(|(c, _)| c)
        .filter(|c| equality.contains(*c))
        .collect();
    let in_play = sim
        .objects
        .iter()
        .any(|o| pruner.may_match(&o.manifest, &scan.filters));
    if columns.is_empty() || !in_play {
        return 0.0;
    }
    let objects = sim.objects.len() as f64;
    columns
        .iter()
        .map(|c| scale.bloom_bytes.get(*c).copied().unwrap_or(0.0) * objects)
        .sum()
}

/// The object's rows that the page index keeps: for each filter column, the rows of its pages
/// whose range may match; a row is kept when every filter column keeps it.
fn selected_rows(
    o: &SimObject,
    filter_columns: &[usize],
    pruner: &Pruner,
    scale: &Scale,
    filters: &[datafusion::prelude::Expr],
) -> Vec<bool> {
    let n = o.part.rows.num_rows();
    let mut keep = vec![true; n];
    let schema = o.part.rows.schema();
    for &c in filter_columns {
        let name = schema.field(c).name();
        let ranges = o.part.page_ranges[c].get_or_init(|| {
            let column = o.part.rows.column(c);
            pages(n, scale.page_rows[c])
                .map(|p| {
                    ravel_manifest::value_range(&[column.slice(p.start, p.len())])
                        .ok()
                        .flatten()
                })
                .collect()
        });
        for (page, range) in pages(n, scale.page_rows[c]).zip(ranges) {
            let mut e = entry(page.len());
            if let Some(r) = range {
                e.ranges.insert(name.clone(), r.clone());
            }
            if !pruner.may_match(&e, filters) {
                keep[page].iter_mut().for_each(|k| *k = false);
            }
        }
    }
    keep
}

/// The statement's filters as one predicate over the rows as statements see them; `None`
/// when there are none or they do not plan here (then every kept row counts as passing).
fn predicate(
    filters: &[datafusion::prelude::Expr],
    sim: &Simulated,
) -> Option<Arc<dyn datafusion::physical_expr::PhysicalExpr>> {
    use datafusion::common::tree_node::{Transformed, TreeNode};
    use datafusion::prelude::Expr;
    let schema = sim.objects.first()?.part.seen.schema();
    let expr = datafusion::logical_expr::utils::conjunction(filters.iter().cloned())?;
    // The filters name the table's scan; the rows here are unqualified.
    let expr = expr
        .transform(|e| match e {
            Expr::Column(c) => Ok(Transformed::yes(Expr::Column(
                datafusion::common::Column::new_unqualified(c.name),
            ))),
            other => Ok(Transformed::no(other)),
        })
        .ok()?
        .data;
    let df_schema = datafusion::common::DFSchema::try_from(schema.as_ref().clone()).ok()?;
    let props = datafusion::execution::context::ExecutionProps::new();
    let ctx =
        datafusion::logical_expr::physical_planning_context::PhysicalPlanningContext::default();
    match datafusion::physical_expr::create_physical_expr(&expr, &df_schema, &props, &ctx) {
        Ok(p) => Some(p),
        Err(e) => {
            tracing::debug!(error = %e, "a statement's filters do not evaluate on the sample");
            None
        }
    }
}

/// The selected rows that pass the predicate.
fn matching_rows(
    o: &SimObject,
    predicate: Option<&Arc<dyn datafusion::physical_expr::PhysicalExpr>>,
    selected: &[bool],
) -> Vec<bool> {
    let Some(p) = predicate else {
        return selected.to_vec();
    };
    let passing = p
        .evaluate(&o.part.seen)
        .and_then(|v| v.into_array(o.part.seen.num_rows()))
        .ok()
        .and_then(|a| {
            a.as_any()
                .downcast_ref::<arrow::array::BooleanArray>()
                .cloned()
        });
    match passing {
        Some(b) => selected
            .iter()
            .enumerate()
            .map(|(i, &s)| s && b.is_valid(i) && b.value(i))
            .collect(),
        None => selected.to_vec(),
    }
}

/// Row ranges of pages of `page_rows` rows (at least one) over `n` rows.
fn pages(n: usize, page_rows: f64) -> impl Iterator<Item = std::ops::Range<usize>> {
    let count = ((n as f64 / page_rows.max(1.0)).ceil() as usize).clamp(1, n.max(1));
    (0..count).map(move |k| k * n / count..(k + 1) * n / count)
}

/// Bytes fetched for the pages of `columns` that hold a row of `rows`, in one request as the
/// query path makes it: each column's pages at their place in the object, ranges closer than
/// object_store's coalescing gap fetched as one.
fn fetched(o: &SimObject, sizing: Sizing<'_>, columns: &[usize], rows: &[bool]) -> f64 {
    let scale = sizing.scale;
    let n = rows.len();
    if columns.is_empty() || n == 0 {
        return 0.0;
    }
    let mut ranges: Vec<(f64, f64)> = Vec::new();
    let mut at = 0.0;
    for (f, fc) in scale.file_columns.iter().enumerate() {
        let chunk = match fc.sampled {
            Some(c) => scale.per_column[c].scaled(o.part.sizes[c]),
            None => ScaledChunk {
                bytes: fc.bytes,
                dictionary: fc.bytes * fc.dictionary_share,
            },
        };
        let ScaledChunk {
            bytes: size,
            dictionary,
        } = sizing.of(f).apply(chunk);
        if columns.contains(&f) {
            let all: Vec<std::ops::Range<usize>> = pages(n, fc.page_rows).collect();
            let mut hit: Vec<&std::ops::Range<usize>> = all
                .iter()
                .filter(|p| rows[(*p).clone()].iter().any(|&s| s))
                .collect();
            // Statistics kept the object, so a matching row may lie between sampled rows: at
            // least one page is read.
            if hit.is_empty() {
                hit.push(&all[all.len() / 2]);
            }
            if dictionary > 0.0 {
                ranges.push((at, at + dictionary));
            }
            let data = at + dictionary;
            let per_row = (size - dictionary) / n as f64;
            ranges.extend(hit.iter().map(|p| {
                (
                    data + p.start as f64 * per_row,
                    data + p.end as f64 * per_row,
                )
            }));
        }
        at += size;
    }
    coalesced(ranges)
}

/// Total bytes of `ranges` once those closer than object_store's gap are fetched as one.
fn coalesced(mut ranges: Vec<(f64, f64)>) -> f64 {
    let gap = object_store::OBJECT_STORE_COALESCE_DEFAULT as f64;
    ranges.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut total = 0.0;
    let mut current: Option<(f64, f64)> = None;
    for (start, end) in ranges {
        current = match current {
            Some((s, e)) if start - e <= gap => Some((s, e.max(end))),
            Some((s, e)) => {
                total += e - s;
                Some((start, end))
            }
            None => Some((start, end)),
        };
    }
    total + current.map_or(0.0, |(s, e)| e - s)
}

/// Objects kept and read, and bytes fetched, by one statement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cost {
    pub kept: usize,
    pub read: usize,
    pub bytes: u64,
}
