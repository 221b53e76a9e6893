//! The manifest: one per load or compaction, written create-if-absent under
//! `<table>/_ravel/manifests/` before the log entry that publishes it. It lists the objects it
//! wrote with their rows, sizes and key ranges; a table version (a Delta log entry, see
//! `ravel-log`) names the live manifests and objects. Also the manifest's encoding of sort keys
//! (JSON values) and their order, so that writers and readers agree on both, and the rules by
//! which a file's schema agrees with a table's.

pub mod clustering;
mod schema;

pub use clustering::{ClusteringInfo, clustering_info};

pub use schema::{
    DifferenceKind, NullabilityDifference, SchemaDifference, child_types, nullability_differences,
    schema_difference, schemas_agree, types_agree, widen,
};

use std::cmp::Ordering;
use std::collections::BTreeMap;

use arrow::array::{Array, AsArray};
use futures::TryStreamExt;
use object_store::{ObjectStore, ObjectStoreExt};
use ravel_store::TablePaths;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Format of manifests this build writes.
pub const MANIFEST_FORMAT: u32 = 1;

/// One load's published objects.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub format: u32,
    pub load_id: String,
    /// Unix milliseconds at commit.
    pub committed_at_ms: u64,
    /// The layout generation the load applied.
    pub layout_generation: u64,
    /// Sort key column names in order (stream, bucket, key…, time), empty without clustering.
    pub sort_key: Vec<String>,
    /// The Arrow schema of every object.
    pub schema: arrow::datatypes::Schema,
    pub objects: Vec<ObjectEntry>,
    /// The load's per-object Bloom filters of the Bloom-scope columns (see `ravel-bloom`),
    /// absent when the layout's scope covers no column.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blooms: Option<BloomIndex>,
}

impl Manifest {
    /// Every key the manifest's load stored: its objects, then its Bloom sidecar.
    pub fn stored_keys(&self) -> impl Iterator<Item = &str> {
        self.objects
            .iter()
            .map(|o| o.key.as_str())
            .chain(self.blooms.iter().map(|b| b.key.as_str()))
    }
}

/// Where a load's Bloom sidecar is and which columns it holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BloomIndex {
    /// Path inside the store: `<table>/_ravel/blooms/<hash>.blooms` (`<table>/data/` in tables
    /// loaded by older builds).
    pub key: String,
    pub bytes: u64,
    /// The sidecar's format (`ravel_bloom::FORMAT` when written; manifests from before the
    /// field existed hold format 1).
    #[serde(default = "first_sidecar_format")]
    pub format: u32,
    /// False-positive rate the filters were sized for.
    pub fpp: f64,
    /// Each column's section: the filters of the manifest's objects, in their order.
    pub columns: BTreeMap<String, Section>,
}

fn first_sidecar_format() -> u32 {
    1
}

/// A byte range of a sidecar.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Section {
    pub offset: u64,
    pub len: u64,
}

/// One stored object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ObjectEntry {
    /// Path inside the store: `<table>/data/<hash>.parquet`.
    pub key: String,
    pub rows: u64,
    pub bytes: u64,
    /// The run the object was cut from (objects of one run do not overlap in key range).
    pub run: u64,
    /// Sort key of the first and last row, values in `sort_key` order.
    pub first_key: Option<Vec<Value>>,
    pub last_key: Option<Vec<Value>>,
    /// Smallest and largest non-null value of the layout's columns (stream, key columns,
    /// time) in this object, encoded as sort keys are: what a reader needs to skip the object
    /// without opening it. A column whose values are all null has no entry. Floats are ordered
    /// in IEEE total order, so a NaN of either sign is an end when the object holds one; a NaN
    /// or infinite end is recorded as null (JSON has no such number), which readers take as
    /// "anything": a finite range says the object holds no NaN.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub ranges: BTreeMap<String, ValueRange>,
    /// The object's statistics as Delta Lake's `add` carries them (`stats`, JSON text:
    /// numRecords, minValues, maxValues, nullCount), from its footer. Absent in objects
    /// written before they were collected, and in spill.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delta_stats: Option<String>,
}

/// The smallest and largest non-null value of a column, encoded by [`key_value`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ValueRange {
    pub min: Value,
    pub max: Value,
}

/// The range of the non-null values of `arrays` (one column in pieces), if any.
pub fn value_range(
    arrays: &[arrow::array::ArrayRef],
) -> Result<Option<ValueRange>, arrow::error::ArrowError> {
    use arrow::array::make_comparator;
    use arrow::compute::{SortOptions, concat};
    let refs: Vec<&dyn Array> = arrays.iter().map(|a| a.as_ref()).collect();
    if refs.is_empty() {
        return Ok(None);
    }
    let all = concat(&refs)?;
    if all.null_count() == all.len() {
        return Ok(None);
    }
    // One linear scan per end, under the order a sort would use (a sort was O(n log n) and,
    // on the loader's object-cutting path, 2 % of a load's CPU).
    let cmp = make_comparator(all.as_ref(), all.as_ref(), SortOptions::default())?;
    let mut present = (0..all.len()).filter(|&i| all.is_valid(i));
    let first = present.next().expect("not all values are null");
    let (mut lo, mut hi) = (first, first);
    for i in present {
        if cmp(i, lo).is_lt() {
            lo = i;
        }
        if cmp(i, hi).is_gt() {
            hi = i;
        }
    }
    Ok(Some(ValueRange {
        min: key_value(all.as_ref(), lo),
        max: key_value(all.as_ref(), hi),
    }))
}

/// A sort key value as JSON: integers and temporal values as numbers (in the column's own
/// unit), strings as strings, bytes as lowercase hex, null as null. Floats are written as
/// their shortest round-trip decimal and read back exactly (serde_json's `float_roundtrip`,
/// which the workspace enables): a reader compares the very value the writer saw.
pub fn key_value(a: &dyn Array, i: usize) -> Value {
    use arrow::datatypes::*;
    if a.is_null(i) {
        return Value::Null;
    }
    macro_rules! num {
        ($t:ty) => {
            Value::from(a.as_primitive::<$t>().value(i))
        };
    }
    match a.data_type() {
        DataType::Int8 => num!(Int8Type),
        DataType::Int16 => num!(Int16Type),
        DataType::Int32 => num!(Int32Type),
        DataType::Int64 => num!(Int64Type),
        DataType::UInt8 => num!(UInt8Type),
        DataType::UInt16 => num!(UInt16Type),
        DataType::UInt32 => num!(UInt32Type),
        DataType::UInt64 => num!(UInt64Type),
        DataType::Float32 => num!(Float32Type),
        DataType::Float64 => num!(Float64Type),
        DataType::Date32 => num!(Date32Type),
        DataType::Date64 => num!(Date64Type),
        DataType::Timestamp(TimeUnit::Second, _) => num!(TimestampSecondType),
        DataType::Timestamp(TimeUnit::Millisecond, _) => num!(TimestampMillisecondType),
        DataType::Timestamp(TimeUnit::Microsecond, _) => num!(TimestampMicrosecondType),
        DataType::Timestamp(TimeUnit::Nanosecond, _) => num!(TimestampNanosecondType),
        DataType::Boolean => Value::from(a.as_boolean().value(i)),
        DataType::Utf8 => Value::from(a.as_string::<i32>().value(i)),
        DataType::LargeUtf8 => Value::from(a.as_string::<i64>().value(i)),
        DataType::Utf8View => Value::from(a.as_string_view().value(i)),
        DataType::Binary => hex(a.as_binary::<i32>().value(i)),
        DataType::LargeBinary => hex(a.as_binary::<i64>().value(i)),
        DataType::BinaryView => hex(a.as_binary_view().value(i)),
        DataType::FixedSizeBinary(_) => hex(a.as_fixed_size_binary().value(i)),
        other => Value::from(format!("<{other}>")),
    }
}

fn hex(b: &[u8]) -> Value {
    Value::from(b.iter().map(|x| format!("{x:02x}")).collect::<String>())
}

/// Compares two sort keys as [`key_value`] encodes them, in clustering order: null first,
/// numbers numerically, strings (and hex-encoded bytes, whose hex order is their byte order)
/// bytewise, component by component.
pub fn compare_keys(a: &[Value], b: &[Value]) -> Ordering {
    for (x, y) in a.iter().zip(b) {
        let o = compare_value(x, y);
        if o != Ordering::Equal {
            return o;
        }
    }
    a.len().cmp(&b.len())
}

fn compare_value(x: &Value, y: &Value) -> Ordering {
    match (x, y) {
        (Value::Null, Value::Null) => Ordering::Equal,
        (Value::Null, _) => Ordering::Less,
        (_, Value::Null) => Ordering::Greater,
        (Value::Number(a), Value::Number(b)) => match (a.as_i64(), b.as_i64()) {
            (Some(a), Some(b)) => a.cmp(&b),
            _ => match (a.as_u64(), b.as_u64()) {
                (Some(a), Some(b)) => a.cmp(&b),
                // One side negative (i64 only), the other beyond i64 (u64 only).
                (None, Some(_)) if a.as_i64().is_some() => Ordering::Less,
                (Some(_), None) if b.as_i64().is_some() => Ordering::Greater,
                _ => a
                    .as_f64()
                    .unwrap_or(f64::NAN)
                    .total_cmp(&b.as_f64().unwrap_or(f64::NAN)),
            },
        },
        (Value::String(a), Value::String(b)) => a.as_bytes().cmp(b.as_bytes()),
        (Value::Bool(a), Value::Bool(b)) => a.cmp(b),
        // Mixed kinds never occur in one key column; order them deterministically.
        _ => kind(x).cmp(&kind(y)),
    }
}

fn kind(v: &Value) -> u8 {
    match v {
        Value::Null => 0,
        Value::Bool(_) => 1,
        Value::Number(_) => 2,
        Value::String(_) => 3,
        Value::Array(_) => 4,
        Value::Object(_) => 5,
    }
}

/// Why manifests could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ManifestError {
    #[error("reading {key}")]
    Store {
        key: String,
        #[source]
        source: object_store::Error,
    },
    #[error("manifest {key} is not valid")]
    Parse {
        key: String,
        #[source]
        source: serde_json::Error,
    },
}

/// Every manifest of a table, oldest load first (load ids start with the commit time).
pub async fn read_manifests(
    store: &dyn ObjectStore,
    table: &TablePaths,
) -> Result<Vec<(String, Manifest)>, ManifestError> {
    let dir = table.manifests_dir();
    let err = |key: &str| {
        let key = key.to_string();
        move |source| ManifestError::Store { key, source }
    };
    let mut keys: Vec<String> = store
        .list(Some(&dir))
        .map_ok(|m| m.location.to_string())
        .try_collect()
        .await
        .map_err(err(dir.as_ref()))?;
    keys.retain(|k| k.ends_with(".json"));
    keys.sort();
    let mut out = Vec::with_capacity(keys.len());
    for key in keys {
        let path = object_store::path::Path::from(key.as_str());
        let manifest = read_manifest(store, &key)
            .await?
            .ok_or_else(|| ManifestError::Store {
                key: key.clone(),
                source: object_store::Error::NotFound {
                    path: path.to_string(),
                    source: "listed, then gone".into(),
                },
            })?;
        out.push((key, manifest));
    }
    Ok(out)
}

/// The manifest stored at `key`; `None` when nothing is stored there.
pub async fn read_manifest(
    store: &dyn ObjectStore,
    key: &str,
) -> Result<Option<Manifest>, ManifestError> {
    let err = |source| ManifestError::Store {
        key: key.to_string(),
        source,
    };
    let path = object_store::path::Path::from(key);
    let got = match store.get(&path).await {
        Ok(got) => got,
        Err(object_store::Error::NotFound { .. }) => return Ok(None),
        Err(e) => return Err(err(e)),
    };
    let bytes = got.bytes().await.map_err(err)?;
    let manifest = serde_json::from_slice(&bytes).map_err(|source| ManifestError::Parse {
        key: key.to_string(),
        source,
    })?;
    Ok(Some(manifest))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_compare_in_clustering_order() {
        let k = |v: Value| v.as_array().unwrap().clone();
        assert_eq!(
            compare_keys(&k(json!([null, 1])), &k(json!([0, 0]))),
            Ordering::Less
        );
        assert_eq!(
            compare_keys(&k(json!([-5])), &k(json!([u64::MAX]))),
            Ordering::Less
        );
        assert_eq!(
            compare_keys(&k(json!([u64::MAX])), &k(json!([i64::MIN]))),
            Ordering::Greater
        );
        assert_eq!(
            compare_keys(&k(json!(["ab"])), &k(json!(["b"]))),
            Ordering::Less
        );
        assert_eq!(
            compare_keys(&k(json!(["00ff"])), &k(json!(["00ff00"]))),
            Ordering::Less
        );
        assert_eq!(
            compare_keys(&k(json!([1, "x"])), &k(json!([1, "x"]))),
            Ordering::Equal
        );
        assert_eq!(
            compare_keys(&k(json!([1.5])), &k(json!([2]))),
            Ordering::Less
        );
    }

    #[test]
    fn value_ranges_skip_nulls_and_span_pieces() {
        use arrow::array::{ArrayRef, Float64Array, Int64Array, StringArray};
        use std::sync::Arc;
        let ints: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from(vec![None, Some(7), Some(-3)])),
            Arc::new(Int64Array::from(vec![Some(12), None, Some(5)])),
        ];
        let r = value_range(&ints).unwrap().unwrap();
        assert_eq!((r.min, r.max), (json!(-3), json!(12)));
        let strings: Vec<ArrayRef> = vec![Arc::new(StringArray::from(vec![
            Some("b"),
            None,
            Some("ab"),
            Some("ba"),
        ]))];
        let r = value_range(&strings).unwrap().unwrap();
        assert_eq!((r.min, r.max), (json!("ab"), json!("ba")));
        let floats: Vec<ArrayRef> = vec![Arc::new(Float64Array::from(vec![2.5, -1.0, 0.5]))];
        let r = value_range(&floats).unwrap().unwrap();
        assert_eq!((r.min, r.max), (json!(-1.0), json!(2.5)));
        let nulls: Vec<ArrayRef> = vec![Arc::new(Int64Array::from(vec![None, None]))];
        assert!(value_range(&nulls).unwrap().is_none());
        assert!(value_range(&[]).unwrap().is_none());
    }

    /// Every finite f64 written as a key reads back as the same bits, in a manifest as in a
    /// bare value (the decimal of 0.9995817600514193 once read back one unit lower).
    #[test]
    fn float_keys_round_trip_exactly() {
        use arrow::array::Float64Array;
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = || {
            // splitmix64: every bit pattern, so every exponent and mantissa, is drawn.
            state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        };
        let mut values = vec![
            0.9995817600514193,
            f64::MIN_POSITIVE,
            f64::MAX,
            -0.0,
            5e-324,
        ];
        values.extend(
            (0..200_000)
                .map(|_| f64::from_bits(next()))
                .filter(|f| f.is_finite()),
        );
        // Values in [0, 1), the shape of a ratio column, drawn apart from the bit patterns.
        values.extend((0..100_000).map(|_| (next() >> 11) as f64 / (1u64 << 53) as f64));
        let column = Float64Array::from(values.clone());
        for (i, want) in values.iter().enumerate() {
            let written = serde_json::to_string(&key_value(&column, i)).unwrap();
            let read: Value = serde_json::from_str(&written).unwrap();
            let got = read.as_f64().unwrap();
            assert_eq!(
                got.to_bits(),
                want.to_bits(),
                "{want:e} written as {written}"
            );
            assert_eq!(
                compare_value(&read, &key_value(&column, i)),
                Ordering::Equal
            );
        }
        let entry = ObjectEntry {
            key: "t/data/x.parquet".into(),
            rows: 1,
            bytes: 1,
            run: 0,
            first_key: Some(vec![json!(0.9995817600514193)]),
            last_key: Some(vec![json!(0.9995817600514193)]),
            ranges: BTreeMap::new(),
            delta_stats: None,
        };
        let back: ObjectEntry =
            serde_json::from_slice(&serde_json::to_vec(&entry).unwrap()).unwrap();
        assert_eq!(back, entry);
    }
}
