//! Versions without rows, fast: loads of one input each, committed straight into the store's
//! directory behind the server while no service runs, as another writer's small loads would
//! leave them. They grow the log, the checkpoints' identifiers and the manifests as the
//! service's own loads do, at a thousand times their rate, so that the figures can be taken at
//! tens of thousands of versions.

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result};
use object_store::local::LocalFileSystem;
use object_store::{ObjectStore, ObjectStoreExt};
use ravel_log::{Commit, Consumed, InputFile, Operation, TableLog};

/// Commits `n` loads into `table` of the store in `store_dir`, each consuming input
/// `synthetic/<first + i>` and adding nothing; returns the newest version.
pub fn commit(store_dir: &Path, table: &str, first: u64, n: u64) -> Result<u64> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(commit_async(store_dir, table, first, n))
}

async fn commit_async(store_dir: &Path, table: &str, first: u64, n: u64) -> Result<u64> {
    let os: Arc<dyn ObjectStore> = Arc::new(LocalFileSystem::new_with_prefix(store_dir)?);
    let log = TableLog::new(os.clone(), ravel_store::TablePaths::new(table)?);
    let newest = log.latest().await?;
    let configuration = (newest.metadata.as_ref())
        .context("the table has no version yet")?
        .configuration
        .clone();
    let store = ravel_store::Store::new(store_dir.display().to_string(), os.clone());
    let mut manifest = (ravel_testkit::published(&store, table).await)
        .into_iter()
        .next()
        .context("the table has no published load to take a schema from")?;
    manifest.objects.clear();
    let mut version = newest.version.unwrap_or(0);
    for i in first..first + n {
        manifest.load_id = format!("synthetic-{i}");
        let key = format!("{table}/_ravel/manifests/{}.json", manifest.load_id);
        let bytes = serde_json::to_vec(&manifest)?;
        os.put(&key.as_str().into(), bytes.into()).await?;
        let input = InputFile {
            name: format!("synthetic/{i}"),
            size: 0,
            version: "0".into(),
            modified_ms: Some(ravel_log::now_ms()),
        };
        let commit = Commit {
            operation: Operation::Load,
            manifest_key: key,
            manifest: &manifest,
            orders: Vec::new(),
            chains: Vec::new(),
            removes: Vec::new(),
            configuration: configuration.clone(),
            written_bytes: 0,
            full: false,
            consumed: Consumed::once(vec![input]),
        };
        if let ravel_log::Committed::Version(v) = log.commit(&commit).await? {
            version = v;
        }
    }
    Ok(version)
}
