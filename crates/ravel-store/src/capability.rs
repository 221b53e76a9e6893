//! What a store's server can do, probed once per store and recorded in it.
//!
//! The commit protocol needs one feature of the server: **conditional create** (a put with
//! `If-None-Match: *` that fails when the key exists), and it must be **atomic**: of
//! concurrent creates of one key, exactly one succeeds. Log entries, manifests, layout
//! generations and the table's schema are created that way, so that two writers cannot both
//! win. Real S3, MinIO and local directories have it. s3s-fs checks the condition and then
//! writes, as two steps, so concurrent creates can all succeed; some servers ignore the header.
//!
//! The first command that writes to a store probes it: it creates a fresh key twice, one
//! after the other (a server that answers the second with success ignores the condition),
//! then races [`RACERS`] creates of one fresh key, [`RACE_ROUNDS`] times (more than one success
//! in a round: not atomic). The answer is recorded in `_ravel/capabilities.json` and read from
//! there afterwards, so later commands do not probe again (delete the record to probe anew,
//! e.g. after upgrading the server; a record without the race's answer is probed anew).
//!
//! On a store without atomic conditional create, every create goes through a claim (see
//! [`crate::ExclusiveCreates`]): safe against concurrent writers, at four requests more per
//! create.

use std::time::{SystemTime, UNIX_EPOCH};

use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};
use serde::{Deserialize, Serialize};

use crate::StoreError;

/// Creates raced at once in one round of the probe.
pub const RACERS: usize = 8;
/// Rounds of the race; one with more than one winner ends the probe.
pub const RACE_ROUNDS: usize = 8;

/// What the server of a store supports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Capabilities {
    /// A create-if-absent put fails when the key exists.
    pub conditional_create: bool,
    /// Of concurrent creates of one key, at most one succeeded in every round of the probe.
    /// `None` in a record from a build that did not race creates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub atomic_create: Option<bool>,
    /// When the probe ran (unix milliseconds).
    pub probed_at_ms: u64,
}

impl Capabilities {
    /// Whether the server's own create-if-absent is safe against concurrent writers (else
    /// creates take a claim first: see [`crate::ExclusiveCreates`]).
    pub fn atomic_create(&self) -> bool {
        self.conditional_create && self.atomic_create == Some(true)
    }
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
            match serde_json::from_slice::<Capabilities>(&bytes) {
                Ok(caps) if caps.atomic_create.is_some() => return Ok(caps),
                // An unreadable record, or one without the race's answer, is probed anew.
                _ => {}
            }
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
    let atomic_create = conditional_create && !creates_race(store, &probe).await.map_err(err)?;
    let caps = Capabilities {
        conditional_create,
        atomic_create: Some(atomic_create),
        probed_at_ms: now_ms,
    };
    if !atomic_create {
        tracing::warn!(
            store = url,
            conditional_create,
            "the store's server does not create keys atomically (If-None-Match): every create takes a claim first (four requests more)"
        );
    }
    let json = serde_json::to_vec_pretty(&caps).expect("capabilities serialize");
    store
        .put(&record_path(), PutPayload::from(json))
        .await
        .map_err(err)?;
    Ok(caps)
}

/// Whether concurrent creates of one fresh key (`base` and the round) ever both succeed.
async fn creates_race(store: &dyn ObjectStore, base: &Path) -> object_store::Result<bool> {
    for round in 0..RACE_ROUNDS {
        let key = Path::from(format!("{base}-race-{round}"));
        let creates = (0..RACERS).map(|i| {
            store.put_opts(
                &key,
                PutPayload::from(format!("racer {i}")),
                PutOptions::from(PutMode::Create),
            )
        });
        let results = futures::future::join_all(creates).await;
        let _ = store.delete(&key).await;
        let mut won = 0;
        for r in results {
            match r {
                Ok(_) => won += 1,
                Err(object_store::Error::AlreadyExists { .. }) => {}
                Err(object_store::Error::Precondition { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        if won > 1 {
            return Ok(true);
        }
    }
    Ok(false)
}
