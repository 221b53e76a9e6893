//! The time the sample's rows span: all of them, and those of each range a statement reads
//! (what a time bucket should hold for the range to read few buckets).

use crate::candidates::{Span, Weighted};

/// Seconds between the oldest and newest time of the sample's rows (of those `rows` selects).
pub(crate) fn time_span(
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
pub(crate) fn range_spans(
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
