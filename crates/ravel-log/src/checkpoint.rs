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

use crate::actions::{ActionLine, Remove, decode_entry, encode_entry};
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

/// The actions of `snapshot` as a checkpoint written now (see [`checkpoint_actions_at`]).
pub fn checkpoint_actions(snapshot: &Snapshot) -> Vec<ActionLine> {
    checkpoint_actions_at(snapshot, crate::now_ms())
}

/// The actions of `snapshot` as a checkpoint written at `now_ms` (Unix milliseconds):
/// protocol, metadata, its objects, the tombstones of objects removed within the table's files
/// window (`delta.deletedFileRetentionDuration`) and the transaction identifiers updated
/// within its inputs window (`delta.setTransactionRetentionDuration`, when recorded): older
/// ones are past the time they serve, and Delta's own checkpoints leave them out
/// ([`crate::Expiry`]). An action with no time is kept.
pub fn checkpoint_actions_at(snapshot: &Snapshot, now_ms: i64) -> Vec<ActionLine> {
    let expiry = crate::Expiry::at(snapshot.metadata.as_ref(), now_ms);
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
    let live = |r: &Remove| expiry.keeps_tombstone(r.deletion_timestamp);
    for r in snapshot.tombstones().filter(live) {
        out.push(ActionLine {
            remove: Some(r),
            ..ActionLine::default()
        });
    }
    for t in snapshot
        .txns()
        .values()
        .filter(|t| expiry.keeps_txn(t.last_updated))
    {
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

#[cfg(test)]
mod retention {
    use std::collections::BTreeMap;

    use super::*;
    use crate::{Add, Format, LogEntry, Metadata, Txn};

    const DAY_MS: i64 = 86_400_000;

    /// The windows a table records (`None`: not recorded).
    #[derive(Debug, Clone, Copy)]
    struct Windows {
        files: Option<&'static str>,
        inputs: Option<&'static str>,
    }

    fn metadata(windows: Windows) -> ActionLine {
        let recorded = [
            (crate::FILES_PROPERTY, windows.files),
            (crate::INPUTS_PROPERTY, windows.inputs),
        ];
        let configuration = recorded
            .into_iter()
            .filter_map(|(name, w)| Some((name.to_string(), w?.to_string())))
            .collect();
        ActionLine {
            meta_data: Some(Metadata {
                id: "t".into(),
                name: None,
                format: Format {
                    provider: "parquet".into(),
                    options: BTreeMap::new(),
                },
                schema_string: "{}".into(),
                partition_columns: Vec::new(),
                configuration,
                created_time: Some(0),
            }),
            ..ActionLine::default()
        }
    }

    fn add(path: &str) -> ActionLine {
        ActionLine {
            add: Some(Add {
                path: path.into(),
                partition_values: BTreeMap::new(),
                size: 1,
                modification_time: 0,
                data_change: true,
                stats: None,
                tags: None,
            }),
            ..ActionLine::default()
        }
    }

    fn remove(path: &str, at: Option<i64>) -> ActionLine {
        ActionLine {
            remove: Some(Remove {
                path: path.into(),
                deletion_timestamp: at,
                data_change: true,
                extended_file_metadata: None,
                partition_values: None,
                size: Some(1),
                tags: None,
            }),
            ..ActionLine::default()
        }
    }

    /// A table of `n` versions: version v adds object v and removes object v - 3 at day v (and
    /// version 7 removes with no time); one `txn` per version.
    fn history(n: u64, windows: Windows) -> Snapshot {
        let mut s = Snapshot::default();
        for v in 0..n {
            let mut actions = vec![add(&format!("o{v}"))];
            if v == 0 {
                actions.push(metadata(windows));
            }
            if v >= 3 {
                let at = (v != 7).then_some(v as i64 * DAY_MS);
                actions.push(remove(&format!("o{}", v - 3), at));
            }
            actions.push(ActionLine {
                txn: Some(Txn {
                    app_id: format!("load-{v}"),
                    version: v as i64,
                    last_updated: Some(v as i64 * DAY_MS),
                }),
                ..ActionLine::default()
            });
            s.apply(&LogEntry {
                version: v,
                actions,
            });
        }
        s
    }

    /// What a checkpoint must hold, by kind of action, sorted.
    #[derive(Debug, PartialEq)]
    struct Held {
        live: Vec<String>,
        tombstones: Vec<String>,
        txns: Vec<String>,
    }

    /// What the checkpoint must hold, from the history's rules alone, with a files window of
    /// `files_ms` and an inputs window of `inputs_ms` (`None`: not recorded, nothing expires).
    fn model(n: u64, files_ms: i64, inputs_ms: Option<i64>, now: i64) -> Held {
        let mut held = Held {
            live: (n.saturating_sub(3)..n).map(|v| format!("o{v}")).collect(),
            tombstones: (3..n)
                .filter(|&v| v == 7 || v as i64 * DAY_MS >= now - files_ms)
                .map(|v| format!("o{}", v - 3))
                .collect(),
            txns: (0..n)
                .filter(|&v| inputs_ms.is_none_or(|w| v as i64 * DAY_MS >= now - w))
                .map(|v| format!("load-{v}"))
                .collect(),
        };
        held.live.sort();
        held.tombstones.sort();
        held.txns.sort();
        held
    }

    fn sorted(actions: &[ActionLine], path: impl Fn(&ActionLine) -> Option<String>) -> Vec<String> {
        let mut out: Vec<String> = actions.iter().filter_map(path).collect();
        out.sort();
        out
    }

    #[test]
    fn a_checkpoint_keeps_the_live_objects_and_the_tombstones_and_txns_of_their_windows() {
        let files = [
            (None, 7 * DAY_MS),
            (Some("interval 2 days"), 2 * DAY_MS),
            (Some("interval 36 hours"), 3 * DAY_MS / 2),
        ];
        let inputs = [
            (None, None),
            (Some("interval 30 days"), Some(30 * DAY_MS)),
            (Some("interval 3 days"), Some(3 * DAY_MS)),
            (Some("interval 90 minutes"), Some(90 * 60_000)),
        ];
        for (files_window, files_ms) in files {
            for (inputs_window, inputs_ms) in inputs {
                let windows = Windows {
                    files: files_window,
                    inputs: inputs_window,
                };
                for n in [0, 3, 8, 30] {
                    for now_day in [0, 5, 12, 40] {
                        let now = now_day * DAY_MS + DAY_MS / 2;
                        let actions = checkpoint_actions_at(&history(n, windows), now);
                        let held = Held {
                            live: sorted(&actions, |a| Some(a.add.as_ref()?.path.clone())),
                            tombstones: sorted(&actions, |a| Some(a.remove.as_ref()?.path.clone())),
                            txns: sorted(&actions, |a| Some(a.txn.as_ref()?.app_id.clone())),
                        };
                        let case = format!("{windows:?}, {n} versions, day {now_day}");
                        assert_eq!(held, model(n, files_ms, inputs_ms, now), "{case}");
                    }
                }
            }
        }
    }
}
