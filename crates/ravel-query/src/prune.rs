//! Skipping whole objects by the manifest, before any of them is opened.
//!
//! The manifest records, per object, the smallest and largest value of the layout's columns
//! (stream, key columns, time). A statement's filters that DataFusion pushes to the table are
//! split into conjuncts; each conjunct of the form `column op literal` (`=`, `<`, `<=`, `>`,
//! `>=`, `IN (…)`, `BETWEEN`), on a column the manifest has a range for, may exclude an object.
//! A column may be wrapped in casts that keep integer values (the `hits` view's
//! `CAST(CAST("EventDate" AS INTEGER) AS DATE)`). Anything else keeps the object: pruning may
//! only ever keep too much, never drop an object that has a matching row. SQL comparisons are
//! never true for null, so an object's nulls do not matter.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use datafusion::arrow::datatypes::DataType;
use datafusion::logical_expr::{BinaryExpr, Expr, Operator};
use datafusion::scalar::ScalarValue;
use ravel_manifest::{ObjectEntry, ValueRange};
use serde_json::Value;

/// A literal as the manifest encodes values: a number, or a string (binary columns as hex).
#[derive(Debug, Clone, PartialEq)]
enum Lit {
    Int(i128),
    Float(f64),
    Str(String),
}

fn lit_of(v: &ScalarValue) -> Option<Lit> {
    use ScalarValue::*;
    Some(match v {
        Int8(Some(x)) => Lit::Int(*x as i128),
        Int16(Some(x)) => Lit::Int(*x as i128),
        Int32(Some(x)) => Lit::Int(*x as i128),
        Int64(Some(x)) => Lit::Int(*x as i128),
        UInt8(Some(x)) => Lit::Int(*x as i128),
        UInt16(Some(x)) => Lit::Int(*x as i128),
        UInt32(Some(x)) => Lit::Int(*x as i128),
        UInt64(Some(x)) => Lit::Int(*x as i128),
        Date32(Some(x)) => Lit::Int(*x as i128),
        Float32(Some(x)) => Lit::Float(*x as f64),
        Float64(Some(x)) => Lit::Float(*x),
        Utf8(Some(s)) | LargeUtf8(Some(s)) | Utf8View(Some(s)) => Lit::Str(s.clone()),
        _ => return None,
    })
}

/// Compares a manifest value with a literal; `None` when they are not comparable.
fn cmp(v: &Value, lit: &Lit, binary: bool) -> Option<Ordering> {
    match (v, lit) {
        (Value::Number(n), Lit::Int(i)) => {
            if let Some(x) = n.as_i64() {
                Some((x as i128).cmp(i))
            } else if let Some(x) = n.as_u64() {
                Some((x as i128).cmp(i))
            } else {
                n.as_f64()?.partial_cmp(&(*i as f64))
            }
        }
        (Value::Number(n), Lit::Float(f)) => n.as_f64()?.partial_cmp(f),
        (Value::String(s), Lit::Str(l)) if binary => {
            // Binary columns are recorded as lowercase hex, which keeps byte order.
            let hex: String = l.bytes().map(|b| format!("{b:02x}")).collect();
            Some(s.as_str().cmp(hex.as_str()))
        }
        (Value::String(s), Lit::Str(l)) => Some(s.as_bytes().cmp(l.as_bytes())),
        _ => None,
    }
}

/// The range of values of an integer-like type (dates as their day numbers).
fn int_range(t: &DataType) -> Option<(i128, i128)> {
    use DataType::*;
    Some(match t {
        Int8 => (i8::MIN as i128, i8::MAX as i128),
        Int16 => (i16::MIN as i128, i16::MAX as i128),
        Int32 | Date32 => (i32::MIN as i128, i32::MAX as i128),
        Int64 => (i64::MIN as i128, i64::MAX as i128),
        UInt8 => (0, u8::MAX as i128),
        UInt16 => (0, u16::MAX as i128),
        UInt32 => (0, u32::MAX as i128),
        UInt64 => (0, u64::MAX as i128),
        _ => return None,
    })
}

/// Whether every value of `from` is the same number in `to`.
fn widening(from: &DataType, to: &DataType) -> bool {
    match (int_range(from), int_range(to)) {
        (Some((a, b)), Some((c, d))) => c <= a && b <= d,
        _ => false,
    }
}

fn literal(e: &Expr) -> Option<Lit> {
    match e {
        Expr::Literal(v, _) => lit_of(v),
        Expr::Cast(c) => literal(&c.expr),
        _ => None,
    }
}

/// Whether values in `r` may satisfy `value op lit`.
fn may_satisfy(r: &ValueRange, op: Operator, lit: &Lit, binary: bool) -> bool {
    let (Some(lo), Some(hi)) = (cmp(&r.min, lit, binary), cmp(&r.max, lit, binary)) else {
        return true;
    };
    use Ordering::*;
    match op {
        Operator::Eq => lo != Greater && hi != Less,
        Operator::Lt => lo == Less,
        Operator::LtEq => lo != Greater,
        Operator::Gt => hi == Greater,
        Operator::GtEq => hi != Less,
        _ => true,
    }
}

fn flip(op: Operator) -> Operator {
    match op {
        Operator::Lt => Operator::Gt,
        Operator::LtEq => Operator::GtEq,
        Operator::Gt => Operator::Lt,
        Operator::GtEq => Operator::LtEq,
        other => other,
    }
}

/// What the pruner knows of the table: the columns stored as binary (compared as hex).
#[derive(Debug, Clone, Default)]
pub struct Pruner {
    types: std::collections::HashMap<String, DataType>,
}

impl Pruner {
    pub fn new(file_schema: &datafusion::arrow::datatypes::Schema) -> Pruner {
        Pruner {
            types: file_schema
                .fields()
                .iter()
                .map(|f| (f.name().clone(), f.data_type().clone()))
                .collect(),
        }
    }

    /// The column a value expression reads and its stored type, through casts that keep
    /// every value the same number (widening integer casts, integers to dates).
    fn column_of<'e>(&self, e: &'e Expr) -> Option<(&'e str, &DataType)> {
        match e {
            Expr::Column(c) => Some((c.name.as_str(), self.types.get(&c.name)?)),
            Expr::Cast(c) => {
                let (name, stored) = self.column_of(&c.expr)?;
                let seen = self.type_of(&c.expr)?;
                widening(&seen, c.field.data_type()).then_some((name, stored))
            }
            _ => None,
        }
    }

    /// The type of a column seen through casts.
    fn type_of(&self, e: &Expr) -> Option<DataType> {
        match e {
            Expr::Column(c) => self.types.get(&c.name).cloned(),
            Expr::Cast(c) => Some(c.field.data_type().clone()),
            _ => None,
        }
    }

    /// Whether `object` may hold a row that satisfies every filter.
    pub fn may_match(&self, object: &ObjectEntry, filters: &[Expr]) -> bool {
        filters.iter().all(|f| self.conjunct(&object.ranges, f))
    }

    fn range<'a>(
        &self,
        ranges: &'a BTreeMap<String, ValueRange>,
        e: &Expr,
    ) -> Option<(&'a ValueRange, bool)> {
        let (name, stored) = self.column_of(e)?;
        let binary = matches!(
            stored,
            DataType::Binary | DataType::LargeBinary | DataType::BinaryView
        );
        ranges.get(name).map(|r| (r, binary))
    }

    fn conjunct(&self, ranges: &BTreeMap<String, ValueRange>, e: &Expr) -> bool {
        match e {
            Expr::BinaryExpr(BinaryExpr { left, op, right }) => match op {
                Operator::And => self.conjunct(ranges, left) && self.conjunct(ranges, right),
                Operator::Or => self.conjunct(ranges, left) || self.conjunct(ranges, right),
                Operator::Eq | Operator::Lt | Operator::LtEq | Operator::Gt | Operator::GtEq => {
                    if let (Some((r, bin)), Some(l)) = (self.range(ranges, left), literal(right)) {
                        may_satisfy(r, *op, &l, bin)
                    } else if let (Some(l), Some((r, bin))) =
                        (literal(left), self.range(ranges, right))
                    {
                        may_satisfy(r, flip(*op), &l, bin)
                    } else {
                        true
                    }
                }
                _ => true,
            },
            Expr::InList(list) if !list.negated => {
                let Some((r, bin)) = self.range(ranges, &list.expr) else {
                    return true;
                };
                list.list.iter().any(|item| match literal(item) {
                    Some(l) => may_satisfy(r, Operator::Eq, &l, bin),
                    None => true,
                })
            }
            Expr::Between(b) if !b.negated => {
                let Some((r, bin)) = self.range(ranges, &b.expr) else {
                    return true;
                };
                let low = literal(&b.low).is_none_or(|l| may_satisfy(r, Operator::GtEq, &l, bin));
                let high = literal(&b.high).is_none_or(|l| may_satisfy(r, Operator::LtEq, &l, bin));
                low && high
            }
            _ => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::prelude::{cast, ident as col, lit};
    use serde_json::json;

    fn object(ranges: &[(&str, Value, Value)]) -> ObjectEntry {
        ObjectEntry {
            key: "k".into(),
            rows: 1,
            bytes: 1,
            run: 0,
            first_key: None,
            last_key: None,
            ranges: ranges
                .iter()
                .map(|(c, a, b)| {
                    (
                        c.to_string(),
                        ValueRange {
                            min: a.clone(),
                            max: b.clone(),
                        },
                    )
                })
                .collect(),
        }
    }

    #[test]
    fn ranges_exclude_only_what_cannot_match() {
        use datafusion::arrow::datatypes::{Field, Schema};
        let schema = Schema::new(vec![
            Field::new("CounterID", DataType::Int32, false),
            Field::new("EventDate", DataType::UInt16, false),
            Field::new("UserID", DataType::Int64, false),
            Field::new("URL", DataType::Utf8, false),
            Field::new("B", DataType::Binary, true),
        ]);
        let p = Pruner::new(&schema);
        let o = object(&[
            ("CounterID", json!(60), json!(70)),
            ("EventDate", json!(15887), json!(15890)),
            ("URL", json!("b"), json!("d")),
            ("B", json!("6263"), json!("6465")),
        ]);
        let keep = |e: Expr| p.may_match(&o, &[e]);
        assert!(keep(col("CounterID").eq(lit(62))));
        assert!(!keep(col("CounterID").eq(lit(71))));
        assert!(!keep(lit(59).eq(col("CounterID"))));
        assert!(keep(col("CounterID").gt_eq(lit(70))));
        assert!(!keep(col("CounterID").gt(lit(70))));
        assert!(!keep(col("CounterID").lt(lit(60))));
        assert!(keep(col("CounterID").lt_eq(lit(60))));
        assert!(!keep(lit(60).gt(col("CounterID"))));
        assert!(!keep(
            col("CounterID").in_list(vec![lit(1), lit(80)], false)
        ));
        assert!(keep(col("CounterID").in_list(vec![lit(1), lit(65)], false)));
        assert!(
            keep(col("CounterID").in_list(vec![lit(1)], true)),
            "NOT IN keeps"
        );
        assert!(!keep(col("CounterID").between(lit(71), lit(90))));
        assert!(keep(col("CounterID").between(lit(50), lit(60))));
        assert!(!keep(
            col("CounterID").eq(lit(62)).and(col("URL").eq(lit("a")))
        ));
        assert!(keep(
            col("CounterID").eq(lit(1)).or(col("URL").eq(lit("c")))
        ));
        assert!(!keep(col("URL").eq(lit("e"))));
        assert!(keep(col("URL").eq(lit("d"))));
        assert!(keep(col("URL").not_eq(lit("x"))), "<> keeps");
        // Binary columns compare as hex: "bc".."de".
        assert!(keep(col("B").eq(lit("cc"))));
        assert!(!keep(col("B").eq(lit("df"))));
        // The hits view's date: CAST(CAST(EventDate AS INT) AS DATE) against a date literal.
        let date = |d: i32| lit(ScalarValue::Date32(Some(d)));
        let ed = cast(cast(col("EventDate"), DataType::Int32), DataType::Date32);
        assert!(!keep(ed.clone().gt_eq(date(15891))));
        assert!(keep(ed.clone().lt_eq(date(15887))));
        // Unknown columns, functions and null literals keep the object.
        assert!(keep(col("Other").eq(lit(1))));
        assert!(keep(col("CounterID").eq(lit(ScalarValue::Int32(None)))));
        assert!(keep(cast(col("CounterID"), DataType::Utf8).eq(lit("x"))));
        // A narrowing cast may change values: it keeps the object.
        let o = object(&[("UserID", json!(1i64 << 40), json!(1i64 << 41))]);
        assert!(p.may_match(&o, &[cast(col("UserID"), DataType::Int32).eq(lit(0))]));
    }
}
