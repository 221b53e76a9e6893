//! The table as Delta Lake readers see it: the `add` actions of the newest version (read from
//! the newest checkpoint on, as they read it) against the objects, their footers and a replay
//! of the whole log.

use std::collections::BTreeMap;

use arrow::datatypes::Schema;
use parquet::file::metadata::ParquetMetaData;
use ravel_log::{Add, Snapshot};
use ravel_manifest::ObjectEntry;

use serde_json::Value;

use crate::{Problem, Violation};

/// What Delta readers are told about the table's columns.
pub(crate) struct DeltaView {
    /// Delta type of each column (by name), from the newest `metaData`.
    types: BTreeMap<String, String>,
    /// The protocol lists [`ravel_log::NO_DELTA_VIEW_FEATURE`]: readers refuse the table, and
    /// its types are not checked.
    refused: bool,
    /// Why the table has no view (a column with no Delta type), from its newest schema.
    pub none: Option<String>,
}

impl DeltaView {
    /// The view of `snapshot`, whose newest objects have `schema`; `None` for a table with no
    /// Delta metadata yet (written before the log: its next commit writes it).
    pub fn of(snapshot: &Snapshot, schema: Option<&Schema>) -> Option<DeltaView> {
        let meta = snapshot
            .metadata
            .as_ref()
            .filter(|_| !snapshot.from_manifests)?;
        let parsed: Value = serde_json::from_str(&meta.schema_string).ok()?;
        let types = parsed["fields"]
            .as_array()?
            .iter()
            .filter_map(|f| Some((f["name"].as_str()?.into(), f["type"].as_str()?.into())))
            .collect();
        let refused = snapshot
            .protocol
            .as_ref()
            .and_then(|p| p.reader_features.as_ref())
            .is_some_and(|f| f.iter().any(|f| f == ravel_log::NO_DELTA_VIEW_FEATURE));
        let none = schema.and_then(|s| ravel_log::no_delta_view(&ravel_log::delta_schema(s)));
        Some(DeltaView {
            types,
            refused,
            none,
        })
    }

    /// A table with a column Delta has no type for whose protocol does not say so (written by
    /// an older build): Delta readers may read wrong values until the next commit.
    pub fn protocol_problem(&self) -> Option<Problem> {
        let why = self.none.as_ref().filter(|_| !self.refused)?;
        Some(Problem::ProtocolFeatureMissing { why: why.clone() })
    }

    /// What the object's `add` and footer say against each other and against the Delta
    /// schema: its size, its row count, its statistics recomputed from the footer, and the
    /// Parquet type of each column.
    pub fn problems(
        &self,
        add: Option<&Add>,
        entry: &ObjectEntry,
        schema: &Schema,
        meta: &ParquetMetaData,
    ) -> Vec<Problem> {
        let Some(add) = add else {
            return vec![Problem::NoDeltaAdd];
        };
        let mut out = Vec::new();
        if add.size != entry.bytes {
            out.push(Problem::DeltaSize {
                add: add.size,
                manifest: entry.bytes,
            });
        }
        let stats: Value = add
            .stats
            .as_deref()
            .and_then(|s| serde_json::from_str(s).ok())
            .unwrap_or(Value::Null);
        let rows = meta.file_metadata().num_rows();
        if stats["numRecords"].as_i64() != Some(rows) {
            out.push(Problem::DeltaRecords {
                add: stats["numRecords"].clone(),
                footer: rows,
            });
        }
        out.extend(stats_problems(&stats, schema, meta));
        if !self.refused {
            out.extend(self.type_problems(meta));
        }
        out
    }

    /// Each column's Parquet type against its Delta type.
    fn type_problems(&self, meta: &ParquetMetaData) -> Vec<Problem> {
        let descr = meta.file_metadata().schema_descr();
        (0..descr.num_columns())
            .filter_map(|i| {
                let col = descr.column(i);
                let column = col.name().to_string();
                let Some(delta) = self.types.get(col.name()) else {
                    return Some(Problem::NotInDeltaSchema { column });
                };
                (!ravel_log::parquet_reads_as(delta, &col)).then(|| Problem::DeltaType {
                    column,
                    physical: col.physical_type(),
                    logical: col.logical_type_ref().cloned(),
                    delta: delta.clone(),
                })
            })
            .collect()
    }
}

/// The `add`'s statistics against those of the footer, for the columns it names: null counts
/// equal, its minimum no larger and its maximum no smaller than the footer's (bounds, as Delta
/// asks, whatever build wrote them).
fn stats_problems(stats: &Value, schema: &Schema, meta: &ParquetMetaData) -> Vec<Problem> {
    let Some(named) = stats["nullCount"].as_object() else {
        return Vec::new(); // written before statistics were collected: numRecords only
    };
    let columns: Vec<usize> = named
        .keys()
        .filter_map(|name| schema.index_of(name).ok())
        .collect();
    let footer: Value =
        serde_json::from_str(&ravel_log::delta_stats(meta, schema, &columns)).unwrap_or_default();
    let mut out = Vec::new();
    for (name, n) in named {
        if footer["nullCount"].get(name).is_some_and(|f| f != n) {
            out.push(Problem::DeltaNullCount {
                column: name.clone(),
                add: n.clone(),
                footer: footer["nullCount"][name].clone(),
            });
        }
    }
    for (part, larger_is_wrong) in [("minValues", true), ("maxValues", false)] {
        let Some(bounds) = stats[part].as_object() else {
            continue;
        };
        for (name, bound) in bounds {
            let Some(value) = footer[part].get(name) else {
                continue;
            };
            let wrong = match larger_is_wrong {
                true => less(value, bound),
                false => less(bound, value),
            };
            if wrong {
                out.push(Problem::DeltaBound {
                    stat: part.to_string(),
                    column: name.clone(),
                    add: bound.clone(),
                    footer: value.clone(),
                });
            }
        }
    }
    out
}

/// `a < b` for two statistics of one column: numbers, or text (ISO dates and times compare as
/// text).
fn less(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(x), Some(y)) => x < y,
            _ => x.as_f64() < y.as_f64(),
        },
        (Value::String(x), Value::String(y)) => x < y,
        _ => false,
    }
}

/// Where the snapshot readers build from the newest checkpoint differs from a replay of every
/// log entry: objects one holds and the other does not, or holds with other actions.
fn checkpoint_problems(newest: &Snapshot, replayed: &Snapshot) -> Vec<Problem> {
    if newest.from_manifests || newest.version != replayed.version {
        return Vec::new();
    }
    let (a, b) = (newest.files(), replayed.files());
    let differ: Vec<String> = a
        .iter()
        .filter(|(path, add)| b.get(*path) != Some(*add))
        .map(|(path, _)| path)
        .chain(b.keys().filter(|path| !a.contains_key(*path)))
        .cloned()
        .collect();
    let version = newest.version;
    let mut out = Vec::new();
    if !differ.is_empty() {
        out.push(Problem::CheckpointFiles {
            version,
            paths: differ,
        });
    }
    if newest.protocol != replayed.protocol || newest.metadata != replayed.metadata {
        out.push(Problem::CheckpointMetadata { version });
    }
    out
}

/// The newest checkpoint (when there is one) against `replayed`, a replay of the whole log
/// (from the oldest checkpoint it keeps, when the log window cleaned the entries before it), and
/// every checksum file against the version `history` replays to.
pub(crate) async fn log_problems(
    log: &ravel_log::TableLog,
    replayed: &Snapshot,
    history: &ravel_log::History,
) -> Result<Vec<Violation>, ravel_log::LogError> {
    let checkpoint = match log.newest_checkpoint().await {
        Ok(Some(mut from)) => log
            .catch_up(&mut from)
            .await
            .map(|_| checkpoint_problems(&from, replayed)),
        Ok(None) => Ok(Vec::new()),
        Err(e) => Err(e),
    };
    let checkpoint =
        checkpoint.unwrap_or_else(|e| vec![Problem::CheckpointUnreadable { cause: e.into() }]);
    let mut out: Vec<Violation> = checkpoint
        .into_iter()
        .map(|problem| Violation::new(LOG, problem))
        .collect();
    let checksums = log.checksum_disagreements(history).await?;
    out.extend(checksums.into_iter().map(|d| {
        let file = d.file.clone();
        Violation::new(file, Problem::ChecksumMismatch { disagreement: d })
    }));
    Ok(out)
}

/// The object named by violations of the log as a whole.
pub(crate) const LOG: &str = "the Delta log";
