//! The sample a distributed load's plan cuts key ranges from: the sort keys of rows spread
//! evenly over each Parquet input, read from the layout's columns only.

use std::cmp::Ordering;
use std::fs::File;
use std::path::Path;

use arrow::array::{ArrayRef, RecordBatch};
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::{ParquetRecordBatchReaderBuilder, RowSelection, RowSelector};
use ravel_layout::Layout;
use ravel_manifest::{compare_keys, key_value};
use serde_json::Value;

use super::JobError;

/// Rows of one input, as the plan sizes shares.
pub(crate) fn parquet_rows(path: &Path) -> Result<u64, JobError> {
    let builder = open(path)?;
    Ok(builder.metadata().file_metadata().num_rows().max(0) as u64)
}

fn open(path: &Path) -> Result<ParquetRecordBatchReaderBuilder<File>, JobError> {
    let failed = |source| JobError::Sample {
        input: path.display().to_string(),
        source,
    };
    let file = File::open(path).map_err(|e| failed(e.into()))?;
    ParquetRecordBatchReaderBuilder::try_new(file).map_err(failed)
}

/// Sort keys of about `rows` rows of `path`, spread evenly over it, as manifests encode keys.
pub(crate) fn keys(path: &Path, layout: &Layout, rows: usize) -> Result<Vec<Vec<Value>>, JobError> {
    let failed = |source| JobError::Sample {
        input: path.display().to_string(),
        source,
    };
    let builder = open(path)?;
    let total = builder.metadata().file_metadata().num_rows().max(0) as usize;
    if total == 0 || rows == 0 {
        return Ok(Vec::new());
    }
    let names = key_column_names(layout);
    let schema = builder.parquet_schema();
    let roots: Vec<usize> = names
        .iter()
        .map(|n| {
            builder
                .schema()
                .index_of(n)
                .map_err(|e| failed(parquet::errors::ParquetError::ArrowError(e.to_string())))
        })
        .collect::<Result<_, _>>()?;
    let mask = ProjectionMask::roots(schema, roots);
    let reader = builder
        .with_projection(mask)
        .with_row_selection(spread(total, rows))
        .build()
        .map_err(failed)?;
    let mut out = Vec::new();
    for batch in reader {
        let batch = batch.map_err(|e| failed(e.into()))?;
        out.extend(batch_keys(&batch, layout).map_err(|e| failed(e.into()))?);
    }
    Ok(out)
}

/// The layout's columns in sort order: stream, time, key columns (each once).
fn key_column_names(layout: &Layout) -> Vec<String> {
    let mut names: Vec<String> = layout.stream.iter().cloned().collect();
    names.extend(layout.time.iter().cloned());
    if let Some(k) = &layout.clustering_key {
        names.extend(k.columns.iter().cloned());
    }
    let mut seen = std::collections::HashSet::new();
    names.retain(|n| seen.insert(n.clone()));
    names
}

/// One selected row every `total / rows` rows.
fn spread(total: usize, rows: usize) -> RowSelection {
    let gap = (total / rows.max(1)).max(1);
    let mut selectors = Vec::new();
    let mut at = 0;
    while at < total {
        selectors.push(RowSelector::select(1));
        let skip = gap.saturating_sub(1).min(total - at - 1);
        if skip > 0 {
            selectors.push(RowSelector::skip(skip));
        }
        at += 1 + skip;
    }
    RowSelection::from(selectors)
}

/// Each row's sort key: stream, time bucket, key columns, time (as
/// [`ravel_layout::ClusteringOrder::key_columns`] orders them).
fn batch_keys(
    batch: &RecordBatch,
    layout: &Layout,
) -> Result<Vec<Vec<Value>>, arrow::error::ArrowError> {
    let column = |name: &str| -> Result<ArrayRef, arrow::error::ArrowError> {
        batch
            .column_by_name(name)
            .cloned()
            .ok_or_else(|| arrow::error::ArrowError::SchemaError(format!("no column {name}")))
    };
    let (Some(key), Some(time)) = (&layout.clustering_key, &layout.time) else {
        return Ok(Vec::new());
    };
    let mut cols: Vec<ArrayRef> = Vec::new();
    if let Some(s) = &layout.stream {
        cols.push(column(s)?);
    }
    let t = column(time)?;
    let bucket = ravel_layout::time_bucket(t.as_ref(), key.bucket_width.seconds())
        .map_err(|e| arrow::error::ArrowError::ComputeError(e.to_string()))?;
    cols.push(bucket);
    for c in &key.columns {
        cols.push(column(c)?);
    }
    cols.push(t);
    Ok((0..batch.num_rows())
        .map(|i| cols.iter().map(|c| key_value(c.as_ref(), i)).collect())
        .collect())
}

/// `n - 1` cut points that split `keys` (sorted here) into `n` parts of about equal rows; cut
/// points are strictly increasing, so fewer when the sample has fewer distinct keys.
pub(crate) fn cuts(mut keys: Vec<Vec<Value>>, n: usize) -> Vec<Vec<Value>> {
    keys.sort_by(|a, b| compare_keys(a, b));
    let mut out: Vec<Vec<Value>> = Vec::new();
    if keys.is_empty() {
        return out;
    }
    for j in 1..n {
        let k = &keys[j * keys.len() / n];
        let above_last = out
            .last()
            .is_none_or(|l| compare_keys(k, l) == Ordering::Greater);
        if above_last && compare_keys(k, &keys[0]) == Ordering::Greater {
            out.push(k.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spread_selects_about_the_rows_asked_within_the_file() {
        let s = spread(1000, 10);
        let selected: usize = s.iter().filter(|r| !r.skip).map(|r| r.row_count).sum();
        let total: usize = s.iter().map(|r| r.row_count).sum();
        assert_eq!((selected, total), (10, 1000));
        let s = spread(5, 10);
        assert_eq!(s.iter().map(|r| r.row_count).sum::<usize>(), 5);
    }

    #[test]
    fn cuts_are_strictly_increasing_quantiles() {
        let keys: Vec<Vec<Value>> = (0..100).map(|i| vec![Value::from(i / 10)]).collect();
        let c = cuts(keys, 4);
        assert_eq!(
            c,
            vec![
                vec![Value::from(2)],
                vec![Value::from(5)],
                vec![Value::from(7)]
            ]
        );
        let same: Vec<Vec<Value>> = (0..100).map(|_| vec![Value::from(1)]).collect();
        assert!(cuts(same, 4).is_empty());
    }
}
