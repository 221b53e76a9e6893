//! The table as Delta Lake readers see it: the `add` actions of the newest version (read from
//! the newest checkpoint on, as they read it) against the objects, their footers and a replay
//! of the whole log.

use std::collections::BTreeMap;

use arrow::datatypes::Schema;
use parquet::file::metadata::ParquetMetaData;
use ravel_log::{Add, Snapshot};
use ravel_manifest::ObjectEntry;
use serde_json::Value;

/// What Delta readers are told about the table's columns.
pub(crate) struct DeltaView {
    /// Delta type of each column (by name), from the newest `metaData`.
    types: BTreeMap<String, String>,
    /// Why readers get no view (a column with no Delta type); then types are not checked.
    pub none: Option<String>,
}

impl DeltaView {
    pub fn of(snapshot: &Snapshot, schema: Option<&Schema>) -> DeltaView {
        let types = snapshot
            .metadata
            .as_ref()
            .and_then(|m| serde_json::from_str::<Value>(&m.schema_string).ok())
            .and_then(|s| {
                let fields = s["fields"].as_array()?;
                Some(
                    fields
                        .iter()
                        .filter_map(|f| {
                            Some((f["name"].as_str()?.into(), f["type"].as_str()?.into()))
                        })
                        .collect(),
                )
            })
            .unwrap_or_default();
        let none = schema.and_then(|s| ravel_log::no_delta_view(&ravel_log::delta_schema(s)));
        DeltaView { types, none }
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
    ) -> Vec<String> {
        let Some(add) = add else {
            return vec!["is in the version but not among its Delta `add` actions".into()];
        };
        let mut out = Vec::new();
        if add.size != entry.bytes {
            out.push(format!(
                "its Delta `add` says {} bytes, the manifest {}",
                add.size, entry.bytes
            ));
        }
        let stats: Value = add
            .stats
            .as_deref()
            .and_then(|s| serde_json::from_str(s).ok())
            .unwrap_or(Value::Null);
        let rows = meta.file_metadata().num_rows();
        if stats["numRecords"].as_i64() != Some(rows) {
            out.push(format!(
                "its Delta `add` says {} records, the footer {rows}",
                stats["numRecords"]
            ));
        }
        out.extend(self.stats_problems(&stats, schema, meta));
        if self.none.is_none() {
            out.extend(self.type_problems(meta));
        }
        out
    }

    /// The `add`'s statistics against those of the footer, for the columns it names.
    fn stats_problems(
        &self,
        stats: &Value,
        schema: &Schema,
        meta: &ParquetMetaData,
    ) -> Vec<String> {
        let Some(named) = stats["nullCount"].as_object() else {
            return Vec::new(); // written before statistics were collected: numRecords only
        };
        let columns: Vec<usize> = named
            .keys()
            .filter_map(|name| schema.index_of(name).ok())
            .collect();
        let footer: Value = serde_json::from_str(&ravel_log::delta_stats(meta, schema, &columns))
            .unwrap_or_default();
        ["minValues", "maxValues", "nullCount"]
            .into_iter()
            .filter(|part| stats[part] != footer[part])
            .map(|part| {
                format!(
                    "its Delta `add` has {part} {}, the footer gives {}",
                    stats[part], footer[part]
                )
            })
            .collect()
    }

    /// Each column's Parquet type against its Delta type.
    fn type_problems(&self, meta: &ParquetMetaData) -> Vec<String> {
        let descr = meta.file_metadata().schema_descr();
        (0..descr.num_columns())
            .filter_map(|i| {
                let col = descr.column(i);
                let Some(delta) = self.types.get(col.name()) else {
                    return Some(format!("column {:?} is not in the Delta schema", col.name()));
                };
                (!ravel_log::parquet_reads_as(delta, &col)).then(|| {
                    format!(
                        "column {:?} is stored as {} ({:?}), which Delta readers do not read as {delta}",
                        col.name(),
                        col.physical_type(),
                        col.logical_type_ref()
                    )
                })
            })
            .collect()
    }
}

/// Where the snapshot readers build from the newest checkpoint differs from a replay of every
/// log entry: the objects one holds and the other does not.
pub(crate) fn checkpoint_problems(newest: &Snapshot, replayed: &Snapshot) -> Vec<String> {
    if newest.from_manifests || newest.version != replayed.version {
        return Vec::new();
    }
    let only = |a: &Snapshot, b: &Snapshot| -> Vec<String> {
        a.files()
            .keys()
            .filter(|k| !b.files().contains_key(*k))
            .cloned()
            .collect()
    };
    let (extra, missing) = (only(newest, replayed), only(replayed, newest));
    let mut out = Vec::new();
    if !extra.is_empty() {
        out.push(format!(
            "read from its checkpoint, version {:?} holds objects a replay of the log does not: {extra:?}",
            newest.version
        ));
    }
    if !missing.is_empty() {
        out.push(format!(
            "read from its checkpoint, version {:?} lacks objects a replay of the log holds: {missing:?}",
            newest.version
        ));
    }
    out
}
