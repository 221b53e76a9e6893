//! A store seen through an overlay: reads find what the store holds, writes land in a local
//! temporary directory of their own and are read back from there, deletes hide objects. A dry
//! run follows the real run's code on it (writes, commits and all) and leaves the store as it
//! was; the directory goes when the last handle on the overlay does.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::{
    CopyMode, CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta,
    ObjectStore, ObjectStoreExt, PutMode, PutMultipartOptions, PutOptions, PutPayload, PutResult,
};

use crate::{Store, StoreError};

/// `base` with writes kept apart (see the module docs).
#[derive(Debug)]
struct Overlay {
    base: Arc<dyn ObjectStore>,
    writes: Arc<LocalFileSystem>,
    /// Paths deleted through the overlay: hidden from reads and listings until written again.
    deleted: Arc<Mutex<HashSet<Path>>>,
    /// Removed with the overlay.
    _dir: tempfile::TempDir,
}

impl Store {
    /// This store seen through an overlay that keeps every write in a local temporary
    /// directory (see the module docs): nothing written through it reaches this store.
    pub fn overlay(&self) -> Result<Store, StoreError> {
        let created = |source| StoreError::CreateDir {
            path: std::env::temp_dir().display().to_string(),
            source,
        };
        let dir = tempfile::Builder::new()
            .prefix("ravel-overlay-")
            .tempdir()
            .map_err(created)?;
        let writes =
            LocalFileSystem::new_with_prefix(dir.path()).map_err(|source| StoreError::Open {
                url: dir.path().display().to_string(),
                source,
            })?;
        let overlay = Overlay {
            base: self.inner.clone(),
            writes: Arc::new(writes),
            deleted: Arc::default(),
            _dir: dir,
        };
        Ok(Store::new(
            format!("{} (overlay)", self.location),
            Arc::new(overlay),
        ))
    }
}

impl std::fmt::Display for Overlay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Overlay({})", self.base)
    }
}

impl Overlay {
    fn is_deleted(&self, location: &Path) -> bool {
        self.deleted
            .lock()
            .expect("not poisoned")
            .contains(location)
    }

    fn undelete(&self, location: &Path) {
        self.deleted.lock().expect("not poisoned").remove(location);
    }

    /// Whether `location` is there, as this overlay shows it.
    async fn exists(&self, location: &Path) -> object_store::Result<bool> {
        match self.head(location).await {
            Ok(_) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// The entries this overlay wrote, then the base's it neither replaced nor deleted.
    fn merged(
        &self,
        written: BoxStream<'static, object_store::Result<ObjectMeta>>,
        base: BoxStream<'static, object_store::Result<ObjectMeta>>,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        let deleted = self.deleted.clone();
        futures::stream::once(async move {
            let written: Vec<ObjectMeta> = written.try_collect().await?;
            let mut hidden = deleted.lock().expect("not poisoned").clone();
            hidden.extend(written.iter().map(|m| m.location.clone()));
            let rest =
                base.try_filter(move |m| futures::future::ready(!hidden.contains(&m.location)));
            Ok::<_, object_store::Error>(
                futures::stream::iter(written.into_iter().map(Ok)).chain(rest),
            )
        })
        .try_flatten()
        .boxed()
    }
}

fn not_found(location: &Path) -> object_store::Error {
    object_store::Error::NotFound {
        path: location.to_string(),
        source: "deleted through the overlay".into(),
    }
}

#[async_trait]
impl ObjectStore for Overlay {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        if matches!(opts.mode, PutMode::Create) && self.exists(location).await? {
            return Err(object_store::Error::AlreadyExists {
                path: location.to_string(),
                source: "stored already".into(),
            });
        }
        let put = self.writes.put_opts(location, payload, opts).await?;
        self.undelete(location);
        Ok(put)
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.undelete(location);
        self.writes.put_multipart_opts(location, opts).await
    }

    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        if self.is_deleted(location) {
            return Err(not_found(location));
        }
        match self.writes.get_opts(location, options.clone()).await {
            Err(object_store::Error::NotFound { .. }) => {
                self.base.get_opts(location, options).await
            }
            other => other,
        }
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        let (writes, deleted) = (self.writes.clone(), self.deleted.clone());
        locations
            .and_then(move |location| {
                let (writes, deleted) = (writes.clone(), deleted.clone());
                async move {
                    match writes.delete(&location).await {
                        Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                        Err(e) => return Err(e),
                    }
                    deleted
                        .lock()
                        .expect("not poisoned")
                        .insert(location.clone());
                    Ok(location)
                }
            })
            .boxed()
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.merged(self.writes.list(prefix), self.base.list(prefix))
    }

    /// Both layers listed after `offset` by their stores, merged as [`Overlay::list`] merges
    /// them.
    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        let written = self.writes.list_with_offset(prefix, offset);
        self.merged(written, self.base.list_with_offset(prefix, offset))
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        let mut listed = self.writes.list_with_delimiter(prefix).await?;
        let base = self.base.list_with_delimiter(prefix).await?;
        let mut hidden = self.deleted.lock().expect("not poisoned").clone();
        hidden.extend(listed.objects.iter().map(|m| m.location.clone()));
        listed.objects.extend(
            base.objects
                .into_iter()
                .filter(|m| !hidden.contains(&m.location)),
        );
        listed.common_prefixes.extend(base.common_prefixes);
        listed.common_prefixes.sort();
        listed.common_prefixes.dedup();
        Ok(listed)
    }

    async fn copy_opts(
        &self,
        from: &Path,
        to: &Path,
        options: CopyOptions,
    ) -> object_store::Result<()> {
        let bytes = self.get(from).await?.bytes().await?;
        let mode = match options.mode {
            CopyMode::Create => PutMode::Create,
            CopyMode::Overwrite => PutMode::Overwrite,
        };
        self.put_opts(to, bytes.into(), PutOptions::from(mode))
            .await
            .map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::ObjectStoreExt;

    async fn read(store: &Store, key: &str) -> Option<String> {
        match store.object_store().get(&Path::from(key)).await {
            Ok(r) => Some(String::from_utf8(r.bytes().await.unwrap().to_vec()).unwrap()),
            Err(object_store::Error::NotFound { .. }) => None,
            Err(e) => panic!("{e}"),
        }
    }

    async fn listed(store: &Store, prefix: &str) -> Vec<String> {
        let mut keys: Vec<String> = store
            .object_store()
            .list(Some(&Path::from(prefix)))
            .map_ok(|m| m.location.to_string())
            .try_collect()
            .await
            .unwrap();
        keys.sort();
        keys
    }

    #[tokio::test]
    async fn writes_and_deletes_through_the_overlay_leave_the_store_as_it_was() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::create(dir.path().to_str().unwrap()).unwrap();
        let os = store.object_store();
        os.put(&Path::from("t/a"), "a".into()).await.unwrap();
        os.put(&Path::from("t/b"), "b".into()).await.unwrap();

        let over = store.overlay().unwrap();
        let o = over.object_store();
        o.put(&Path::from("t/a"), "a2".into()).await.unwrap();
        o.put(&Path::from("t/c"), "c".into()).await.unwrap();
        o.delete(&Path::from("t/b")).await.unwrap();
        let taken = o
            .put_opts(
                &Path::from("t/a"),
                "x".into(),
                PutOptions::from(PutMode::Create),
            )
            .await
            .unwrap_err();
        assert!(matches!(taken, object_store::Error::AlreadyExists { .. }));
        o.copy(&Path::from("t/c"), &Path::from("u/c"))
            .await
            .unwrap();

        assert_eq!(read(&over, "t/a").await.as_deref(), Some("a2"));
        assert_eq!(read(&over, "t/b").await, None);
        assert_eq!(read(&over, "u/c").await.as_deref(), Some("c"));
        assert_eq!(listed(&over, "t").await, ["t/a", "t/c"]);
        let top = o.list_with_delimiter(None).await.unwrap();
        let mut prefixes: Vec<String> = top.common_prefixes.iter().map(Path::to_string).collect();
        // `_ravel/` holds the capability record the first create probed for.
        prefixes.retain(|p| p != "_ravel");
        assert_eq!(prefixes, ["t", "u"]);

        assert_eq!(read(&store, "t/a").await.as_deref(), Some("a"));
        assert_eq!(read(&store, "t/b").await.as_deref(), Some("b"));
        assert_eq!(listed(&store, "").await, ["t/a", "t/b"]);
    }
}
