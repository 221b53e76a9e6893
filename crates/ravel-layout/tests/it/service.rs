//! The layout service on a real local store: generations, compare-and-swap, no-op updates,
//! validation against the recorded schema.

use arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use ravel_layout::{BloomScope, ClusteringKey, Layout, LayoutError, LayoutStore};
use ravel_store::Store;

fn store() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path().to_str().unwrap()).unwrap();
    (dir, store)
}

fn flights() -> Schema {
    Schema::new(vec![
        Field::new("carrier", DataType::Utf8, false),
        Field::new(
            "time_hour",
            DataType::Timestamp(TimeUnit::Second, None),
            false,
        ),
        Field::new("origin", DataType::Utf8, false),
        Field::new("dest", DataType::Utf8, false),
        Field::new("distance", DataType::Float64, false),
        Field::new(
            "legs",
            DataType::Struct(vec![Field::new("a", DataType::Int32, true)].into()),
            true,
        ),
    ])
}

fn key(cols: &[&str], width: &str) -> Option<ClusteringKey> {
    Some(ClusteringKey {
        columns: cols.iter().map(|c| c.to_string()).collect(),
        bucket_width: width.parse().unwrap(),
    })
}

#[tokio::test]
async fn defaults_then_generations() {
    let (dir, store) = store();
    generations(&store, &|p| dir.path().join(p).is_file()).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn defaults_then_generations_on_s3() {
    let server = ravel_testkit::S3Server::start();
    let store = server.store("warehouse");
    let root = server.root().join(&server.bucket).join("warehouse");
    generations(&store, &|p| root.join(p).is_file()).await;
}

async fn generations(store: &Store, exists: &dyn Fn(&str) -> bool) {
    let svc = LayoutStore::new(store, "hits").unwrap();
    let l = svc.load().await.unwrap();
    assert_eq!(l, Layout::default());
    assert_eq!(l.generation, 0);

    let u = svc
        .update(|l| {
            l.stream = Some("CounterID".into());
            l.time = Some("EventTime".into());
            l.clustering_key = key(&["EventDate", "UserID"], "1d");
            Ok(())
        })
        .await
        .unwrap();
    assert!(u.changed);
    assert_eq!(u.layout.generation, 1);
    assert!(exists("hits/_layout/00000000000000000001.json"));

    // Setting the same value again writes nothing and keeps the generation.
    let u = svc
        .update(|l| {
            l.clustering_key = key(&["EventDate", "UserID"], "24h");
            Ok(())
        })
        .await
        .unwrap();
    assert!(!u.changed);
    assert_eq!(u.layout.generation, 1);
    assert!(!exists("hits/_layout/00000000000000000002.json"));

    let u = svc
        .update(|l| {
            l.bloom.scope = BloomScope::Columns(vec!["URL".into()]);
            Ok(())
        })
        .await
        .unwrap();
    assert_eq!(u.layout.generation, 2);
    let back = svc.load().await.unwrap();
    assert_eq!(back, u.layout);
    assert_eq!(back.clustering_key, key(&["EventDate", "UserID"], "1d"));
    // History is kept.
    assert_eq!(
        svc.load_generation(1).await.unwrap().bloom.scope,
        BloomScope::Text
    );
}

#[tokio::test]
async fn concurrent_updates_one_wins_one_conflicts() {
    let (_dir, store) = store();
    one_wins(&store).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn concurrent_updates_one_wins_one_conflicts_on_s3() {
    let server = ravel_testkit::S3Server::start();
    one_wins(&server.store("")).await;
}

async fn one_wins(store: &Store) {
    let a = LayoutStore::new(store, "t").unwrap();
    let b = LayoutStore::new(store, "t").unwrap();
    let base = a.load().await.unwrap();
    let mut x = base.clone();
    x.time = Some("EventTime".into());
    x.clustering_key = key(&["UserID"], "1h");
    let mut y = x.clone();
    y.clustering_key = key(&["EventDate"], "6h");
    let (ra, rb) = tokio::join!(
        a.update_from(&base, x.clone()),
        b.update_from(&base, y.clone())
    );
    let (won, lost, winner) = match (ra, rb) {
        (Ok(w), Err(e)) => (w, e, x),
        (Err(e), Ok(w)) => (w, e, y),
        other => panic!("expected one winner and one conflict, got {other:?}"),
    };
    assert_eq!(won.layout.generation, 1);
    assert!(
        matches!(lost, LayoutError::Conflict { generation: 1, .. }),
        "{lost}"
    );
    assert!(
        lost.to_string().contains("re-read the layout and retry"),
        "{lost}"
    );
    assert!(!lost.is_invalid_input());
    // Nothing is lost: the stored layout is the winner's, and a retry from it succeeds.
    let stored = a.load().await.unwrap();
    assert_eq!(stored.clustering_key, winner.clustering_key);
    let retried = b
        .update(|l| {
            l.stream = Some("CounterID".into());
            Ok(())
        })
        .await
        .unwrap();
    assert_eq!(retried.layout.generation, 2);
    assert_eq!(retried.layout.clustering_key, winner.clustering_key);
}

#[tokio::test(flavor = "multi_thread")]
async fn many_racing_writers_each_generation_written_once() {
    let (_dir, store) = store();
    racing_writers(&store).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn many_racing_writers_each_generation_written_once_on_s3() {
    let server = ravel_testkit::S3Server::start();
    racing_writers(&server.store("p/q")).await;
}

async fn racing_writers(store: &Store) {
    let mut tasks = Vec::new();
    for i in 0..8u64 {
        let svc = LayoutStore::new(store, "race").unwrap();
        tasks.push(tokio::spawn(async move {
            let mut wins = 0;
            for j in 0..5u64 {
                loop {
                    let r = svc
                        .update(|l| {
                            l.bloom.fpp = 0.001 + (i * 10 + j) as f64 / 1000.0;
                            Ok(())
                        })
                        .await;
                    match r {
                        Ok(u) => {
                            wins += u.changed as u64;
                            break;
                        }
                        Err(LayoutError::Conflict { .. }) => continue,
                        Err(e) => panic!("{e}"),
                    }
                }
            }
            wins
        }));
    }
    let mut wins = 0;
    for t in tasks {
        wins += t.await.unwrap();
    }
    let svc = LayoutStore::new(store, "race").unwrap();
    // Every successful change is exactly one generation.
    assert_eq!(svc.load().await.unwrap().generation, wins);
    assert_eq!(wins, 40);
}

#[tokio::test]
async fn recorded_schema_checks_every_change() {
    let (dir, store) = store();
    let svc = LayoutStore::new(&store, "flights").unwrap();
    assert!(svc.schema().await.unwrap().is_none());
    assert!(svc.record_schema(&flights()).await.unwrap());
    assert!(!svc.record_schema(&flights()).await.unwrap());
    let other = Schema::new(vec![Field::new("x", DataType::Int8, false)]);
    assert!(matches!(
        svc.record_schema(&other).await,
        Err(LayoutError::SchemaMismatch { .. })
    ));

    // The defaults name no time column: a key set alone is refused.
    let err = svc
        .update(|l| {
            l.clustering_key = key(&["origin", "dest"], "1d");
            Ok(())
        })
        .await
        .unwrap_err();
    assert!(matches!(err, LayoutError::KeyWithoutTime), "{err}");
    assert!(err.is_invalid_input());
    assert!(
        !dir.path().join("flights/_layout").exists(),
        "nothing written"
    );

    let u = svc
        .update(|l| {
            l.stream = Some("carrier".into());
            l.time = Some("time_hour".into());
            l.clustering_key = key(&["origin", "dest"], "1d");
            Ok(())
        })
        .await
        .unwrap();
    assert_eq!(u.layout.generation, 1);

    for (change, expect) in [
        (
            Box::new(|l: &mut Layout| l.clustering_key = key(&["legs"], "1d"))
                as Box<dyn Fn(&mut Layout)>,
            "has type Struct",
        ),
        (
            Box::new(|l: &mut Layout| {
                l.time = Some("origin".into());
                l.clustering_key = key(&["dest"], "1d");
            }),
            "time column \"origin\" has type Utf8",
        ),
        (
            Box::new(|l: &mut Layout| l.time = Some("distance".into())),
            "time column \"distance\"",
        ),
        (
            Box::new(|l: &mut Layout| l.stream = Some("airline".into())),
            "\"airline\"",
        ),
        (
            Box::new(|l: &mut Layout| l.clustering_key = key(&["dest", "dest"], "1d")),
            "more than once",
        ),
    ] {
        let err = svc
            .update(|l| {
                change(l);
                Ok(())
            })
            .await
            .unwrap_err();
        assert!(
            err.to_string().contains(expect),
            "{err} should contain {expect}"
        );
        assert!(err.is_invalid_input());
    }
    assert_eq!(
        svc.load().await.unwrap().generation,
        1,
        "no refused change was written"
    );
}

#[tokio::test]
async fn corrupt_documents_are_reported_with_their_path() {
    let (dir, store) = store();
    let svc = LayoutStore::new(&store, "t").unwrap();
    std::fs::create_dir_all(dir.path().join("t/_layout")).unwrap();
    std::fs::write(
        dir.path().join("t/_layout/00000000000000000001.json"),
        b"{not json",
    )
    .unwrap();
    let err = svc.load().await.unwrap_err();
    assert!(
        err.to_string()
            .contains("t/_layout/00000000000000000001.json"),
        "{err}"
    );
}
