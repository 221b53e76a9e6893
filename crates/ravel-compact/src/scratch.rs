//! One operation's scratch prefix: the spill and intermediate passes of a merge live under
//! `<table>/_ravel/tmp/<operation>/` (see [`TablePaths::scratch_dir`]). Their names are content
//! hashes, but no other operation writes, reads or deletes under this prefix, so two merges of
//! the same inputs never share an intermediate object, and clearing the prefix can never delete
//! an object that a version names.

use std::sync::Arc;

use futures::TryStreamExt;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};
use ravel_loader::{LoadError, Prepared};
use ravel_store::TablePaths;

/// The scratch prefix of one operation.
#[derive(Debug, Clone)]
pub(crate) struct Scratch {
    os: Arc<dyn ObjectStore>,
    paths: TablePaths,
    operation: String,
}

impl Scratch {
    /// A new operation's prefix (nothing is stored until a loader writes to it).
    pub(crate) fn new(os: Arc<dyn ObjectStore>, paths: TablePaths) -> Scratch {
        Scratch {
            os,
            paths,
            operation: ravel_store::unique_id(),
        }
    }

    /// The operation's name, for [`ravel_loader::LoadMode::in_scratch`].
    pub(crate) fn operation(&self) -> &str {
        &self.operation
    }

    /// Moves the objects and sidecar of `prepared` (written under this prefix) to the table's
    /// data and sidecar directories, so that they can be published. A server-side copy each;
    /// the originals go with [`Scratch::clear`].
    pub(crate) async fn promote(&self, prepared: &mut Prepared) -> Result<(), LoadError> {
        let (data, blooms) = (self.paths.data_dir(), self.paths.blooms_dir());
        let m = &mut prepared.manifest;
        let keys = m
            .objects
            .iter_mut()
            .map(|o| (&data, &mut o.key))
            .chain(m.blooms.iter_mut().map(|b| (&blooms, &mut b.key)));
        for (dir, key) in keys {
            let from = Path::from(key.as_str());
            let Some(name) = from.filename() else {
                continue;
            };
            let to = dir.clone().join(name);
            self.os
                .copy(&from, &to)
                .await
                .map_err(|source| LoadError::Store {
                    key: to.to_string(),
                    source,
                })?;
            *key = to.to_string();
        }
        Ok(())
    }

    /// Deletes everything under the prefix. A failure is logged: `gc` collects what is left.
    pub(crate) async fn clear(&self) {
        let dir = self.paths.scratch_dir(&self.operation);
        let listed: Result<Vec<_>, _> = self.os.list(Some(&dir)).try_collect().await;
        let listed = match listed {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!(prefix = %dir, error = %ravel_store::ErrorChain::new(&e), "scratch objects not listed; gc collects them");
                return;
            }
        };
        for m in listed {
            if let Err(e) = self.os.delete(&m.location).await {
                tracing::warn!(key = %m.location, error = %ravel_store::ErrorChain::new(&e), "a scratch object was not deleted; gc collects it");
            }
        }
    }
}
