//! The table's schema as a Delta Lake reader sees it, and the protocol that schema needs.

use arrow::datatypes::{DataType, Schema, TimeUnit};
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

/// Delta's primitive type for an Arrow type, where one holds every value.
pub fn delta_type(t: &DataType) -> Option<String> {
    let name = match t {
        DataType::Boolean => "boolean",
        DataType::Int8 => "byte",
        DataType::Int16 | DataType::UInt8 => "short",
        DataType::Int32 | DataType::UInt16 => "integer",
        DataType::Int64 | DataType::UInt32 => "long",
        DataType::UInt64 => "decimal(20,0)",
        DataType::Float32 => "float",
        DataType::Float64 => "double",
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => "string",
        DataType::Binary
        | DataType::LargeBinary
        | DataType::BinaryView
        | DataType::FixedSizeBinary(_) => "binary",
        DataType::Date32 => "date",
        DataType::Timestamp(
            TimeUnit::Second | TimeUnit::Millisecond | TimeUnit::Microsecond,
            tz,
        ) => {
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
}
