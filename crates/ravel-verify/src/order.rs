//! Clustering order: a load's sort key is its layout's; objects of one run follow each other in
//! key order and do not overlap; a clustered object's row group names the stream column first
//! in its `sorting_columns`; and, deep, the rows are in clustering order and span the key range
//! the manifest records.

use std::cmp::Ordering;

use arrow::array::RecordBatch;
use arrow::datatypes::{Schema, SchemaRef};
use arrow::row::Rows;
use parquet::file::metadata::RowGroupMetaData;
use ravel_layout::{ClusteringOrder, Layout};
use ravel_manifest::{Manifest, ObjectEntry, compare_keys, key_value};
use serde_json::Value;

use crate::{Problem, Violation};

/// The manifest's sort key against its layout generation's (for a clustered layout).
pub(crate) fn sort_key_problem(m: &Manifest, layout: &Layout) -> Option<Problem> {
    let names = layout.sort_key_names();
    (layout.clustering_key.is_some() && m.sort_key != names).then(|| Problem::SortKeyMismatch {
        sort_key: m.sort_key.clone(),
        generation: m.layout_generation,
        layout: names,
    })
}

/// Objects of one run follow each other in key order and must not overlap.
pub(crate) fn check_runs(manifest: &str, m: &Manifest) -> Vec<Violation> {
    let mut out = Vec::new();
    for pair in m.objects.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        if a.run != b.run {
            continue;
        }
        if let (Some(last), Some(first)) = (&a.last_key, &b.first_key)
            && compare_keys(last, first) == Ordering::Greater
        {
            let problem = Problem::RunOverlap {
                previous: a.key.clone(),
                run: a.run,
                manifest: manifest.to_string(),
                last: Value::from(last.clone()),
                first: Value::from(first.clone()),
            };
            out.push(Violation::new(b.key.clone(), problem));
        }
    }
    out
}

/// A clustered object's row group must name the stream column first in `sorting_columns`.
pub(crate) fn sorting_columns_problem(
    layout: &Layout,
    schema: &Schema,
    group: &RowGroupMetaData,
) -> Option<Problem> {
    let stream = layout
        .stream
        .as_ref()
        .filter(|_| layout.clustering_key.is_some())?;
    let want = schema.index_of(stream).ok()?;
    let got = group
        .sorting_columns()
        .and_then(|s| s.first())
        .map(|s| s.column_idx as usize);
    (got != Some(want)).then(|| Problem::SortingColumns {
        sorting_columns: group.sorting_columns().cloned(),
        stream: stream.clone(),
    })
}

/// The rows against the clustering order and the recorded key range.
pub(crate) fn row_problems(
    layout: &Layout,
    entry: &ObjectEntry,
    schema: &SchemaRef,
    batches: &[RecordBatch],
) -> Vec<Problem> {
    let order = match ClusteringOrder::try_new(layout, schema) {
        Ok(Some(o)) => o,
        Ok(None) => return Vec::new(), // arrival order: nothing to check
        Err(e) => return vec![Problem::LayoutMismatch { cause: e.into() }],
    };
    let batch = match arrow::compute::concat_batches(schema, batches) {
        Ok(b) => b,
        Err(e) => return vec![Problem::RowsUnjoinable { cause: e.into() }],
    };
    if batch.num_rows() == 0 {
        return Vec::new();
    }
    let rows = match order.key_rows(&batch) {
        Ok(rows) => rows,
        Err(e) => return vec![Problem::SortKeyUncomputable { cause: e.into() }],
    };
    let mut out: Vec<Problem> = order_problem(&rows).into_iter().collect();
    out.extend(range_problem(&order, entry, &batch));
    out
}

/// The first pair of neighbouring rows out of clustering order.
fn order_problem(rows: &Rows) -> Option<Problem> {
    (1..rows.num_rows())
        .find(|&i| rows.row(i - 1) > rows.row(i))
        .map(|next| Problem::OutOfOrder {
            row: next - 1,
            next,
        })
}

/// The keys of the first and last rows against the manifest's key range.
fn range_problem(
    order: &ClusteringOrder,
    entry: &ObjectEntry,
    batch: &RecordBatch,
) -> Option<Problem> {
    let cols = match order.key_columns(batch) {
        Ok(cols) => cols,
        Err(e) => return Some(Problem::SortKeyUncomputable { cause: e.into() }),
    };
    let at = |i: usize| -> Vec<Value> { cols.iter().map(|c| key_value(c.as_ref(), i)).collect() };
    let (first, last) = (at(0), at(batch.num_rows() - 1));
    let agrees = entry.first_key.as_ref() == Some(&first) && entry.last_key.as_ref() == Some(&last);
    (!agrees).then(|| Problem::KeyRangeMismatch {
        first: Value::from(first),
        last: Value::from(last),
        manifest_first: entry.first_key.clone().map(Value::from),
        manifest_last: entry.last_key.clone().map(Value::from),
    })
}
