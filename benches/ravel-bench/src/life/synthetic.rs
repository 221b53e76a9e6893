//! Versions without rows, fast: loads of one input each, committed straight into the store's
//! directory behind the server while no service runs, as another writer's small loads would
//! leave them ([`ravel_testkit::commit_empty_loads`]). They grow the log, the checkpoints'
//! identifiers and the manifests as the service's own loads do, at a thousand times their
//! rate, so that the figures can be taken at tens of thousands of versions.

use std::path::Path;
use std::sync::Arc;

use anyhow::Result;
use object_store::local::LocalFileSystem;

/// Commits `n` loads into `table` of the store in `store_dir`, each consuming input
/// `synthetic/<first + i>` and adding nothing; returns the newest version.
pub fn commit(store_dir: &Path, table: &str, first: u64, n: u64) -> Result<u64> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let os = Arc::new(LocalFileSystem::new_with_prefix(store_dir)?);
    let store = ravel_store::Store::new(store_dir.display().to_string(), os);
    Ok(rt.block_on(ravel_testkit::commit_empty_loads(&store, table, first, n)))
}
