//! Create-if-absent writes of documents that must be written once: manifests, layout
//! generations, a table's recorded schema.
//!
//! A document is written with `PutMode::Create`. When the put fails, the write may still have
//! landed (a retried request whose first attempt was stored and whose response was lost finds
//! its own document; a timeout may hide a stored write), so the name is read back: the write
//! succeeded iff the stored bytes are ours. Other bytes under the name are someone else's
//! document, and the put's own error stands.

use bytes::Bytes;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};

/// Why [`create_or_confirm`] did not store the document.
#[derive(Debug, thiserror::Error)]
pub enum CreateError {
    /// The put failed and the name does not hold these bytes: nothing is stored there, or
    /// another writer's document is (then `source` is `AlreadyExists`, or `Precondition` on
    /// some servers; see [`CreateError::is_taken`]).
    #[error("writing {key}")]
    Write {
        key: String,
        #[source]
        source: object_store::Error,
    },

    /// The put failed and reading the name back failed too: whether the document is stored
    /// is unknown. Writing the same bytes again settles it.
    #[error(
        "writing {key} failed ({write}) and reading it back failed too ({read}): it may or may not be stored"
    )]
    Unknown {
        key: String,
        write: Box<object_store::Error>,
        read: Box<object_store::Error>,
    },
}

impl CreateError {
    /// The name holds another writer's document (the create lost a race).
    pub fn is_taken(&self) -> bool {
        matches!(
            self,
            CreateError::Write {
                source: object_store::Error::AlreadyExists { .. }
                    | object_store::Error::Precondition { .. },
                ..
            }
        )
    }

    /// The name the write was for.
    pub fn key(&self) -> &str {
        match self {
            CreateError::Write { key, .. } | CreateError::Unknown { key, .. } => key,
        }
    }
}

/// Stores `bytes` under `path` unless something is there already (`PutMode::Create`); if the put
/// fails for any reason, reads `path` back and succeeds iff it holds exactly `bytes`: the
/// document is ours, stored by this call or by an earlier attempt of the same write.
pub async fn create_or_confirm(
    store: &dyn ObjectStore,
    path: &Path,
    bytes: Bytes,
) -> Result<(), CreateError> {
    let put = store
        .put_opts(
            path,
            PutPayload::from(bytes.clone()),
            PutOptions::from(PutMode::Create),
        )
        .await;
    let Err(write) = put else {
        return Ok(());
    };
    match read_back(store, path).await {
        Ok(Some(there)) if there == bytes => {
            tracing::debug!(key = %path, error = %crate::ErrorChain::new(&write), "the put failed but stored our bytes");
            Ok(())
        }
        Ok(_) => Err(CreateError::Write {
            key: path.to_string(),
            source: write,
        }),
        Err(read) => Err(CreateError::Unknown {
            key: path.to_string(),
            write: Box::new(write),
            read: Box::new(read),
        }),
    }
}

/// What `path` holds, `None` when nothing.
async fn read_back(
    store: &dyn ObjectStore,
    path: &Path,
) -> Result<Option<Bytes>, object_store::Error> {
    match store.get(path).await {
        Ok(got) => got.bytes().await.map(Some),
        Err(object_store::Error::NotFound { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use async_trait::async_trait;
    use futures::stream::BoxStream;
    use object_store::memory::InMemory;
    use object_store::{
        CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta,
        PutMultipartOptions, PutResult,
    };
    use std::sync::Arc;

    fn doc() -> Path {
        Path::from("t/manifests/one.json")
    }

    async fn stored(store: &dyn ObjectStore) -> Option<Bytes> {
        read_back(store, &doc()).await.unwrap()
    }

    #[tokio::test]
    async fn creates_then_confirms_the_same_bytes_and_refuses_others() {
        let dir = tempfile::tempdir().unwrap();
        let store = object_store::local::LocalFileSystem::new_with_prefix(dir.path()).unwrap();
        let ours = Bytes::from_static(b"{\"load\": 1}");
        create_or_confirm(&store, &doc(), ours.clone())
            .await
            .unwrap();
        assert_eq!(stored(&store).await, Some(ours.clone()));
        // A second attempt of the same write finds its own bytes: success.
        create_or_confirm(&store, &doc(), ours.clone())
            .await
            .unwrap();
        // Different bytes under the name are someone else's: the put's error, nothing changed.
        let err = create_or_confirm(&store, &doc(), Bytes::from_static(b"{\"load\": 2}"))
            .await
            .unwrap_err();
        assert!(err.is_taken(), "{err:?}");
        assert_eq!(err.key(), doc().as_ref());
        assert_eq!(stored(&store).await, Some(ours));
    }

    /// A store whose puts fail (after storing, when `lands`) and whose reads may fail.
    #[derive(Debug)]
    struct Faulty {
        inner: InMemory,
        lands: bool,
        reads_fail: bool,
    }

    impl std::fmt::Display for Faulty {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "Faulty")
        }
    }

    fn fault(what: &str) -> object_store::Error {
        object_store::Error::Generic {
            store: "Faulty",
            source: what.to_string().into(),
        }
    }

    #[async_trait]
    impl ObjectStore for Faulty {
        async fn put_opts(
            &self,
            location: &Path,
            payload: PutPayload,
            opts: PutOptions,
        ) -> object_store::Result<PutResult> {
            if self.lands {
                self.inner.put_opts(location, payload, opts).await?;
            }
            Err(fault("response lost"))
        }
        async fn put_multipart_opts(
            &self,
            location: &Path,
            opts: PutMultipartOptions,
        ) -> object_store::Result<Box<dyn MultipartUpload>> {
            self.inner.put_multipart_opts(location, opts).await
        }
        async fn get_opts(
            &self,
            location: &Path,
            options: GetOptions,
        ) -> object_store::Result<GetResult> {
            if self.reads_fail {
                return Err(fault("read failed"));
            }
            self.inner.get_opts(location, options).await
        }
        fn delete_stream(
            &self,
            locations: BoxStream<'static, object_store::Result<Path>>,
        ) -> BoxStream<'static, object_store::Result<Path>> {
            self.inner.delete_stream(locations)
        }
        fn list(
            &self,
            prefix: Option<&Path>,
        ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
            self.inner.list(prefix)
        }
        async fn list_with_delimiter(
            &self,
            prefix: Option<&Path>,
        ) -> object_store::Result<ListResult> {
            self.inner.list_with_delimiter(prefix).await
        }
        async fn copy_opts(
            &self,
            from: &Path,
            to: &Path,
            options: CopyOptions,
        ) -> object_store::Result<()> {
            self.inner.copy_opts(from, to, options).await
        }
    }

    #[tokio::test]
    async fn a_failed_put_that_stored_our_bytes_succeeds() {
        let store = Faulty {
            inner: InMemory::new(),
            lands: true,
            reads_fail: false,
        };
        let ours = Bytes::from_static(b"ours");
        create_or_confirm(&store, &doc(), ours.clone())
            .await
            .unwrap();
        assert_eq!(stored(&store).await, Some(ours));
    }

    #[tokio::test]
    async fn a_failed_put_that_stored_nothing_fails_with_its_own_error() {
        let store = Faulty {
            inner: InMemory::new(),
            lands: false,
            reads_fail: false,
        };
        let err = create_or_confirm(&store, &doc(), Bytes::from_static(b"ours"))
            .await
            .unwrap_err();
        match &err {
            CreateError::Write { source, .. } => {
                assert!(source.to_string().contains("response lost"))
            }
            other => panic!("expected the put's error, got {other:?}"),
        }
        assert!(!err.is_taken());
    }

    #[tokio::test]
    async fn a_failed_put_and_a_failed_read_leave_the_outcome_unknown() {
        let store = Arc::new(Faulty {
            inner: InMemory::new(),
            lands: true,
            reads_fail: true,
        });
        let err = create_or_confirm(store.as_ref(), &doc(), Bytes::from_static(b"ours"))
            .await
            .unwrap_err();
        let CreateError::Unknown { write, read, .. } = &err else {
            panic!("expected an unknown outcome, got {err:?}");
        };
        assert!(write.to_string().contains("response lost"));
        assert!(read.to_string().contains("read failed"));
        assert!(err.to_string().contains("may or may not be stored"));
    }
}
