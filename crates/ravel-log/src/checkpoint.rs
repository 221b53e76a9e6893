//! Checkpoints: every [`CHECKPOINT_INTERVAL`] versions, and at every merge's version (a step of
//! a compaction or of maintenance), the table's state is written as Delta Lake's classic
//! checkpoint, `_delta_log/<version, 20 digits>.checkpoint.parquet` (one row per action:
//! `protocol`, `metaData`, an `add` per object, a `remove` per tombstone, a `txn` per
//! application or consumed input), and
//! `_delta_log/_last_checkpoint` names it. A reader starts from the newest checkpoint and
//! replays only the entries after it, so that reading the newest version costs one LIST from
//! the checkpoint on and at most `CHECKPOINT_INTERVAL - 1` entries, however long the history.
//!
//! A checkpoint only summarises entries that exist: losing one (or `_last_checkpoint`) costs a
//! longer replay, never a version.

use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::{DataType, Field, Fields, Schema, SchemaRef};
use bytes::Bytes;
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use serde::{Deserialize, Serialize};

use crate::actions::{ActionLine, decode_entry, encode_entry};
use crate::{LogError, Snapshot};

/// Versions between checkpoints (Delta's default).
pub const CHECKPOINT_INTERVAL: u64 = 10;

/// The content of `_last_checkpoint`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LastCheckpoint {
    pub version: u64,
    /// Actions (rows) in the checkpoint.
    pub size: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_of_add_files: Option<u64>,
}

fn map_of_strings(name: &str) -> Field {
    let entries = Field::new(
        "key_value",
        DataType::Struct(Fields::from(vec![
            Field::new("key", DataType::Utf8, false),
            Field::new("value", DataType::Utf8, true),
        ])),
        false,
    );
    Field::new(name, DataType::Map(Arc::new(entries), false), true)
}

fn strings(name: &str) -> Field {
    let item = Field::new("element", DataType::Utf8, true);
    Field::new(name, DataType::List(Arc::new(item)), true)
}

fn record(name: &str, fields: Vec<Field>) -> Field {
    Field::new(name, DataType::Struct(Fields::from(fields)), true)
}

/// The checkpoint's schema: Delta's, for the actions this build writes.
pub fn checkpoint_schema() -> SchemaRef {
    let s = |n: &str| Field::new(n, DataType::Utf8, true);
    let l = |n: &str| Field::new(n, DataType::Int64, true);
    let b = |n: &str| Field::new(n, DataType::Boolean, true);
    Arc::new(Schema::new(vec![
        record(
            "protocol",
            vec![
                Field::new("minReaderVersion", DataType::Int32, true),
                Field::new("minWriterVersion", DataType::Int32, true),
                strings("readerFeatures"),
                strings("writerFeatures"),
            ],
        ),
        record(
            "metaData",
            vec![
                s("id"),
                s("name"),
                s("description"),
                record("format", vec![s("provider"), map_of_strings("options")]),
                s("schemaString"),
                strings("partitionColumns"),
                map_of_strings("configuration"),
                l("createdTime"),
            ],
        ),
        record(
            "add",
            vec![
                s("path"),
                map_of_strings("partitionValues"),
                l("size"),
                l("modificationTime"),
                b("dataChange"),
                s("stats"),
                map_of_strings("tags"),
            ],
        ),
        record(
            "remove",
            vec![
                s("path"),
                l("deletionTimestamp"),
                b("dataChange"),
                b("extendedFileMetadata"),
                map_of_strings("partitionValues"),
                l("size"),
                map_of_strings("tags"),
            ],
        ),
        record("txn", vec![s("appId"), l("version"), l("lastUpdated")]),
    ]))
}

/// The actions of `snapshot` as a checkpoint: protocol, metadata, its objects, its tombstones.
pub fn checkpoint_actions(snapshot: &Snapshot) -> Vec<ActionLine> {
    let mut out = Vec::new();
    if let Some(p) = &snapshot.protocol {
        out.push(ActionLine {
            protocol: Some(p.clone()),
            ..ActionLine::default()
        });
    }
    if let Some(m) = &snapshot.metadata {
        out.push(ActionLine {
            meta_data: Some(m.clone()),
            ..ActionLine::default()
        });
    }
    for add in snapshot.files().values() {
        out.push(ActionLine {
            add: Some(add.clone()),
            ..ActionLine::default()
        });
    }
    for r in snapshot.tombstones() {
        out.push(ActionLine {
            remove: Some(r),
            ..ActionLine::default()
        });
    }
    for t in snapshot.txns().values() {
        out.push(ActionLine {
            txn: Some(t.clone()),
            ..ActionLine::default()
        });
    }
    out
}

fn internal<E>(what: &str, e: E) -> LogError
where
    E: std::error::Error + Send + Sync + 'static,
{
    LogError::Checkpoint {
        what: what.to_string(),
        source: Box::new(e),
    }
}

/// `actions` as a checkpoint file.
pub fn encode_checkpoint(actions: &[ActionLine]) -> Result<Bytes, LogError> {
    let schema = checkpoint_schema();
    let json = encode_entry(actions);
    let mut decoder = arrow::json::ReaderBuilder::new(schema.clone())
        .build_decoder()
        .map_err(|e| internal("building the checkpoint's decoder", e))?;
    let mut out = Vec::new();
    let mut w = ArrowWriter::try_new(&mut out, schema.clone(), None)
        .map_err(|e| internal("writing the checkpoint", e))?;
    // The decoder takes one batch's worth of lines at a time: feed it until every line is in.
    let mut rest = &json[..];
    loop {
        let read = decoder
            .decode(rest)
            .map_err(|e| internal("reading the actions", e))?;
        rest = &rest[read..];
        let batch = decoder
            .flush()
            .map_err(|e| internal("reading the actions", e))?;
        match batch {
            Some(batch) => w
                .write(&batch)
                .map_err(|e| internal("writing the checkpoint", e))?,
            // Nothing buffered and nothing taken: every line is in.
            None if rest.is_empty() || read == 0 => break,
            None => continue,
        }
    }
    if w.flushed_row_groups().is_empty() && w.in_progress_rows() == 0 {
        w.write(&RecordBatch::new_empty(schema))
            .map_err(|e| internal("writing the checkpoint", e))?;
    }
    w.close()
        .map_err(|e| internal("writing the checkpoint", e))?;
    Ok(Bytes::from(out))
}

/// The actions of a checkpoint file (columns this build does not know are ignored).
pub fn decode_checkpoint(bytes: Bytes) -> Result<Vec<ActionLine>, LogError> {
    let reader = ParquetRecordBatchReaderBuilder::try_new(bytes)
        .map_err(|e| internal("opening the checkpoint", e))?
        .build()
        .map_err(|e| internal("opening the checkpoint", e))?;
    let mut json = Vec::new();
    {
        let mut w = arrow::json::LineDelimitedWriter::new(&mut json);
        for batch in reader {
            let batch = batch.map_err(|e| internal("reading the checkpoint", e))?;
            w.write(&batch)
                .map_err(|e| internal("reading the checkpoint", e))?;
        }
        w.finish()
            .map_err(|e| internal("reading the checkpoint", e))?;
    }
    decode_entry(&json).map_err(|(line, e)| internal(&format!("checkpoint row {line}"), e))
}
