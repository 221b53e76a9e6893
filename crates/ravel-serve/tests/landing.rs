//! What the service takes from a landing directory, run in-process with `once` on small tables:
//! never a store's own objects, each regular file once, no file that is still being written,
//! and a file that cannot load fails alone, whatever the reason, the table's first load
//! included.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use arrow::array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use ravel_layout::{ClusteringKey, Layout};
use ravel_serve::{Config, ServeOptions, Service, TableStatus};
use ravel_store::Store;
use tokio_util::sync::CancellationToken;

/// A table whose layout sorts by stream `s`, then key `k`, then time `t`.
async fn table(dir: &Path) -> (String, Store) {
    let url = dir.join("store").display().to_string();
    let store = Store::create(&url).unwrap();
    let layout = Layout {
        stream: Some("s".into()),
        time: Some("t".into()),
        clustering_key: Some(ClusteringKey {
            columns: vec!["k".into()],
            bucket_width: ravel_layout::BucketWidth::from_seconds(86_400).unwrap(),
        }),
        ..Layout::default()
    };
    ravel_testkit::set_layout(&store, "events", &layout).await;
    (url, store)
}

/// `rows` rows of the table's columns, keys from `first`, as a Parquet file at `path`.
fn rows(path: &Path, first: i64, rows: i64) {
    let keys: Vec<i64> = (first..first + rows).collect();
    let columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from_iter_values(
            keys.iter().map(|k| format!("s{}", k % 3)),
        )),
        Arc::new(Int64Array::from(keys.clone())),
        Arc::new(Int64Array::from_iter_values(keys.iter().map(|k| k * 1000))),
    ];
    write(path, &["s", "k", "t"], columns);
}

fn write(path: &Path, names: &[&str], columns: Vec<ArrayRef>) {
    let fields: Vec<Field> = (names.iter().zip(&columns))
        .map(|(n, c)| Field::new(*n, c.data_type().clone(), true))
        .collect();
    let batch = RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap();
    let file = std::fs::File::create(path).unwrap();
    let mut w = parquet::arrow::ArrowWriter::try_new(file, batch.schema(), None).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
}

fn config(store: &str, landing: &Path, extra: &str) -> Config {
    let text = format!(
        "poll_interval = \"100ms\"\n[[table]]\nstore = \"{store}\"\nname = \"events\"\nlanding = \"{}\"\npattern = \"*.parquet\"\nbatch_age = \"0s\"\ngc_interval = \"0s\"\n{extra}\n",
        landing.display()
    );
    Config::parse(&text, "serve.toml").unwrap()
}

/// `serve --once` on `config`, in-process, given at most a minute.
async fn once(config: Config) -> TableStatus {
    let tier = ravel_tier::Tier::detect().unwrap();
    let mut opts = ServeOptions::new(ravel_ingest::IngestOptions::from_tier(&tier));
    opts.once = true;
    let run = Service::new(config, opts).run(CancellationToken::new());
    let statuses = tokio::time::timeout(Duration::from_secs(60), run)
        .await
        .expect("--once returns");
    statuses.into_iter().next().unwrap()
}

fn landing(dir: &Path) -> PathBuf {
    let landing = dir.join("landing");
    std::fs::create_dir(&landing).unwrap();
    landing
}

#[test]
fn a_landing_that_is_holds_or_lies_in_a_store_is_refused_naming_both() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store").display().to_string();
    for landing in [
        dir.path().join("store"),
        dir.path().join("store/events"),
        dir.path().to_path_buf(),
    ] {
        let text = format!(
            "[[table]]\nstore = \"{store}\"\nname = \"events\"\nlanding = \"{}\"\npattern = \"*.parquet\"\n",
            landing.display()
        );
        let e = Config::parse(&text, "serve.toml").unwrap_err().to_string();
        assert!(
            e.contains(&format!("{:?}", landing.display().to_string()))
                && e.contains(&format!("the store {store:?}")),
            "{e}"
        );
    }
}

#[tokio::test]
async fn links_pipes_and_loops_are_left_out_with_a_note_and_every_file_loads_once() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = table(dir.path()).await;
    let landing = landing(dir.path());
    rows(&landing.join("a.parquet"), 0, 100);
    rows(&landing.join("b.parquet"), 100, 50);
    std::os::unix::fs::symlink(landing.join("a.parquet"), landing.join("again.parquet")).unwrap();
    std::os::unix::fs::symlink(".", landing.join("loop")).unwrap();
    std::os::unix::fs::symlink(landing.join("gone"), landing.join("dangling.parquet")).unwrap();
    std::fs::hard_link(landing.join("a.parquet"), landing.join("hard.parquet")).unwrap();
    let fifo = landing.join("pipe.parquet");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    assert!(made.unwrap().success());
    let s = once(config(&store, &landing, "")).await;
    assert_eq!((s.rows, s.pending_files), (150, 0), "{s:#?}");
    assert!(
        s.last_error.is_none() && s.failed_files.is_empty(),
        "{s:#?}"
    );
    let mut notes: Vec<(String, String)> = (s.skipped_files.iter())
        .map(|k| {
            (
                k.name.rsplit('/').next().unwrap().to_string(),
                k.reason.clone(),
            )
        })
        .collect();
    notes.sort();
    let names: Vec<&str> = notes.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "again.parquet",
            "dangling.parquet",
            "hard.parquet",
            "loop",
            "pipe.parquet"
        ],
        "{notes:?}"
    );
    for (name, why) in &notes[..2] {
        assert!(why.contains("a symbolic link"), "{name}: {why}");
    }
    assert!(notes[2].1.contains("a hard link to a.parquet"), "{notes:?}");
    assert!(notes[3].1.contains("a symbolic link"), "{notes:?}");
    assert!(notes[4].1.contains("a named pipe"), "{notes:?}");
    // Run again: nothing more.
    let s = once(config(&store, &landing, "")).await;
    assert_eq!((s.rows, s.loads), (150, 0), "{s:#?}");
}

#[tokio::test]
async fn a_file_of_another_schema_landing_first_fails_alone_and_the_others_load() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = table(dir.path()).await;
    let landing = landing(dir.path());
    // Columns the layout does not name, landed before the table's first file.
    let other: Vec<ArrayRef> = vec![Arc::new(Int64Array::from(vec![1, 2, 3]))];
    write(&landing.join("0-other.parquet"), &["x"], other);
    rows(&landing.join("1-a.parquet"), 0, 100);
    rows(&landing.join("2-b.parquet"), 100, 100);
    let s = once(config(&store, &landing, "")).await;
    assert_eq!(s.rows, 200, "{s:#?}");
    let failed: Vec<&str> = s.failed_files.iter().map(|f| f.name.as_str()).collect();
    assert!(
        failed.len() == 1 && failed[0].ends_with("0-other.parquet"),
        "{s:#?}"
    );
    assert!(s.last_error.is_none(), "{s:#?}");
}

#[tokio::test]
async fn a_missing_landing_is_a_standing_error_and_a_pattern_matching_nothing_is_told() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = table(dir.path()).await;
    let missing = dir.path().join("no-such-landing");
    let s = once(config(&store, &missing, "")).await;
    let error = s.last_error.clone().unwrap_or_default();
    assert!(
        error.contains("does not exist") && error.contains("no-such-landing"),
        "{s:#?}"
    );
    let landing = landing(dir.path());
    std::fs::write(landing.join("a.csv"), "x\n").unwrap();
    let s = once(config(&store, &landing, "")).await;
    assert!(s.last_error.is_none(), "{s:#?}");
    assert_eq!(s.unmatched_files, 1);
    assert!(
        s.next.reason.contains("none matching the pattern"),
        "{s:#?}"
    );
}

#[tokio::test]
async fn a_file_growing_in_the_landing_is_never_published_part_way() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = table(dir.path()).await;
    let landing = landing(dir.path());
    let path = landing.join("growing.tsv");
    let line = |k: i64| format!("s{}\t{k}\t{}\n", k % 3, k * 1000);
    std::fs::write(&path, (0..1000).map(line).collect::<String>()).unwrap();
    // Keep appending while the service runs; the file is whole once the writer stops.
    let writer = {
        let path = path.clone();
        std::thread::spawn(move || {
            for chunk in 1..40i64 {
                use std::io::Write;
                let mut f = std::fs::OpenOptions::new()
                    .append(true)
                    .open(&path)
                    .unwrap();
                let text: String = (chunk * 1000..chunk * 1000 + 1000).map(line).collect();
                f.write_all(text.as_bytes()).unwrap();
                std::thread::sleep(Duration::from_millis(30));
            }
        })
    };
    let mut cfg = config(&store, &landing, "settle = \"5s\"");
    cfg.tables[0].pattern = "*.tsv".into();
    let tsv = Schema::new(vec![
        Field::new("s", DataType::Utf8, true),
        Field::new("k", DataType::Int64, true),
        Field::new("t", DataType::Int64, true),
    ]);
    let tier = ravel_tier::Tier::detect().unwrap();
    let mut opts = ServeOptions::new(ravel_ingest::IngestOptions::from_tier(&tier));
    opts.once = true;
    opts.tsv.schema = Some(Arc::new(tsv));
    let run = Service::new(cfg, opts).run(CancellationToken::new());
    let s = tokio::time::timeout(Duration::from_secs(60), run)
        .await
        .unwrap()
        .remove(0);
    writer.join().unwrap();
    assert_eq!((s.rows, s.pending_files), (40_000, 0), "{s:#?}");
    assert!(s.replaced_files.is_empty(), "{s:#?}");
}

#[tokio::test]
async fn after_load_deletes_or_moves_a_file_once_its_version_committed_and_a_file_left_behind_at_the_next_poll()
 {
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = table(dir.path()).await;
    let landing = landing(dir.path());
    std::fs::create_dir(landing.join("2026-12-07")).unwrap();
    rows(&landing.join("2026-12-07/a.parquet"), 0, 100);
    rows(&landing.join("b.parquet"), 100, 50);
    // Loaded and kept: the state a service killed between its commit and its deletes leaves.
    let s = once(config(&store, &landing, "")).await;
    assert_eq!((s.rows, s.loads), (150, 1), "{s:#?}");
    assert!(landing.join("b.parquet").exists());
    // The next poll moves the files a version consumed, and loads nothing again.
    let moved = dir.path().join("loaded");
    let extra = format!("after_load = \"move:{}\"", moved.display());
    rows(&landing.join("c.parquet"), 150, 10);
    let s = once(config(&store, &landing, &extra)).await;
    assert_eq!((s.rows, s.last_error.clone()), (160, None), "{s:#?}");
    assert!(moved.join("2026-12-07/a.parquet").exists() && moved.join("b.parquet").exists());
    assert!(!landing.join("2026-12-07/a.parquet").exists());
    // c.parquet is moved at the poll after its own load.
    assert!(moved.join("c.parquet").exists() && !landing.join("c.parquet").exists());
    rows(&landing.join("d.parquet"), 160, 10);
    let s = once(config(&store, &landing, "after_load = \"delete\"")).await;
    assert_eq!(s.rows, 170, "{s:#?}");
    let left: Vec<_> = std::fs::read_dir(&landing)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        left,
        vec![std::ffi::OsString::from("2026-12-07")],
        "only the emptied directory is left"
    );
}

#[test]
fn after_load_may_not_move_files_into_a_landing_prefix_or_a_store() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display();
    for to in [format!("{d}/landing/done"), format!("{d}/store/moved")] {
        let text = format!(
            "[[table]]\nstore = \"{d}/store\"\nname = \"events\"\nlanding = \"{d}/landing\"\npattern = \"*.parquet\"\nafter_load = \"move:{to}\"\n"
        );
        let e = Config::parse(&text, "serve.toml").unwrap_err().to_string();
        assert!(e.contains("after_load") && e.contains(&to), "{e}");
    }
    let text = format!(
        "[[table]]\nstore = \"{d}/store\"\nname = \"events\"\nlanding = \"{d}/landing\"\npattern = \"*.parquet\"\nafter_load = \"archive\"\n"
    );
    let e = Config::parse(&text, "serve.toml").unwrap_err().to_string();
    assert!(e.contains("after_load") && e.contains("move:PREFIX"), "{e}");
}

#[tokio::test]
async fn a_cursor_lists_only_keys_after_those_consumed_longer_than_the_lookback_ago() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = table(dir.path()).await;
    let landing = landing(dir.path());
    for day in ["2026-12-06", "2026-12-07", "2026-12-08"] {
        std::fs::create_dir(landing.join(day)).unwrap();
    }
    rows(&landing.join("2026-12-06/a.parquet"), 0, 100);
    rows(&landing.join("2026-12-07/b.parquet"), 100, 100);
    // Within the lookback, the cursor stays where it was.
    let s = once(config(&store, &landing, "cursor_lookback = \"1h\"")).await;
    assert_eq!((s.rows, s.cursor.clone()), (200, None), "{s:#?}");
    let s = once(config(&store, &landing, "cursor_lookback = \"0s\"")).await;
    assert_eq!(s.cursor.as_deref(), Some("2026-12-07/b.parquet"), "{s:#?}");
    let kept = dir.path().join("store/events/_ravel/landing");
    assert_eq!(
        std::fs::read_dir(&kept).unwrap().count(),
        1,
        "the cursor is kept in the table"
    );
    // A key sorting before the cursor is not listed again (a writer later than the lookback);
    // a file that is not consumed (it fails) holds the cursor before it.
    rows(&landing.join("2026-12-06/late.parquet"), 200, 100);
    std::fs::write(landing.join("2026-12-08/a-bad.parquet"), b"not parquet").unwrap();
    rows(&landing.join("2026-12-08/c.parquet"), 300, 100);
    let s = once(config(&store, &landing, "cursor_lookback = \"0s\"")).await;
    assert_eq!(s.rows, 300, "{s:#?}");
    assert_eq!(s.failed_files.len(), 1, "{s:#?}");
    assert_eq!(s.cursor.as_deref(), Some("2026-12-07/b.parquet"), "{s:#?}");
    // Gone, the failed file no longer holds it.
    std::fs::remove_file(landing.join("2026-12-08/a-bad.parquet")).unwrap();
    let s = once(config(&store, &landing, "cursor_lookback = \"0s\"")).await;
    assert_eq!(s.cursor.as_deref(), Some("2026-12-08/c.parquet"), "{s:#?}");
    assert_eq!((s.rows, s.loads), (300, 0), "{s:#?}");
}

#[tokio::test]
async fn consumed_names_come_from_the_snapshot_not_from_every_versions_entry() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = table(dir.path()).await;
    let landing = landing(dir.path());
    for i in 0..12 {
        rows(&landing.join(format!("f{i:02}.parquet")), i * 10, 10);
    }
    // One file a batch: a version each, and a checkpoint among them.
    let s = once(config(&store, &landing, "batch_bytes = 1")).await;
    assert_eq!(s.rows, 120, "{s:#?}");
    // Every log entry a checkpoint covers goes, as a log cleanup would delete them.
    let log = dir.path().join("store/events/_delta_log");
    let last: serde_json::Value =
        serde_json::from_slice(&std::fs::read(log.join("_last_checkpoint")).unwrap()).unwrap();
    let checkpoint = last["version"].as_u64().unwrap();
    assert!(checkpoint >= 10, "{last}");
    for v in 0..checkpoint {
        std::fs::remove_file(log.join(format!("{v:020}.json"))).unwrap();
    }
    // A file replaced under a name the first version consumed is known as such.
    std::fs::remove_file(landing.join("f00.parquet")).unwrap();
    rows(&landing.join("f00.parquet"), 1000, 5);
    let s = once(config(&store, &landing, "")).await;
    assert_eq!((s.rows, s.pending_files), (120, 0), "{s:#?}");
    let replaced: Vec<&str> = s.replaced_files.iter().map(|r| r.name.as_str()).collect();
    assert!(
        replaced.len() == 1 && replaced[0].ends_with("f00.parquet"),
        "{s:#?}"
    );
    assert!(
        s.failed_files.is_empty() && s.last_error.is_none(),
        "{s:#?}"
    );
}

/// Sets `path`'s modification time to `age` ago.
fn age(path: &Path, age: Duration) {
    let file = std::fs::File::options().write(true).open(path).unwrap();
    file.set_modified(std::time::SystemTime::now() - age)
        .unwrap();
}

#[tokio::test]
async fn a_file_older_than_the_inputs_window_of_an_older_table_is_counted_and_never_loaded() {
    let dir = tempfile::tempdir().unwrap();
    let url = dir.path().join("store").display().to_string();
    let store = Store::create(&url).unwrap();
    let mut layout = Layout {
        stream: Some("s".into()),
        time: Some("t".into()),
        ..Layout::default()
    };
    layout.retention.inputs_s = 3;
    ravel_testkit::set_layout(&store, "events", &layout).await;
    let landing = landing(dir.path());
    // A new table takes a file a year old: it forgot no load yet.
    rows(&landing.join("a.parquet"), 0, 100);
    age(
        &landing.join("a.parquet"),
        Duration::from_secs(365 * 86_400),
    );
    let s = once(config(&url, &landing, "")).await;
    assert_eq!((s.rows, s.beyond_window_files), (100, 0), "{s:#?}");
    // Once the table is older than its window, a file older than the window that no version
    // it remembers consumed may be one it forgot: counted, never loaded, not a failure. So is
    // a.parquet, whose load the window forgot. A new file loads as ever.
    tokio::time::sleep(Duration::from_millis(3_500)).await;
    rows(&landing.join("b.parquet"), 100, 10);
    age(&landing.join("b.parquet"), Duration::from_secs(3_600));
    rows(&landing.join("c.parquet"), 110, 20);
    let s = once(config(&url, &landing, "")).await;
    assert_eq!(
        (
            s.rows,
            s.beyond_window_files,
            s.failures,
            s.last_error.clone()
        ),
        (120, 2, 0, None),
        "{s:#?}"
    );
    // A landing cursor passes them (they never load), and the next listing leaves them out.
    let s = once(config(&url, &landing, "cursor_lookback = \"0s\"")).await;
    let seen = (s.rows, s.beyond_window_files, s.cursor.as_deref());
    assert_eq!(seen, (120, 0, Some("c.parquet")), "{s:#?}");
}

/// A service that did not look at its table while other writers committed and the log window
/// cleaned the entries after the version it had read catches up from the checkpoint the log
/// starts at, and goes on loading.
#[tokio::test(flavor = "multi_thread")]
async fn a_service_left_behind_by_a_log_cleanup_reads_on_from_its_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let url = dir.path().join("store").display().to_string();
    let store = Store::create(&url).unwrap();
    let mut layout = Layout {
        stream: Some("s".into()),
        time: Some("t".into()),
        ..Layout::default()
    };
    layout.retention.log_s = 1;
    layout.maintenance.policy = ravel_layout::MaintenanceMode::None;
    ravel_testkit::set_layout(&store, "events", &layout).await;
    let landing = landing(dir.path());
    rows(&landing.join("a.parquet"), 0, 10);
    let text = format!(
        "poll_interval = \"8s\"\n[[table]]\nstore = \"{url}\"\nname = \"events\"\nlanding = \"{}\"\npattern = \"*.parquet\"\nbatch_age = \"0s\"\nsettle = \"0s\"\ngc_interval = \"0s\"\n",
        landing.display()
    );
    let tier = ravel_tier::Tier::detect().unwrap();
    let ingest = ravel_ingest::IngestOptions::from_tier(&tier);
    let service = Service::new(
        Config::parse(&text, "serve.toml").unwrap(),
        ServeOptions::new(ingest.clone()),
    );
    let shared = service.shared();
    let stop = CancellationToken::new();
    let others = async {
        let version = |v: u64| {
            let shared = shared.clone();
            async move {
                for _ in 0..400 {
                    if shared.statuses()[0].version == Some(v) {
                        return true;
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                false
            }
        };
        assert!(version(0).await, "the service loads a.parquet");
        // Between two of its polls: eleven loads by another writer (a checkpoint at version 10),
        // and a cleanup of every entry before it, the next one the service would read included.
        let elsewhere = dir.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        for i in 1..=11 {
            let path = elsewhere.join(format!("{i}.parquet"));
            rows(&path, 10 * i, 10);
            let format = ravel_loader::InputFormat::Parquet;
            ravel_loader::load_files(
                &store,
                "events",
                ingest.load.clone(),
                &[path],
                format,
                |_, _| {},
            )
            .await
            .unwrap();
        }
        tokio::time::sleep(Duration::from_millis(1_200)).await;
        let gc = ravel_gc::GcOptions::new(Duration::from_secs(1), false);
        let report = ravel_gc::gc(&store, "events", &gc).await.unwrap();
        assert!(report.log.deleted > 0, "{report:?}");
        assert!(version(11).await, "{:#?}", shared.statuses());
        rows(&landing.join("b.parquet"), 200, 5);
        assert!(version(12).await, "{:#?}", shared.statuses());
        assert_eq!(shared.statuses()[0].rows, 125);
        stop.cancel();
    };
    tokio::join!(service.run(stop.clone()), others);
}
