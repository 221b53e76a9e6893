//! The `stats` of an object's `add`, as Delta Lake readers skip files on them: `numRecords`,
//! and per statistics column `nullCount`, `minValues` and `maxValues`, taken from the object's
//! own Parquet footer (its one row group).
//!
//! Bounds are what Delta asks for: a minimum no larger and a maximum no smaller than any
//! value in the file. Strings carry the footer's bounds (parquet truncates long ones to a
//! prefix, and rounds a truncated maximum up). Timestamps are written with millisecond
//! precision, the minimum rounded down and the maximum up. Floating-point columns carry no
//! bounds (the footer leaves NaN out of them, and a reader could skip a file holding NaN);
//! booleans, binary and decimals carry only their null count.

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::datatypes::{
    DataType, Date32Type, Int8Type, Int16Type, Int32Type, Int64Type, Schema, TimeUnit, UInt8Type,
    UInt16Type, UInt32Type,
};
use parquet::arrow::arrow_reader::statistics::StatisticsConverter;
use parquet::file::metadata::ParquetMetaData;
use serde_json::{Map, Value, json};

/// Columns Delta writers collect statistics on when a table does not say otherwise
/// (`delta.dataSkippingNumIndexedCols`).
pub const DELTA_INDEXED_COLUMNS: usize = 32;

/// The table property naming the columns whose statistics the `add` actions carry.
pub const STATS_COLUMNS_PROPERTY: &str = "delta.dataSkippingStatsColumns";

/// The columns whose statistics an object's `add` carries: the schema's first 32 (what Delta
/// writers index by default) and `also` (the layout's sort columns), in schema order.
pub fn stats_columns(schema: &Schema, also: &[&str]) -> Vec<usize> {
    (0..schema.fields().len())
        .filter(|&c| c < DELTA_INDEXED_COLUMNS || also.contains(&schema.field(c).name().as_str()))
        .collect()
}

/// [`STATS_COLUMNS_PROPERTY`]'s value for `columns` of `schema`: names separated by commas,
/// quoted with backticks where they are not plain identifiers.
pub fn stats_columns_property(schema: &Schema, columns: &[usize]) -> String {
    columns
        .iter()
        .map(|&c| {
            let name = schema.field(c).name();
            let plain = name
                .chars()
                .all(|ch| ch.is_ascii_alphanumeric() || ch == '_');
            match plain && !name.is_empty() {
                true => name.clone(),
                false => format!("`{}`", name.replace('`', "``")),
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// The Delta `stats` (JSON text) of the object whose footer is `meta` and whose Arrow schema
/// is `schema`, for `columns` (indices into `schema`). A column the footer has no statistics
/// for is left out.
pub fn delta_stats(meta: &ParquetMetaData, schema: &Schema, columns: &[usize]) -> String {
    let rows: i64 = meta.row_groups().iter().map(|g| g.num_rows()).sum();
    let mut mins = Map::new();
    let mut maxes = Map::new();
    let mut nulls = Map::new();
    for &c in columns {
        let field = schema.field(c);
        let Some(col) = column_stats(meta, schema, field.name()) else {
            continue;
        };
        if let Some(n) = col.nulls {
            nulls.insert(field.name().clone(), json!(n));
        }
        if let Some(v) = col.min.and_then(|a| bound(&a, Round::Down)) {
            mins.insert(field.name().clone(), v);
        }
        if let Some(v) = col.max.and_then(|a| bound(&a, Round::Up)) {
            maxes.insert(field.name().clone(), v);
        }
    }
    json!({
        "numRecords": rows,
        "minValues": mins,
        "maxValues": maxes,
        "nullCount": nulls,
    })
    .to_string()
}

/// One column's statistics over the object's row groups (ravel objects have one).
struct ColumnStats {
    min: Option<ArrayRef>,
    max: Option<ArrayRef>,
    nulls: Option<u64>,
}

fn column_stats(meta: &ParquetMetaData, schema: &Schema, name: &str) -> Option<ColumnStats> {
    let parquet_schema = meta.file_metadata().schema_descr();
    let converter = StatisticsConverter::try_new(name, schema, parquet_schema).ok()?;
    let groups = meta.row_groups();
    let one = |a: ArrayRef| (a.len() == 1 && a.is_valid(0)).then_some(a);
    let nulls = converter.row_group_null_counts(groups).ok()?;
    Some(ColumnStats {
        min: converter.row_group_mins(groups).ok().and_then(one),
        max: converter.row_group_maxes(groups).ok().and_then(one),
        nulls: (groups.len() == 1 && nulls.is_valid(0)).then(|| nulls.value(0)),
    })
}

#[derive(Clone, Copy, PartialEq)]
enum Round {
    Down,
    Up,
}

/// The Delta JSON value of the one value in `a`, rounded outwards where Delta's precision is
/// coarser; `None` for a type whose bounds are not written.
fn bound(a: &ArrayRef, round: Round) -> Option<Value> {
    Some(match a.data_type() {
        DataType::Int8 => json!(a.as_primitive::<Int8Type>().value(0)),
        DataType::Int16 => json!(a.as_primitive::<Int16Type>().value(0)),
        DataType::Int32 => json!(a.as_primitive::<Int32Type>().value(0)),
        DataType::Int64 => json!(a.as_primitive::<Int64Type>().value(0)),
        DataType::UInt8 => json!(a.as_primitive::<UInt8Type>().value(0)),
        DataType::UInt16 => json!(a.as_primitive::<UInt16Type>().value(0)),
        DataType::UInt32 => json!(a.as_primitive::<UInt32Type>().value(0)),
        DataType::Date32 => {
            let days = a.as_primitive::<Date32Type>().value(0);
            let date = arrow::temporal_conversions::date32_to_datetime(days)?;
            json!(date.format("%Y-%m-%d").to_string())
        }
        DataType::Timestamp(unit, tz) => {
            let cast = arrow::compute::cast(a, &DataType::Int64).ok()?;
            let v = cast.as_primitive::<Int64Type>().value(0);
            json!(timestamp_text(millis(v, *unit, round)?, tz.is_some())?)
        }
        DataType::Utf8 => json!(a.as_string::<i32>().value(0)),
        DataType::LargeUtf8 => json!(a.as_string::<i64>().value(0)),
        DataType::Utf8View => json!(a.as_string_view().value(0)),
        _ => return None,
    })
}

/// `v` in `unit` as milliseconds, rounded `round`.
fn millis(v: i64, unit: TimeUnit, round: Round) -> Option<i64> {
    let per_ms: i64 = match unit {
        TimeUnit::Second => return v.checked_mul(1000),
        TimeUnit::Millisecond => return Some(v),
        TimeUnit::Microsecond => 1_000,
        TimeUnit::Nanosecond => 1_000_000,
    };
    Some(match round {
        Round::Down => v.div_euclid(per_ms),
        Round::Up => v.div_euclid(per_ms) + i64::from(v.rem_euclid(per_ms) != 0),
    })
}

/// Delta's text of a timestamp statistic: ISO 8601 with milliseconds, `Z` for a timestamp
/// adjusted to UTC, none for one without a time zone.
fn timestamp_text(ms: i64, utc: bool) -> Option<String> {
    let t = arrow::temporal_conversions::timestamp_ms_to_datetime(ms)?;
    let text = t.format("%Y-%m-%dT%H:%M:%S%.3f").to_string();
    Some(if utc { text + "Z" } else { text })
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{
        BinaryArray, Float64Array, Int32Array, RecordBatch, StringArray, TimestampMicrosecondArray,
        UInt16Array,
    };
    use arrow::datatypes::Field;
    use std::sync::Arc;

    fn footer(batch: &RecordBatch) -> ParquetMetaData {
        let mut w = parquet::arrow::ArrowWriter::try_new(Vec::new(), batch.schema(), None).unwrap();
        w.write(batch).unwrap();
        w.finish().unwrap()
    }

    #[test]
    fn bounds_null_counts_and_rounding_as_delta_reads_them() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("i", DataType::Int32, true),
            Field::new("d", DataType::UInt16, false),
            Field::new(
                "t",
                DataType::Timestamp(TimeUnit::Microsecond, Some("+02:00".into())),
                false,
            ),
            Field::new("s", DataType::Utf8, true),
            Field::new("f", DataType::Float64, false),
            Field::new("b", DataType::Binary, false),
            Field::new("late", DataType::Int32, false),
        ]));
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(Int32Array::from(vec![Some(-5), None, Some(7)])),
                Arc::new(UInt16Array::from(vec![15900, 65535, 0])),
                Arc::new(
                    TimestampMicrosecondArray::from(vec![1_500, 2_000, 1_373_860_727_123_456])
                        .with_timezone("+02:00"),
                ),
                Arc::new(StringArray::from(vec![Some("b"), Some("a"), None])),
                Arc::new(Float64Array::from(vec![1.0, f64::NAN, 2.0])),
                Arc::new(BinaryArray::from(vec![&b"x"[..], b"y", b"z"])),
                Arc::new(Int32Array::from(vec![1, 2, 3])),
            ],
        )
        .unwrap();
        let stats = delta_stats(&footer(&batch), &schema, &[0, 1, 2, 3, 4, 5]);
        let v: Value = serde_json::from_str(&stats).unwrap();
        assert_eq!(v["numRecords"], 3);
        assert_eq!(v["minValues"]["i"], -5);
        assert_eq!(v["maxValues"]["i"], 7);
        assert_eq!(v["nullCount"]["i"], 1);
        assert_eq!(v["maxValues"]["d"], 65535);
        assert_eq!(v["minValues"]["t"], "1970-01-01T00:00:00.001Z");
        assert_eq!(v["maxValues"]["t"], "2013-07-15T03:58:47.124Z");
        assert_eq!(
            (&v["minValues"]["s"], &v["maxValues"]["s"]),
            (&json!("a"), &json!("b"))
        );
        assert_eq!(v["nullCount"]["s"], 1);
        for no_bounds in ["f", "b"] {
            assert!(v["minValues"].get(no_bounds).is_none(), "{no_bounds}");
            assert_eq!(v["nullCount"][no_bounds], 0);
        }
        assert!(
            v["nullCount"].get("late").is_none(),
            "not a statistics column"
        );
    }

    #[test]
    fn first_32_columns_and_the_layouts() {
        let fields: Vec<Field> = (0..40)
            .map(|i| Field::new(format!("c{i}"), DataType::Int32, false))
            .chain([Field::new("odd name", DataType::Int32, false)])
            .collect();
        let schema = Schema::new(fields);
        let cols = stats_columns(&schema, &["c35", "odd name"]);
        assert_eq!(cols.len(), 34);
        assert_eq!(&cols[31..], &[31, 35, 40]);
        let property = stats_columns_property(&schema, &cols);
        assert!(property.starts_with("c0,c1,"));
        assert!(property.ends_with(",c31,c35,`odd name`"));
    }
}
