//! The query path against a loaded table: the same answers as DataFusion reading the same
//! objects directly, the same answers with and without manifest pruning, and exact traffic
//! counts on a statement that must touch one object.

use std::time::Duration;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::util::pretty::pretty_format_batches;
use datafusion::prelude::{SessionConfig, SessionContext};
use ravel_hits::{GenOptions, generate};
use ravel_loader::{LoadOptions, LoadReport, Loader};
use ravel_query::{QueryOptions, QueryTable};
use ravel_store::Store;

async fn load_hits(store: &Store, rows: u64, run_bytes: u64) -> LoadReport {
    ravel_testkit::set_layout(store, "hits", &ravel_hits::layout()).await;
    let (_, batches) = generate(GenOptions {
        rows,
        seed: 17,
        batch_rows: 10_000,
        ..GenOptions::default()
    });
    let opts = LoadOptions {
        object_bytes: 1_000_000,
        // Several objects a run, each its own slice of the counters.
        target_bytes: Some(run_bytes),
        pipeline_depth: 4,
        load_budget: 400_000_000,
        max_flush_delay: Duration::from_secs(3600),
        zstd_level: 1,
    };
    let mut loader = Loader::new(store, "hits", opts).await.unwrap();
    for b in batches {
        loader.push(b).await.unwrap();
    }
    loader.finish().await.unwrap()
}

/// Rows as sorted text lines: answers compared without regard to row order.
fn lines(batches: &[RecordBatch]) -> Vec<String> {
    let shown = pretty_format_batches(batches).unwrap().to_string();
    let mut v: Vec<String> = shown
        .lines()
        .filter(|l| l.starts_with('|'))
        .skip(1) // the header
        .map(str::to_string)
        .collect();
    v.sort();
    v
}

const STATEMENTS: [&str; 6] = [
    "SELECT COUNT(*) FROM hits",
    "SELECT \"RegionID\", COUNT(DISTINCT \"UserID\") AS u FROM hits GROUP BY \"RegionID\" ORDER BY u DESC, \"RegionID\" LIMIT 10",
    "SELECT \"URL\", COUNT(*) AS c FROM hits WHERE \"CounterID\" = 62 AND \"EventDate\" >= '2013-07-01' AND \"EventDate\" <= '2013-07-31' AND \"IsRefresh\" = 0 GROUP BY \"URL\" ORDER BY c DESC, \"URL\" LIMIT 10",
    "SELECT COUNT(*) FROM hits WHERE \"URL\" LIKE '%/blog/%'",
    "SELECT \"EventDate\", COUNT(*) FROM hits WHERE \"CounterID\" BETWEEN 100 AND 2000 GROUP BY \"EventDate\"",
    "SELECT MIN(\"EventTime\"), MAX(\"UserID\"), SUM(\"ResolutionWidth\") FROM hits WHERE \"CounterID\" IN (62, 1000, 5000) AND \"EventDate\" < '2013-07-10'",
];

#[tokio::test(flavor = "multi_thread")]
async fn answers_match_datafusion_reading_the_objects_directly() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path().to_str().unwrap()).unwrap();
    // Runs of ~100 MB: two for 200k rows.
    let report = load_hits(&store, 200_000, 100_000_000).await;
    assert!(report.objects.len() >= 8, "{}", report.objects.len());

    let table = QueryTable::open(&store, "hits", &QueryOptions::default())
        .await
        .unwrap();
    let unpruned = QueryTable::open(
        &store,
        "hits",
        &QueryOptions {
            manifest_pruning: false,
            ..QueryOptions::default()
        },
    )
    .await
    .unwrap();
    // DataFusion on its own, over the objects' directory, as ClickBench's entry sets it up.
    let direct = SessionContext::new_with_config(SessionConfig::new());
    direct
        .sql(&format!(
            "CREATE EXTERNAL TABLE hits_raw STORED AS PARQUET LOCATION '{}/hits/data/' OPTIONS ('binary_as_string' 'true')",
            dir.path().display()
        ))
        .await
        .unwrap();
    direct
        .sql("CREATE VIEW hits AS SELECT * EXCEPT (\"EventDate\"), CAST(CAST(\"EventDate\" AS INTEGER) AS DATE) AS \"EventDate\" FROM hits_raw")
        .await
        .unwrap();

    for sql in STATEMENTS {
        let ours = table.sql(sql).await.unwrap();
        let theirs = direct.sql(sql).await.unwrap().collect().await.unwrap();
        assert_eq!(lines(&ours.batches), lines(&theirs), "{sql}");
        assert!(ours.rows > 0, "{sql}");
        let all = unpruned.sql(sql).await.unwrap();
        assert_eq!(
            lines(&all.batches),
            lines(&theirs),
            "{sql} without manifest pruning"
        );
        assert!(ours.scan.kept <= all.scan.kept, "{sql}");
    }
    // The LIKE matches some rows but not all (an answer of 0 would compare nothing).
    let like = table.sql(STATEMENTS[3]).await.unwrap();
    let n = {
        use datafusion::arrow::array::AsArray;
        use datafusion::arrow::datatypes::Int64Type;
        like.batches[0]
            .column(0)
            .as_primitive::<Int64Type>()
            .value(0)
    };
    assert!(n > 0 && n < 200_000, "{n} rows match the LIKE");
    // The CounterID = 62 statement reads a fraction of the objects.
    let q = table.sql(STATEMENTS[2]).await.unwrap();
    assert!(
        q.scan.kept < report.objects.len() / 2,
        "kept {} of {}",
        q.scan.kept,
        report.objects.len()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn traffic_is_counted_exactly_on_a_statement_that_touches_one_object() {
    let server = ravel_testkit::S3Server::start();
    let store = server.store("w");
    // One run: objects do not overlap.
    let report = load_hits(&store, 120_000, 350_000_000).await;
    let n = report.objects.len();
    assert!(n >= 4, "{n}");
    // A counter whose rows all lie in one object: its range there is [v, v] and no other
    // object's range holds v.
    let range = |o: &ravel_manifest::ObjectEntry| {
        let r = &o.ranges["CounterID"];
        (r.min.as_i64().unwrap(), r.max.as_i64().unwrap())
    };
    let (target, v) = report
        .objects
        .iter()
        .enumerate()
        .flat_map(|(i, o)| {
            let (lo, hi) = range(o);
            [(i, lo), (i, hi)]
        })
        .find(|&(i, v)| {
            report.objects.iter().enumerate().all(|(j, o)| {
                let (lo, hi) = range(o);
                j == i || v < lo || v > hi
            })
        })
        .expect("a counter inside one object");
    let sql = format!("SELECT COUNT(*) FROM hits WHERE \"CounterID\" = {v}");

    let table = QueryTable::open(&store, "hits", &QueryOptions::default())
        .await
        .unwrap();
    assert_eq!(table.opened().manifests, 1);
    let opened = table.opened();
    assert_eq!(
        (opened.version, opened.traffic.lists, opened.traffic.gets),
        (0, 1, 4),
        "one GET of _last_checkpoint (absent: fewer than 10 versions), one LIST of the log, one GET of its entry, one of its checksum file, one of the manifest"
    );
    let a = table.sql(&sql).await.unwrap();
    assert_eq!(a.scan.kept, 1);
    assert_eq!(a.traffic.objects, 1, "{:?}", a.traffic);
    assert!(a.traffic.gets >= 1 && a.traffic.bytes > 0);
    assert!(a.traffic.bytes <= report.objects[target].bytes);
    assert_eq!(
        (a.traffic.heads, a.traffic.lists),
        (0, 0),
        "sizes come from the manifest"
    );

    // Without the manifest's ranges every object's footer is read.
    let all = QueryTable::open(
        &store,
        "hits",
        &QueryOptions {
            manifest_pruning: false,
            ..QueryOptions::default()
        },
    )
    .await
    .unwrap();
    let b = all.sql(&sql).await.unwrap();
    assert_eq!(b.traffic.objects, n, "{:?}", b.traffic);
    assert!(b.traffic.gets >= n as u64);
    assert_eq!(lines(&a.batches), lines(&b.batches));

    // A URL that only one object holds: its counters lie strictly inside that object's
    // CounterID range (the run's objects do not overlap, boundary counters may be split).
    let urls = table
        .sql("SELECT \"URL\", MIN(\"CounterID\"), MAX(\"CounterID\") FROM hits_raw GROUP BY \"URL\" ORDER BY \"URL\"")
        .await
        .unwrap();
    let mut point = None;
    'found: for batch in &urls.batches {
        use datafusion::arrow::array::AsArray;
        use datafusion::arrow::datatypes::Int32Type;
        let (u, lo, hi) = (
            batch.column(0).as_string_view(),
            batch.column(1).as_primitive::<Int32Type>(),
            batch.column(2).as_primitive::<Int32Type>(),
        );
        for r in 0..batch.num_rows() {
            let (a, b) = (lo.value(r) as i64, hi.value(r) as i64);
            if let Some(i) = report.objects.iter().position(|o| {
                let (l, h) = range(o);
                l < a && b < h
            }) && !u.value(r).contains('\'')
            {
                point = Some((u.value(r).to_string(), i));
                break 'found;
            }
        }
    }
    let (url, holder) = point.expect("a URL inside one object");
    let sql = format!("SELECT COUNT(*), MIN(\"WatchID\") FROM hits WHERE \"URL\" = '{url}'");
    // Fresh tables: DataFusion caches footers in its context, which would hide their reads.
    let fresh = |manifest_pruning| {
        let store = store.clone();
        async move {
            QueryTable::open(
                &store,
                "hits",
                &QueryOptions {
                    manifest_pruning,
                    ..QueryOptions::default()
                },
            )
            .await
            .unwrap()
        }
    };
    let a = fresh(true).await.sql(&sql).await.unwrap();
    let b = fresh(false).await.sql(&sql).await.unwrap();
    assert_eq!(lines(&a.batches), lines(&b.batches), "{sql}");
    assert_eq!(b.traffic.objects, n);
    // The object that holds the URL is kept; the sidecar's filters drop the others (a false
    // positive at the layout's 1 % may keep one more).
    assert!(
        a.scan.kept >= 1 && a.scan.kept <= 2,
        "kept {} of {n}",
        a.scan.kept
    );
    assert!((1..=2).contains(&a.traffic.objects), "{:?}", a.traffic);
    // The sidecar's URL section costs one GET; the objects it saves cost more.
    assert!(
        a.traffic.gets < b.traffic.gets,
        "{:?} vs {:?}",
        a.traffic,
        b.traffic
    );
    assert!(
        a.traffic.bytes < b.traffic.bytes,
        "{:?} vs {:?}",
        a.traffic,
        b.traffic
    );
    let count = {
        use datafusion::arrow::array::AsArray;
        use datafusion::arrow::datatypes::Int64Type;
        a.batches[0].column(0).as_primitive::<Int64Type>().value(0)
    };
    assert!(count > 0, "the URL is in object {holder}");
}

/// The context reaches no store but the table's, and that one only for reading: a COPY run
/// through the context itself (past the statement check) writes neither a local file nor an
/// object in the table's store; through `sql` it is refused before it runs.
#[tokio::test(flavor = "multi_thread")]
async fn the_context_can_write_nowhere() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path().join("store").to_str().unwrap()).unwrap();
    load_hits(&store, 2_000, 100_000_000).await;
    let table = QueryTable::open(&store, "hits", &QueryOptions::default())
        .await
        .unwrap();
    let local = dir.path().join("out.csv");
    let targets = [
        local.display().to_string(),
        format!("file://{}", local.display()),
        "ravel://store/hits/data/x.csv".to_string(),
    ];
    for target in targets {
        let sql = format!("COPY (SELECT 1 AS x) TO '{target}' STORED AS CSV");
        let run = async { table.context().sql(&sql).await?.collect().await };
        assert!(run.await.is_err(), "{sql}");
        let refused = table.sql(&sql).await.unwrap_err();
        assert!(
            matches!(refused, ravel_query::QueryError::ReadOnly { .. }),
            "{refused}"
        );
        assert!(refused.is_invalid_input());
    }
    assert!(!local.exists());
    assert!(!dir.path().join("store/hits/data/x.csv").exists());
    // Upper-case names and names with `-` are registered as they are, for quoted statements.
    let named = QueryTable::open(
        &store,
        "hits",
        &QueryOptions {
            sql_name: Some("Hits-2".into()),
            ..QueryOptions::default()
        },
    )
    .await
    .unwrap();
    let a = named.sql("SELECT COUNT(*) FROM \"Hits-2\"").await.unwrap();
    assert_eq!(a.rows, 1);
    let e = named.sql("SELECT COUNT(*) FROM Hits").await.unwrap_err();
    assert!(
        e.is_invalid_input() && e.to_string().contains("quote"),
        "{e}"
    );
}
