//! The ingestion call: a load followed by the table's maintenance policy, one report; a rerun
//! names the load that published the rows; a table without a clustering key is loaded and
//! has nothing to maintain.

use std::path::{Path, PathBuf};

use ravel_hits::{GenOptions, write_generated};
use ravel_ingest::{IngestOptions, Loaded, Maintained, ingest};
use ravel_layout::{Maintenance, MaintenanceMode};
use ravel_loader::{Files, InputFormat, LoadOptions};
use ravel_store::Store;

fn hits(dir: &Path, name: &str, rows: u64, seed: u64) -> PathBuf {
    let path = dir.join(name);
    let opts = GenOptions {
        rows,
        seed,
        batch_rows: 4096,
        ..GenOptions::default()
    };
    write_generated(opts, &path, |_| {}).unwrap();
    path
}

fn options() -> IngestOptions {
    let mut load = LoadOptions::from_tier(&ravel_tier::Tier::detect().unwrap());
    load.object_bytes = 100_000;
    load.load_budget = 200_000_000;
    IngestOptions::new(load)
}

async fn store_with(dir: &Path, policy: Option<MaintenanceMode>) -> Store {
    let store = Store::create(dir.join("store").to_str().unwrap()).unwrap();
    let mut layout = ravel_hits::layout();
    if let Some(policy) = policy {
        layout.maintenance = Maintenance {
            policy,
            ..layout.maintenance
        };
    } else {
        layout.clustering_key = None;
    }
    ravel_testkit::set_layout(&store, "hits", &layout).await;
    store
}

#[tokio::test(flavor = "multi_thread")]
async fn a_load_is_maintained_and_its_rerun_names_the_load_that_published_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with(dir.path(), Some(MaintenanceMode::Full)).await;
    let first = [hits(dir.path(), "a.parquet", 6_000, 1)];
    let second = [hits(dir.path(), "b.parquet", 6_000, 2)];
    let opts = options();
    let a = ingest(
        &store,
        "hits",
        &Files::new(&first, InputFormat::Parquet),
        &opts,
        |_, _| {},
    )
    .await
    .unwrap();
    let b = ingest(
        &store,
        "hits",
        &Files::new(&second, InputFormat::Parquet),
        &opts,
        |_, _| {},
    )
    .await
    .unwrap();
    assert_eq!((a.rows, b.rows), (6_000, 6_000));
    assert!(matches!(b.loaded, Loaded::Runs(_)));
    // The full policy merged the two loads into one sequence.
    let merged = b.maintenance.report().expect("the policy ran");
    assert_eq!(merged.depth_after, 1, "{merged:?}");
    assert!(merged.steps > 0);
    // Run again, sorted this time: nothing published, and the published load is named.
    let again = ingest(
        &store,
        "hits",
        &Files::new(&second, InputFormat::Parquet),
        &opts.clone().sorted(true),
        |_, _| {},
    )
    .await
    .unwrap();
    assert!(again.already_published);
    assert_eq!((again.rows, again.objects), (0, 0));
    assert_eq!(again.load_id, b.load_id);
    assert_eq!(again.version, b.version);
    assert!(matches!(again.loaded, Loaded::Sorted(_)));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_table_without_a_clustering_key_is_loaded_and_has_nothing_to_maintain() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with(dir.path(), None).await;
    let input = [hits(dir.path(), "a.parquet", 3_000, 3)];
    let files = Files::new(&input, InputFormat::Parquet);
    let report = ingest(&store, "hits", &files, &options(), |_, _| {})
        .await
        .unwrap();
    assert_eq!(report.rows, 3_000);
    assert!(matches!(report.maintenance, Maintained::NotClustered));
    // Sorted needs a clustering key: refused as bad input, nothing published.
    let input = [hits(dir.path(), "b.parquet", 3_000, 4)];
    let files = Files::new(&input, InputFormat::Parquet);
    let err = ingest(&store, "hits", &files, &options().sorted(true), |_, _| {})
        .await
        .unwrap_err();
    assert!(err.is_invalid_input(), "{err}");
    assert!(err.to_string().contains("clustering key"), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_file_that_fails_is_named_by_the_error() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with(dir.path(), Some(MaintenanceMode::Tiered)).await;
    let bad = dir.path().join("bad.parquet");
    std::fs::write(&bad, b"not parquet").unwrap();
    let inputs = [hits(dir.path(), "a.parquet", 2_000, 5), bad.clone()];
    let files = Files::new(&inputs, InputFormat::Parquet);
    let err = ingest(&store, "hits", &files, &options(), |_, _| {})
        .await
        .unwrap_err();
    assert_eq!(err.failed_input(), Some(bad.to_str().unwrap()), "{err}");
    assert!(!err.is_conflict());
}

/// How an input that was loaded is presented again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Again {
    /// `cp -p` of it back over its name: the same name, size and modification time.
    CopiedOverKeepingTime,
    /// `cp` to a new name, and `cp -p` to another: new names, the same rows.
    CopiedToNewName,
    CopiedToNewNameKeepingTime,
    /// `cp` back over its name: the same rows, a new modification time.
    CopiedOver,
    /// `touch`: a new modification time.
    Touched,
    /// The touched file with `--reload`.
    TouchedReloaded,
}

/// What a load of one input came to, its directory written `DIR`.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Outcome {
    Loaded { rows: u64 },
    PublishedAlready { version: Option<u64> },
    Refused { message: String },
}

/// Presents `a` (in `dir`) again as `how` says; the file to load.
fn present(dir: &Path, a: &Path, how: Again) -> PathBuf {
    let later = |path: &Path| {
        let modified = std::fs::metadata(path).unwrap().modified().unwrap();
        let file = std::fs::File::options().write(true).open(path).unwrap();
        file.set_modified(modified + std::time::Duration::from_secs(60))
            .unwrap();
    };
    let copy_keeping_time = |from: &Path, to: &Path| {
        let modified = std::fs::metadata(from).unwrap().modified().unwrap();
        std::fs::copy(from, to).unwrap();
        let file = std::fs::File::options().write(true).open(to).unwrap();
        file.set_modified(modified).unwrap();
    };
    let aside = dir.join("aside.parquet");
    match how {
        Again::CopiedOverKeepingTime => {
            copy_keeping_time(a, &aside);
            copy_keeping_time(&aside, a);
            a.to_path_buf()
        }
        Again::CopiedToNewName => {
            let to = dir.join("a-copy.parquet");
            std::fs::copy(a, &to).unwrap();
            later(&to);
            to
        }
        Again::CopiedToNewNameKeepingTime => {
            let to = dir.join("a-kept.parquet");
            copy_keeping_time(a, &to);
            to
        }
        Again::CopiedOver => {
            std::fs::copy(a, &aside).unwrap();
            std::fs::copy(&aside, a).unwrap();
            later(a);
            a.to_path_buf()
        }
        Again::Touched | Again::TouchedReloaded => {
            later(a);
            a.to_path_buf()
        }
    }
}

/// Loads `a.parquet` and `b.parquet` (overlapping), merges them when `merged` (the first load's
/// objects replaced), then presents `a` again every way there is, in turn.
async fn presented_again(merged: bool) -> Vec<(Again, Outcome)> {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with(dir.path(), Some(MaintenanceMode::None)).await;
    let a = hits(dir.path(), "a.parquet", 1_000, 1);
    let b = hits(dir.path(), "b.parquet", 1_000, 2);
    let opts = options().maintain(false);
    let load = |path: PathBuf, reload: bool| {
        let (store, opts, dir) = (store.clone(), opts.clone(), dir.path().to_path_buf());
        async move {
            let paths = [path];
            let files = Files {
                reload,
                ..Files::new(&paths, InputFormat::Parquet)
            };
            match ingest(&store, "hits", &files, &opts, |_, _| {}).await {
                Ok(r) if r.already_published => Outcome::PublishedAlready { version: r.version },
                Ok(r) => Outcome::Loaded { rows: r.rows },
                Err(e) => {
                    assert!(e.is_invalid_input(), "{e}");
                    let message = ravel_store::ErrorChain::new(&e).to_string();
                    let dir = std::fs::canonicalize(&dir).unwrap();
                    Outcome::Refused {
                        message: message.replace(dir.to_str().unwrap(), "DIR"),
                    }
                }
            }
        }
    };
    assert_eq!(
        load(a.clone(), false).await,
        Outcome::Loaded { rows: 1_000 }
    );
    assert_eq!(load(b, false).await, Outcome::Loaded { rows: 1_000 });
    if merged {
        let report = ravel_compact::compact(&store, "hits", &options().compact_options())
            .await
            .unwrap();
        assert!(report.input_objects > 0, "{report:?}");
    }
    let mut out = Vec::new();
    for how in [
        Again::CopiedOverKeepingTime,
        Again::CopiedToNewName,
        Again::CopiedToNewNameKeepingTime,
        Again::CopiedOver,
        Again::Touched,
        Again::TouchedReloaded,
    ] {
        let input = present(dir.path(), &a, how);
        out.push((how, load(input, how == Again::TouchedReloaded).await));
    }
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn an_input_touched_or_copied_gets_one_answer_whether_or_not_a_merge_replaced_its_objects() {
    let live = presented_again(false).await;
    let merged = presented_again(true).await;
    assert_eq!(live, merged);
    let refused = |how: Again| -> String {
        match &live.iter().find(|(h, _)| *h == how).unwrap().1 {
            Outcome::Refused { message } => message.clone(),
            other => panic!("{how:?}: {other:?}"),
        }
    };
    for how in [Again::CopiedOver, Again::Touched] {
        let message = refused(how);
        assert!(
            message.contains("input DIR/a.parquet")
                && message.contains("version 0")
                && message.contains("--reload"),
            "{how:?}: {message}"
        );
    }
    let loaded = Outcome::Loaded { rows: 1_000 };
    let expected = [
        (
            Again::CopiedOverKeepingTime,
            Outcome::PublishedAlready { version: Some(0) },
        ),
        (Again::CopiedToNewName, loaded.clone()),
        (Again::CopiedToNewNameKeepingTime, loaded.clone()),
        (
            Again::CopiedOver,
            Outcome::Refused {
                message: refused(Again::CopiedOver),
            },
        ),
        (
            Again::Touched,
            Outcome::Refused {
                message: refused(Again::Touched),
            },
        ),
        (Again::TouchedReloaded, loaded),
    ];
    assert_eq!(live, expected);
}
