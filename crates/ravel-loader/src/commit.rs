//! The committer: publishes a load's manifest once its objects are stored, unless the load is
//! published already or would list an object another manifest lists.

use std::sync::Arc;

use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};
use ravel_manifest::Manifest;
use ravel_store::TablePaths;

use crate::LoadError;

/// Publishes manifests of one table.
#[derive(Debug, Clone)]
pub struct Committer {
    store: Arc<dyn ObjectStore>,
    table: TablePaths,
}

/// What a commit did.
#[derive(Debug, Clone, PartialEq)]
pub enum Committed {
    /// The manifest is written, at `path`.
    Published { path: Path },
    /// A manifest of the same objects under the same layout generation is published already
    /// (a rerun of a load whose first run was published): nothing was written.
    AlreadyPublished { load_id: String },
}

impl Committer {
    pub fn new(store: Arc<dyn ObjectStore>, table: TablePaths) -> Committer {
        Committer { store, table }
    }

    /// Publishes `manifest`: checks that every object and the sidecar it lists is stored as
    /// recorded, looks for an earlier publication of the same load (then publishes nothing)
    /// or a manifest sharing one of its objects (then fails), and writes the manifest
    /// create-if-absent.
    pub async fn commit(&self, manifest: &Manifest) -> Result<Committed, LoadError> {
        // Never publish an object that is not there (`gc` of an older build, a hand, a bucket
        // rule may have deleted it since its upload).
        self.check_stored(manifest).await?;
        // A rerun of a load that was published and then killed (or whose manifest write failed
        // after landing, or whose objects were deleted and stored again just now) finds the
        // earlier publication: publishing again would double its rows. An object listed by a
        // manifest of other objects is refused for the same reason.
        match self.find_published(manifest).await? {
            Published::Nothing => {}
            Published::Same(load_id) => return Ok(Committed::AlreadyPublished { load_id }),
            Published::Overlapping { manifest, object } => {
                return Err(LoadError::PublishedElsewhere { manifest, object });
            }
        }
        let path = self.put_manifest(manifest).await?;
        Ok(Committed::Published { path })
    }

    /// Asks the store for every object and the sidecar `manifest` lists (a few at a time): each
    /// must be there with its recorded size. The loader keeps no bytes of an uploaded object,
    /// so a missing one fails the load; its rerun stores it again.
    pub async fn check_stored(&self, manifest: &Manifest) -> Result<(), LoadError> {
        use futures::{StreamExt, TryStreamExt};
        let listed = manifest
            .objects
            .iter()
            .map(|o| (o.key.clone(), o.bytes))
            .chain(manifest.blooms.iter().map(|b| (b.key.clone(), b.bytes)));
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

    /// Writes `manifest` create-if-absent under its load id: the commit. Returns its path.
    pub async fn put_manifest(&self, manifest: &Manifest) -> Result<Path, LoadError> {
        let path = self
            .table
            .manifests_dir()
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

    /// How the table's published manifests stand to `manifest` (see [`published_as`]).
    pub async fn find_published(&self, manifest: &Manifest) -> Result<Published, LoadError> {
        let published = ravel_manifest::read_manifests(self.store.as_ref(), &self.table)
            .await
            .map_err(|e| LoadError::Internal {
                task: "reading the table's manifests".into(),
                message: e.to_string(),
            })?;
        Ok(published_as(&published, manifest))
    }
}

/// Objects checked for existence at once before the commit.
const CHECK_CONCURRENCY: usize = 16;

/// How a load about to commit stands to the manifests published already.
#[derive(Debug, PartialEq)]
pub enum Published {
    /// No published manifest lists any of its objects.
    Nothing,
    /// This load id lists the same objects under the same layout generation: the load is
    /// published already.
    Same(String),
    /// This manifest lists `object` among others: publishing would list it twice.
    Overlapping { manifest: String, object: String },
}

/// Compares `ours` with `published` (key, manifest): the same set of object keys under the
/// same layout generation is the same load, whatever the order or which objects were stored
/// again since; any shared object otherwise is an overlap. An object key (a content hash) may
/// be listed by one manifest of a table only, so that no row counts twice. A later version log
/// passes the manifests of the current version here.
pub fn published_as(published: &[(String, Manifest)], ours: &Manifest) -> Published {
    use std::collections::HashSet;
    let keys: HashSet<&str> = ours.objects.iter().map(|o| o.key.as_str()).collect();
    let mut overlap = None;
    for (path, m) in published {
        let theirs: HashSet<&str> = m.objects.iter().map(|o| o.key.as_str()).collect();
        if m.layout_generation == ours.layout_generation && theirs == keys {
            return Published::Same(m.load_id.clone());
        }
        if overlap.is_none()
            && let Some(object) = m.objects.iter().find(|o| keys.contains(o.key.as_str()))
        {
            overlap = Some(Published::Overlapping {
                manifest: path.clone(),
                object: object.key.clone(),
            });
        }
    }
    overlap.unwrap_or(Published::Nothing)
}
