//! When two schemas describe the same table: the rule that load, query and verify share.
//!
//! Two schemas agree when they have the same column names in the same order and the same
//! types. Metadata (the schema's and every field's) and nullability do not count, nested
//! fields included, and neither does the name of a list's or map's child field (writers name
//! it `item`, `element` or `entries` by convention, not by meaning). A load writes the table's
//! own schema whatever the input's metadata and nullability were; a reader of loads whose
//! schemas differ only in nullability reads each column as nullable when any load's is.

use std::sync::Arc;

use arrow::datatypes::{DataType, Field, FieldRef, Fields, Schema};

/// Whether two types agree: equal, except for the metadata and nullability of nested fields
/// and the names of list and map children.
pub fn types_agree(a: &DataType, b: &DataType) -> bool {
    use DataType::*;
    match (a, b) {
        (List(x), List(y))
        | (LargeList(x), LargeList(y))
        | (ListView(x), ListView(y))
        | (LargeListView(x), LargeListView(y)) => types_agree(x.data_type(), y.data_type()),
        (FixedSizeList(x, n), FixedSizeList(y, m)) => {
            n == m && types_agree(x.data_type(), y.data_type())
        }
        (Map(x, sorted_x), Map(y, sorted_y)) => {
            sorted_x == sorted_y && children_agree_by_position(x.data_type(), y.data_type())
        }
        (Struct(xs), Struct(ys)) => {
            xs.len() == ys.len()
                && xs
                    .iter()
                    .zip(ys.iter())
                    .all(|(x, y)| x.name() == y.name() && types_agree(x.data_type(), y.data_type()))
        }
        (Dictionary(kx, vx), Dictionary(ky, vy)) => kx == ky && types_agree(vx, vy),
        (RunEndEncoded(rx, vx), RunEndEncoded(ry, vy)) => {
            rx.data_type() == ry.data_type() && types_agree(vx.data_type(), vy.data_type())
        }
        _ => a == b,
    }
}

/// A map's entries: the key and value types agree, whatever the entries' names.
fn children_agree_by_position(a: &DataType, b: &DataType) -> bool {
    match (a, b) {
        (DataType::Struct(xs), DataType::Struct(ys)) => {
            xs.len() == ys.len()
                && xs
                    .iter()
                    .zip(ys.iter())
                    .all(|(x, y)| types_agree(x.data_type(), y.data_type()))
        }
        _ => types_agree(a, b),
    }
}

/// How a schema differs from a table's in names, types or order: the first column that
/// differs and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaDifference {
    pub column: String,
    pub problem: String,
    /// Which rule the schema breaks.
    pub kind: DifferenceKind,
}

/// The rules of this module a schema can break, in the order they are checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum DifferenceKind {
    /// A column of the table's is not there.
    Missing,
    /// A column's type does not agree with the table's.
    Type,
    /// A column is not in the table's schema.
    Extra,
    /// The same columns, in another order.
    Order,
}

impl std::fmt::Display for SchemaDifference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "column {:?} {}", self.column, self.problem)
    }
}

/// The first difference of `other` from `table` under the rule of this module (`None`: they
/// agree).
pub fn schema_difference(table: &Schema, other: &Schema) -> Option<SchemaDifference> {
    let differs = |column: &str, kind: DifferenceKind, problem: String| {
        Some(SchemaDifference {
            column: column.to_string(),
            problem,
            kind,
        })
    };
    for f in table.fields() {
        match other.field_with_name(f.name()) {
            Err(_) => return differs(f.name(), DifferenceKind::Missing, "is missing".into()),
            Ok(g) if !types_agree(f.data_type(), g.data_type()) => {
                return differs(
                    f.name(),
                    DifferenceKind::Type,
                    format!(
                        "has type {}, the table's is {}",
                        g.data_type(),
                        f.data_type()
                    ),
                );
            }
            Ok(_) => {}
        }
    }
    if let Some(extra) = other
        .fields()
        .iter()
        .find(|g| table.field_with_name(g.name()).is_err())
    {
        return differs(
            extra.name(),
            DifferenceKind::Extra,
            "is not in the table's schema".into(),
        );
    }
    let names = |s: &Schema| {
        s.fields()
            .iter()
            .map(|f| f.name().clone())
            .collect::<Vec<_>>()
    };
    if names(table) != names(other) {
        let at = names(table)
            .into_iter()
            .zip(names(other))
            .find(|(a, b)| a != b)
            .map(|(_, b)| b)
            .unwrap_or_default();
        return differs(
            &at,
            DifferenceKind::Order,
            "is in another position than in the table's schema".into(),
        );
    }
    None
}

/// Whether two schemas agree (see the module docs).
pub fn schemas_agree(a: &Schema, b: &Schema) -> bool {
    schema_difference(a, b).is_none()
}

/// A field, nested ones included, whose nullability differs between two agreeing schemas.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NullabilityDifference {
    /// The column, then the nested field's names: `stops.item`.
    pub path: String,
    /// Whether the table's field is nullable (the other's is the opposite).
    pub table_nullable: bool,
}

/// Every field whose nullability differs between `table` and an agreeing `other`.
pub fn nullability_differences(table: &Schema, other: &Schema) -> Vec<NullabilityDifference> {
    let mut out = Vec::new();
    for (f, g) in table.fields().iter().zip(other.fields().iter()) {
        field_nullability(f, g, f.name().clone(), &mut out);
    }
    out
}

fn field_nullability(f: &Field, g: &Field, path: String, out: &mut Vec<NullabilityDifference>) {
    if f.is_nullable() != g.is_nullable() {
        out.push(NullabilityDifference {
            path: path.clone(),
            table_nullable: f.is_nullable(),
        });
    }
    for (x, y) in child_fields(f.data_type())
        .iter()
        .zip(child_fields(g.data_type()).iter())
    {
        field_nullability(x, y, format!("{path}.{}", x.name()), out);
    }
}

/// The types of a nested type's child arrays, in their order (none for a flat type): what an
/// array of type `t` holds as child data (a run-end array its run ends and values, a
/// dictionary its values).
pub fn child_types(t: &DataType) -> Vec<DataType> {
    match t {
        DataType::RunEndEncoded(r, v) => vec![r.data_type().clone(), v.data_type().clone()],
        DataType::Dictionary(_, v) => vec![v.as_ref().clone()],
        _ => child_fields(t)
            .iter()
            .map(|f| f.data_type().clone())
            .collect(),
    }
}

/// The child fields of a nested type (none for a flat type).
fn child_fields(t: &DataType) -> Vec<FieldRef> {
    use DataType::*;
    match t {
        List(f)
        | LargeList(f)
        | ListView(f)
        | LargeListView(f)
        | FixedSizeList(f, _)
        | Map(f, _) => {
            vec![f.clone()]
        }
        Struct(fs) => fs.iter().cloned().collect(),
        RunEndEncoded(_, v) => vec![v.clone()],
        _ => Vec::new(),
    }
}

/// The more permissive of two agreeing schemas: `a`'s names, types and metadata, each field
/// (nested ones included) nullable when it is nullable in either. What a reader of loads that
/// differ only in nullability reads them as.
pub fn widen(a: &Schema, b: &Schema) -> Schema {
    let fields: Vec<FieldRef> = a
        .fields()
        .iter()
        .zip(b.fields().iter())
        .map(|(x, y)| Arc::new(widen_field(x, y)))
        .collect();
    Schema::new_with_metadata(fields, a.metadata().clone())
}

fn widen_field(a: &Field, b: &Field) -> Field {
    a.clone()
        .with_data_type(widen_type(a.data_type(), b.data_type()))
        .with_nullable(a.is_nullable() || b.is_nullable())
}

fn widen_type(a: &DataType, b: &DataType) -> DataType {
    use DataType::*;
    let one = |x: &FieldRef, y: &FieldRef| Arc::new(widen_field(x, y));
    match (a, b) {
        (List(x), List(y)) => List(one(x, y)),
        (LargeList(x), LargeList(y)) => LargeList(one(x, y)),
        (ListView(x), ListView(y)) => ListView(one(x, y)),
        (LargeListView(x), LargeListView(y)) => LargeListView(one(x, y)),
        (FixedSizeList(x, n), FixedSizeList(y, _)) => FixedSizeList(one(x, y), *n),
        (Map(x, sorted), Map(y, _)) => Map(one(x, y), *sorted),
        (Struct(xs), Struct(ys)) => Struct(Fields::from(
            xs.iter()
                .zip(ys.iter())
                .map(|(x, y)| one(x, y))
                .collect::<Vec<_>>(),
        )),
        (RunEndEncoded(r, x), RunEndEncoded(_, y)) => RunEndEncoded(r.clone(), one(x, y)),
        _ => a.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn schema(fields: Vec<Field>) -> Schema {
        Schema::new(fields)
    }

    #[test]
    fn metadata_and_nullability_do_not_count() {
        let table = schema(vec![
            Field::new("a", DataType::Int64, false),
            Field::new("l", DataType::new_list(DataType::Int32, false), false),
        ]);
        let other = Schema::new_with_metadata(
            vec![
                Field::new("a", DataType::Int64, true)
                    .with_metadata(HashMap::from([("a".into(), "b".into())])),
                Field::new(
                    "l",
                    DataType::List(Arc::new(Field::new("element", DataType::Int32, true))),
                    true,
                ),
            ],
            HashMap::from([("x".into(), "y".into())]),
        );
        assert!(schemas_agree(&table, &other));
        let diffs = nullability_differences(&table, &other);
        let paths: Vec<&str> = diffs.iter().map(|d| d.path.as_str()).collect();
        assert_eq!(paths, ["a", "l", "l.item"]);
        let wide = widen(&table, &other);
        assert!(wide.field(0).is_nullable());
        assert_eq!(
            wide.field(1).data_type(),
            &DataType::new_list(DataType::Int32, true)
        );
        assert!(nullability_differences(&wide, &other).is_empty());
    }

    #[test]
    fn names_types_and_order_count() {
        let table = schema(vec![
            Field::new("a", DataType::Int64, false),
            Field::new("b", DataType::Utf8, false),
        ]);
        let typed = schema(vec![
            Field::new("a", DataType::Int32, false),
            Field::new("b", DataType::Utf8, false),
        ]);
        let d = schema_difference(&table, &typed).unwrap();
        assert_eq!((d.column.as_str(), d.kind), ("a", DifferenceKind::Type));
        assert!(d.problem.contains("Int32"), "{d}");
        let swapped = schema(vec![
            Field::new("b", DataType::Utf8, false),
            Field::new("a", DataType::Int64, false),
        ]);
        let d = schema_difference(&table, &swapped).unwrap();
        assert_eq!((d.column.as_str(), d.kind), ("b", DifferenceKind::Order));
        let missing = schema(vec![Field::new("a", DataType::Int64, false)]);
        let d = schema_difference(&table, &missing).unwrap();
        assert_eq!((d.column.as_str(), d.kind), ("b", DifferenceKind::Missing));
        let structs = |name: &str| {
            schema(vec![Field::new_struct(
                "s",
                vec![Field::new(name, DataType::Int8, true)],
                true,
            )])
        };
        assert!(!schemas_agree(&structs("x"), &structs("y")));
        assert!(schemas_agree(&structs("x"), &structs("x")));
    }
}
