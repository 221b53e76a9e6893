//! Objects other Delta writers added (delta-rs, Spark, DuckDB...): an `add` without the
//! `ravel.manifest` tag. A version reads them as they are, unsorted and without Bloom filters;
//! a compaction or maintenance takes them back in (see `ravel-compact`'s adoption), sorted under
//! the table's layout. Also the table features this build reads and writes: a table whose
//! protocol lists another is refused, rather than read or written wrongly.
//!
//! Other writers may partition their objects (a column's value in the `add`'s
//! `partitionValues`, not in the object: [`ForeignObject::partition_column`]) and may create the
//! table: then its schema is the one the Delta metadata declares ([`Snapshot::declared_schema`]).

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{ArrayRef, StringArray, UInt32Array, new_null_array};
use arrow::compute::CastOptions;
use arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use arrow::error::ArrowError;
use ravel_manifest::ObjectEntry;
use ravel_store::TablePaths;

use crate::actions::TAG_MANIFEST;
use crate::schema::NO_DELTA_VIEW_FEATURE;
use crate::{LogError, Protocol, Snapshot};

/// The writer feature that fences other Delta writers off the table: writers that do not know
/// it refuse to write (Delta requires that of every writer), while readers read on. Set through
/// the table's layout (`layout fence set`).
pub const FENCE_FEATURE: &str = "ravelSoleWriter";

/// The table property that records the fence (the layout's setting, in the Delta metadata).
pub const FENCE_PROPERTY: &str = "ravel.fence";

/// Reader features this build reads correctly.
const READS: &[&str] = &["timestampNtz", NO_DELTA_VIEW_FEATURE];

/// Writer features this build honours when it writes (the legacy ones of writer version 2:
/// it writes no null into a NOT NULL column and sets no constraint or append-only table).
const WRITES: &[&str] = &[
    "timestampNtz",
    NO_DELTA_VIEW_FEATURE,
    FENCE_FEATURE,
    "appendOnly",
    "invariants",
];

/// An object another Delta writer added.
#[derive(Debug, Clone, PartialEq)]
pub struct ForeignObject {
    /// Path inside the store.
    pub key: String,
    /// Path relative to the table, as the log names it (URL-encoded).
    pub path: String,
    pub bytes: u64,
    /// Rows, from its Delta statistics (`numRecords`), when it has them.
    pub rows: Option<u64>,
    /// The version whose entry added it (its rank among equal sort keys once adopted); for an
    /// object read from a checkpoint, the checkpoint's version (later than or equal to it).
    pub version: u64,
    /// Its Delta statistics, as its `add` carries them.
    pub stats: Option<String>,
    /// Its partition columns and their values (`None`: null), which are not in the object.
    pub partition_values: BTreeMap<String, Option<String>>,
}

impl ForeignObject {
    /// The object as a manifest entry: no key range (it is in no order) and no Bloom
    /// filters, so that no reader skips it. `run` tells it apart from every other object.
    pub fn entry(&self, run: u64) -> ObjectEntry {
        ObjectEntry {
            key: self.key.clone(),
            rows: self.rows.unwrap_or(0),
            bytes: self.bytes,
            run,
            first_key: None,
            last_key: None,
            ranges: BTreeMap::new(),
            delta_stats: self.stats.clone(),
        }
    }

    /// The values of partition column `field` for `rows` rows of the object: its partition
    /// value parsed as the field's type (as Delta serializes it: `2021-07-01`,
    /// `2021-07-01 08:00:00`...), or null; `None` when `field` is not one of its partition
    /// columns.
    pub fn partition_column(
        &self,
        field: &Field,
        rows: usize,
    ) -> Option<Result<ArrayRef, ArrowError>> {
        let value = self.partition_values.get(field.name())?;
        let Some(value) = value else {
            return Some(Ok(new_null_array(field.data_type(), rows)));
        };
        let strict = CastOptions {
            safe: false,
            ..CastOptions::default()
        };
        let text = StringArray::from(vec![value.as_str()]);
        Some(
            arrow::compute::cast_with_options(&text, field.data_type(), &strict).and_then(|one| {
                arrow::compute::take(&one, &UInt32Array::from(vec![0; rows]), None)
            }),
        )
    }
}

/// An object another Delta writer added holds a column the table does not have (that
/// writer's schema evolution, e.g. delta-rs's `schema_mode="merge"`): ravel-load neither drops
/// it nor adds it to the table, and writes nothing.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error(
    "object {key}, which another Delta writer added in version {version}, has column {column:?}, \
     which table {table:?} lacks; ravel-load adds no column to a table's schema, so nothing was \
     published. Take the object out with that writer (restore the version before it, or rewrite \
     its rows without the column), then `ravel-load layout --table {table} fence set` keeps \
     other writers out"
)]
pub struct ExtraColumn {
    pub table: String,
    /// Path inside the store.
    pub key: String,
    pub version: u64,
    pub column: String,
}

impl ForeignObject {
    /// The error naming `column` of this object, which `table` lacks.
    pub fn extra_column(&self, table: &str, column: &str) -> ExtraColumn {
        ExtraColumn {
            table: table.to_string(),
            key: self.key.clone(),
            version: self.version,
            column: column.to_string(),
        }
    }
}

/// Why the schema a table's Delta metadata declares cannot be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DeclaredSchemaError {
    #[error("the table's Delta schema (metaData schemaString) is not valid JSON")]
    NotJson(#[source] serde_json::Error),
    #[error(
        "column {column:?} of the table's Delta schema has type {delta_type}, which ravel-load does not read"
    )]
    Unreadable { column: String, delta_type: String },
}

/// The Arrow schema of a Delta `schemaString`: each Delta primitive type as the Arrow type
/// readers read it as (`timestamp` as microseconds in UTC, `timestamp_ntz` without a zone),
/// nullable as declared. Nested types, `void` and unknown types are refused, naming the column.
pub fn arrow_schema(schema_string: &str) -> Result<Schema, DeclaredSchemaError> {
    let v: serde_json::Value =
        serde_json::from_str(schema_string).map_err(DeclaredSchemaError::NotJson)?;
    let fields = v["fields"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let fields = fields
        .iter()
        .map(|f| {
            let name = f["name"].as_str().unwrap_or_default();
            let unreadable = || DeclaredSchemaError::Unreadable {
                column: name.to_string(),
                delta_type: f["type"].to_string(),
            };
            let data_type = f["type"]
                .as_str()
                .and_then(arrow_type)
                .ok_or_else(unreadable)?;
            let nullable = f["nullable"].as_bool().unwrap_or(true);
            Ok(Field::new(name, data_type, nullable))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Schema::new(fields))
}

/// The Arrow type Delta primitive type `t` reads as.
fn arrow_type(t: &str) -> Option<DataType> {
    Some(match t {
        "boolean" => DataType::Boolean,
        "byte" => DataType::Int8,
        "short" => DataType::Int16,
        "integer" => DataType::Int32,
        "long" => DataType::Int64,
        "float" => DataType::Float32,
        "double" => DataType::Float64,
        "string" => DataType::Utf8,
        "binary" => DataType::Binary,
        "date" => DataType::Date32,
        "timestamp" => DataType::Timestamp(TimeUnit::Microsecond, Some(Arc::from("UTC"))),
        "timestamp_ntz" => DataType::Timestamp(TimeUnit::Microsecond, None),
        _ => {
            let (p, s) = t
                .strip_prefix("decimal(")?
                .strip_suffix(')')?
                .split_once(',')?;
            DataType::Decimal128(p.trim().parse().ok()?, s.trim().parse().ok()?)
        }
    })
}

impl Snapshot {
    /// The objects of this version that other Delta writers added, by path.
    pub fn foreign(&self, table: &TablePaths) -> Vec<ForeignObject> {
        self.files()
            .iter()
            .filter(|(_, add)| add.tag(TAG_MANIFEST).is_none())
            .map(|(path, add)| ForeignObject {
                key: table.absolute(&decoded(path)),
                path: path.clone(),
                bytes: add.size,
                rows: add
                    .stats
                    .as_deref()
                    .and_then(|s| serde_json::from_str::<serde_json::Value>(s).ok())
                    .and_then(|v| v["numRecords"].as_u64()),
                version: self.added_in.get(path).copied().unwrap_or(0),
                stats: add.stats.clone(),
                partition_values: add.partition_values.clone(),
            })
            .collect()
    }

    /// The schema the table's Delta metadata declares, in Arrow types (see [`arrow_schema`]);
    /// `None` when the version has no metadata. A table another Delta writer created has no
    /// recorded schema: this is its schema.
    pub fn declared_schema(&self) -> Option<Result<Schema, DeclaredSchemaError>> {
        let m = self.metadata.as_ref()?;
        Some(arrow_schema(&m.schema_string))
    }

    /// Fails when the table's protocol lists a feature this build cannot read, or, with
    /// `writing`, one whose rules it does not follow when it writes.
    pub fn check_features(&self, writing: bool) -> Result<(), LogError> {
        let Some(p) = &self.protocol else {
            return Ok(());
        };
        let unknown = unknown_features(p, writing);
        if unknown.is_empty() {
            return Ok(());
        }
        Err(LogError::UnsupportedFeatures {
            version: self.version.unwrap_or(0),
            features: unknown,
            writing,
        })
    }
}

/// The features of `p` this build does not support for reading (or writing).
fn unknown_features(p: &Protocol, writing: bool) -> Vec<String> {
    let mut out: Vec<String> = p
        .reader_features
        .iter()
        .flatten()
        .filter(|f| !READS.contains(&f.as_str()))
        .cloned()
        .collect();
    // Reader version 2 is column mapping without a feature list.
    if p.min_reader_version == 2 || p.min_reader_version > 3 {
        out.push(format!("reader version {}", p.min_reader_version));
    }
    if writing {
        for f in p.writer_features.iter().flatten() {
            if !WRITES.contains(&f.as_str()) && !out.contains(f) {
                out.push(f.clone());
            }
        }
        if p.min_writer_version > 7 || (3..7).contains(&p.min_writer_version) {
            out.push(format!("writer version {}", p.min_writer_version));
        }
    }
    out
}

/// Table features ravel-load sets and clears itself; any other one a table lists was set by
/// another engine, and ravel's commits keep it.
const OWN: &[&str] = &["timestampNtz", NO_DELTA_VIEW_FEATURE, FENCE_FEATURE];

/// `ours` (the protocol ravel's columns and settings ask for) with the features another engine
/// set in `base` kept (those this build supports: it refuses tables with others).
pub(crate) fn keep_others(base: Option<&Protocol>, mut ours: Protocol) -> Protocol {
    let Some(base) = base else {
        return ours;
    };
    let others = |features: &Option<Vec<String>>| -> Vec<String> {
        features
            .iter()
            .flatten()
            .filter(|f| !OWN.contains(&f.as_str()))
            .cloned()
            .collect()
    };
    let (readers, writers) = (others(&base.reader_features), others(&base.writer_features));
    if !readers.is_empty() {
        ours.min_reader_version = 3;
        ours.reader_features.get_or_insert_default().extend(readers);
    }
    if !writers.is_empty() {
        ours.min_writer_version = 7;
        ours.writer_features.get_or_insert_default().extend(writers);
    }
    ours
}

/// A log path as a store path: Delta paths are URL-encoded.
fn decoded(path: &str) -> String {
    object_store::path::Path::from_url_path(path)
        .map_or_else(|_| path.to_string(), |p| p.to_string())
}

/// `protocol` with the fence on or off.
pub fn fenced(mut protocol: Protocol, on: bool) -> Protocol {
    let mut writers = protocol.writer_features.take().unwrap_or_default();
    writers.retain(|f| f != FENCE_FEATURE);
    if on {
        writers.push(FENCE_FEATURE.to_string());
    }
    if writers.is_empty() && protocol.reader_features.is_none() {
        return Protocol {
            min_reader_version: 1,
            min_writer_version: 2,
            reader_features: None,
            writer_features: None,
        };
    }
    protocol.min_writer_version = 7;
    protocol.writer_features = Some(writers);
    protocol
}

#[cfg(test)]
mod tests {
    use super::*;

    fn protocol(readers: Option<&[&str]>, writers: Option<&[&str]>) -> Protocol {
        let own = |f: Option<&[&str]>| f.map(|f| f.iter().map(|s| s.to_string()).collect());
        Protocol {
            min_reader_version: if readers.is_some() { 3 } else { 1 },
            min_writer_version: if writers.is_some() { 7 } else { 2 },
            reader_features: own(readers),
            writer_features: own(writers),
        }
    }

    #[test]
    fn the_fence_is_a_writer_feature_that_comes_and_goes() {
        let open = protocol(None, None);
        let on = fenced(open.clone(), true);
        assert_eq!(on, protocol(None, Some(&[FENCE_FEATURE])));
        assert_eq!(fenced(on, false), open);
        let no_view = protocol(
            Some(&[NO_DELTA_VIEW_FEATURE]),
            Some(&[NO_DELTA_VIEW_FEATURE]),
        );
        let on = fenced(no_view.clone(), true);
        assert_eq!(
            on.writer_features.as_deref().unwrap(),
            [NO_DELTA_VIEW_FEATURE, FENCE_FEATURE]
        );
        assert_eq!(fenced(on, false), no_view);
    }

    #[test]
    fn features_another_engine_set_are_kept() {
        let base = protocol(None, Some(&["appendOnly", FENCE_FEATURE]));
        let ours = fenced(protocol(None, None), false);
        let kept = keep_others(Some(&base), ours);
        assert_eq!(kept, protocol(None, Some(&["appendOnly"])));
        assert_eq!(
            keep_others(None, protocol(None, None)),
            protocol(None, None)
        );
    }

    #[test]
    fn a_declared_schema_reads_as_the_arrow_types_delta_readers_use() {
        let declared = r#"{"type":"struct","fields":[
            {"name":"a","type":"long","nullable":false,"metadata":{}},
            {"name":"b","type":"timestamp","nullable":true,"metadata":{}},
            {"name":"c","type":"timestamp_ntz","nullable":true,"metadata":{}},
            {"name":"d","type":"decimal(10,2)","nullable":true,"metadata":{}},
            {"name":"e","type":"date","nullable":true,"metadata":{}}]}"#;
        let schema = arrow_schema(declared).unwrap();
        let utc = DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()));
        assert_eq!(
            schema,
            Schema::new(vec![
                Field::new("a", DataType::Int64, false),
                Field::new("b", utc, true),
                Field::new("c", DataType::Timestamp(TimeUnit::Microsecond, None), true),
                Field::new("d", DataType::Decimal128(10, 2), true),
                Field::new("e", DataType::Date32, true),
            ])
        );
        let nested = r#"{"type":"struct","fields":[{"name":"n","type":{"type":"array",
            "elementType":"long","containsNull":true},"nullable":true,"metadata":{}}]}"#;
        let err = arrow_schema(nested).unwrap_err().to_string();
        assert!(err.contains("column \"n\""), "{err}");
    }

    #[test]
    fn a_partition_value_reads_as_its_column_type_or_null() {
        let object = ForeignObject {
            key: "t/c=1/part-0.parquet".into(),
            path: "c=1/part-0.parquet".into(),
            bytes: 10,
            rows: Some(3),
            version: 1,
            stats: None,
            partition_values: [
                ("c".to_string(), Some("-7".to_string())),
                ("d".to_string(), Some("2021-07-01".to_string())),
                ("t".to_string(), Some("2021-07-01 08:30:00".to_string())),
                ("n".to_string(), None),
                ("bad".to_string(), Some("x".to_string())),
            ]
            .into(),
        };
        let column =
            |name: &str, t: DataType| object.partition_column(&Field::new(name, t, true), 3);
        let c = column("c", DataType::Int16).unwrap().unwrap();
        assert_eq!(c.as_ref(), &arrow::array::Int16Array::from(vec![-7; 3]));
        let d = column("d", DataType::Date32).unwrap().unwrap();
        assert_eq!(
            d.as_ref(),
            &arrow::array::Date32Array::from(vec![18_809; 3])
        );
        let ms = DataType::Timestamp(TimeUnit::Millisecond, None);
        let t = column("t", ms).unwrap().unwrap();
        let at = 1_625_128_200_000;
        assert_eq!(
            t.as_ref(),
            &arrow::array::TimestampMillisecondArray::from(vec![at; 3])
        );
        let n = column("n", DataType::Utf8).unwrap().unwrap();
        assert_eq!(n.null_count(), 3);
        assert!(column("bad", DataType::Int32).unwrap().is_err());
        assert!(column("other", DataType::Int32).is_none());
    }

    #[test]
    fn features_it_does_not_know_are_named() {
        let dv = protocol(Some(&["deletionVectors"]), Some(&["deletionVectors"]));
        assert_eq!(unknown_features(&dv, false), ["deletionVectors"]);
        assert_eq!(unknown_features(&dv, true), ["deletionVectors"]);
        let checks = protocol(None, Some(&["checkConstraints", FENCE_FEATURE]));
        assert!(unknown_features(&checks, false).is_empty());
        assert_eq!(unknown_features(&checks, true), ["checkConstraints"]);
        let mut v4 = protocol(None, None);
        v4.min_writer_version = 4;
        assert_eq!(unknown_features(&v4, true), ["writer version 4"]);
        let mut mapped = protocol(None, None);
        mapped.min_reader_version = 2;
        assert_eq!(unknown_features(&mapped, false), ["reader version 2"]);
    }
}
