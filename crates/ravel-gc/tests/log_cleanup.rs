//! `gc` deletes the log files the table's log window expired, as Delta's expired-log cleanup
//! does: on a local store and on a real S3 server (s3s-fs, in-process). The table's window is
//! set to 1 s in its metadata and the test waits past it. Objects a cleaned entry removed are
//! still found and deleted after the retention; live objects and the manifests the remaining
//! log names stay.

use std::collections::BTreeMap;
use std::time::Duration;

use object_store::ObjectStoreExt;
use object_store::path::Path;
use ravel_gc::{GcOptions, GcReport, gc};
use ravel_log::{Commit, Consumed, LogError, Operation, TableLog};
use ravel_manifest::{MANIFEST_FORMAT, Manifest, ObjectEntry};
use ravel_store::{Store, TablePaths};

/// A table's log and the store it is in.
struct Table {
    store: Store,
    log: TableLog,
}

impl Table {
    fn new(store: Store) -> Table {
        let log = TableLog::new(store.object_store().clone(), TablePaths::new("t").unwrap());
        Table { store, log }
    }

    async fn put(&self, key: &str, bytes: Vec<u8>) {
        let os = self.store.object_store();
        os.put(&Path::from(key), bytes.into()).await.unwrap();
    }

    async fn exists(&self, key: &str) -> bool {
        self.store
            .object_store()
            .head(&Path::from(key))
            .await
            .is_ok()
    }

    /// Stores the objects `names` and commits them, replacing `removes`, with a log window of
    /// 1 s.
    async fn commit(&self, id: &str, names: &[&str], removes: &[&str]) {
        let mut objects = Vec::new();
        for n in names {
            let key = format!("t/data/{n}.parquet");
            self.put(&key, b"abc".to_vec()).await;
            objects.push(ObjectEntry {
                key,
                rows: 1,
                bytes: 3,
                run: 0,
                first_key: None,
                last_key: None,
                ranges: BTreeMap::new(),
                delta_stats: None,
            });
        }
        let m = Manifest {
            format: MANIFEST_FORMAT,
            load_id: id.into(),
            committed_at_ms: 1,
            layout_generation: 0,
            sort_key: vec![],
            schema: arrow::datatypes::Schema::empty(),
            objects,
            blooms: None,
        };
        let manifest_key = format!("t/_ravel/manifests/{id}.json");
        self.put(&manifest_key, serde_json::to_vec(&m).unwrap())
            .await;
        let window = (ravel_log::LOG_PROPERTY.to_string(), ravel_log::interval(1));
        let operation = match removes.is_empty() {
            true => Operation::Load,
            false => Operation::Compaction,
        };
        self.log
            .commit(&Commit {
                operation,
                manifest_key,
                manifest: &m,
                orders: vec![None; names.len()],
                chains: Vec::new(),
                removes: removes
                    .iter()
                    .map(|r| format!("t/data/{r}.parquet"))
                    .collect(),
                configuration: BTreeMap::from([window]),
                written_bytes: 0,
                full: false,
                consumed: Consumed::default(),
            })
            .await
            .unwrap();
    }

    /// `n` loads of one object each, from `first` on.
    async fn loads(&self, first: usize, n: usize) {
        for i in first..first + n {
            self.commit(&format!("l{i:02}"), &[&format!("o{i:02}")], &[])
                .await;
        }
    }

    async fn live(&self) -> Vec<String> {
        let s = self.log.latest().await.unwrap();
        s.files().keys().cloned().collect()
    }

    async fn gc(&self, older_than_s: u64, dry_run: bool) -> GcReport {
        let opts = GcOptions::new(Duration::from_secs(older_than_s), dry_run);
        gc(&self.store, "t", &opts).await.unwrap()
    }
}

/// Waits past the 1 s log window.
async fn past_the_window() {
    tokio::time::sleep(Duration::from_millis(2100)).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn gc_deletes_the_expired_log_and_collects_what_cleaned_entries_removed() {
    let dir = tempfile::tempdir().unwrap();
    let t = Table::new(Store::create(dir.path().to_str().unwrap()).unwrap());
    // Version 12 merges two objects (a checkpoint, as after every merge); 13..24 load.
    t.loads(0, 12).await;
    t.commit("m", &["m1"], &["o01", "o02"]).await;
    t.loads(13, 12).await;
    let live = t.live().await;
    past_the_window().await;

    let dry = t.gc(3600, true).await;
    assert_eq!(dry.log.window_s, 1);
    assert_eq!(dry.log.starts_at, Some(20));
    // Versions 0..19: an entry and a checksum file each, and the checkpoints of 10 and 12.
    assert_eq!((dry.log.expired, dry.log.deleted), (42, 0));
    assert!(t.exists("t/_delta_log/00000000000000000000.json").await);

    let r = t.gc(3600, false).await;
    assert_eq!(
        (r.log.deleted, r.log.deleted_bytes),
        (42, dry.log.expired_bytes)
    );
    assert!(!t.exists("t/_delta_log/00000000000000000019.json").await);
    assert!(
        t.exists("t/_delta_log/00000000000000000020.checkpoint.parquet")
            .await
    );
    assert!(t.exists("t/_delta_log/_last_checkpoint").await);
    assert_eq!(t.live().await, live);
    assert!(matches!(
        t.log.at(12).await,
        Err(LogError::Cleaned {
            version: 12,
            oldest: 20
        })
    ));
    // The merged objects left within the retention (the checkpoint's tombstones date them).
    for o in ["o01", "o02"] {
        assert!(t.exists(&format!("t/data/{o}.parquet")).await, "{o}");
    }
    let again = t.gc(0, false).await;
    assert_eq!(again.log.deleted, 0);
    let gone: Vec<&str> = again.unreferenced.iter().map(|u| u.key.as_str()).collect();
    assert_eq!(gone, ["t/data/o01.parquet", "t/data/o02.parquet"]);
    assert!(again.unreferenced.iter().all(|u| u.deleted && u.removed));
    for path in &live {
        assert!(t.exists(&format!("t/{path}")).await, "{path} is live");
    }
    let manifests = t
        .store
        .object_store()
        .list(Some(&Path::from("t/_ravel/manifests")));
    let manifests: Vec<_> = futures::TryStreamExt::try_collect::<Vec<_>>(manifests)
        .await
        .unwrap();
    assert_eq!(
        manifests.len(),
        25,
        "every manifest the log still names stays"
    );
    assert_eq!(t.live().await, live);
}

#[tokio::test(flavor = "multi_thread")]
async fn on_s3() {
    let server = ravel_testkit::S3Server::start();
    let t = Table::new(server.store("w"));
    t.loads(0, 12).await;
    let live = t.live().await;
    past_the_window().await;
    let r = t.gc(3600, false).await;
    // Versions 0..9, an entry and a checksum file each; the log starts at checkpoint 10.
    assert_eq!((r.log.starts_at, r.log.deleted), (Some(10), 20));
    assert!(r.log.deleted_bytes > 0);
    assert!(!t.exists("t/_delta_log/00000000000000000009.json").await);
    assert!(t.exists("t/_delta_log/00000000000000000010.json").await);
    assert_eq!(t.live().await, live);
    assert_eq!(t.log.versions().await.unwrap(), [10, 11]);
    assert!(matches!(
        t.log.at(9).await,
        Err(LogError::Cleaned {
            version: 9,
            oldest: 10
        })
    ));
    assert_eq!(t.gc(3600, false).await.log.deleted, 0);
    t.loads(12, 1).await;
    assert_eq!(t.live().await.len(), live.len() + 1);
}
