//! Float comparisons as DuckDB makes them: every NaN equal to every other NaN and greater than
//! any other value (+inf included), and -0.0 equal to 0.0.
//!
//! Arrow compares floats in IEEE total order: bitwise equality, -0.0 below 0.0, a NaN with its
//! sign bit set below -inf and apart from other NaNs. DataFusion makes -0.0 equal to 0.0 in `=`
//! and `<` but not in `IN`, and keeps the rest. The analyzer rule [`FloatComparisons`] wraps each
//! float operand of a comparison (`=`, `<>`, `<`, `<=`, `>`, `>=`, `IS [NOT] DISTINCT FROM`,
//! `IN`, `BETWEEN`) in [`canonical_float`], which turns every NaN into the positive quiet NaN
//! and -0.0 into 0.0: total order over those values is DuckDB's order. A literal becomes its
//! canonical value at once; an integer or decimal cast to a float is neither NaN nor -0.0, so it
//! is left as it is (and DataFusion may still move its cast to the literal).
//!
//! Other uses of floats (ORDER BY, GROUP BY, DISTINCT, join keys, MIN/MAX) keep DataFusion's
//! total order.

use std::sync::{Arc, LazyLock};

use datafusion::arrow::array::{Array, ArrayRef, AsArray, PrimitiveArray};
use datafusion::arrow::datatypes::{
    ArrowPrimitiveType, DataType, Float16Type, Float32Type, Float64Type,
};
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
use datafusion::common::{DFSchema, Result, ScalarValue};
use datafusion::logical_expr::expr::{InList, ScalarFunction};
use datafusion::logical_expr::expr_rewriter::NamePreserver;
use datafusion::logical_expr::utils::merge_schema;
use datafusion::logical_expr::{
    Between, BinaryExpr, ColumnarValue, ExprSchemable, LogicalPlan, Operator, ScalarFunctionArgs,
    ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use datafusion::optimizer::AnalyzerRule;
use datafusion::prelude::Expr;

/// The name of [`canonical_float`] in plans.
pub const CANONICAL_FLOAT: &str = "canonical_float";

/// `canonical_float(x)`: `x` with every NaN as the positive quiet NaN and -0.0 as 0.0, so that
/// Arrow's total order over the results is DuckDB's order over the inputs.
pub fn canonical_float() -> Arc<ScalarUDF> {
    static UDF: LazyLock<Arc<ScalarUDF>> =
        LazyLock::new(|| Arc::new(ScalarUDF::new_from_impl(CanonicalFloat::new())));
    UDF.clone()
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct CanonicalFloat {
    signature: Signature,
}

impl CanonicalFloat {
    fn new() -> CanonicalFloat {
        let floats = vec![DataType::Float16, DataType::Float32, DataType::Float64];
        CanonicalFloat {
            signature: Signature::uniform(1, floats, Volatility::Immutable),
        }
    }
}

/// Arrow's half-precision float.
type F16 = <Float16Type as ArrowPrimitiveType>::Native;

/// One float type's canonical value: NaN as the positive quiet NaN, -0.0 as 0.0.
macro_rules! canonical_fn {
    ($name:ident, $t:ty, $nan:expr, $zero:expr) => {
        pub(crate) fn $name(x: $t) -> $t {
            if x.is_nan() {
                $nan
            } else if x == $zero {
                $zero
            } else {
                x
            }
        }
    };
}
canonical_fn!(canonical_f16, F16, F16::NAN, F16::ZERO);
canonical_fn!(canonical_f32, f32, f32::NAN, 0.0);
canonical_fn!(canonical_f64, f64, f64::NAN, 0.0);

fn map<T: ArrowPrimitiveType>(a: &ArrayRef, f: fn(T::Native) -> T::Native) -> ArrayRef {
    let a: &PrimitiveArray<T> = a.as_primitive();
    Arc::new(a.unary::<_, T>(f))
}

/// A float scalar's canonical value; other scalars as they are.
pub(crate) fn canonical_scalar(v: &ScalarValue) -> ScalarValue {
    match v {
        ScalarValue::Float16(x) => ScalarValue::Float16(x.map(canonical_f16)),
        ScalarValue::Float32(x) => ScalarValue::Float32(x.map(canonical_f32)),
        ScalarValue::Float64(x) => ScalarValue::Float64(x.map(canonical_f64)),
        other => other.clone(),
    }
}

impl ScalarUDFImpl for CanonicalFloat {
    fn name(&self) -> &str {
        CANONICAL_FLOAT
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, args: &[DataType]) -> Result<DataType> {
        Ok(args[0].clone())
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        Ok(match &args.args[0] {
            ColumnarValue::Scalar(v) => ColumnarValue::Scalar(canonical_scalar(v)),
            ColumnarValue::Array(a) => ColumnarValue::Array(match a.data_type() {
                DataType::Float16 => map::<Float16Type>(a, canonical_f16),
                DataType::Float32 => map::<Float32Type>(a, canonical_f32),
                DataType::Float64 => map::<Float64Type>(a, canonical_f64),
                _ => a.clone(),
            }),
        })
    }
}

/// Whether `e` is a call of [`canonical_float`]; its argument if so.
pub(crate) fn canonical_argument(e: &Expr) -> Option<&Expr> {
    match e {
        Expr::ScalarFunction(f) if f.name() == CANONICAL_FLOAT && f.args.len() == 1 => {
            Some(&f.args[0])
        }
        _ => None,
    }
}

/// The analyzer rule that makes float comparisons DuckDB's (see the module). It runs after
/// DataFusion's type coercion, so both sides of a comparison have their final types.
#[derive(Debug, Default)]
pub struct FloatComparisons;

impl AnalyzerRule for FloatComparisons {
    fn analyze(&self, plan: LogicalPlan, _: &ConfigOptions) -> Result<LogicalPlan> {
        plan.transform_up_with_subqueries(rewrite_node).data()
    }

    fn name(&self) -> &str {
        "float_comparisons"
    }
}

/// Rewrites the comparisons of one plan node, keeping the names of its expressions.
fn rewrite_node(node: LogicalPlan) -> Result<Transformed<LogicalPlan>> {
    let schema = merge_schema(&node.inputs());
    let names = NamePreserver::new(&node);
    let out = node.map_expressions(|e| {
        let name = names.save(&e);
        let out = e.transform_up(|e| Ok(rewrite_comparison(e, &schema)))?;
        Ok(out.update_data(|e| name.restore(e)))
    })?;
    if out.transformed {
        out.map_data(|plan| plan.recompute_schema())
    } else {
        Ok(out)
    }
}

/// A comparison with its float operands made canonical; any other expression as it is.
fn rewrite_comparison(e: Expr, schema: &DFSchema) -> Transformed<Expr> {
    use Operator::*;
    let mut changed = false;
    let mut fix = |e: Box<Expr>| match canonical(&e, schema) {
        Some(c) => {
            changed = true;
            Box::new(c)
        }
        None => e,
    };
    let out = match e {
        Expr::BinaryExpr(BinaryExpr { left, op, right })
            if matches!(
                op,
                Eq | NotEq | Lt | LtEq | Gt | GtEq | IsDistinctFrom | IsNotDistinctFrom
            ) =>
        {
            Expr::BinaryExpr(BinaryExpr::new(fix(left), op, fix(right)))
        }
        Expr::InList(l) => Expr::InList(InList {
            expr: fix(l.expr),
            list: l.list.into_iter().map(|i| *fix(Box::new(i))).collect(),
            negated: l.negated,
        }),
        Expr::Between(b) => Expr::Between(Between {
            expr: fix(b.expr),
            negated: b.negated,
            low: fix(b.low),
            high: fix(b.high),
        }),
        other => other,
    };
    if changed {
        Transformed::yes(out)
    } else {
        Transformed::no(out)
    }
}

/// `e` made canonical, when it is a float that may be NaN or -0.0 and is not canonical yet.
fn canonical(e: &Expr, schema: &DFSchema) -> Option<Expr> {
    let is_float = |e: &Expr| e.get_type(schema).is_ok_and(|t| t.is_floating());
    match e {
        Expr::Literal(v, meta) => {
            let c = canonical_scalar(v);
            (bits(&c) != bits(v)).then(|| Expr::Literal(c, meta.clone()))
        }
        _ if canonical_argument(e).is_some() || !is_float(e) => None,
        Expr::Cast(c) if c.expr.get_type(schema).is_ok_and(exact) => None,
        _ => Some(Expr::ScalarFunction(ScalarFunction::new_udf(
            canonical_float(),
            vec![e.clone()],
        ))),
    }
}

/// Whether a cast of this type to a float can be neither NaN nor -0.0.
fn exact(t: DataType) -> bool {
    t.is_integer() || t.is_decimal() || t == DataType::Boolean
}

/// A float scalar's bits (to tell a canonical value from the one it replaces).
fn bits(v: &ScalarValue) -> Option<u64> {
    match v {
        ScalarValue::Float16(x) => x.map(|x| x.to_bits() as u64),
        ScalarValue::Float32(x) => x.map(|x| x.to_bits() as u64),
        ScalarValue::Float64(x) => x.map(f64::to_bits),
        _ => None,
    }
}
