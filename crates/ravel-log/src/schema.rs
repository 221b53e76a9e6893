//! The table's schema as a Delta Lake reader sees it, and the protocol that schema needs.

use arrow::datatypes::{DataType, Schema, TimeUnit};
use parquet::schema::types::ColumnDescriptor;
use serde_json::{Value, json};

use crate::actions::Protocol;

/// Reader feature a table lists when a column has no Delta type: Delta readers refuse such a
/// table by name instead of reading wrong values; ravel-load reads it as always.
pub const NO_DELTA_VIEW_FEATURE: &str = "ravelNoDeltaView";

/// The Delta schema (`schemaString`) of `schema`, and the columns with no Delta type.
#[derive(Debug, Clone, PartialEq)]
pub struct DeltaSchema {
    pub schema_string: String,
    /// Columns with no faithful Delta type, with theirs.
    pub unmapped: Vec<UnmappedColumn>,
    /// Some column is a timestamp without a time zone (Delta's `timestamp_ntz` feature).
    pub timestamp_ntz: bool,
}

/// A column Delta has no type for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnmappedColumn {
    pub name: String,
    pub arrow_type: String,
}

/// Maps `schema` to Delta's JSON schema format. A column with no Delta type is written as a
/// string and named in [`DeltaSchema::unmapped`].
pub fn delta_schema(schema: &Schema) -> DeltaSchema {
    let mut unmapped = Vec::new();
    let mut timestamp_ntz = false;
    let fields: Vec<Value> = schema
        .fields()
        .iter()
        .map(|f| {
            let t = delta_type(f.data_type()).unwrap_or_else(|| {
                unmapped.push(UnmappedColumn {
                    name: f.name().clone(),
                    arrow_type: f.data_type().to_string(),
                });
                "string".into()
            });
            timestamp_ntz |= t == "timestamp_ntz";
            json!({"name": f.name(), "type": t, "nullable": f.is_nullable(), "metadata": {}})
        })
        .collect();
    DeltaSchema {
        schema_string: json!({"type": "struct", "fields": fields}).to_string(),
        unmapped,
        timestamp_ntz,
    }
}

/// Delta's primitive type for an Arrow type, where one holds every value and Delta readers
/// read the Parquet type parquet-rs stores it as (see [`parquet_reads_as`]). The unsigned
/// types take the next wider signed type, as Spark reads Parquet's unsigned integers; UInt64
/// has none (Delta's `decimal(20,0)` is not stored as an unsigned INT64, and readers refuse
/// it). Timestamps of milliseconds and microseconds are stored annotated in their unit
/// and read as Delta's microseconds. Seconds have no Delta type: parquet-rs stores them as a
/// plain INT64 (Parquet has no unit of seconds) that only Arrow readers take for a timestamp;
/// storing them as milliseconds instead would change the objects and cost bytes (hits'
/// `EventTime`: 1.60 times its bytes, 2.1 % of the objects'; `benches/delta/timestamp_cost.py`).
/// Nanoseconds have no Delta type either.
pub fn delta_type(t: &DataType) -> Option<String> {
    let name = match t {
        DataType::Boolean => "boolean",
        DataType::Int8 => "byte",
        DataType::Int16 | DataType::UInt8 => "short",
        DataType::Int32 | DataType::UInt16 => "integer",
        DataType::Int64 | DataType::UInt32 => "long",
        DataType::Float32 => "float",
        DataType::Float64 => "double",
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => "string",
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => "binary",
        DataType::Date32 => "date",
        DataType::Timestamp(TimeUnit::Millisecond | TimeUnit::Microsecond, tz) => {
            if tz.is_some() {
                "timestamp"
            } else {
                "timestamp_ntz"
            }
        }
        DataType::Decimal128(p, s) if *p <= 38 && *s >= 0 => {
            return Some(format!("decimal({p},{s})"));
        }
        _ => return None,
    };
    Some(name.to_string())
}

/// Why a table of `schema` has no Delta view, naming each column with no Delta type; `None`
/// when it has one.
pub fn no_delta_view(schema: &DeltaSchema) -> Option<String> {
    if schema.unmapped.is_empty() {
        return None;
    }
    let columns: Vec<String> = schema
        .unmapped
        .iter()
        .map(|c| format!("column {:?} ({})", c.name, c.arrow_type))
        .collect();
    Some(format!(
        "the table has no Delta Lake view: Delta has no type that holds every value of {}; \
         Delta readers refuse the table (reader feature {NO_DELTA_VIEW_FEATURE}) rather than \
         read wrong values. ravel-load reads it as always",
        columns.join(", ")
    ))
}

/// Whether Delta readers read a Parquet column stored as `col` as Delta type `delta` (as
/// [`delta_type`] names it) with every value intact: the physical type and annotation the
/// Delta protocol and Spark's Parquet reader expect for that type.
pub fn parquet_reads_as(delta: &str, col: &ColumnDescriptor) -> bool {
    use parquet::basic::{LogicalType as L, TimeUnit as U, Type as P};
    let logical = col.logical_type_ref();
    let timestamp = |utc: bool| {
        matches!(logical, Some(L::Timestamp(t))
            if t.is_adjusted_to_u_t_c == utc && !matches!(t.unit, U::NANOS))
    };
    match (delta, col.physical_type()) {
        ("boolean", P::BOOLEAN) | ("float", P::FLOAT) | ("double", P::DOUBLE) => logical.is_none(),
        ("byte", P::INT32) => int_fits(logical, 8),
        ("short", P::INT32) => int_fits(logical, 16),
        ("integer", P::INT32) => int_fits(logical, 32),
        ("long", P::INT32) => int_fits(logical, 64),
        ("long", P::INT64) => match logical {
            None => true,
            Some(L::Integer(i)) => i.is_signed,
            _ => false,
        },
        ("date", P::INT32) => matches!(logical, Some(L::Date)),
        ("timestamp", P::INT64) => timestamp(true),
        ("timestamp_ntz", P::INT64) => timestamp(false),
        ("string", P::BYTE_ARRAY) => matches!(logical, Some(L::String)),
        ("binary", P::BYTE_ARRAY) => logical.is_none(),
        (d, P::INT32 | P::INT64 | P::FIXED_LEN_BYTE_ARRAY) if d.starts_with("decimal(") => {
            matches!(logical, Some(L::Decimal(t))
                if d == format!("decimal({},{})", t.precision, t.scale))
        }
        _ => false,
    }
}

/// An integer annotation (or none, a plain 32-bit integer) whose every value fits a signed
/// integer of `bits`.
fn int_fits(logical: Option<&parquet::basic::LogicalType>, bits: i8) -> bool {
    match logical {
        None => bits >= 32,
        Some(parquet::basic::LogicalType::Integer(i)) if i.is_signed => i.bit_width <= bits,
        Some(parquet::basic::LogicalType::Integer(i)) => i.bit_width < bits,
        _ => false,
    }
}

/// The lowest protocol that reads `schema`: reader 1 / writer 2 without table features,
/// reader 3 / writer 7 when a column needs one.
pub fn protocol_for(schema: &DeltaSchema) -> Protocol {
    let mut readers = Vec::new();
    if schema.timestamp_ntz {
        readers.push("timestampNtz".to_string());
    }
    if !schema.unmapped.is_empty() {
        readers.push(NO_DELTA_VIEW_FEATURE.to_string());
    }
    if readers.is_empty() {
        return Protocol {
            min_reader_version: 1,
            min_writer_version: 2,
            reader_features: None,
            writer_features: None,
        };
    }
    Protocol {
        min_reader_version: 3,
        min_writer_version: 7,
        writer_features: Some(readers.clone()),
        reader_features: Some(readers),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::datatypes::Field;

    #[test]
    fn maps_types_and_names_the_unmapped() {
        let schema = Schema::new(vec![
            Field::new("a", DataType::UInt16, false),
            Field::new("t", DataType::Timestamp(TimeUnit::Millisecond, None), true),
            Field::new("s", DataType::Utf8, true),
        ]);
        let d = delta_schema(&schema);
        assert!(d.unmapped.is_empty() && d.timestamp_ntz);
        let v: Value = serde_json::from_str(&d.schema_string).unwrap();
        assert_eq!(v["fields"][0]["type"], "integer");
        assert_eq!(v["fields"][0]["nullable"], false);
        assert_eq!(v["fields"][1]["type"], "timestamp_ntz");
        let p = protocol_for(&d);
        assert_eq!((p.min_reader_version, p.min_writer_version), (3, 7));
        assert_eq!(p.reader_features.unwrap(), vec!["timestampNtz"]);

        let plain = delta_schema(&Schema::new(vec![Field::new("x", DataType::Int64, true)]));
        assert_eq!(protocol_for(&plain).min_reader_version, 1);

        let odd = delta_schema(&Schema::new(vec![Field::new("d", DataType::Date64, true)]));
        assert_eq!(odd.unmapped[0].name, "d");
        assert!(
            protocol_for(&odd)
                .reader_features
                .unwrap()
                .contains(&NO_DELTA_VIEW_FEATURE.to_string())
        );
    }

    /// Every Arrow type the property-test tables use (and the other mapped ones) is stored by
    /// parquet-rs as a Parquet type Delta readers read as its Delta type; the unmapped ones are
    /// named.
    #[test]
    fn every_mapped_type_is_stored_as_delta_reads_it() {
        use parquet::arrow::ArrowSchemaConverter;
        let tz = |t: TimeUnit, z: Option<&str>| DataType::Timestamp(t, z.map(Into::into));
        let mapped = [
            (DataType::Int8, "byte"),
            (DataType::Int16, "short"),
            (DataType::Int32, "integer"),
            (DataType::Int64, "long"),
            (DataType::UInt8, "short"),
            (DataType::UInt16, "integer"),
            (DataType::UInt32, "long"),
            (DataType::Date32, "date"),
            (tz(TimeUnit::Millisecond, None), "timestamp_ntz"),
            (tz(TimeUnit::Microsecond, Some("+02:00")), "timestamp"),
            (tz(TimeUnit::Millisecond, Some("UTC")), "timestamp"),
            (DataType::Utf8, "string"),
            (DataType::LargeUtf8, "string"),
            (DataType::Utf8View, "string"),
            (DataType::Binary, "binary"),
            (DataType::LargeBinary, "binary"),
            (DataType::Boolean, "boolean"),
            (DataType::Float32, "float"),
            (DataType::Float64, "double"),
            (DataType::Decimal128(12, 2), "decimal(12,2)"),
            (DataType::Decimal128(30, 0), "decimal(30,0)"),
        ];
        let fields: Vec<Field> = mapped
            .iter()
            .enumerate()
            .map(|(i, (t, _))| Field::new(format!("c{i}"), t.clone(), true))
            .collect();
        let parquet = ArrowSchemaConverter::new()
            .convert(&Schema::new(fields))
            .unwrap();
        for (i, (t, delta)) in mapped.iter().enumerate() {
            assert_eq!(delta_type(t).as_deref(), Some(*delta), "{t}");
            assert!(
                parquet_reads_as(delta, &parquet.column(i)),
                "{t} as {delta}"
            );
        }
        // A wider stored type is never read as a narrower Delta type.
        let (u32_col, u16_col) = (parquet.column(6), parquet.column(5));
        assert!(!parquet_reads_as("integer", &u32_col));
        assert!(!parquet_reads_as("short", &u16_col));
        assert!(
            !parquet_reads_as("timestamp", &parquet.column(8)),
            "ntz as utc"
        );
        assert!(
            !parquet_reads_as("string", &parquet.column(14)),
            "binary as string"
        );
        let seconds = ArrowSchemaConverter::new()
            .convert(&Schema::new(vec![Field::new(
                "s",
                tz(TimeUnit::Second, None),
                false,
            )]))
            .unwrap();
        assert!(
            !parquet_reads_as("timestamp_ntz", &seconds.column(0)),
            "plain INT64"
        );

        let unmapped = Schema::new(vec![
            Field::new("u64", DataType::UInt64, false),
            Field::new("ns", tz(TimeUnit::Nanosecond, Some("UTC")), false),
            Field::new("secs", tz(TimeUnit::Second, None), false),
            Field::new("fsb", DataType::FixedSizeBinary(16), false),
            Field::new("ok", DataType::Int32, false),
        ]);
        let d = delta_schema(&unmapped);
        let names: Vec<&str> = d.unmapped.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["u64", "ns", "secs", "fsb"]);
        let message = no_delta_view(&d).unwrap();
        assert!(message.contains("\"u64\" (UInt64)"), "{message}");
        assert!(
            no_delta_view(&delta_schema(&Schema::new(vec![Field::new(
                "ok",
                DataType::Int32,
                false
            )])))
            .is_none()
        );
    }
}
