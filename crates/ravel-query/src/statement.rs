//! What a statement may do here, and its rows as a stream.
//!
//! This path only reads: a statement is planned, and a plan that would write (COPY, INSERT),
//! define or drop (CREATE, DROP) or change the session (SET) is refused before it runs.
//! DataFusion's [`SQLOptions`] say the same again, and the context can reach no store but the
//! table's own (no local file system), so even a plan that got past both could write nothing.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::error::DataFusionError;
use datafusion::execution::SendableRecordBatchStream;
use datafusion::execution::object_store::{
    DefaultObjectStoreRegistry, ObjectStoreRegistry, ObjectStoreUrl,
};
use datafusion::execution::runtime_env::{RuntimeEnv, RuntimeEnvBuilder};
use datafusion::logical_expr::LogicalPlan;
use datafusion::prelude::SQLOptions;
use futures::StreamExt;
use object_store::ObjectStore;

use crate::{QueryError, ScanCounts, Traffic, TrafficCounter};

/// A runtime whose only object store is the table's: DataFusion's default registers the local
/// file system for `file://` paths, which would let a statement reach any local file.
pub(crate) fn table_only_runtime(
    url: &ObjectStoreUrl,
    store: Arc<dyn ObjectStore>,
) -> Result<Arc<RuntimeEnv>, QueryError> {
    let registry = DefaultObjectStoreRegistry::new();
    let file = url::Url::parse("file:///").expect("a valid URL");
    registry.deregister_store(&file)?;
    registry.register_store(url.as_ref(), store);
    Ok(RuntimeEnvBuilder::new()
        .with_object_store_registry(Arc::new(registry))
        .build_arc()?)
}

/// DataFusion's own statement options for this path: queries only.
fn read_only() -> SQLOptions {
    SQLOptions::new()
        .with_allow_ddl(false)
        .with_allow_dml(false)
        .with_allow_statements(false)
}

/// Refuses a plan with any node (subqueries included) that is not part of a query.
pub(crate) fn refuse_writes(plan: &LogicalPlan) -> Result<(), QueryError> {
    let mut what = None;
    plan.apply_with_subqueries(|node| {
        what = not_a_query(node);
        Ok(match what {
            Some(_) => TreeNodeRecursion::Stop,
            None => TreeNodeRecursion::Continue,
        })
    })?;
    if let Some(what) = what {
        return Err(QueryError::ReadOnly { what });
    }
    read_only()
        .verify_plan(plan)
        .map_err(|e| QueryError::ReadOnly {
            what: e.strip_backtrace(),
        })
}

/// What `node` does when it is more than reading, in words.
fn not_a_query(node: &LogicalPlan) -> Option<String> {
    match node {
        LogicalPlan::Copy(_) => Some("a COPY".into()),
        LogicalPlan::Dml(d) => Some(format!("a write ({})", d.op)),
        LogicalPlan::Ddl(d) => Some(format!("a definition ({})", d.name())),
        LogicalPlan::Statement(s) => Some(format!("a statement ({})", s.name())),
        _ => None,
    }
}

/// Whether DataFusion refused a statement for what it says (its SQL, its names, its plan, a
/// feature it lacks) rather than failing to run it.
pub(crate) fn is_bad_statement(e: &DataFusionError) -> bool {
    matches!(
        e.find_root(),
        DataFusionError::SQL(..)
            | DataFusionError::Plan(_)
            | DataFusionError::SchemaError(..)
            | DataFusionError::NotImplemented(_)
            | DataFusionError::Configuration(_)
    )
}

/// `e` in words: for a statement DataFusion refused, the reason alone (not the optimizer
/// rule or planning step that met it); otherwise the whole message, its causes included.
pub(crate) fn describe(e: &DataFusionError) -> String {
    if is_bad_statement(e) {
        e.find_root().strip_backtrace()
    } else {
        e.strip_backtrace()
    }
}

/// Whether `e` says a table was not found.
pub(crate) fn is_table_not_found(e: &DataFusionError) -> bool {
    let msg = e.find_root().strip_backtrace();
    msg.contains("table '") && msg.contains("' not found")
}

/// Whether SQL must quote `name` to reach it: unquoted names fold to lower case, and `-` is
/// not part of an unquoted name.
pub(crate) fn needs_quotes(name: &str) -> bool {
    name.chars()
        .any(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'))
}

/// What a statement cost so far (all of it once its stream ended).
#[derive(Debug, Clone)]
pub struct Spent {
    /// Rows read from the stream so far.
    pub rows: usize,
    /// Seconds since the statement was planned.
    pub wall_s: f64,
    /// Store traffic of this statement (manifests excluded: they are read at open).
    pub traffic: Traffic,
    /// Objects the statement's scans kept (by the manifest) of those listed.
    pub scan: ScanCounts,
}

/// A statement's rows as they come, so that a caller can print them without holding them all;
/// dropping it stops the statement.
pub struct AnswerStream {
    pub(crate) stream: SendableRecordBatchStream,
    pub(crate) rows: usize,
    pub(crate) started: Instant,
    pub(crate) counter: TrafficCounter,
    pub(crate) scan: Arc<Mutex<ScanCounts>>,
}

impl AnswerStream {
    /// The schema of the rows.
    pub fn schema(&self) -> SchemaRef {
        self.stream.schema()
    }

    /// The next batch of rows, or `None` at the end.
    pub async fn next(&mut self) -> Option<Result<RecordBatch, QueryError>> {
        let batch = self.stream.next().await?;
        if let Ok(b) = &batch {
            self.rows += b.num_rows();
        }
        Some(batch.map_err(QueryError::from))
    }

    /// Rows, time and traffic so far.
    pub fn spent(&self) -> Spent {
        Spent {
            rows: self.rows,
            wall_s: self.started.elapsed().as_secs_f64(),
            traffic: self.counter.get(),
            scan: *self.scan.lock().expect("scan counts"),
        }
    }
}
