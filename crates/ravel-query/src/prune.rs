//! Skipping whole objects by the manifest, before any of them is opened.
//!
//! The manifest records, per object, the smallest and largest value of the layout's columns
//! (stream, key columns, time). A statement's filters that DataFusion pushes to the table are
//! split into conjuncts; each conjunct of the form `column op literal` (`=`, `<`, `<=`, `>`,
//! `>=`, `IN (…)`, `BETWEEN`), on a column the manifest has a range for, may exclude an object.
//! A column may be wrapped in casts that keep its values (wider integers or floats, the `hits`
//! view's `CAST(CAST("EventDate" AS INTEGER) AS DATE)`), and in `canonical_float` (every float
//! comparison, see `floats`), under which floats compare as DuckDB compares them: -0.0 = 0.0,
//! NaN above all. A NaN or infinite end of a range is recorded as null, which keeps the object.
//! Anything else keeps the object: pruning may only ever keep too much, never drop an object
//! that has a matching row. SQL comparisons are never true for null, so an object's nulls do
//! not matter.
//!
//! Where the load kept a per-object Bloom filter of a string column (its sidecar, see
//! `ravel-bloom`), an equality or `IN` on that column also asks the filter: an object whose
//! filter holds none of the values is dropped. A filter has no false negatives, so this too
//! only ever drops objects without a matching row.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use datafusion::arrow::datatypes::DataType;
use datafusion::logical_expr::{BinaryExpr, Expr, Operator};
use datafusion::scalar::ScalarValue;
use ravel_bloom::Filter;
use ravel_manifest::{ObjectEntry, ValueRange};

use crate::floats::{canonical_argument, canonical_f64};
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

/// How a column's recorded values compare with a literal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Order {
    /// As Arrow compares them: numbers numerically (floats in IEEE total order, -0.0 < 0.0),
    /// strings bytewise.
    Natural,
    /// A binary column, recorded as lowercase hex.
    Hex,
    /// A float column read through `canonical_float`: as DuckDB compares floats (-0.0 = 0.0,
    /// NaN above every other value).
    Canonical,
}

/// Two floats in `order`.
fn float_cmp(a: f64, b: f64, order: Order) -> Ordering {
    match order {
        Order::Canonical => canonical_f64(a).total_cmp(&canonical_f64(b)),
        _ => a.total_cmp(&b),
    }
}

/// Compares a manifest value with a literal; `None` when they are not comparable.
fn cmp(v: &Value, lit: &Lit, order: Order) -> Option<Ordering> {
    match (v, lit) {
        // A NaN or infinite value of the object is recorded as null (a NaN of either sign is
        // an end of the range in total order), which compares with nothing and keeps the
        // object: a finite range says the object holds no NaN.
        (Value::Number(n), Lit::Int(i)) => {
            if let Some(x) = n.as_i64() {
                Some((x as i128).cmp(i))
            } else if let Some(x) = n.as_u64() {
                Some((x as i128).cmp(i))
            } else {
                Some(float_cmp(n.as_f64()?, *i as f64, order))
            }
        }
        (Value::Number(n), Lit::Float(f)) => Some(float_cmp(n.as_f64()?, *f, order)),
        (Value::String(s), Lit::Str(l)) if order == Order::Hex => {
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
    use DataType::*;
    match (int_range(from), int_range(to)) {
        (Some((a, b)), Some((c, d))) => c <= a && b <= d,
        _ => matches!(
            (from, to),
            (Float16, Float32 | Float64) | (Float32, Float64)
        ),
    }
}

/// The value of a literal, through casts that keep it: an integer cast to an integer (or date)
/// type that holds it, a float to a float type, a string to a string type. Any other cast may
/// change the value (`CAST(62.7 AS INT)`), so it is no literal here and keeps the object.
fn literal(e: &Expr) -> Option<Lit> {
    if let Some(arg) = canonical_argument(e) {
        return match literal(arg)? {
            Lit::Float(f) => Some(Lit::Float(canonical_f64(f))),
            other => Some(other),
        };
    }
    match e {
        Expr::Literal(v, _) => lit_of(v),
        Expr::Cast(c) => {
            let inner = literal(&c.expr)?;
            let to = c.field.data_type();
            let keeps = match &inner {
                Lit::Int(i) => int_range(to).is_some_and(|(lo, hi)| lo <= *i && *i <= hi),
                Lit::Float(_) => matches!(to, DataType::Float32 | DataType::Float64),
                Lit::Str(_) => matches!(
                    to,
                    DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
                ),
            };
            keeps.then_some(inner)
        }
        _ => None,
    }
}

/// Whether values in `r` may satisfy `value op lit`.
fn may_satisfy(r: &ValueRange, op: Operator, lit: &Lit, order: Order) -> bool {
    let (Some(lo), Some(hi)) = (cmp(&r.min, lit, order), cmp(&r.max, lit, order)) else {
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

/// One conjunct of a statement's filters that pruning can use: a column (through casts that keep
/// its values) compared with literals. What a layout advisor reads from a statement.
#[derive(Debug, Clone, PartialEq)]
pub struct Predicate {
    /// The column as stored.
    pub column: String,
    pub test: Test,
}

/// How a [`Predicate`] compares its column.
#[derive(Debug, Clone, PartialEq)]
pub enum Test {
    /// `=` or `IN`, with this many values; `text` when they are strings, which are then in
    /// `strings`.
    Equal {
        values: usize,
        text: bool,
        strings: Vec<String>,
    },
    /// `<`, `<=`, `>`, `>=` or `BETWEEN`: the bounds given, as numbers when they are numbers
    /// (dates as days, `days` set).
    Range {
        low: Option<f64>,
        high: Option<f64>,
        days: bool,
    },
}

/// An equality with `lits`.
fn equal(lits: &[Lit]) -> Test {
    let strings: Vec<String> = lits
        .iter()
        .filter_map(|l| match l {
            Lit::Str(s) => Some(s.clone()),
            _ => None,
        })
        .collect();
    Test::Equal {
        values: lits.len(),
        text: !lits.is_empty() && strings.len() == lits.len(),
        strings,
    }
}

fn number(e: &Expr) -> (Option<f64>, bool) {
    let days = date_literal(e);
    match literal(e) {
        Some(Lit::Int(i)) => (Some(i as f64), days),
        Some(Lit::Float(f)) => (Some(f), days),
        _ => (None, days),
    }
}

/// Whether `e` is a date literal (through casts).
fn date_literal(e: &Expr) -> bool {
    match e {
        Expr::Literal(ScalarValue::Date32(_), _) => true,
        Expr::Cast(c) => *c.field.data_type() == DataType::Date32 || date_literal(&c.expr),
        _ => false,
    }
}

/// What the manifest (and the load's sidecar) says of one object.
struct Facts<'a> {
    ranges: &'a BTreeMap<String, ValueRange>,
    blooms: &'a [(&'a str, &'a Filter)],
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
    /// every value the same number (widening integer or float casts, integers to dates) and
    /// `canonical_float`.
    fn column_of<'e>(&self, e: &'e Expr) -> Option<(&'e str, &DataType)> {
        if let Some(arg) = canonical_argument(e) {
            return self.column_of(arg);
        }
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

    /// Whether `object` may hold a row that satisfies every filter, by its ranges alone.
    pub fn may_match(&self, object: &ObjectEntry, filters: &[Expr]) -> bool {
        self.may_match_with(object, &[], filters)
    }

    /// Whether `object` may hold a row that satisfies every filter, by its ranges and the
    /// Bloom filters given (`(column, the object's filter)`).
    pub fn may_match_with(
        &self,
        object: &ObjectEntry,
        blooms: &[(&str, &Filter)],
        filters: &[Expr],
    ) -> bool {
        let facts = Facts {
            ranges: &object.ranges,
            blooms,
        };
        filters.iter().all(|f| self.conjunct(&facts, f))
    }

    /// The string columns that the filters compare for equality with literals: the columns
    /// whose Bloom filters can drop objects for this statement.
    pub fn equality_columns(&self, filters: &[Expr]) -> std::collections::BTreeSet<String> {
        let mut out = std::collections::BTreeSet::new();
        for f in filters {
            self.collect_equalities(f, &mut out);
        }
        out
    }

    /// The conjuncts of `filters` that compare a column with literals, as pruning reads them;
    /// an `OR` of equalities on one column counts as one `IN`. Others are left out.
    pub fn predicates(&self, filters: &[Expr]) -> Vec<Predicate> {
        let mut out = Vec::new();
        for f in filters {
            self.collect_predicates(f, &mut out);
        }
        out
    }

    fn collect_predicates(&self, e: &Expr, out: &mut Vec<Predicate>) {
        let found = match e {
            Expr::BinaryExpr(BinaryExpr {
                left,
                op: Operator::And,
                right,
            }) => {
                self.collect_predicates(left, out);
                self.collect_predicates(right, out);
                return;
            }
            Expr::BinaryExpr(BinaryExpr { left, op, right }) => self.comparison(left, *op, right),
            Expr::InList(list) if !list.negated => {
                let lits: Option<Vec<Lit>> = list.list.iter().map(literal).collect();
                self.column_of(&list.expr)
                    .zip(lits)
                    .map(|((c, _), l)| Predicate {
                        column: c.to_string(),
                        test: equal(&l),
                    })
            }
            Expr::Between(b) if !b.negated => self.column_of(&b.expr).map(|(c, _)| {
                let ((low, d1), (high, d2)) = (number(&b.low), number(&b.high));
                Predicate {
                    column: c.to_string(),
                    test: Test::Range {
                        low,
                        high,
                        days: d1 || d2,
                    },
                }
            }),
            _ => None,
        };
        out.extend(found);
    }

    /// `left op right` as a predicate, when one side is a column and the other a literal.
    fn comparison(&self, left: &Expr, op: Operator, right: &Expr) -> Option<Predicate> {
        if op == Operator::Or {
            let (a, b) = (
                self.predicates(std::slice::from_ref(left)),
                self.predicates(std::slice::from_ref(right)),
            );
            return match (a.as_slice(), b.as_slice()) {
                ([p1], [p2]) if p1.column == p2.column => match (&p1.test, &p2.test) {
                    (
                        Test::Equal {
                            values: v1,
                            text: t1,
                            strings: s1,
                        },
                        Test::Equal {
                            values: v2,
                            text: t2,
                            strings: s2,
                        },
                    ) => Some(Predicate {
                        column: p1.column.clone(),
                        test: Test::Equal {
                            values: v1 + v2,
                            text: *t1 && *t2,
                            strings: s1.iter().chain(s2).cloned().collect(),
                        },
                    }),
                    _ => None,
                },
                _ => None,
            };
        }
        let (column, lit, op) = match (self.column_of(left), self.column_of(right)) {
            (Some((c, _)), None) => (c, right, op),
            (None, Some((c, _))) => (c, left, flip(op)),
            _ => return None,
        };
        let test = match op {
            Operator::Eq => equal(&[literal(lit)?]),
            Operator::Lt | Operator::LtEq | Operator::Gt | Operator::GtEq => {
                literal(lit)?;
                let (value, days) = number(lit);
                let (low, high) = match op {
                    Operator::Gt | Operator::GtEq => (value, None),
                    _ => (None, value),
                };
                Test::Range { low, high, days }
            }
            _ => return None,
        };
        Some(Predicate {
            column: column.to_string(),
            test,
        })
    }

    fn collect_equalities(&self, e: &Expr, out: &mut std::collections::BTreeSet<String>) {
        match e {
            Expr::BinaryExpr(BinaryExpr { left, op, right }) => match op {
                Operator::And | Operator::Or => {
                    self.collect_equalities(left, out);
                    self.collect_equalities(right, out);
                }
                Operator::Eq => {
                    for (c, l) in [(left, right), (right, left)] {
                        if let (Some(name), Some(Lit::Str(_))) = (self.string_column(c), literal(l))
                        {
                            out.insert(name.to_string());
                        }
                    }
                }
                _ => {}
            },
            Expr::InList(list) if !list.negated => {
                if let Some(name) = self.string_column(&list.expr)
                    && list
                        .list
                        .iter()
                        .all(|i| matches!(literal(i), Some(Lit::Str(_))))
                {
                    out.insert(name.to_string());
                }
            }
            _ => {}
        }
    }

    /// The name of a string or binary column read as it is stored (no function, no cast that
    /// could change its values).
    fn string_column<'e>(&self, e: &'e Expr) -> Option<&'e str> {
        match e {
            Expr::Column(c) => self
                .types
                .get(&c.name)
                .is_some_and(ravel_bloom::supported)
                .then_some(c.name.as_str()),
            _ => None,
        }
    }

    fn range<'a>(&self, facts: &Facts<'a>, e: &Expr) -> Option<(&'a ValueRange, Order)> {
        let (name, stored) = self.column_of(e)?;
        let order = if canonical_argument(e).is_some() {
            Order::Canonical
        } else if matches!(
            stored,
            DataType::Binary | DataType::LargeBinary | DataType::BinaryView
        ) {
            Order::Hex
        } else {
            Order::Natural
        };
        facts.ranges.get(name).map(|r| (r, order))
    }

    /// Whether the object may hold a row with `column = lit`, by its range and its filter.
    fn may_equal(&self, facts: &Facts<'_>, column: &Expr, lit: &Lit) -> bool {
        let by_range = self
            .range(facts, column)
            .is_none_or(|(r, order)| may_satisfy(r, Operator::Eq, lit, order));
        let by_bloom = match (self.string_column(column), lit) {
            (Some(name), Lit::Str(s)) => facts
                .blooms
                .iter()
                .find(|(c, _)| *c == name)
                .is_none_or(|(_, f)| f.may_contain(s.as_bytes())),
            _ => true,
        };
        by_range && by_bloom
    }

    fn conjunct(&self, facts: &Facts<'_>, e: &Expr) -> bool {
        match e {
            Expr::BinaryExpr(BinaryExpr { left, op, right }) => match op {
                Operator::And => self.conjunct(facts, left) && self.conjunct(facts, right),
                Operator::Or => self.conjunct(facts, left) || self.conjunct(facts, right),
                Operator::Eq => {
                    if let Some(l) = literal(right) {
                        self.may_equal(facts, left, &l)
                    } else if let Some(l) = literal(left) {
                        self.may_equal(facts, right, &l)
                    } else {
                        true
                    }
                }
                Operator::Lt | Operator::LtEq | Operator::Gt | Operator::GtEq => {
                    if let (Some((r, order)), Some(l)) = (self.range(facts, left), literal(right)) {
                        may_satisfy(r, *op, &l, order)
                    } else if let (Some(l), Some((r, order))) =
                        (literal(left), self.range(facts, right))
                    {
                        may_satisfy(r, flip(*op), &l, order)
                    } else {
                        true
                    }
                }
                _ => true,
            },
            Expr::InList(list) if !list.negated => {
                list.list.iter().any(|item| match literal(item) {
                    Some(l) => self.may_equal(facts, &list.expr, &l),
                    None => true,
                })
            }
            Expr::Between(b) if !b.negated => {
                let Some((r, order)) = self.range(facts, &b.expr) else {
                    return true;
                };
                let low = literal(&b.low).is_none_or(|l| may_satisfy(r, Operator::GtEq, &l, order));
                let high =
                    literal(&b.high).is_none_or(|l| may_satisfy(r, Operator::LtEq, &l, order));
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
            delta_stats: None,
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
        // A literal cast that changes its value is no literal: CAST(62.7 AS INT) is 62.
        assert!(keep(col("CounterID").eq(cast(lit(62.7), DataType::Int32))));
        assert!(!keep(
            col("CounterID").eq(cast(lit(71i64), DataType::Int32))
        ));
        // A narrowing cast may change values: it keeps the object.
        let o = object(&[("UserID", json!(1i64 << 40), json!(1i64 << 41))]);
        assert!(p.may_match(&o, &[cast(col("UserID"), DataType::Int32).eq(lit(0))]));
    }

    #[test]
    fn predicates_are_the_comparisons_pruning_reads() {
        use datafusion::arrow::datatypes::{Field, Schema};
        let schema = Schema::new(vec![
            Field::new("CounterID", DataType::Int32, false),
            Field::new("EventDate", DataType::UInt16, false),
            Field::new("URL", DataType::Utf8, false),
        ]);
        let p = Pruner::new(&schema);
        let date = |d: i32| lit(ScalarValue::Date32(Some(d)));
        let ed = cast(cast(col("EventDate"), DataType::Int32), DataType::Date32);
        let found = p.predicates(&[
            col("CounterID")
                .eq(lit(62))
                .and(ed.clone().gt_eq(date(15887))),
            lit(15917).gt_eq(cast(
                cast(col("EventDate"), DataType::Int32),
                DataType::Int64,
            )),
            col("URL").eq(lit("a")).or(col("URL").eq(lit("b"))),
            col("URL").like(lit("%g%")),
            col("CounterID").eq(lit(1)).or(col("URL").eq(lit("b"))),
        ]);
        let range = |low, high, days| Test::Range { low, high, days };
        let tests: Vec<(&str, Test)> = found
            .iter()
            .map(|p| (p.column.as_str(), p.test.clone()))
            .collect();
        let strings = |s: &[&str]| s.iter().map(|s| s.to_string()).collect();
        assert_eq!(
            tests,
            vec![
                (
                    "CounterID",
                    Test::Equal {
                        values: 1,
                        text: false,
                        strings: vec![]
                    }
                ),
                ("EventDate", range(Some(15887.0), None, true)),
                ("EventDate", range(None, Some(15917.0), false)),
                (
                    "URL",
                    Test::Equal {
                        values: 2,
                        text: true,
                        strings: strings(&["a", "b"])
                    }
                ),
            ]
        );
    }

    #[test]
    fn floats_compare_in_total_order() {
        use datafusion::arrow::datatypes::{Field, Schema};
        let schema = Schema::new(vec![Field::new("F", DataType::Float64, true)]);
        let p = Pruner::new(&schema);
        // An object whose values are all -0.0 holds rows with F < 0.0 (Arrow's total order).
        let o = object(&[("F", json!(-0.0), json!(-0.0))]);
        assert!(p.may_match(&o, &[col("F").lt(lit(0.0))]));
        assert!(!p.may_match(&o, &[col("F").gt(lit(-0.0))]));
        assert!(!p.may_match(&o, &[col("F").gt_eq(lit(0.0))]));
    }

    #[test]
    fn canonical_floats_compare_as_duckdb_does() {
        use datafusion::arrow::array::{ArrayRef, Float64Array};
        use datafusion::arrow::datatypes::{Field, Schema};
        use datafusion::logical_expr::expr::ScalarFunction;
        use std::sync::Arc;
        let schema = Schema::new(vec![Field::new("F", DataType::Float64, true)]);
        let p = Pruner::new(&schema);
        let f = Expr::ScalarFunction(ScalarFunction::new_udf(
            crate::floats::canonical_float(),
            vec![col("F")],
        ));
        // The manifest's range of the object's values, as the loader records it.
        let object_of = |values: Vec<f64>| {
            let a: ArrayRef = Arc::new(Float64Array::from(values));
            let r = ravel_manifest::value_range(&[a]).unwrap().unwrap();
            object(&[("F", r.min, r.max)])
        };
        // -0.0 equals 0.0: an object of -0.0 alone holds rows with F = 0.0, none below it.
        let zeros = object_of(vec![-0.0, -0.0]);
        let keep = |o: &ObjectEntry, e: Expr| p.may_match(o, &[e]);
        assert!(keep(&zeros, f.clone().eq(lit(0.0))));
        assert!(keep(&zeros, f.clone().gt_eq(lit(0.0))));
        assert!(!keep(&zeros, f.clone().lt(lit(0.0))));
        assert!(!keep(&zeros, f.clone().gt(lit(-0.0))));
        // NaN is above every other value, +inf included: a finite range holds none.
        let finite = object_of(vec![1.0, 5.0]);
        assert!(!keep(&finite, f.clone().eq(lit(f64::NAN))));
        assert!(!keep(&finite, f.clone().gt_eq(lit(f64::NAN))));
        assert!(keep(&finite, f.clone().lt(lit(f64::NAN))));
        // NaN of either sign is an end of the recorded range (in total order), recorded as
        // null: the object is kept.
        let negative_nan = f64::from_bits(0xfff8_0000_0000_0000);
        for nan in [f64::NAN, negative_nan] {
            let o = object_of(vec![1.0, nan, 5.0]);
            assert!(keep(&o, f.clone().eq(lit(f64::NAN))), "{nan}");
            assert!(keep(&o, f.clone().gt(lit(f64::INFINITY))), "{nan}");
        }
        assert!(keep(
            &finite,
            f.clone().in_list(vec![lit(-0.0), lit(3.0)], false)
        ));
    }

    #[test]
    fn bloom_filters_drop_objects_without_the_value() {
        use datafusion::arrow::datatypes::{Field, Schema};
        let schema = Schema::new(vec![
            Field::new("CounterID", DataType::Int32, false),
            Field::new("URL", DataType::Binary, false),
        ]);
        let p = Pruner::new(&schema);
        let urls = [&b"http://a/1"[..], b"http://a/2"];
        let f = Filter::from_bytes(&ravel_bloom::of_values(urls, 0.01)).unwrap();
        let blooms = [("URL", &f)];
        let o = object(&[("CounterID", json!(60), json!(70))]);
        let keep = |e: Expr| p.may_match_with(&o, &blooms, &[e]);
        assert!(keep(col("URL").eq(lit("http://a/1"))));
        assert!(keep(lit("http://a/2").eq(col("URL"))));
        assert!(!keep(col("URL").eq(lit("http://b/1"))));
        assert!(keep(
            col("URL").in_list(vec![lit("x"), lit("http://a/2")], false)
        ));
        assert!(!keep(col("URL").in_list(vec![lit("x"), lit("y")], false)));
        assert!(keep(col("URL").not_eq(lit("http://a/1"))), "<> keeps");
        assert!(keep(col("URL").like(lit("http://b%"))), "LIKE keeps");
        assert!(keep(
            col("URL")
                .eq(lit("http://b/1"))
                .or(col("CounterID").eq(lit(62)))
        ));
        assert!(!keep(
            col("URL")
                .eq(lit("http://b/1"))
                .and(col("CounterID").eq(lit(62)))
        ));
        // Without a filter for the column, the object is kept.
        assert!(p.may_match_with(&o, &[], &[col("URL").eq(lit("http://b/1"))]));
        let wanted = p.equality_columns(&[
            col("URL").eq(lit("a")).and(col("CounterID").eq(lit(1))),
            col("Title").eq(lit("t")),
        ]);
        assert_eq!(
            wanted.into_iter().collect::<Vec<_>>(),
            vec!["URL".to_string()]
        );
    }
}
