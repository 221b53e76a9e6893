//! What a store's server can do, probed once per store and recorded in it.
//!
//! The commit protocol needs one feature of the server: **conditional create** (a put with
//! `If-None-Match: *` that fails when the key exists). Layout generations and the table's
//! schema are created that way so that two writers cannot both win, and manifests and objects
//! so that nothing is overwritten. Real S3, MinIO, s3s and local directories have it; some
//! S3-compatible servers ignore the header and overwrite.
//!
//! The first command that writes to a store probes it: it creates a fresh key twice; a server
//! that answers the second create with success ignored the condition. The answer is recorded
//! in `_ravel/capabilities.json` and read from there afterwards, so later commands do not
//! probe again (delete the record to probe anew, e.g. after upgrading the server).
//!
//! Without conditional create, ravel-load falls back as follows:
//! - loads proceed, with a warning: objects are named by their content hash (an overwrite
//!   writes the same bytes) and manifests by a load id unique to the load (commit time, the
//!   hash of its objects, the process id), so no two loads write the same key;
//! - layout changes are refused: without the condition two concurrent changes could both win
//!   unnoticed;
//! - the table's schema is still recorded by the first load (or `schema set`), but two first
//!   loads with different schemas at once could both record theirs, the last write winning;
//!   each manifest keeps its load's schema, and readers refuse a table whose loads disagree.

use std::time::{SystemTime, UNIX_EPOCH};

use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};
use serde::{Deserialize, Serialize};

use crate::StoreError;

/// What the server of a store supports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Capabilities {
    /// A create-if-absent put fails when the key exists.
    pub conditional_create: bool,
    /// When the probe ran (unix milliseconds).
    pub probed_at_ms: u64,
}

/// Where the probe's answer is kept.
pub fn record_path() -> Path {
    Path::from("_ravel/capabilities.json")
}

/// Reads the recorded capabilities, or probes the store and records them.
pub(crate) async fn detect(store: &dyn ObjectStore, url: &str) -> Result<Capabilities, StoreError> {
    let err = |source| StoreError::Probe {
        url: url.to_string(),
        source,
    };
    match store.get(&record_path()).await {
        Ok(got) => {
            let bytes = got.bytes().await.map_err(err)?;
            if let Ok(caps) = serde_json::from_slice::<Capabilities>(&bytes) {
                return Ok(caps);
            }
            // An unreadable record is probed anew and replaced.
        }
        Err(object_store::Error::NotFound { .. }) => {}
        Err(e) => return Err(err(e)),
    }
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let probe = Path::from(format!(
        "_ravel/probe-{now_ms}-{}-{}",
        std::process::id(),
        now_ms.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40
    ));
    let create = || {
        store.put_opts(
            &probe,
            PutPayload::from_static(b"probe"),
            PutOptions::from(PutMode::Create),
        )
    };
    match create().await {
        Ok(_) | Err(object_store::Error::AlreadyExists { .. }) => {}
        Err(e) => return Err(err(e)),
    }
    let conditional_create = match create().await {
        Err(object_store::Error::AlreadyExists { .. }) => true,
        Ok(_) => false,
        Err(e) => return Err(err(e)),
    };
    let _ = store.delete(&probe).await;
    let caps = Capabilities {
        conditional_create,
        probed_at_ms: now_ms,
    };
    if !conditional_create {
        tracing::warn!(
            store = url,
            "the store's server ignores conditional creates (If-None-Match): loads proceed (their keys are unique), layout changes are refused"
        );
    }
    let json = serde_json::to_vec_pretty(&caps).expect("capabilities serialize");
    store
        .put(&record_path(), PutPayload::from(json))
        .await
        .map_err(err)?;
    Ok(caps)
}
