//! Publishing, in one place: a load's objects, or a merge's in place of its inputs, become the
//! table's next version once they are stored. The committer checks every object and the
//! sidecar is there as recorded, writes the manifest (create-if-absent), then commits the log
//! entry (see `ravel-log`). A load whose objects the table holds already publishes nothing.

use std::collections::BTreeMap;
use std::sync::Arc;

use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};
use ravel_log::{ChainOrigin, Commit, Consumed, Operation, TableLog};
use ravel_manifest::Manifest;
use ravel_store::{Store, TablePaths};

pub use ravel_log::{Committed, Published};

use crate::LoadError;

/// Publishes versions of one table.
#[derive(Debug, Clone)]
pub struct Committer {
    store: Arc<dyn ObjectStore>,
    table: TablePaths,
    log: TableLog,
}

/// What a merge's version does besides adding the merged objects: the objects they replace,
/// where each merged object ranks among equal sort keys, and what writing them cost.
#[derive(Debug, Clone, Default)]
pub struct Replacement {
    /// Per object of the manifest, its rank among equal sort keys.
    pub orders: Vec<Option<u64>>,
    /// Per object of the manifest, the run it continues; `None`: its own run.
    pub chains: Vec<Option<ChainOrigin>>,
    /// Store paths of the objects leaving the table.
    pub removes: Vec<String>,
    /// Bytes the merge stored, intermediate objects included.
    pub written_bytes: u64,
    /// The version is one sequence (a full compaction).
    pub full: bool,
    /// What a load consumed (empty for a merge).
    pub consumed: Consumed,
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

    /// Publishes a load's `manifest`: looks for the load in the newest version (then publishes
    /// nothing) or one of its objects there (then fails), and otherwise publishes it as a
    /// version that adds its objects. `spilled_bytes`: what the load stored besides them (the
    /// sorted runs `load --compact` merges), counted in the table's totals as bytes written.
    /// `configuration` is recorded in the table's metadata, and `consumed` (the load's inputs)
    /// in the version: a version that consumed them already is the load's publication.
    pub async fn commit(
        &self,
        manifest: &Manifest,
        spilled_bytes: u64,
        configuration: BTreeMap<String, String>,
        consumed: Consumed,
    ) -> Result<Committed, LoadError> {
        // A rerun of a load that was published and then killed finds the earlier publication
        // here (and the log checks again at the commit): publishing again would double its
        // rows. Looking first keeps a rerun from writing a second manifest.
        let newest = self.log.latest().await?;
        if let ravel_log::InputsStand::Published { version } = newest.inputs_stand(&consumed) {
            return Ok(Committed::AlreadyLive(self.log.publication(version).await));
        }
        newest.check_new(&consumed, ravel_log::now_ms())?;
        if let Some(p) = ravel_log::published_in(&self.table, &newest, manifest)? {
            return Ok(Committed::AlreadyLive(p));
        }
        // Other writers' objects that this version would leave unreadable, or that hold a
        // column the table lacks (maintenance could never take them in): refused now, before
        // anything is published.
        crate::foreign::check(&self.store, &self.table, &newest, Some(&manifest.schema)).await?;
        let replacement = Replacement {
            orders: vec![None; manifest.objects.len()],
            written_bytes: spilled_bytes,
            consumed,
            ..Replacement::default()
        };
        self.publish(Operation::Load, manifest, replacement, configuration)
            .await
    }

    /// Publishes a merge's `manifest` as the version that replaces `replacement.removes` with
    /// its objects; the commit fails as a conflict when one of them left the table meanwhile.
    pub async fn replace(
        &self,
        manifest: &Manifest,
        replacement: Replacement,
        configuration: BTreeMap<String, String>,
    ) -> Result<Committed, LoadError> {
        self.publish(Operation::Compaction, manifest, replacement, configuration)
            .await
    }

    /// Checks that every object and the sidecar `manifest` lists is stored as recorded (never
    /// publish an object that is not there: `gc` of an older build, a hand or a bucket rule
    /// may have deleted it since its upload), writes the manifest and commits the version.
    #[tracing::instrument(
        name = "commit",
        skip_all,
        fields(
            operation = ?operation,
            objects = manifest.objects.len(),
            removes = r.removes.len(),
            version = tracing::field::Empty
        )
    )]
    async fn publish(
        &self,
        operation: Operation,
        manifest: &Manifest,
        r: Replacement,
        configuration: BTreeMap<String, String>,
    ) -> Result<Committed, LoadError> {
        self.check_stored(manifest).await?;
        let path = self.put_manifest(manifest).await?;
        let commit = Commit {
            operation,
            manifest_key: path.to_string(),
            manifest,
            orders: r.orders,
            chains: r.chains,
            removes: r.removes,
            configuration,
            written_bytes: r.written_bytes,
            full: r.full,
            consumed: r.consumed,
        };
        let committed = self.log.commit(&commit).await?;
        tracing::Span::current().record("version", committed.version());
        tracing::debug!(manifest = %path, version = committed.version(), "published");
        Ok(committed)
    }

    /// Asks the store for every object and the sidecar `manifest` lists (a few at a time): each
    /// must be there with its recorded size. The loader keeps no bytes of an uploaded object,
    /// so a missing one fails the load; its rerun stores it again.
    async fn check_stored(&self, manifest: &Manifest) -> Result<(), LoadError> {
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
                let not_stored = |problem: crate::NotStored| LoadError::NotStored {
                    key: key.clone(),
                    problem,
                };
                match self.store.head(&Path::from(key.as_str())).await {
                    Ok(meta) if meta.size == bytes => Ok(()),
                    Ok(meta) => Err(not_stored(crate::NotStored::Size {
                        found: meta.size,
                        stored: bytes,
                    })),
                    Err(object_store::Error::NotFound { .. }) => {
                        Err(not_stored(crate::NotStored::Missing))
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
    async fn put_manifest(&self, manifest: &Manifest) -> Result<Path, LoadError> {
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

/// Records the table's layout settings in its Delta metadata, and the protocol they ask for
/// (the fence on or off), as a version of their own: other writers see the fence from that
/// version on, not from the next load. `None` when the newest version has them already, or the
/// table has no version or no recorded schema yet (its first load records them).
pub async fn commit_settings(store: &Store, table: &str) -> Result<Option<u64>, LoadError> {
    let layouts = ravel_layout::LayoutStore::new(store, table)?;
    let layout = layouts.load().await?;
    let Some(schema) = layouts.schema().await? else {
        return Ok(None);
    };
    let log = TableLog::new(store.object_store().clone(), layouts.table().clone());
    let configuration = crate::table_configuration(&layout, &schema);
    Ok(log.commit_settings(&configuration).await?)
}
