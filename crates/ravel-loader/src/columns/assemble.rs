//! An object's keys and ranges, gathered as its sort columns are encoded, and its file
//! assembled from its columns' chunks.

use std::collections::BTreeMap;

use arrow::array::{ArrayRef, RecordBatch};
use parquet::file::metadata::KeyValue;
use ravel_encode::EncodedColumn;
use serde_json::Value;

use super::ColumnLoad;
use crate::object::{EncodedObject, object_blooms};
use crate::{ArrowStage, LoadError};

/// What an object's manifest entry and footer record of its sort columns, gathered as each
/// of them is encoded.
#[derive(Default)]
pub(super) struct ObjectKeys {
    /// Per sort column (in the key schema's order): its first and last value, two rows.
    pub(super) edges: Vec<Option<ArrayRef>>,
    pub(super) ranges: BTreeMap<String, ravel_manifest::ValueRange>,
}

/// One sort column's share of [`ObjectKeys`] for one object.
pub(super) struct KeyColumn {
    pub(super) edges: ArrayRef,
    pub(super) range: Option<ravel_manifest::ValueRange>,
}

impl ColumnLoad {
    /// Object `o`'s file from its columns' chunks, with its keys, ranges and filters.
    pub(super) fn assemble(
        &self,
        o: usize,
        columns: Vec<EncodedColumn>,
    ) -> Result<EncodedObject, LoadError> {
        let (first_key, last_key) = self.first_and_last_key(o)?;
        let kv = vec![
            KeyValue::new(
                "ravel.first_key".into(),
                Value::from(first_key.clone()).to_string(),
            ),
            KeyValue::new(
                "ravel.last_key".into(),
                Value::from(last_key.clone()).to_string(),
            ),
        ];
        let filled: Vec<Option<Vec<u8>>> = columns.iter().map(|c| c.filled_bloom.clone()).collect();
        let size: u64 = columns.iter().map(EncodedColumn::bytes).sum();
        let schema = self.encoder.schema();
        let out = Vec::with_capacity(size as usize + (1 << 20));
        let (bytes, meta) = ravel_encode::assemble(schema, self.props.clone(), columns, kv, out)?;
        let blooms = object_blooms(self.encoder.bloom_columns(), vec![filled], &bytes, &meta);
        let stats = self.encoder.stats_columns();
        let delta_stats = (!stats.is_empty()).then(|| ravel_log::delta_stats(&meta, schema, stats));
        Ok(EncodedObject {
            bytes: bytes::Bytes::from(bytes),
            rows: self.bounds[o + 1] - self.bounds[o],
            first_key: Some(first_key),
            last_key: Some(last_key),
            ranges: self.keys[o].ranges.clone(),
            blooms,
            delta_stats,
        })
    }

    /// The clustering key of object `o`'s first and last row.
    fn first_and_last_key(&self, o: usize) -> Result<(Vec<Value>, Vec<Value>), LoadError> {
        let edges = self.keys[o]
            .edges
            .iter()
            .map(|e| {
                e.clone()
                    .expect("every sort column is encoded before assembly")
            })
            .collect();
        let batch = RecordBatch::try_new(self.key_schema.clone(), edges)
            .map_err(LoadError::arrow(ArrowStage::ComputingRanges))?;
        let key_cols = self.clustering.key_columns(&batch)?;
        let key = |i: usize| -> Vec<Value> {
            key_cols
                .iter()
                .map(|c| ravel_manifest::key_value(c.as_ref(), i))
                .collect()
        };
        Ok((key(0), key(1)))
    }
}

/// An object's first and last value of a sort column and its value range, from the object's
/// values of it.
pub(super) fn key_column(values: &[ArrayRef]) -> Result<KeyColumn, LoadError> {
    let ranges = || LoadError::arrow(ArrowStage::ComputingRanges);
    let first = values.first().filter(|a| !a.is_empty());
    let last = values.last().filter(|a| !a.is_empty());
    let (Some(first), Some(last)) = (first, last) else {
        return Err(LoadError::InternalState {
            task: "a load by columns",
            problem: "an object with no rows",
        });
    };
    let edges = arrow::compute::concat(&[&first.slice(0, 1), &last.slice(last.len() - 1, 1)])
        .map_err(ranges())?;
    let range = ravel_manifest::value_range(values).map_err(ranges())?;
    Ok(KeyColumn { edges, range })
}
