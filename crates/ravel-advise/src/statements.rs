//! What each statement asks of the table: the filters DataFusion hands the table's scan (those
//! `query` prunes by), the columns the scan reads and the columns it groups by. Found by
//! planning the statement against the table itself, as `query` would.

use std::collections::BTreeSet;

use datafusion::arrow::datatypes::Schema;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::logical_expr::LogicalPlan;
use datafusion::prelude::Expr;
use ravel_query::QueryTable;
use ravel_query::prune::{Predicate, Pruner};
use serde::Serialize;

use crate::log::Statement;

/// A statement's scans of the table, merged.
#[derive(Debug, Clone, Default)]
pub struct Scan {
    /// The filters pushed to the table's scans (every scan's, as conjuncts).
    pub filters: Vec<Expr>,
    /// The columns the scans read (stored names).
    pub columns: BTreeSet<String>,
    /// The table's columns the statement groups by.
    pub group_by: BTreeSet<String>,
    /// The table's columns the filters name.
    pub filtered: BTreeSet<String>,
    /// The columns of an `ORDER BY … LIMIT` (a top-k) over the rows: the query path reads the
    /// other columns of few rows only, once the top-k's bound filters the scan.
    pub top_k: Option<BTreeSet<String>>,
    /// The filters' comparisons of a column with literals.
    pub predicates: Vec<Predicate>,
}

/// One statement of the log, planned.
#[derive(Debug, Clone)]
pub struct Planned {
    pub statement: Statement,
    /// `Err`: why the statement is left out (it does not plan, or reads nothing of the table).
    pub scan: Result<Scan, String>,
}

/// A statement left out of the advice, with why.
#[derive(Debug, Clone, Serialize)]
pub struct Skipped {
    pub line: usize,
    pub sql: String,
    pub error: String,
}

/// Plans every statement against `q` (registered over the table) and reads its scans, on
/// rayon's workers; the caller waits until all are planned.
pub fn plan_all(q: &QueryTable, schema: &Schema, statements: &[Statement]) -> Vec<Planned> {
    use rayon::prelude::*;
    let pruner = Pruner::new(schema);
    // Planning waits on nothing (the table is registered in memory): the statements plan on
    // every worker.
    statements
        .par_iter()
        .map(|s| Planned {
            statement: s.clone(),
            scan: futures::executor::block_on(scan_of(q, schema, &pruner, &s.sql)),
        })
        .collect()
}

async fn scan_of(
    q: &QueryTable,
    schema: &Schema,
    pruner: &Pruner,
    sql: &str,
) -> Result<Scan, String> {
    let plan = q
        .check(sql)
        .await
        .map_err(|e| ravel_store::ErrorChain::new(&e).to_string())?;
    let plan = q
        .context()
        .state()
        .optimize(&plan)
        .map_err(|e| e.to_string())?;
    let mut scan = Scan::default();
    let mut scans = 0;
    plan.apply_with_subqueries(|node| {
        match node {
            LogicalPlan::TableScan(t) => {
                scans += 1;
                let source = t.source.schema();
                let read: Vec<String> = match &t.projection {
                    Some(p) => p.iter().map(|&i| source.field(i).name().clone()).collect(),
                    None => source.fields().iter().map(|f| f.name().clone()).collect(),
                };
                scan.columns
                    .extend(read.into_iter().filter(|c| schema.index_of(c).is_ok()));
                scan.filters.extend(t.filters.iter().cloned());
            }
            LogicalPlan::Sort(sort) if sort.fetch.is_some() && over_rows(&sort.input) => {
                let names = sort.expr.iter().flat_map(|e| e.expr.column_refs());
                let names: BTreeSet<String> = names
                    .map(|c| c.name.clone())
                    .filter(|c| schema.index_of(c).is_ok())
                    .collect();
                scan.top_k.get_or_insert_with(BTreeSet::new).extend(names);
            }
            LogicalPlan::Aggregate(a) => {
                for e in &a.group_expr {
                    let names = e.column_refs().into_iter().map(|c| c.name.clone());
                    scan.group_by
                        .extend(names.filter(|c| schema.index_of(c).is_ok()));
                }
            }
            _ => {}
        }
        Ok(TreeNodeRecursion::Continue)
    })
    .map_err(|e| e.to_string())?;
    if scans == 0 {
        return Err("the statement reads nothing of the table".into());
    }
    scan.predicates = pruner.predicates(&scan.filters);
    for f in &scan.filters {
        let names = f.column_refs().into_iter().map(|c| c.name.clone());
        scan.filtered
            .extend(names.filter(|c| schema.index_of(c).is_ok()));
    }
    Ok(scan)
}

/// Whether `plan` hands on a table's rows one for one (projections and filters over a scan),
/// so that a top-k above it bounds the scan.
fn over_rows(plan: &LogicalPlan) -> bool {
    match plan {
        LogicalPlan::TableScan(_) => true,
        LogicalPlan::Projection(p) => over_rows(&p.input),
        LogicalPlan::Filter(f) => over_rows(&f.input),
        LogicalPlan::SubqueryAlias(a) => over_rows(&a.input),
        _ => false,
    }
}
