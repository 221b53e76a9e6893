//! The committer: publishes a load as the table's next version once its objects are stored:
//! writes the load's manifest, then the log entry that adds its objects (see `ravel-log`),
//! unless the load is in the table already or would add an object the table holds.

use std::collections::BTreeMap;
use std::sync::Arc;

use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};
use ravel_log::{Commit, Operation, Snapshot, TableLog};
use ravel_manifest::Manifest;
use ravel_store::TablePaths;

use crate::LoadError;

/// Publishes versions of one table.
#[derive(Debug, Clone)]
pub struct Committer {
    store: Arc<dyn ObjectStore>,
    table: TablePaths,
    log: TableLog,
}

/// What a commit did.
#[derive(Debug, Clone, PartialEq)]
pub enum Committed {
    /// The manifest is written, at `path`, and version `version` adds its objects.
    Published { path: Path, version: u64 },
    /// Every object of the load is in the table already (a rerun of a load whose first run was
    /// published): nothing was written. `load_id` names the published load.
    AlreadyPublished { load_id: String },
}

impl Committer {
    pub fn new(store: Arc<dyn ObjectStore>, table: TablePaths) -> Committer {
        let log = TableLog::new(store.clone(), table.clone());
        Committer { store, table, log }
    }

    /// The table's log.
    pub fn log(&self) -> &TableLog {
        &self.log
    }

    /// Publishes `manifest`: checks that every object and the sidecar it lists is stored as
    /// recorded, looks for the load in the newest version (then publishes nothing) or one of
    /// its objects there (then fails), writes the manifest create-if-absent and commits the
    /// version that adds its objects. `configuration` is recorded in the table's metadata.
    pub async fn commit(
        &self,
        manifest: &Manifest,
        configuration: BTreeMap<String, String>,
    ) -> Result<Committed, LoadError> {
        // Never publish an object that is not there (`gc` of an older build, a hand, a bucket
        // rule may have deleted it since its upload).
        self.check_stored(manifest).await?;
        // A rerun of a load that was published and then killed finds the earlier publication
        // here (and the log checks again at the commit): publishing again would double its
        // rows. An object the table holds among other objects is refused for the same reason.
        let newest = self.log.latest().await?;
        if let Some(load_id) = published_as(&self.table, &newest, manifest)? {
            return Ok(Committed::AlreadyPublished { load_id });
        }
        let path = self.put_manifest(manifest).await?;
        let commit = Commit {
            operation: Operation::Load,
            manifest_key: path.to_string(),
            manifest,
            orders: vec![None; manifest.objects.len()],
            chains: Vec::new(),
            removes: Vec::new(),
            configuration,
            written_bytes: 0,
            full: false,
        };
        match self.log.commit(&commit).await? {
            ravel_log::Committed::Version(version) => Ok(Committed::Published { path, version }),
            ravel_log::Committed::AlreadyLive { .. } => {
                let newest = self.log.latest().await?;
                let load_id = published_as(&self.table, &newest, manifest)?
                    .unwrap_or_else(|| manifest.load_id.clone());
                Ok(Committed::AlreadyPublished { load_id })
            }
        }
    }

    /// Asks the store for every object and the sidecar `manifest` lists (a few at a time): each
    /// must be there with its recorded size. The loader keeps no bytes of an uploaded object,
    /// so a missing one fails the load; its rerun stores it again.
    pub async fn check_stored(&self, manifest: &Manifest) -> Result<(), LoadError> {
        use futures::{StreamExt, TryStreamExt};
        // Collected first: a stream over borrowing closures would keep the future from being
        // spawned (its `Send` would not hold for every lifetime).
        let listed: Vec<(String, u64)> = manifest
            .objects
            .iter()
            .map(|o| (o.key.clone(), o.bytes))
            .chain(manifest.blooms.iter().map(|b| (b.key.clone(), b.bytes)))
            .collect();
        futures::stream::iter(listed)
            .map(|(key, bytes)| async move {
                let not_stored = |problem: String| LoadError::NotStored {
                    key: key.clone(),
                    problem,
                };
                match self.store.head(&Path::from(key.as_str())).await {
                    Ok(meta) if meta.size == bytes => Ok(()),
                    Ok(meta) => Err(not_stored(format!(
                        "has {} bytes where this load stored {bytes}",
                        meta.size
                    ))),
                    Err(object_store::Error::NotFound { .. }) => {
                        Err(not_stored("is missing".into()))
                    }
                    Err(source) => Err(LoadError::Store {
                        key: key.clone(),
                        source,
                    }),
                }
            })
            .buffer_unordered(CHECK_CONCURRENCY)
            .try_collect::<()>()
            .await
    }

    /// Writes `manifest` create-if-absent under its load id, before the version that adds its
    /// objects (alone it publishes nothing). Returns its path.
    pub async fn put_manifest(&self, manifest: &Manifest) -> Result<Path, LoadError> {
        let path = self
            .table
            .commit_manifests_dir()
            .join(format!("{}.json", manifest.load_id));
        let json = serde_json::to_vec_pretty(manifest).expect("a manifest serializes");
        // A retried request whose first attempt was stored (the response was lost) finds its
        // own manifest: that is success. Anything else under this name is not ours.
        ravel_store::create_or_confirm(self.store.as_ref(), &path, json.into())
            .await
            .map_err(|e| match e {
                ravel_store::CreateError::Write { key, source } => LoadError::Store { key, source },
                ravel_store::CreateError::Unknown { key, write, read } => {
                    LoadError::CommitUnknown { key, write, read }
                }
            })?;
        Ok(path)
    }
}

/// Objects checked for existence at once before the commit.
const CHECK_CONCURRENCY: usize = 16;

/// How `ours` stands to the version `newest`: `Some(load id)` when the version holds every
/// object of it (the load is published already; the id is that of the manifest listing its
/// first object), an error when it holds some of them (publishing would count their rows
/// twice), `None` when it holds none. Objects are content hashes: the same key is the same rows.
pub fn published_as(
    table: &TablePaths,
    newest: &Snapshot,
    ours: &Manifest,
) -> Result<Option<String>, LoadError> {
    let held: Vec<&str> = ours
        .objects
        .iter()
        .map(|o| table.relative(&o.key).unwrap_or(&o.key))
        .filter(|p| newest.holds(p))
        .collect();
    let Some(first) = held.first() else {
        return Ok(None);
    };
    let manifest = table.absolute(
        newest.files()[*first]
            .tag(ravel_log::TAG_MANIFEST)
            .unwrap_or_default(),
    );
    if held.len() < ours.objects.len() {
        return Err(LoadError::PublishedElsewhere {
            manifest,
            object: table.absolute(first),
        });
    }
    let load_id = manifest
        .rsplit('/')
        .next()
        .and_then(|f| f.strip_suffix(".json"))
        .unwrap_or(&manifest);
    Ok(Some(load_id.to_string()))
}
