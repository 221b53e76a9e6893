//! The log window's cleanup on a local store: which files it deletes, in which order, and what
//! readers read after it (the newest version, versions from the checkpoint the log starts at,
//! and a clear error for older ones); a cleanup killed after any of its deletes leaves a log
//! that reads the same table; the lost-entry rule neither fires on a cleaned log nor misses a
//! lost newest entry. "Now" is passed a day ahead of the clock instead of backdating files.

use std::collections::BTreeMap;
use std::path::Path as FsPath;
use std::sync::Arc;

use futures::TryStreamExt;
use object_store::ObjectStoreExt;
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::{ObjectStore, PutPayload};
use ravel_log::{ExpiredLog, LogError, Operation, TableLog};
use ravel_store::TablePaths;

use crate::{Fixture, fixture, manifest};

/// The table of the store in `dir`.
fn fixture_at(dir: tempfile::TempDir) -> Fixture {
    let store: Arc<dyn ObjectStore> =
        Arc::new(LocalFileSystem::new_with_prefix(dir.path()).unwrap());
    let log = TableLog::new(store.clone(), TablePaths::new("t").unwrap());
    Fixture {
        _dir: dir,
        store,
        log,
    }
}

const HOUR_MS: i64 = 3_600_000;

fn a_day_ahead() -> i64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    now.as_millis() as i64 + 24 * HOUR_MS
}

/// 25 versions: loads, and at 20 a compaction replacing three objects (checkpoints at 10, 20).
async fn table() -> Fixture {
    let f = fixture();
    for i in 0..20 {
        let m = manifest(&format!("l{i:02}"), &[&format!("o{i:02}")]);
        f.commit(Operation::Load, &m, &[]).await.unwrap();
    }
    let m = manifest("m", &["m1"]);
    f.commit(Operation::Compaction, &m, &["o00", "o05", "o07"])
        .await
        .unwrap();
    for i in 21..25 {
        let m = manifest(&format!("l{i:02}"), &[&format!("o{i:02}")]);
        f.commit(Operation::Load, &m, &[]).await.unwrap();
    }
    f
}

/// The files of `_delta_log`, by name.
async fn log_files(store: &dyn ObjectStore) -> Vec<String> {
    let mut names: Vec<String> = store
        .list(Some(&Path::from("t/_delta_log")))
        .map_ok(|m| m.location.filename().unwrap().to_string())
        .try_collect()
        .await
        .unwrap();
    names.sort();
    names
}

/// Each object of the table's newest version with its size, from the log.
async fn objects(log: &TableLog) -> BTreeMap<String, u64> {
    let s = log.latest().await.unwrap();
    s.files().iter().map(|(p, a)| (p.clone(), a.size)).collect()
}

async fn expired(log: &TableLog) -> ExpiredLog {
    log.expired_log(a_day_ahead(), HOUR_MS).await.unwrap()
}

#[tokio::test]
async fn a_cleaned_log_starts_at_its_newest_expired_checkpoint_and_reads_as_before() {
    let f = table().await;
    // Nothing is a day old yet.
    let now = a_day_ahead() - 24 * HOUR_MS;
    let none = f.log.expired_log(now, HOUR_MS).await.unwrap();
    assert_eq!(none, ExpiredLog::default());

    let before = objects(&f.log).await;
    let at_22 = f.live(Some(22)).await;
    let plan = expired(&f.log).await;
    assert_eq!(plan.checkpoint, Some(20));
    assert!(plan.refused.is_none());
    // Oldest version first; of each, the checksum file, the checkpoint, then the entry.
    let names: Vec<&str> = plan.files.iter().map(|f| name(&f.key)).collect();
    let mut want = Vec::new();
    for v in 0..20u64 {
        want.push(format!("{v:020}.crc"));
        if v == 10 {
            want.push(format!("{v:020}.checkpoint.parquet"));
        }
        want.push(format!("{v:020}.json"));
    }
    assert_eq!(names, want);

    let deleted = f.log.delete_expired(&plan).await.unwrap();
    assert_eq!(deleted.files, 41);
    assert_eq!(deleted.bytes, plan.bytes());
    let left = log_files(f.store.as_ref()).await;
    assert!(
        left.iter()
            .all(|n| n.as_str() >= "00000000000000000020" || n == "_last_checkpoint")
    );
    assert!(left.contains(&format!("{:020}.checkpoint.parquet", 20)));

    assert_eq!(objects(&f.log).await, before);
    assert_eq!(f.live(Some(22)).await, at_22);
    assert_eq!(f.live(Some(20)).await.len(), 18);
    let err = f.log.at(5).await.unwrap_err();
    assert!(
        matches!(
            err,
            LogError::Cleaned {
                version: 5,
                oldest: 20
            }
        ) && !err.is_damage(),
        "{err}"
    );
    assert!(
        err.to_string()
            .contains("oldest version still readable is 20"),
        "{err}"
    );
    assert!(matches!(
        f.log.at(25).await,
        Err(LogError::NoSuchVersion(25))
    ));
    assert_eq!(
        f.log.versions().await.unwrap(),
        (20..25).collect::<Vec<_>>()
    );
    let history = f.log.history().await.unwrap();
    assert_eq!(history.oldest(), Some(20));
    assert_eq!(history.len(), 5);
    let replayed = history.replay();
    assert_eq!(replayed.files(), f.log.latest().await.unwrap().files());
    assert!(
        f.log
            .checksum_disagreements(&history)
            .await
            .unwrap()
            .is_empty()
    );
    // The tombstones of the compaction stay (the files window has not passed).
    assert!(replayed.removed().contains_key("data/o05.parquet"));

    // Commits go on; a second cleanup finds nothing more to delete.
    let m = manifest("l25", &["o25"]);
    f.commit(Operation::Load, &m, &[]).await.unwrap();
    assert_eq!(f.live(None).await.len(), before.len() + 1);
    assert_eq!(expired(&f.log).await.files, Vec::new());
}

fn name(key: &str) -> &str {
    key.rsplit('/').next().unwrap()
}

#[tokio::test]
async fn the_lost_entry_rule_holds_on_a_cleaned_log() {
    let f = table().await;
    let plan = expired(&f.log).await;
    // A checksum file below the start whose entry is gone (an engine that deletes entries
    // first, or files a cleanup left): no lost entry.
    let kept = f
        .store
        .get(&f.log.checksum_path(3))
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    f.log.delete_expired(&plan).await.unwrap();
    f.store
        .put(&f.log.checksum_path(3), PutPayload::from(kept))
        .await
        .unwrap();
    assert_eq!(f.log.latest().await.unwrap().version, Some(24));
    assert_eq!(f.log.history().await.unwrap().oldest(), Some(20));
    assert!(matches!(
        f.log.at(3).await,
        Err(LogError::Cleaned {
            version: 3,
            oldest: 20
        })
    ));

    // An entry missing after the checkpoint the log starts at, its checksum file gone too: a
    // gap no checkpoint explains.
    let crc_22 = f.log.checksum_path(22);
    let entry_22 = f.log.table().log_entry(22);
    let saved = f.store.get(&entry_22).await.unwrap().bytes().await.unwrap();
    f.store.delete(&crc_22).await.unwrap();
    f.store.delete(&entry_22).await.unwrap();
    let err = f.log.history().await.unwrap_err();
    assert!(
        matches!(
            err,
            LogError::Gap {
                missing: 22,
                newest: 24
            }
        ),
        "{err}"
    );
    f.store
        .put(&entry_22, PutPayload::from(saved))
        .await
        .unwrap();

    // The newest entry deleted, its checksum file kept: lost, cleaned log or not.
    f.store.delete(&f.log.table().log_entry(24)).await.unwrap();
    for err in [
        f.log.latest().await.unwrap_err(),
        f.log.history().await.unwrap_err(),
    ] {
        assert!(
            matches!(err, LogError::LostEntry { version: 24 }) && err.is_damage(),
            "{err}"
        );
    }
}

#[tokio::test]
async fn a_checkpoint_that_disagrees_with_the_log_is_never_cleaned_to() {
    let f = table().await;
    // Checkpoint 20 rewritten without one of its objects.
    let mut actions = f.log.checkpoint_entry(20).await.unwrap().actions;
    let dropped = actions.iter().position(|a| a.add.is_some()).unwrap();
    actions.remove(dropped);
    let bytes = ravel_log::encode_checkpoint(&actions).unwrap();
    f.store
        .put(&f.log.checkpoint_path(20), PutPayload::from(bytes))
        .await
        .unwrap();
    let plan = expired(&f.log).await;
    assert_eq!((plan.checkpoint, plan.files.len()), (None, 0));
    let why = plan.refused.unwrap();
    assert!(
        why.contains("holds 17 object(s) and the log replayed to version 20 18"),
        "{why}"
    );
}

/// Copies the directory tree `from` to `to`.
fn copy_tree(from: &FsPath, to: &FsPath) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), target).unwrap();
        }
    }
}

/// A cleanup killed after each of its deletes (the first `k` files of its order gone): the log
/// reads the same objects at the newest version and at every version from 20, verify's replay
/// agrees, and the next cleanup finishes the work.
#[tokio::test]
async fn a_cleanup_killed_after_any_delete_leaves_a_log_that_reads_the_same_table() {
    let f = table().await;
    let before = objects(&f.log).await;
    let plan = expired(&f.log).await;
    let at: Vec<Vec<String>> = futures::future::join_all((20..25).map(|v| f.live(Some(v)))).await;
    for k in 0..=plan.files.len() {
        let dir = tempfile::tempdir().unwrap();
        copy_tree(f._dir.path(), dir.path());
        let copy = fixture_at(dir);
        let killed = ExpiredLog {
            files: plan.files[..k].to_vec(),
            ..plan.clone()
        };
        copy.log.delete_expired(&killed).await.unwrap();
        let case = format!("killed after {k} of {} deletes", plan.files.len());
        assert_eq!(objects(&copy.log).await, before, "{case}");
        let history = copy.log.history().await.expect(&case);
        assert_eq!(
            history.replay().files(),
            copy.log.latest().await.unwrap().files(),
            "{case}"
        );
        assert!(
            copy.log
                .checksum_disagreements(&history)
                .await
                .unwrap()
                .is_empty(),
            "{case}"
        );
        for (v, live) in (20..25).zip(&at) {
            assert_eq!(&copy.live(Some(v)).await, live, "{case}, version {v}");
        }
        // The next cleanup resumes: the log then starts at checkpoint 20.
        let rest = expired(&copy.log).await;
        assert_eq!(rest.files.len(), plan.files.len() - k, "{case}");
        copy.log.delete_expired(&rest).await.unwrap();
        assert_eq!(
            copy.log.history().await.unwrap().oldest(),
            Some(20),
            "{case}"
        );
        assert_eq!(objects(&copy.log).await, before, "{case}");
    }
}
