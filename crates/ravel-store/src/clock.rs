//! The store's clock. Ages that decide what `gc` may delete (an object's, a lease's) compare
//! times the store gave its writes with "now". Taking "now" from the machine `gc` runs on would
//! make its clock count: ten minutes fast, and every running load's lease looks stale. So `gc`
//! asks the store: it writes a small object and reads back the time the store gave it.

use chrono::{DateTime, Utc};
use object_store::{ObjectStore, ObjectStoreExt};

/// How far apart the clocks of a lease's writer and of the store may be before `gc` says so.
pub const SKEW_BOUND: std::time::Duration = std::time::Duration::from_secs(120);

/// The store's time against this machine's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreClock {
    /// The store's clock minus this machine's, at the reading.
    offset: chrono::Duration,
    /// Whether the store gave it (else this machine's clock stands in).
    pub from_store: bool,
}

impl StoreClock {
    /// This machine's clock (tests, and a store that refuses the probe's write).
    pub fn local() -> StoreClock {
        StoreClock {
            offset: chrono::Duration::zero(),
            from_store: false,
        }
    }

    /// Writes `_ravel/clock` (beside the store's tables, so that it makes no table exist) and
    /// reads back the time the store gave it. When the store refuses (a read-only credential),
    /// this machine's clock stands in, with a warning.
    pub async fn read(store: &dyn ObjectStore) -> StoreClock {
        let path = object_store::path::Path::from("_ravel/clock");
        let before = Utc::now();
        let written = async {
            store
                .put(&path, bytes::Bytes::from_static(b"{}").into())
                .await?;
            store.head(&path).await
        };
        match written.await {
            Ok(meta) => {
                let after = Utc::now();
                let local = before + (after - before) / 2;
                StoreClock {
                    offset: meta.last_modified - local,
                    from_store: true,
                }
            }
            Err(e) => {
                tracing::warn!(error = %crate::ErrorChain::new(&e), "the store's clock could not be read; ages are by this machine's clock");
                StoreClock::local()
            }
        }
    }

    /// The store's time now.
    pub fn now(&self) -> DateTime<Utc> {
        Utc::now() + self.offset
    }

    /// Seconds this machine's clock is behind the store's (negative: ahead).
    pub fn offset_s(&self) -> i64 {
        self.offset.num_seconds()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_local_store_shares_this_machines_clock() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::Store::create(dir.path().to_str().unwrap()).unwrap();
        let clock = StoreClock::read(store.object_store().as_ref()).await;
        assert!(clock.from_store);
        assert!(clock.offset_s().abs() <= 2, "{clock:?}");
        assert!(dir.path().join("_ravel/clock").exists());
    }
}
