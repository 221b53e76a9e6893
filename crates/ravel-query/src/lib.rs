//! Reads a ravel table back with DataFusion.
//!
//! [`QueryTable::open`] reads the table's newest version (or the one asked for) and the
//! manifests it names, and registers, in a fresh DataFusion `SessionContext`, a table of
//! exactly the version's objects ([`table::RavelTable`]): sizes
//! from the manifest (no listing, no HEAD), the stream column declared as each file group's
//! order, Parquet pruning on (row-group statistics, page index, Bloom filters, filter
//! pushdown; the first three off for scans that read a float column, see [`floats`]), binary
//! columns read as strings, and the manifest's per-object ranges skipping
//! objects before any object is opened ([`prune`]); a statement that compares a Bloom-scope
//! string column for equality also reads that column's section of each load's Bloom sidecar
//! (one ranged GET per load, once per table) and skips the objects whose filters exclude it. When `EventDate` is stored as UInt16 days (the
//! public hits.parquet convention), the table is registered as `<name>_raw` and a view `<name>`
//! presents EventDate as a DATE, as ClickBench's DataFusion entry does. Both are registered
//! under their exact names: a statement quotes a name with upper-case letters or `-`
//! (`"CON"`), since SQL folds unquoted names to lower case.
//!
//! Statements only read ([`statement`]): one that would write, define, drop or set anything
//! is refused before it runs, and the context reaches no store but the table's. Float
//! comparisons answer as DuckDB's do: NaN equal to NaN and above +inf, -0.0 equal to 0.0
//! ([`floats`]).
//!
//! Every request goes through a [`traffic::TrafficStore`], so each statement's GETs and bytes
//! are what a cold read from the store costs.

pub mod bench;
pub mod floats;
pub mod prune;
pub mod statement;
pub mod table;
pub mod traffic;

use std::sync::{Arc, Mutex};
use std::time::Instant;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::{DataType, Schema, SchemaRef};
use datafusion::catalog::TableProvider;
use datafusion::common::TableReference;
use datafusion::datasource::ViewTable;
use datafusion::execution::object_store::ObjectStoreUrl;
use datafusion::logical_expr::{LogicalPlan, cast};
use datafusion::prelude::{Expr, SessionConfig, SessionContext, ident};
use ravel_log::{LiveManifest, LogError, TableLog};
use ravel_manifest::ManifestError;
use ravel_store::{Store, StoreError, TablePaths};
use serde::Serialize;

pub use bench::{StatementRun, bench_statements, statements};
pub use statement::{AnswerStream, Spent};
pub use table::{RavelTable, ScanCounts};
pub use traffic::{Traffic, TrafficCounter, TrafficStore};

/// Why a table could not be queried.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum QueryError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    #[error(transparent)]
    Log(#[from] LogError),
    #[error(transparent)]
    Layout(#[from] ravel_layout::LayoutError),
    #[error("table {0:?} has no loads in this store (no versions)")]
    NoSuchTable(String),
    /// An older version whose replaced objects `gc` deleted after its retention.
    #[error(
        "version {version} can no longer be read: gc collected the objects later versions \
         replaced ({key} is gone; gc keeps them for its retention, --older-than); read a newer \
         version"
    )]
    Collected { version: u64, key: String },
    #[error(
        "the loads of table {table:?} have different schemas ({first} and {other}); a table's loads share one"
    )]
    SchemaDiffers {
        table: String,
        first: String,
        other: String,
    },
    /// A statement that would write, define, drop or set something: this path only reads.
    #[error(
        "the table is read-only here: only queries run, and this statement is {what} (refused, \
         nothing ran)"
    )]
    ReadOnly { what: String },
    /// The name statements would use for the table is not a plain name.
    #[error(
        "the name {0:?} for the table in statements is not allowed: use 1-128 characters of \
         A-Z a-z 0-9 _ - and do not start with _ or -"
    )]
    BadSqlName(String),
    /// A statement named a table that is not there, and the table's own name is one SQL folds
    /// to lower case unless it is quoted.
    #[error(
        "{}; the table is named {name:?}: quote it as \"{name}\" (SQL folds unquoted names to \
         lower case)",
        statement::describe(.error)
    )]
    Unquoted {
        name: String,
        error: datafusion::error::DataFusionError,
    },
    /// A statement of a file failed or was refused.
    #[error("line {line}: {error}")]
    AtLine { line: usize, error: Box<QueryError> },
    /// DataFusion refused or failed a statement. Its message says it all (its causes
    /// included), so it is not repeated as this error's source.
    #[error("{}", statement::describe(.0))]
    DataFusion(datafusion::error::DataFusionError),
}

impl From<datafusion::error::DataFusionError> for QueryError {
    fn from(e: datafusion::error::DataFusionError) -> Self {
        QueryError::DataFusion(e)
    }
}

impl QueryError {
    /// Whether the user asked for something that is not there or not valid SQL.
    pub fn is_invalid_input(&self) -> bool {
        match self {
            QueryError::NoSuchTable(_) => true,
            QueryError::Store(e) => e.is_invalid_input(),
            QueryError::ReadOnly { .. }
            | QueryError::BadSqlName(_)
            | QueryError::Unquoted { .. } => true,
            QueryError::AtLine { error, .. } => error.is_invalid_input(),
            // A version the log window cleaned: asked for what the table no longer keeps.
            QueryError::Log(LogError::Cleaned { .. }) => true,
            QueryError::DataFusion(e) => statement::is_bad_statement(e),
            _ => false,
        }
    }
}

/// How a table is read.
#[derive(Debug, Clone)]
pub struct QueryOptions {
    /// Skip objects by the manifest's ranges before opening them.
    pub manifest_pruning: bool,
    /// The name statements use for the table (default: the table's own name).
    pub sql_name: Option<String>,
    /// DataFusion's target partitions (default: the number of cores).
    pub target_partitions: Option<usize>,
    /// The version to read (default: the newest).
    pub version: Option<u64>,
}

impl Default for QueryOptions {
    fn default() -> Self {
        QueryOptions {
            manifest_pruning: true,
            sql_name: None,
            target_partitions: None,
            version: None,
        }
    }
}

/// What one statement returned and cost.
#[derive(Debug, Clone)]
pub struct Answer {
    pub batches: Vec<RecordBatch>,
    pub rows: usize,
    pub wall_s: f64,
    /// Store traffic of this statement (manifests excluded: they are read at open).
    pub traffic: Traffic,
    /// Objects the statement's scans kept (by the manifest) of those listed.
    pub scan: ScanCounts,
}

/// Store traffic and size of opening a table.
#[derive(Debug, Clone, Serialize)]
pub struct Opened {
    /// The version read.
    pub version: u64,
    pub manifests: usize,
    pub objects: usize,
    /// Of those, objects other Delta writers added (read whole: no ranges, no Bloom filters).
    pub foreign: usize,
    /// Reading the manifests.
    pub traffic: Traffic,
}

/// A table registered in a DataFusion context, ready for statements.
pub struct QueryTable {
    ctx: SessionContext,
    counter: TrafficCounter,
    scan: Arc<Mutex<ScanCounts>>,
    opened: Opened,
    /// The name statements use for the table.
    name: String,
    /// The schema the objects are read with (binary columns as stored).
    file_schema: SchemaRef,
}

/// The schema the table's objects are read with: the manifests' (loads agree when their names,
/// types and order do; a column nullable in any load is read as nullable), or, when other
/// writers' objects are all the version holds, the table's recorded schema.
async fn file_schema(
    store: &Store,
    table: &str,
    manifests: &[LiveManifest],
) -> Result<Schema, QueryError> {
    let Some(first) = manifests.first() else {
        let recorded = ravel_layout::LayoutStore::new(store, table)?
            .schema()
            .await?;
        return recorded.ok_or_else(|| QueryError::NoSuchTable(table.to_string()));
    };
    let mut schema = first.manifest.schema.clone();
    for m in manifests {
        if !ravel_manifest::schemas_agree(&schema, &m.manifest.schema) {
            return Err(QueryError::SchemaDiffers {
                table: table.to_string(),
                first: first.key.clone(),
                other: m.key.clone(),
            });
        }
        schema = ravel_manifest::widen(&schema, &m.manifest.schema);
    }
    Ok(schema)
}

/// The stream column, first in every object's order when every load clustered by it.
fn stream_of(manifests: &[LiveManifest]) -> Option<String> {
    let newest = &manifests.last()?.manifest;
    newest
        .sort_key
        .first()
        .filter(|s| {
            manifests
                .iter()
                .all(|m| m.manifest.sort_key.first() == Some(*s))
        })
        .cloned()
}

impl QueryTable {
    /// Reads `table`'s manifests from `store` and registers the table (see the crate docs).
    pub async fn open(
        store: &Store,
        table: &str,
        opts: &QueryOptions,
    ) -> Result<QueryTable, QueryError> {
        let paths = TablePaths::new(table)?;
        let name = sql_name(table, opts)?;
        let counting = TrafficStore::new(store.object_store().clone());
        let counter = counting.counter();
        let counting = Arc::new(counting);
        let log = TableLog::new(counting.clone(), paths);
        let snapshot = match opts.version {
            Some(v) => log.at(v).await?,
            None => log.latest().await?,
        };
        if opts.version.is_some() {
            still_stored(&log, &snapshot, counting.as_ref()).await?;
        }
        let manifests = log.manifests(&snapshot).await?;
        let foreign = snapshot.foreign(log.table());
        let Some(version) = snapshot
            .version
            .filter(|_| !(manifests.is_empty() && foreign.is_empty()))
        else {
            return Err(QueryError::NoSuchTable(table.to_string()));
        };
        let file_schema = file_schema(store, table, &manifests).await?;
        let objects: usize = manifests.iter().map(|m| m.live.len()).sum();
        // Objects other writers added are in no order: then no scan promises one.
        let stream = stream_of(&manifests).filter(|_| foreign.is_empty());
        let opened = Opened {
            version,
            manifests: manifests.len(),
            objects: objects + foreign.len(),
            foreign: foreign.len(),
            traffic: counter.get(),
        };
        counter.reset();

        let mut config = SessionConfig::new().with_information_schema(false);
        if let Some(n) = opts.target_partitions {
            config = config.with_target_partitions(n);
        }
        // An object is one row group: a byte range of it without the row group's start holds
        // nothing to read, yet its partition fetches the footer again. Never split objects.
        config.options_mut().optimizer.repartition_file_scans = false;
        let parquet = &mut config.options_mut().execution.parquet;
        parquet.pushdown_filters = true;
        parquet.reorder_filters = true;
        parquet.enable_page_index = true;
        parquet.bloom_filter_on_read = true;
        parquet.pruning = true;
        parquet.binary_as_string = true;
        let store_url = ObjectStoreUrl::parse("ravel://store/")?;
        let runtime = statement::table_only_runtime(&store_url, counting.clone())?;
        let ctx = SessionContext::new_with_config_rt(config, runtime);
        ctx.add_analyzer_rule(Arc::new(floats::FloatComparisons));

        let raw_date = file_schema
            .field_with_name("EventDate")
            .is_ok_and(|f| f.data_type() == &DataType::UInt16);
        let provider = RavelTable::new(
            &file_schema,
            &manifests,
            &foreign,
            stream,
            store_url,
            counting,
            opts.manifest_pruning,
        );
        let scan = provider.scan_counts();
        let provider: Arc<dyn TableProvider> = if raw_date {
            let raw = TableReference::bare(format!("{name}_raw"));
            ctx.register_table(raw.clone(), Arc::new(provider))?;
            Arc::new(ViewTable::new(date_view(&ctx, raw).await?, None))
        } else {
            Arc::new(provider)
        };
        ctx.register_table(TableReference::bare(name.as_str()), provider)?;
        Ok(QueryTable {
            ctx,
            counter,
            scan,
            opened,
            name,
            file_schema: Arc::new(file_schema),
        })
    }

    /// What opening the table read.
    pub fn opened(&self) -> &Opened {
        &self.opened
    }

    /// The schema the table's objects are read with: the one its manifests record (binary
    /// columns as stored, where statements see strings).
    pub fn file_schema(&self) -> &SchemaRef {
        &self.file_schema
    }

    /// The DataFusion context (for statements of the caller's own).
    pub fn context(&self) -> &SessionContext {
        &self.ctx
    }

    /// Runs one statement and returns all its rows and its traffic (for tests and benchmarks:
    /// the rows are held in memory; [`QueryTable::sql_stream`] hands them over as they come).
    pub async fn sql(&self, sql: &str) -> Result<Answer, QueryError> {
        let mut stream = self.sql_stream(sql).await?;
        let mut batches = Vec::new();
        while let Some(batch) = stream.next().await {
            batches.push(batch?);
        }
        let spent = stream.spent();
        Ok(Answer {
            batches,
            rows: spent.rows,
            wall_s: spent.wall_s,
            traffic: spent.traffic,
            scan: spent.scan,
        })
    }

    /// Starts one statement, which must be a query (see [`statement`]); its rows come from
    /// the stream as they are read, and its traffic is counted from here.
    pub async fn sql_stream(&self, sql: &str) -> Result<AnswerStream, QueryError> {
        self.counter.reset();
        *self.scan.lock().expect("scan counts") = ScanCounts::default();
        let started = Instant::now();
        let plan = self.check(sql).await?;
        let stream = async {
            self.ctx
                .execute_logical_plan(plan)
                .await?
                .execute_stream()
                .await
        }
        .await
        .map_err(|e| self.explain(e))?;
        Ok(AnswerStream {
            stream,
            rows: 0,
            started,
            counter: self.counter.clone(),
            scan: self.scan.clone(),
        })
    }

    /// Plans one statement without running it, refusing anything but a query.
    pub async fn check(&self, sql: &str) -> Result<LogicalPlan, QueryError> {
        let plan = self
            .ctx
            .state()
            .create_logical_plan(sql)
            .await
            .map_err(|e| self.explain(e))?;
        statement::refuse_writes(&plan)?;
        Ok(plan)
    }

    /// `e`, with a hint to quote the table's name when a statement did not find a table and
    /// the name is one SQL folds unless quoted.
    fn explain(&self, e: datafusion::error::DataFusionError) -> QueryError {
        if statement::is_table_not_found(&e) && statement::needs_quotes(&self.name) {
            QueryError::Unquoted {
                name: self.name.clone(),
                error: e,
            }
        } else {
            QueryError::DataFusion(e)
        }
    }
}

/// Fails with [`QueryError::Collected`] when an object of `snapshot` that the newest version no
/// longer holds is gone (the newest version's own objects are not asked for).
async fn still_stored(
    log: &TableLog,
    snapshot: &ravel_log::Snapshot,
    store: &dyn object_store::ObjectStore,
) -> Result<(), QueryError> {
    use futures::{StreamExt, TryStreamExt};
    use object_store::ObjectStoreExt;
    let newest = log.latest().await?;
    let replaced: Vec<String> = snapshot
        .files()
        .keys()
        .filter(|k| !newest.holds(k))
        .map(|k| log.table().absolute(k))
        .collect();
    let version = snapshot.version.unwrap_or(0);
    futures::stream::iter(replaced)
        .map(|key| async move {
            match store
                .head(&object_store::path::Path::from(key.as_str()))
                .await
            {
                Err(object_store::Error::NotFound { .. }) => {
                    Err(QueryError::Collected { version, key })
                }
                // Any other failure shows when the statement reads the object.
                _ => Ok(()),
            }
        })
        .buffer_unordered(16)
        .try_collect::<()>()
        .await
}

/// The name statements use for `table`: `--as`'s when given, checked as table names are, so
/// that it is a plain name.
fn sql_name(table: &str, opts: &QueryOptions) -> Result<String, QueryError> {
    match &opts.sql_name {
        Some(name) => match TablePaths::new(name) {
            Ok(_) => Ok(name.clone()),
            Err(_) => Err(QueryError::BadSqlName(name.clone())),
        },
        None => Ok(table.to_string()),
    }
}

/// The table `raw` with its UInt16 `EventDate` (days since 1970) as a DATE, last, as
/// ClickBench's DataFusion entry presents it; built as a plan, so no name passes through SQL.
async fn date_view(ctx: &SessionContext, raw: TableReference) -> Result<LogicalPlan, QueryError> {
    let df = ctx.table(raw).await?;
    let mut columns: Vec<Expr> = df
        .schema()
        .fields()
        .iter()
        .filter(|f| f.name() != "EventDate")
        .map(|f| ident(f.name()))
        .collect();
    let days = cast(ident("EventDate"), DataType::Int32);
    columns.push(cast(days, DataType::Date32).alias("EventDate"));
    Ok(df.select(columns)?.into_unoptimized_plan())
}
