//! The log on a local store: versions, readers of old versions, conflicts, tables from before
//! the log.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Schema};
use object_store::ObjectStore;
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::{ObjectStoreExt, PutPayload};
use ravel_log::{Commit, Committed, Consumed, InputFile, LogError, Operation, TableLog};
use ravel_manifest::{MANIFEST_FORMAT, Manifest, ObjectEntry};
use ravel_store::TablePaths;

mod cleanup;

struct Fixture {
    _dir: tempfile::TempDir,
    store: Arc<dyn ObjectStore>,
    log: TableLog,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn ObjectStore> =
        Arc::new(LocalFileSystem::new_with_prefix(dir.path()).unwrap());
    let log = TableLog::new(store.clone(), TablePaths::new("t").unwrap());
    Fixture {
        _dir: dir,
        store,
        log,
    }
}

fn manifest(id: &str, objects: &[&str]) -> Manifest {
    Manifest {
        format: MANIFEST_FORMAT,
        load_id: id.into(),
        committed_at_ms: 1,
        layout_generation: 0,
        sort_key: vec![],
        schema: Schema::new(vec![Field::new("x", DataType::Int64, false)]),
        objects: objects
            .iter()
            .map(|o| ObjectEntry {
                key: format!("t/data/{o}.parquet"),
                rows: 10,
                bytes: 100,
                run: 0,
                first_key: None,
                last_key: None,
                ranges: BTreeMap::new(),
                delta_stats: None,
            })
            .collect(),
        blooms: None,
    }
}

impl Fixture {
    async fn put_manifest(&self, dir: &str, m: &Manifest) -> String {
        let key = format!("t/{dir}/{}.json", m.load_id);
        let bytes = serde_json::to_vec(m).unwrap();
        self.store
            .put(&Path::from(key.as_str()), PutPayload::from(bytes))
            .await
            .unwrap();
        key
    }

    async fn commit(
        &self,
        op: Operation,
        m: &Manifest,
        removes: &[&str],
    ) -> Result<Committed, LogError> {
        self.commit_consuming(op, m, removes, Consumed::default())
            .await
    }

    async fn commit_consuming(
        &self,
        op: Operation,
        m: &Manifest,
        removes: &[&str],
        consumed: Consumed,
    ) -> Result<Committed, LogError> {
        let key = self.put_manifest("_ravel/manifests", m).await;
        self.log
            .commit(&Commit {
                operation: op,
                manifest_key: key,
                manifest: m,
                orders: vec![None; m.objects.len()],
                chains: Vec::new(),
                removes: removes
                    .iter()
                    .map(|o| format!("t/data/{o}.parquet"))
                    .collect(),
                configuration: BTreeMap::new(),
                written_bytes: if op == Operation::Compaction { 250 } else { 0 },
                full: op == Operation::Compaction && removes.len() > 2,
                consumed,
            })
            .await
    }

    /// A compaction whose manifest `m` replaces the objects at store paths `removes`.
    async fn commit_removing(&self, m: &Manifest, removes: &[&str]) -> Result<Committed, LogError> {
        let key = self.put_manifest("_ravel/manifests", m).await;
        self.log
            .commit(&Commit {
                operation: Operation::Compaction,
                manifest_key: key,
                manifest: m,
                orders: vec![None; m.objects.len()],
                chains: Vec::new(),
                removes: removes.iter().map(|r| r.to_string()).collect(),
                configuration: BTreeMap::new(),
                written_bytes: 0,
                full: false,
                consumed: Consumed::default(),
            })
            .await
    }

    async fn live(&self, version: Option<u64>) -> Vec<String> {
        let s = match version {
            Some(v) => self.log.at(v).await.unwrap(),
            None => self.log.latest().await.unwrap(),
        };
        let mut keys: Vec<String> = self
            .log
            .manifests(&s)
            .await
            .unwrap()
            .iter()
            .flat_map(|m| m.objects().map(|(_, o)| o.key.clone()).collect::<Vec<_>>())
            .map(|k| {
                k.trim_start_matches("t/data/")
                    .trim_end_matches(".parquet")
                    .to_string()
            })
            .collect();
        keys.sort();
        keys
    }
}

#[tokio::test]
async fn loads_add_versions_and_old_versions_stay_readable() {
    let f = fixture();
    assert_eq!(f.log.latest().await.unwrap().version, None);
    let a = manifest("a", &["a1", "a2"]);
    assert_eq!(
        f.commit(Operation::Load, &a, &[]).await.unwrap(),
        Committed::Version(0)
    );
    let b = manifest("b", &["b1"]);
    assert_eq!(
        f.commit(Operation::Load, &b, &[]).await.unwrap(),
        Committed::Version(1)
    );
    assert_eq!(f.live(None).await, ["a1", "a2", "b1"]);
    assert_eq!(f.live(Some(0)).await, ["a1", "a2"]);
    // Ranks follow the commits: the first load's objects sort first among equal keys.
    let latest = f.log.latest().await.unwrap();
    let ms = f.log.manifests(&latest).await.unwrap();
    let orders: Vec<u64> = ms.iter().map(|m| m.order()).collect();
    assert_eq!(orders, [0, 1]);
    assert_eq!(ms[0].manifest.load_id, "a");
    // The entry is a Delta log entry: commitInfo, protocol and metaData first, then adds.
    let entry = f.log.entry(0).await.unwrap();
    assert_eq!(entry.commit_info().unwrap()["operation"], "WRITE");
    assert!(entry.actions[1].protocol.is_some() && entry.actions[2].meta_data.is_some());
    let add = entry.actions[3].add.as_ref().unwrap();
    assert_eq!((add.path.as_str(), add.size), ("data/a1.parquet", 100));
    // The second load changed neither schema nor settings: no metaData again.
    let second = f.log.entry(1).await.unwrap();
    assert!(second.actions.iter().all(|a| a.meta_data.is_none()));
    // A rerun of a committed load writes nothing; a load sharing one object is refused.
    match f.commit(Operation::Load, &a, &[]).await.unwrap() {
        Committed::AlreadyLive(p) => {
            assert_eq!(p.version, 1);
            assert!(
                p.manifest.ends_with(&format!("{}.json", a.load_id)),
                "{p:?}"
            );
            assert_eq!(p.load_id, a.load_id);
        }
        other => panic!("a rerun committed again: {other:?}"),
    }
    let c = manifest("c", &["c1", "a1"]);
    let err = f.commit(Operation::Load, &c, &[]).await.unwrap_err();
    assert!(matches!(err, LogError::AlreadyLive { .. }), "{err}");
    assert_eq!(f.log.versions().await.unwrap(), [0, 1]);
}

#[tokio::test]
async fn concurrent_loads_all_land() {
    let f = Arc::new(fixture());
    let mut tasks = Vec::new();
    for i in 0..12 {
        let f = f.clone();
        tasks.push(tokio::spawn(async move {
            let m = manifest(&format!("l{i:02}"), &[&format!("o{i:02}")]);
            f.commit(Operation::Load, &m, &[]).await.unwrap()
        }));
    }
    let mut versions = Vec::new();
    for t in tasks {
        match t.await.unwrap() {
            Committed::Version(v) => versions.push(v),
            other => panic!("{other:?}"),
        }
    }
    versions.sort_unstable();
    assert_eq!(versions, (0..12).collect::<Vec<u64>>());
    assert_eq!(f.live(None).await.len(), 12);
}

#[tokio::test]
async fn compaction_replaces_its_inputs_and_conflicts_when_one_left() {
    let f = fixture();
    f.commit(Operation::Load, &manifest("a", &["a1", "a2"]), &[])
        .await
        .unwrap();
    f.commit(Operation::Load, &manifest("b", &["b1"]), &[])
        .await
        .unwrap();
    let merged = manifest("m", &["m1"]);
    // A load lands while the compaction runs: it stays.
    f.commit(Operation::Load, &manifest("c", &["c1"]), &[])
        .await
        .unwrap();
    let done = f
        .commit(Operation::Compaction, &merged, &["a1", "a2", "b1"])
        .await
        .unwrap();
    assert_eq!(done, Committed::Version(3));
    // A merge's version is checkpointed: a reader starts there, replaying no load before it.
    let checkpoint = f.log.newest_checkpoint().await.unwrap().unwrap();
    assert_eq!(checkpoint.version, Some(3));
    assert_eq!(f.live(None).await, ["c1", "m1"]);
    assert_eq!(f.live(Some(2)).await, ["a1", "a2", "b1", "c1"]);
    let latest = f.log.latest().await.unwrap();
    assert_eq!(latest.removed().len(), 3);
    assert_eq!(latest.removed()["data/a1.parquet"].version, 3);
    // What the version references: its objects and their manifests; what readers of the
    // versions before it may open: the replaced objects, since the compaction's time.
    let live = f.log.manifests(&latest).await.unwrap();
    let refs = f.log.references(&latest, &live).await.unwrap();
    let mut now: Vec<&str> = refs.live.iter().map(String::as_str).collect();
    now.sort_unstable();
    assert_eq!(
        now,
        [
            "t/_ravel/manifests/c.json",
            "t/_ravel/manifests/m.json",
            "t/data/c1.parquet",
            "t/data/m1.parquet"
        ]
    );
    let mut gone: Vec<&str> = refs.removed.keys().map(String::as_str).collect();
    gone.sort_unstable();
    assert_eq!(
        gone,
        [
            "t/data/a1.parquet",
            "t/data/a2.parquet",
            "t/data/b1.parquet"
        ]
    );
    assert!(refs.removed.values().all(Option::is_some));
    assert!(refs.contains("t/data/a1.parquet") && !refs.contains("t/data/zz.parquet"));
    let entry = f.log.entry(3).await.unwrap();
    assert_eq!(entry.commit_info().unwrap()["operation"], "OPTIMIZE");
    let remove = entry
        .actions
        .iter()
        .find_map(|a| a.remove.as_ref())
        .unwrap();
    assert!(!remove.data_change);
    // A second compaction of the same inputs lost: nothing written.
    let other = manifest("n", &["n1"]);
    let err = f
        .commit(Operation::Compaction, &other, &["a1", "b1"])
        .await
        .unwrap_err();
    assert!(err.is_conflict(), "{err}");
    assert!(err.to_string().contains("rerun"), "{err}");
    assert_eq!(f.log.versions().await.unwrap(), [0, 1, 2, 3]);
}

#[tokio::test]
async fn a_table_from_before_the_log_reads_as_its_first_version() {
    let f = fixture();
    let old = [
        manifest("0001-x", &["x1", "x2"]),
        manifest("0002-y", &["y1"]),
    ];
    for m in &old {
        f.put_manifest("manifests", m).await;
    }
    let first = f.log.latest().await.unwrap();
    assert!(first.from_manifests);
    assert_eq!(first.version, Some(0));
    assert_eq!(f.live(None).await, ["x1", "x2", "y1"]);
    let v = f
        .commit(Operation::Load, &manifest("z", &["z1"]), &[])
        .await
        .unwrap();
    assert_eq!(v, Committed::Version(1));
    let convert = f.log.entry(0).await.unwrap();
    assert_eq!(convert.commit_info().unwrap()["operation"], "CONVERT");
    assert_eq!(f.live(Some(0)).await, ["x1", "x2", "y1"]);
    assert_eq!(f.live(None).await, ["x1", "x2", "y1", "z1"]);
    let latest = f.log.latest().await.unwrap();
    assert!(!latest.from_manifests);
    let ms = f.log.manifests(&latest).await.unwrap();
    assert_eq!(ms.last().unwrap().manifest.load_id, "z");
}

#[tokio::test]
async fn a_missing_entry_is_named() {
    let f = fixture();
    for i in 0..3 {
        let m = manifest(&format!("l{i}"), &[&format!("o{i}")]);
        f.commit(Operation::Load, &m, &[]).await.unwrap();
    }
    f.store
        .delete(&Path::from("t/_delta_log/00000000000000000001.json"))
        .await
        .unwrap();
    // Its checksum file is left: the entry was lost.
    let err = f.log.latest().await.unwrap_err();
    assert!(matches!(err, LogError::LostEntry { version: 1 }), "{err}");
    // Without it, the gap says which entry is missing.
    f.store
        .delete(&Path::from("t/_delta_log/00000000000000000001.crc"))
        .await
        .unwrap();
    let err = f.log.latest().await.unwrap_err();
    assert!(
        matches!(
            err,
            LogError::Gap {
                missing: 1,
                newest: 2
            }
        ),
        "{err}"
    );
}

#[tokio::test]
async fn readers_start_from_the_newest_checkpoint() {
    let f = fixture();
    for i in 0..20 {
        let m = manifest(&format!("l{i:02}"), &[&format!("o{i:02}")]);
        f.commit(Operation::Load, &m, &[]).await.unwrap();
    }
    // Version 20 replaces three objects: the checkpoint holds their tombstones.
    let done = f
        .commit(
            Operation::Compaction,
            &manifest("m", &["m1"]),
            &["o00", "o05", "o07"],
        )
        .await
        .unwrap();
    assert_eq!(done, Committed::Version(20));
    f.commit(Operation::Load, &manifest("z", &["z1"]), &[])
        .await
        .unwrap();
    for v in [10, 20] {
        let path = f.log.checkpoint_path(v);
        assert!(f.store.head(&path).await.is_ok(), "checkpoint {v}");
    }
    let last: serde_json::Value = serde_json::from_slice(
        &f.store
            .get(&Path::from("t/_delta_log/_last_checkpoint"))
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap(),
    )
    .unwrap();
    assert_eq!(last["version"], 20);
    assert_eq!(last["numOfAddFiles"], 18);

    let replayed = {
        let mut s = ravel_log::Snapshot::default();
        for e in f.log.history().await.unwrap().entries {
            s.apply(&e);
        }
        s
    };
    // An entry before the checkpoint that no longer parses: a reader starting from the
    // checkpoint never reads it.
    f.store
        .put(&f.log.table().log_entry(3), PutPayload::from("not json"))
        .await
        .unwrap();
    let latest = f.log.latest().await.unwrap();
    assert_eq!(latest.version, Some(21));
    assert_eq!(latest.files(), replayed.files());
    assert_eq!(
        latest.removed().keys().collect::<Vec<_>>(),
        replayed.removed().keys().collect::<Vec<_>>()
    );
    assert_eq!(latest.protocol, replayed.protocol);
    assert_eq!(latest.metadata, replayed.metadata);
    let tombstone = &latest.removed()["data/o05.parquet"];
    assert_eq!(tombstone.size, Some(100));
    assert!(tombstone.deletion_timestamp.is_some());
    assert_eq!(
        tombstone.manifest.as_deref(),
        Some("_ravel/manifests/l05.json")
    );
    assert_eq!(f.live(None).await.len(), 19);

    // A checkpoint that does not read is passed over: the whole log is replayed (and here
    // fails on the broken entry, which proves the replay).
    f.store
        .put(&f.log.checkpoint_path(20), PutPayload::from("not parquet"))
        .await
        .unwrap();
    assert!(matches!(f.log.latest().await, Err(LogError::Parse { .. })));
}

#[tokio::test]
async fn every_entry_carries_the_totals_and_a_full_compaction_starts_them_over() {
    let f = fixture();
    let totals = |f: &Fixture| {
        let log = f.log.clone();
        async move { log.totals(&log.latest().await.unwrap()).await.unwrap() }
    };
    for i in 0..3 {
        let m = manifest(&format!("l{i}"), &[&format!("o{i}a"), &format!("o{i}b")]);
        f.commit(Operation::Load, &m, &[]).await.unwrap();
    }
    let t = totals(&f).await;
    assert_eq!((t.loaded_bytes, t.loaded_since_full_bytes), (600, 600));
    assert_eq!(t.written_bytes, 0);
    // A partial merge (two inputs) adds its written bytes; loaded bytes stay.
    f.commit(
        Operation::Compaction,
        &manifest("m", &["m1"]),
        &["o0a", "o0b"],
    )
    .await
    .unwrap();
    let t = totals(&f).await;
    assert_eq!((t.written_bytes, t.written_since_full_bytes), (250, 250));
    assert_eq!(t.write_amplification(), 250.0 / 600.0);
    // A full compaction (the fixture marks merges of more than two inputs full).
    f.commit(
        Operation::Compaction,
        &manifest("n", &["n1"]),
        &["m1", "o1a", "o1b"],
    )
    .await
    .unwrap();
    let t = totals(&f).await;
    assert_eq!((t.loaded_bytes, t.written_bytes), (600, 500));
    assert_eq!(
        (t.loaded_since_full_bytes, t.written_since_full_bytes),
        (0, 0)
    );
    // At a checkpoint (version 10) no entry is replayed: the totals come from its entry.
    for i in 3..9 {
        let m = manifest(&format!("l{i}"), &[&format!("o{i}")]);
        f.commit(Operation::Load, &m, &[]).await.unwrap();
    }
    assert!(f.log.newest_checkpoint().await.unwrap().is_some());
    let t = totals(&f).await;
    assert_eq!(f.log.latest().await.unwrap().version, Some(10));
    assert_eq!((t.loaded_bytes, t.loaded_since_full_bytes), (1200, 600));
}

fn input(name: &str) -> InputFile {
    InputFile {
        name: format!("/landing/{name}"),
        size: 100,
        version: "1".into(),
        modified_ms: None,
    }
}

#[tokio::test]
async fn a_load_of_consumed_inputs_is_published_whatever_merged_since() {
    let f = fixture();
    let inputs = |names: &[&str]| Consumed::once(names.iter().map(|n| input(n)).collect());
    let a = manifest("a", &["a1", "a2"]);
    let v = f.commit_consuming(Operation::Load, &a, &[], inputs(&["x", "y"]));
    assert_eq!(v.await.unwrap(), Committed::Version(0));
    // A merge replaces the load's objects: the newest version holds none of them.
    let merged = manifest("m", &["m1"]);
    f.commit(Operation::Compaction, &merged, &["a1", "a2"])
        .await
        .unwrap();
    // A rerun stores other objects (another layout, another run cut) under another manifest:
    // the inputs, not the objects, say it is published, and by which version.
    let again = manifest("again", &["r1"]);
    let rerun = f.commit_consuming(Operation::Load, &again, &[], inputs(&["y", "x"]));
    match rerun.await.unwrap() {
        Committed::AlreadyLive(p) => {
            assert_eq!((p.version, p.load_id.as_str()), (0, "a"));
            assert!(p.manifest.ends_with("a.json"), "{}", p.manifest);
        }
        other => panic!("published again: {other:?}"),
    }
    // Some inputs consumed, some not: refused, naming the consumed one and its version.
    let partly = f.commit_consuming(Operation::Load, &again, &[], inputs(&["x", "z"]));
    let err = partly.await.unwrap_err();
    assert!(
        matches!(&err, LogError::PartlyConsumed { input, version: 0, new: 1 } if input.ends_with("/x")),
        "{err}"
    );
    // On purpose, they load again, and the version records the newer load.
    let reload = Consumed {
        reload: true,
        ..inputs(&["x", "y"])
    };
    let v = f.commit_consuming(Operation::Load, &again, &[], reload);
    assert_eq!(v.await.unwrap(), Committed::Version(2));
    let s = f.log.latest().await.unwrap();
    assert_eq!(s.consumed_by(&input("x")), Some(2));
    assert_eq!(s.consumed_by(&input("z")), None);
}

#[tokio::test]
async fn a_file_changed_under_a_consumed_name_is_refused_at_the_commit_unless_reloaded() {
    let f = fixture();
    let a = manifest("a", &["a1"]);
    let once = |input: InputFile| Consumed::once(vec![input]);
    f.commit_consuming(Operation::Load, &a, &[], once(input("x")))
        .await
        .unwrap();
    // The same name, another modification time: the name was loaded once already, whatever
    // merged since.
    let merged = manifest("m", &["m1"]);
    f.commit(Operation::Compaction, &merged, &["a1"])
        .await
        .unwrap();
    let touched = InputFile {
        version: "2".into(),
        ..input("x")
    };
    let b = manifest("b", &["b1"]);
    let err = f
        .commit_consuming(Operation::Load, &b, &[], once(touched.clone()))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, LogError::NameConsumed { input, version: 0 } if input.ends_with("/x"))
            && err.is_invalid_input(),
        "{err}"
    );
    assert!(err.to_string().contains("--reload"), "{err}");
    // Another name is another input; on purpose, the changed file loads too.
    let copy = f.commit_consuming(Operation::Load, &b, &[], once(input("x-copy")));
    assert_eq!(copy.await.unwrap(), Committed::Version(2));
    let reload = Consumed {
        reload: true,
        ..once(touched.clone())
    };
    let c = manifest("c", &["c1"]);
    let v = f.commit_consuming(Operation::Load, &c, &[], reload);
    assert_eq!(v.await.unwrap(), Committed::Version(3));
    let s = f.log.latest().await.unwrap();
    assert_eq!(s.name_consumed_by(&input("x")), Some(3));
    assert_eq!(s.consumed_by(&touched), Some(3));
    // Each input's name is one txn of its own; checkpoints keep them.
    f.log.write_checkpoint(&s).await.unwrap();
    let from_checkpoint = f.log.newest_checkpoint().await.unwrap().unwrap();
    assert_eq!(from_checkpoint.name_consumed_by(&input("x-copy")), Some(2));
}

#[tokio::test]
async fn consumed_inputs_survive_a_checkpoint() {
    let f = fixture();
    let consumed = Consumed::once(vec![input("x")]);
    let a = manifest("a", &["a1"]);
    f.commit_consuming(Operation::Load, &a, &[], consumed)
        .await
        .unwrap();
    let s = f.log.latest().await.unwrap();
    f.log.write_checkpoint(&s).await.unwrap();
    let from_checkpoint = f.log.newest_checkpoint().await.unwrap().unwrap();
    assert_eq!(from_checkpoint.txns(), s.txns());
    assert_eq!(from_checkpoint.consumed_by(&input("x")), Some(0));
}

/// Rewrites the checksum file of `version`: `change` edits its JSON.
async fn edit_checksum(f: &Fixture, version: u64, change: impl FnOnce(&mut serde_json::Value)) {
    let crc = Path::from(format!("t/_delta_log/{version:020}.crc"));
    let good = f.store.get(&crc).await.unwrap().bytes().await.unwrap();
    let mut json: serde_json::Value = serde_json::from_slice(&good).unwrap();
    change(&mut json);
    let bytes = serde_json::to_vec(&json).unwrap();
    f.store.put(&crc, PutPayload::from(bytes)).await.unwrap();
}

#[tokio::test]
async fn a_wrong_checksum_file_is_named_and_the_log_read() {
    let f = fixture();
    for i in 0..3 {
        let m = manifest(&format!("l{i}"), &[&format!("o{i}")]);
        f.commit(Operation::Load, &m, &[]).await.unwrap();
    }
    // The file records one file more than version 2 holds; its entry is the one it was
    // written for (the same txnId): the file is wrong, the log reads.
    edit_checksum(&f, 2, |crc| crc["numFiles"] = serde_json::json!(4)).await;
    let s = f.log.latest().await.unwrap();
    assert_eq!((s.version, s.files().len()), (Some(2), 3));
    let wrong = s.wrong_checksum.clone().expect("named");
    assert_eq!(wrong.culprit, ravel_log::Culprit::ChecksumFile);
    let said = wrong.to_string();
    assert!(
        said.starts_with("checksum file t/_delta_log/00000000000000000002.crc records numFiles 4 (3 in the log replayed) for version 2")
            && said.contains("the checksum file is wrong"),
        "{said}"
    );
    // Read from a checkpoint of that version: the checkpoint is not blamed.
    f.log.write_checkpoint(&s).await.unwrap();
    let s = f.log.latest().await.unwrap();
    assert_eq!(s.files().len(), 3);
    assert!(s.damaged_checkpoint.is_none());
    assert!(s.wrong_checksum.is_some());
    // Every stored file is weighed, not only the newest.
    edit_checksum(&f, 0, |crc| crc["tableSizeBytes"] = serde_json::json!(7)).await;
    let history = f.log.history().await.unwrap();
    let found = f.log.checksum_disagreements(&history).await.unwrap();
    let versions: Vec<u64> = found.iter().map(|d| d.version).collect();
    assert_eq!(versions, [0, 2]);
    assert!(
        found[0]
            .finding()
            .starts_with("records tableSizeBytes 7 (100 in the log replayed)")
    );
}

#[tokio::test]
async fn a_checksum_file_whose_entry_another_commit_replaced_refuses_reads() {
    let f = fixture();
    for i in 0..3 {
        let m = manifest(&format!("l{i}"), &[&format!("o{i}")]);
        f.commit(Operation::Load, &m, &[]).await.unwrap();
    }
    // Another writer's entry 2 in place of ravel's (a store without conditional creates):
    // version 2 as the checksum file recorded it is lost.
    let other = r#"{"commitInfo":{"operation":"WRITE","txnId":"another"}}"#;
    f.store
        .put(
            &Path::from("t/_delta_log/00000000000000000002.json"),
            PutPayload::from(format!("{other}\n").into_bytes()),
        )
        .await
        .unwrap();
    let err = f.log.latest().await.unwrap_err();
    assert!(err.is_damage(), "{err}");
    let said = err.to_string();
    assert!(
        said.starts_with("checksum file t/_delta_log/00000000000000000002.crc records numFiles 3 (2 in the log replayed)")
            && said.contains("the entry is not the one it was written for"),
        "{said}"
    );
    // A file that names no commit cannot tell: reads refuse, naming the file.
    edit_checksum(&f, 2, |crc| {
        crc.as_object_mut().unwrap().remove("txnId");
    })
    .await;
    let err = f.log.latest().await.unwrap_err();
    let said = err.to_string();
    assert!(
        matches!(&err, LogError::ChecksumDisagrees(d) if d.culprit == ravel_log::Culprit::Unknown)
            && said.contains("00000000000000000002.crc")
            && said.contains("delete the checksum file if the log is intact"),
        "{said}"
    );
}

#[tokio::test]
async fn a_lost_newest_entry_refuses_reads() {
    let f = fixture();
    for i in 0..3 {
        let m = manifest(&format!("l{i}"), &[&format!("o{i}")]);
        f.commit(Operation::Load, &m, &[]).await.unwrap();
    }
    // The newest entry deleted, its checksum file left: the version is lost, not silently
    // older.
    f.store
        .delete(&Path::from("t/_delta_log/00000000000000000002.json"))
        .await
        .unwrap();
    for err in [
        f.log.latest().await.unwrap_err(),
        f.log.history().await.unwrap_err(),
    ] {
        assert!(
            matches!(err, LogError::LostEntry { version: 2 }) && err.is_damage(),
            "{err}"
        );
    }
    let m = manifest("l3", &["o3"]);
    let err = f.commit(Operation::Load, &m, &[]).await.unwrap_err();
    assert!(matches!(err, LogError::LostEntry { version: 2 }), "{err}");
}

#[tokio::test]
async fn a_checkpoint_holds_every_action_past_one_batch() {
    let f = fixture();
    let objects: Vec<String> = (0..1500).map(|i| format!("o{i:04}")).collect();
    let names: Vec<&str> = objects.iter().map(String::as_str).collect();
    let m = manifest("big", &names);
    f.commit(Operation::Load, &m, &[]).await.unwrap();
    let s = f.log.latest().await.unwrap();
    f.log.write_checkpoint(&s).await.unwrap();
    let read = f.log.newest_checkpoint().await.unwrap().unwrap();
    assert_eq!(read.files().len(), 1500);
}

/// A commit's version ends the table's partitioning: it must not land while an object another
/// writer added partitioned stays live, whoever added it first; a version that removes every
/// such object lands.
#[tokio::test]
async fn a_commit_that_would_leave_a_partitioned_object_behind_is_a_conflict() {
    let f = fixture();
    f.commit(Operation::Load, &manifest("a", &["a1"]), &[])
        .await
        .unwrap();
    // Another writer's append: an object whose column `x` is in its partition values.
    let add = serde_json::json!({"add": {
        "path": "x=7/part-0.parquet", "partitionValues": {"x": "7"}, "size": 100,
        "modificationTime": 1, "dataChange": true,
    }});
    let entry = format!("{}\n{add}\n", serde_json::json!({"commitInfo": {}}));
    f.store
        .put(
            &Path::from("t/_delta_log/00000000000000000001.json"),
            PutPayload::from(entry),
        )
        .await
        .unwrap();
    let err = f
        .commit(Operation::Load, &manifest("b", &["b1"]), &[])
        .await
        .unwrap_err();
    assert!(
        matches!(&err, LogError::PartitionedLeftBehind { key, version: 1, columns }
            if key == "t/x=7/part-0.parquet" && columns == &["x"]),
        "{err}"
    );
    assert!(err.is_conflict(), "{err}");
    let err = f
        .commit(Operation::Compaction, &manifest("m", &["m1"]), &["a1"])
        .await
        .unwrap_err();
    assert!(err.is_conflict(), "{err}");
    assert_eq!(f.log.versions().await.unwrap(), [0, 1], "nothing published");
    // Its adoption removes it: that version lands, and the load after it.
    let adopted = f
        .commit_removing(&manifest("m", &["m1"]), &["t/x=7/part-0.parquet"])
        .await
        .unwrap();
    assert_eq!(adopted, Committed::Version(2));
    f.commit(Operation::Load, &manifest("b", &["b1"]), &[])
        .await
        .unwrap();
    assert_eq!(f.live(None).await, ["a1", "b1", "m1"]);
}
