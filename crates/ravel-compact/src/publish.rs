//! Where every version this crate makes is published: a compaction's step, an adoption, a
//! sorted load and a job's commit all go through [`Publisher`], so the table's configuration is
//! written from its layout one way, and a conflict reaches the caller as the log's error.

use std::sync::Arc;

use object_store::ObjectStore;
use ravel_layout::Layout;
use ravel_loader::{Committed, Committer, LoadError, Replacement};
use ravel_log::{ChainOrigin, Consumed, TableLog};
use ravel_manifest::Manifest;
use ravel_store::TablePaths;

use crate::CompactError;
use crate::plan::Step;

/// Publishes versions of one table with its layout's configuration.
pub(crate) struct Publisher {
    committer: Committer,
    layout: Layout,
}

impl Publisher {
    pub(crate) fn new(os: Arc<dyn ObjectStore>, paths: TablePaths, layout: &Layout) -> Self {
        Publisher {
            committer: Committer::new(os, paths),
            layout: layout.clone(),
        }
    }

    /// The table's log.
    pub(crate) fn log(&self) -> &TableLog {
        self.committer.log()
    }

    /// Publishes `manifest` as a load: new objects, `spilled` bytes stored besides them, and
    /// the inputs it consumes (so that a load run again publishes nothing twice).
    pub(crate) async fn load(
        &self,
        manifest: &Manifest,
        spilled: u64,
        consumed: Consumed,
    ) -> Result<Committed, CompactError> {
        let configuration = ravel_loader::table_configuration(&self.layout, &manifest.schema);
        let committed = self
            .committer
            .commit(manifest, spilled, configuration, consumed)
            .await;
        committed.map_err(conflict_as_log)
    }

    /// Publishes `manifest` in place of the objects `replacement` removes.
    pub(crate) async fn replace(
        &self,
        manifest: &Manifest,
        replacement: Replacement,
    ) -> Result<Committed, CompactError> {
        let configuration = ravel_loader::table_configuration(&self.layout, &manifest.schema);
        let committed = self
            .committer
            .replace(manifest, replacement, configuration)
            .await;
        committed.map_err(conflict_as_log)
    }
}

/// The log's errors (a conflict among them) are the caller's to report and to retry on.
fn conflict_as_log(e: LoadError) -> CompactError {
    match e {
        LoadError::Log(e) => CompactError::Log(e),
        e => CompactError::from(e),
    }
}

/// Per object of a step's manifest, its rank and the run it continues.
pub(crate) struct Ranks {
    pub(crate) orders: Vec<Option<u64>>,
    pub(crate) chains: Vec<Option<ChainOrigin>>,
}

/// What a compaction's step publishes: its output in place of its inputs, and what writing it
/// cost.
pub(crate) struct Publish<'a> {
    pub(crate) step: &'a Step,
    pub(crate) ranks: Ranks,
    pub(crate) written_bytes: u64,
    /// The step leaves the table one sequence.
    pub(crate) full: bool,
}

impl Publish<'_> {
    /// The replacement this step's version records.
    pub(crate) fn replacement(self) -> Replacement {
        Replacement {
            orders: self.ranks.orders,
            chains: self.ranks.chains,
            removes: self
                .step
                .input_objects()
                .map(|o| o.entry.key.clone())
                .collect(),
            written_bytes: self.written_bytes,
            full: self.full,
            consumed: Default::default(),
        }
    }
}
