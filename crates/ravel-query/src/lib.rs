//! Reads a ravel table back with DataFusion.
//!
//! [`QueryTable::open`] reads the table's manifests and registers, in a fresh DataFusion
//! `SessionContext`, a table of exactly the objects they list ([`table::RavelTable`]): sizes
//! from the manifest (no listing, no HEAD), the stream column declared as each file group's
//! order, Parquet pruning on (row-group statistics, page index, Bloom filters, filter
//! pushdown), binary columns read as strings, and the manifest's per-object ranges skipping
//! objects before any object is opened ([`prune`]); a statement that compares a Bloom-scope
//! string column for equality also reads that column's section of each load's Bloom sidecar
//! (one ranged GET per load, once per table) and skips the objects whose filters exclude it. When `EventDate` is stored as UInt16 days (the
//! public hits.parquet convention), the table is registered as `<name>_raw` and a view `<name>`
//! presents EventDate as a DATE, as ClickBench's DataFusion entry does.
//!
//! Every request goes through a [`traffic::TrafficStore`], so each statement's GETs and bytes
//! are what a cold read from the store costs.

pub mod prune;
pub mod table;
pub mod traffic;

use std::sync::{Arc, Mutex};
use std::time::Instant;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::DataType;
use datafusion::execution::object_store::ObjectStoreUrl;
use datafusion::prelude::{SessionConfig, SessionContext};
use ravel_manifest::{ManifestError, read_manifests};
use ravel_store::{Store, StoreError, TablePaths};
use serde::Serialize;

pub use table::{RavelTable, ScanCounts};
pub use traffic::{Traffic, TrafficCounter, TrafficStore};

/// Why a table could not be queried.
#[derive(Debug, thiserror::Error)]
pub enum QueryError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    #[error("table {0:?} has no loads in this store (no manifests)")]
    NoSuchTable(String),
    #[error(
        "the loads of table {table:?} have different schemas ({first} and {other}); a table's loads share one"
    )]
    SchemaDiffers {
        table: String,
        first: String,
        other: String,
    },
    #[error("{0}")]
    DataFusion(#[from] datafusion::error::DataFusionError),
}

impl QueryError {
    /// Whether the user asked for something that is not there or not valid SQL.
    pub fn is_invalid_input(&self) -> bool {
        match self {
            QueryError::NoSuchTable(_) => true,
            QueryError::Store(e) => matches!(
                e,
                StoreError::BadTableName(_)
                    | StoreError::BadUrl { .. }
                    | StoreError::NoSuchStore { .. }
            ),
            QueryError::DataFusion(e) => matches!(
                e.find_root(),
                datafusion::error::DataFusionError::SQL(..)
                    | datafusion::error::DataFusionError::Plan(_)
                    | datafusion::error::DataFusionError::SchemaError(..)
            ),
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
}

impl Default for QueryOptions {
    fn default() -> Self {
        QueryOptions {
            manifest_pruning: true,
            sql_name: None,
            target_partitions: None,
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
    pub manifests: usize,
    pub objects: usize,
    /// Reading the manifests.
    pub traffic: Traffic,
}

/// A table registered in a DataFusion context, ready for statements.
pub struct QueryTable {
    ctx: SessionContext,
    counter: TrafficCounter,
    scan: Arc<Mutex<ScanCounts>>,
    opened: Opened,
}

impl QueryTable {
    /// Reads `table`'s manifests from `store` and registers the table (see the crate docs).
    pub async fn open(
        store: &Store,
        table: &str,
        opts: &QueryOptions,
    ) -> Result<QueryTable, QueryError> {
        let paths = TablePaths::new(table)?;
        let counting = TrafficStore::new(store.object_store().clone());
        let counter = counting.counter();
        let counting = Arc::new(counting);
        let manifests = read_manifests(counting.as_ref(), &paths).await?;
        let Some((first_key, first)) = manifests.first() else {
            return Err(QueryError::NoSuchTable(table.to_string()));
        };
        let file_schema = first.schema.clone();
        for (key, m) in &manifests {
            if m.schema.fields() != file_schema.fields() {
                return Err(QueryError::SchemaDiffers {
                    table: table.to_string(),
                    first: first_key.clone(),
                    other: key.clone(),
                });
            }
        }
        let objects: usize = manifests.iter().map(|(_, m)| m.objects.len()).sum();
        // The stream column is first in every object's order when the newest load clustered.
        let newest = &manifests.last().expect("one manifest").1;
        let stream = (!newest.sort_key.is_empty())
            .then(|| newest.sort_key.first().cloned())
            .flatten()
            .filter(|s| manifests.iter().all(|(_, m)| m.sort_key.first() == Some(s)));
        let opened = Opened {
            manifests: manifests.len(),
            objects,
            traffic: counter.get(),
        };
        counter.reset();

        let mut config = SessionConfig::new().with_information_schema(false);
        if let Some(n) = opts.target_partitions {
            config = config.with_target_partitions(n);
        }
        let parquet = &mut config.options_mut().execution.parquet;
        parquet.pushdown_filters = true;
        parquet.reorder_filters = true;
        parquet.enable_page_index = true;
        parquet.bloom_filter_on_read = true;
        parquet.pruning = true;
        parquet.binary_as_string = true;
        let ctx = SessionContext::new_with_config(config);
        let store_url = ObjectStoreUrl::parse("ravel://store/")?;
        ctx.register_object_store(store_url.as_ref(), counting.clone());

        let name = opts.sql_name.clone().unwrap_or_else(|| table.to_string());
        let raw_date = file_schema
            .field_with_name("EventDate")
            .is_ok_and(|f| f.data_type() == &DataType::UInt16);
        let manifests: Vec<_> = manifests.into_iter().map(|(_, m)| m).collect();
        let provider = RavelTable::new(
            &file_schema,
            &manifests,
            stream,
            store_url,
            counting,
            opts.manifest_pruning,
        );
        let scan = provider.scan_counts();
        if raw_date {
            let raw = format!("{name}_raw");
            ctx.register_table(raw.as_str(), Arc::new(provider))?;
            ctx.sql(&format!(
                "CREATE VIEW \"{name}\" AS SELECT * EXCEPT (\"EventDate\"), \
                 CAST(CAST(\"EventDate\" AS INTEGER) AS DATE) AS \"EventDate\" FROM \"{raw}\""
            ))
            .await?;
        } else {
            ctx.register_table(name.as_str(), Arc::new(provider))?;
        }
        Ok(QueryTable {
            ctx,
            counter,
            scan,
            opened,
        })
    }

    /// What opening the table read.
    pub fn opened(&self) -> &Opened {
        &self.opened
    }

    /// The DataFusion context (for statements of the caller's own).
    pub fn context(&self) -> &SessionContext {
        &self.ctx
    }

    /// Runs one statement and returns its rows and its traffic.
    pub async fn sql(&self, sql: &str) -> Result<Answer, QueryError> {
        self.counter.reset();
        *self.scan.lock().expect("scan counts") = ScanCounts::default();
        let t = Instant::now();
        let batches = self.ctx.sql(sql).await?.collect().await?;
        let wall_s = t.elapsed().as_secs_f64();
        Ok(Answer {
            rows: batches.iter().map(|b| b.num_rows()).sum(),
            batches,
            wall_s,
            traffic: self.counter.get(),
            scan: *self.scan.lock().expect("scan counts"),
        })
    }
}

/// One statement of a benchmark run: cold (fresh context and store handle) and hot (the same
/// statement again in that context).
#[derive(Debug, Clone, Serialize)]
pub struct StatementRun {
    /// 1-based position in the statements file.
    pub number: usize,
    pub sql: String,
    pub rows: Option<usize>,
    pub cold_s: Option<f64>,
    pub hot_s: Option<f64>,
    /// Store traffic of the cold run, opening the table (its manifests) included.
    pub cold_gets: Option<u64>,
    pub cold_bytes: Option<u64>,
    pub objects_touched: Option<usize>,
    pub objects_total: Option<usize>,
    /// Objects kept by the manifest's ranges.
    pub objects_kept: Option<usize>,
    /// Store traffic of the hot run (what the context's caches did not save).
    pub hot_gets: Option<u64>,
    pub hot_bytes: Option<u64>,
    pub error: Option<String>,
}

/// Statements of a file: one per line; blank lines and `--` comments are skipped.
pub fn statements(text: &str) -> Vec<(usize, String)> {
    text.lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim()))
        .filter(|(_, l)| !l.is_empty() && !l.starts_with("--"))
        .map(|(i, l)| (i, l.to_string()))
        .collect()
}

/// Runs each statement cold and then hot against `table` in the store at `url`; a statement
/// that fails is reported with its error and the run goes on.
pub async fn bench_statements(
    url: &str,
    table: &str,
    statements: &[(usize, String)],
    opts: &QueryOptions,
    mut progress: impl FnMut(&StatementRun),
) -> Result<Vec<StatementRun>, QueryError> {
    let mut out = Vec::new();
    for (number, sql) in statements {
        let mut run = StatementRun {
            number: *number,
            sql: sql.clone(),
            rows: None,
            cold_s: None,
            hot_s: None,
            cold_gets: None,
            cold_bytes: None,
            objects_touched: None,
            objects_total: None,
            objects_kept: None,
            hot_gets: None,
            hot_bytes: None,
            error: None,
        };
        // Cold: a new store handle (no connection, no cache) and a new context.
        let store = Store::open(url)?;
        let t = Instant::now();
        let result = async {
            let q = QueryTable::open(&store, table, opts).await?;
            let a = q.sql(sql).await?;
            Ok::<_, QueryError>((q, a))
        }
        .await;
        match result {
            Ok((q, a)) => {
                run.cold_s = Some(t.elapsed().as_secs_f64());
                run.rows = Some(a.rows);
                run.cold_gets = Some(q.opened().traffic.gets + a.traffic.gets);
                run.cold_bytes = Some(q.opened().traffic.bytes + a.traffic.bytes);
                run.objects_touched = Some(a.traffic.objects);
                run.objects_total = Some(q.opened().objects);
                run.objects_kept = Some(a.scan.kept);
                match q.sql(sql).await {
                    Ok(hot) => {
                        run.hot_s = Some(hot.wall_s);
                        run.hot_gets = Some(hot.traffic.gets);
                        run.hot_bytes = Some(hot.traffic.bytes);
                    }
                    Err(e) => run.error = Some(format!("hot run: {e}")),
                }
            }
            Err(e @ (QueryError::NoSuchTable(_) | QueryError::Store(_))) => return Err(e),
            Err(e) => run.error = Some(e.to_string()),
        }
        progress(&run);
        out.push(run);
    }
    Ok(out)
}
