//! A landing prefix listed after a cursor. Where landing keys sort by arrival (date-prefixed
//! keys, as Firehose, Vector and Fluent Bit write them), a poll need not list the keys every
//! version consumed long ago: it lists after the cursor (S3's `StartAfter`), which the table
//! keeps beside its data and which trails the consumed keys by a lookback, for late writers.

use std::time::{Duration, SystemTime};

use bytes::Bytes;
use object_store::ObjectStoreExt;
use object_store::path::Path;
use ravel_log::Snapshot;
use ravel_store::{Store, TablePaths};
use serde::{Deserialize, Serialize};

use crate::landing::Landed;

/// The cursor of one landing prefix of one table.
pub(crate) struct Cursor {
    /// Where it is kept: `<table>/_ravel/landing/<hash of the landing URL>.json`.
    path: Path,
    pub(crate) stored: Stored,
}

/// The cursor's document.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Stored {
    /// The landing prefix it belongs to.
    pub landing: String,
    /// Keys up to this one are consumed and landed longer than the lookback ago.
    pub after: Option<String>,
}

/// Why the cursor could not be read or written.
#[derive(Debug, thiserror::Error)]
#[error("{what} the landing cursor {path}")]
pub struct CursorError {
    what: &'static str,
    path: String,
    #[source]
    source: Box<dyn std::error::Error + Send + Sync>,
}

impl Cursor {
    /// Reads the cursor of `landing` kept in `table` (none yet: the listing starts at the
    /// beginning).
    pub(crate) async fn read(
        store: &Store,
        table: &TablePaths,
        landing: &str,
    ) -> Result<Cursor, CursorError> {
        let hash = blake3::hash(landing.as_bytes()).to_hex();
        let path = Path::from(format!(
            "{}/_ravel/landing/{}.json",
            table.root(),
            &hash[..32]
        ));
        let failed = |what, source| CursorError {
            what,
            path: path.to_string(),
            source,
        };
        let stored = match store.object_store().get(&path).await {
            Err(object_store::Error::NotFound { .. }) => Stored {
                landing: landing.to_string(),
                after: None,
            },
            got => {
                let bytes = got.map_err(|e| failed("reading", e.into()))?;
                let bytes = bytes
                    .bytes()
                    .await
                    .map_err(|e| failed("reading", e.into()))?;
                serde_json::from_slice(&bytes).map_err(|e| failed("parsing", e.into()))?
            }
        };
        Ok(Cursor { path, stored })
    }

    /// Moves the cursor past the leading keys of `listed` (in key order, listed after the
    /// cursor) that a version consumed and that landed longer than `lookback` ago, and stores
    /// it when it moved. A key not consumed yet (pending, failed, still settling) stops it.
    pub(crate) async fn advance(
        &mut self,
        store: &Store,
        listed: &[Landed],
        snapshot: &Snapshot,
        lookback: Duration,
    ) -> Result<bool, CursorError> {
        let Some(after) = next_cursor(listed, snapshot, lookback, SystemTime::now()) else {
            return Ok(false);
        };
        self.stored.after = Some(after);
        let json = serde_json::to_vec(&self.stored).expect("serializes");
        store
            .object_store()
            .put(&self.path, Bytes::from(json).into())
            .await
            .map_err(|e| CursorError {
                what: "writing",
                path: self.path.to_string(),
                source: e.into(),
            })?;
        Ok(true)
    }
}

/// The key the cursor moves to, if it moves: the last of the leading keys landed before
/// `now - lookback` that a version consumed or that are beyond the table's inputs window
/// (never loaded: see [`Snapshot::check_window`]).
fn next_cursor(
    listed: &[Landed],
    snapshot: &Snapshot,
    lookback: Duration,
    now: SystemTime,
) -> Option<String> {
    let now_ms = now
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    let settled = |f: &&Landed| {
        let old = now.duration_since(f.landed).unwrap_or_default() >= lookback;
        let one = ravel_loader::Consumed::once(vec![f.identity.clone()]);
        let done = snapshot.consumed_by(&f.identity).is_some()
            || snapshot.check_window(&one, now_ms).is_err();
        old && done
    };
    listed
        .iter()
        .take_while(settled)
        .last()
        .map(|f| f.key.clone())
}
