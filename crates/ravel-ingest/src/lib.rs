//! One call that does what `ravel-load load` does: [`ingest`] takes in objects other Delta
//! writers added partitioned (a load cannot publish beside them), loads the files once (see
//! `ravel_loader::Files`: a rerun of a published load publishes nothing), sorted globally or
//! in runs, then applies the table's maintenance policy, planned again after a conflict with
//! another writer. It returns one [`IngestReport`] whose `load_id` and `version` always name
//! the load that published the inputs' rows: this call's, or the one that had already.
//!
//! ```no_run
//! # async fn example(store: &ravel_store::Store) -> Result<(), Box<dyn std::error::Error>> {
//! let tier = ravel_tier::Tier::detect()?;
//! let opts = ravel_ingest::IngestOptions::from_tier(&tier);
//! let paths = [std::path::PathBuf::from("landing/part-0001.parquet")];
//! let files = ravel_loader::Files::new(&paths, ravel_loader::InputFormat::Parquet);
//! let report = ravel_ingest::ingest(store, "hits", &files, &opts, |_, _| {}).await?;
//! println!("{} rows in version {:?}", report.rows, report.version);
//! # Ok(()) }
//! ```

mod maintain;
mod report;

pub use maintain::{Maintained, maintain_after_load, maintain_retrying};
pub use report::{IngestReport, Loaded};

use ravel_compact::{CompactError, CompactOptions, SortedLoad, SortedLoadReport};
use ravel_loader::{Files, LoadOptions, Loader};
use ravel_store::Store;
use ravel_tier::Tier;
use serde::Serialize;

/// How [`ingest`] loads and maintains.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct IngestOptions {
    /// Geometry and budget of the load and of the merges after it.
    pub load: LoadOptions,
    /// Publish the rows globally sorted (`load --compact`): runs are spilled and merged once.
    /// Needs a clustering key.
    pub sorted: bool,
    /// Apply the table's maintenance policy after the load (also after a rerun that published
    /// nothing: it retries a maintenance that failed).
    pub maintain: bool,
    /// Times maintenance is planned again from the newest version after another writer
    /// removed one of its inputs.
    pub conflict_retries: usize,
}

impl IngestOptions {
    /// `load`'s geometry; maintenance after the load, three retries after conflicts.
    pub fn new(load: LoadOptions) -> IngestOptions {
        IngestOptions {
            load,
            sorted: false,
            maintain: true,
            conflict_retries: 3,
        }
    }

    /// The tier's geometry (see [`LoadOptions::from_tier`]).
    pub fn from_tier(tier: &Tier) -> IngestOptions {
        IngestOptions::new(LoadOptions::from_tier(tier))
    }

    /// Whether the rows are published globally sorted.
    pub fn sorted(mut self, sorted: bool) -> IngestOptions {
        self.sorted = sorted;
        self
    }

    /// Whether the maintenance policy runs after the load.
    pub fn maintain(mut self, maintain: bool) -> IngestOptions {
        self.maintain = maintain;
        self
    }

    /// The options of the merges: the load's geometry, the fan-in from the budget.
    pub fn compact_options(&self) -> CompactOptions {
        CompactOptions {
            load: self.load.clone(),
            fan_in: None,
            max_input_bytes: None,
            dry_run: false,
            max_steps: None,
        }
    }
}

/// Why an ingestion failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IngestError {
    /// Objects another Delta writer added partitioned could not be taken in: nothing loaded.
    #[error("taking in the partitioned objects another Delta writer added, before the load")]
    TakeIn(#[source] CompactError),
    /// The load failed: nothing of it is published.
    #[error(transparent)]
    Load(CompactError),
    /// The rows are published (the report says where); the maintenance after them failed. A
    /// rerun of the same load publishes nothing and retries the maintenance.
    #[error(
        "published as version {}; maintaining table {:?} after it failed (a rerun of the same load publishes nothing and retries the maintenance)",
        report.version.map_or("?".to_string(), |v| v.to_string()),
        report.table
    )]
    MaintenanceFailed {
        report: Box<IngestReport>,
        #[source]
        source: CompactError,
    },
}

impl IngestError {
    /// Errors the caller can fix by asking differently: bad input, a bad request.
    pub fn is_invalid_input(&self) -> bool {
        match self {
            IngestError::TakeIn(e) | IngestError::Load(e) => e.is_invalid_input(),
            IngestError::MaintenanceFailed { .. } => false,
        }
    }

    /// The input the failure is about, when one input failed the load (see
    /// `ravel_loader::LoadError::failed_input`): a load of the others may succeed.
    pub fn failed_input(&self) -> Option<&str> {
        match self {
            IngestError::Load(e) => e.failed_input(),
            _ => None,
        }
    }

    /// Another writer changed the table in a way this call could not replay over.
    pub fn is_conflict(&self) -> bool {
        match self {
            IngestError::TakeIn(e) | IngestError::Load(e) => e.is_conflict(),
            IngestError::MaintenanceFailed { source, .. } => source.is_conflict(),
        }
    }
}

/// Loads `files` into `table` and keeps it clustered (see the crate docs). `progress` sees
/// the rows read so far and the loader.
pub async fn ingest(
    store: &Store,
    table: &str,
    files: &Files<'_>,
    opts: &IngestOptions,
    progress: impl FnMut(u64, &Loader),
) -> Result<IngestReport, IngestError> {
    let merges = opts.compact_options();
    let took_in = ravel_compact::adopt_partitioned(store, table, &merges)
        .await
        .map_err(IngestError::TakeIn)?;
    let loaded = match opts.sorted {
        true => Loaded::Sorted(Box::new(
            sorted_load(store, table, &merges, files, progress).await?,
        )),
        false => Loaded::Runs(Box::new(
            ravel_loader::load_files_with(store, table, opts.load.clone(), files, progress)
                .await
                .map_err(|e| IngestError::Load(e.into()))?,
        )),
    };
    let mut report = IngestReport::new(table, took_in, loaded);
    if !opts.maintain {
        return Ok(report);
    }
    match maintain_after_load(store, table, &merges, opts.conflict_retries).await {
        Ok(m) => {
            report.maintenance = m;
            Ok(report)
        }
        Err(source) => Err(IngestError::MaintenanceFailed {
            report: Box::new(report),
            source,
        }),
    }
}

/// `load --compact`: the rows published globally sorted (see [`SortedLoad`]).
async fn sorted_load(
    store: &Store,
    table: &str,
    opts: &CompactOptions,
    files: &Files<'_>,
    progress: impl FnMut(u64, &Loader),
) -> Result<SortedLoadReport, IngestError> {
    let mut load = SortedLoad::new(store, table, opts)
        .await
        .map_err(IngestError::Load)?;
    let fed = load.feed(files, progress).await;
    let done = match fed {
        Ok(()) => load.finish().await,
        Err(e) => Err(load.abandon(e).await),
    };
    done.map_err(IngestError::Load)
}
