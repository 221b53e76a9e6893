//! `advise` on small generated hits tables in a local store: the candidates it draws from a
//! log, its estimate against the same statements run on a real load under the layout it
//! recommends, `apply` followed by `compact`, and the bad inputs it refuses.

use std::time::Duration;

use ravel_advise::{AdviseError, AdviseOptions, CandidateKind, advise, apply};
use ravel_hits::{GenOptions, generate};
use ravel_layout::{BloomScope, Layout, LayoutStore};
use ravel_loader::{LoadOptions, Loader};
use ravel_query::{QueryOptions, bench_statements, statements};
use ravel_store::Store;

const ROWS: u64 = 60_000;

fn load_options() -> LoadOptions {
    LoadOptions {
        object_bytes: 150_000,
        target_bytes: None,
        pipeline_depth: 4,
        load_budget: 400_000_000,
        max_flush_delay: Duration::from_secs(3600),
        zstd_level: 3,
    }
}

/// Loads the generated rows into `table` under `layout`, as one sorted sequence.
async fn load(store: &Store, table: &str, layout: &Layout) {
    ravel_testkit::set_layout(store, table, layout).await;
    let (_, batches) = generate(GenOptions {
        rows: ROWS,
        seed: 5,
        batch_rows: 10_000,
        ..GenOptions::default()
    });
    let mut loader = Loader::new(store, table, load_options()).await.unwrap();
    for b in batches {
        loader.push(b).await.unwrap();
    }
    loader.finish().await.unwrap();
}

async fn hits_table() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path().to_str().unwrap()).unwrap();
    load(&store, "hits", &ravel_hits::layout()).await;
    (dir, store)
}

/// Some of the table's values of `column`, as SQL literals.
async fn values(store: &Store, column: &str, n: usize) -> Vec<String> {
    let q = ravel_query::QueryTable::open(store, "hits", &QueryOptions::default())
        .await
        .unwrap();
    let sql = format!("SELECT \"{column}\" FROM hits WHERE \"WatchID\" % 997 = 3 LIMIT {n}");
    let a = q.sql(&sql).await.unwrap();
    let mut out = Vec::new();
    for b in &a.batches {
        let col = arrow::compute::cast(b.column(0), &arrow::datatypes::DataType::Utf8).unwrap();
        let col = col
            .as_any()
            .downcast_ref::<arrow::array::StringArray>()
            .unwrap();
        out.extend(col.iter().map(|v| v.unwrap().to_string()));
    }
    out
}

fn user_log(users: &[String]) -> String {
    users
        .iter()
        .map(|u| format!("SELECT \"EventTime\", \"URL\" FROM hits WHERE \"UserID\" = {u}\n"))
        .collect()
}

fn options() -> AdviseOptions {
    AdviseOptions {
        sample_rows: 20_000,
        ..AdviseOptions::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn candidates_come_from_what_the_statements_compare() {
    let (_dir, store) = hits_table().await;
    let users = values(&store, "UserID", 5).await;
    let a = advise(&store, "hits", &user_log(&users), &options())
        .await
        .unwrap();
    let kinds: Vec<CandidateKind> = a.candidates.iter().map(|c| c.kind).collect();
    assert!(kinds.contains(&CandidateKind::Current) && kinds.contains(&CandidateKind::Arrival));
    assert!(
        a.candidates
            .iter()
            .any(|c| c.layout.stream.as_deref() == Some("UserID")),
        "a user lookup makes UserID a stream candidate"
    );
    // No string is compared for equality: generated candidates carry no Bloom filters.
    for c in a
        .candidates
        .iter()
        .filter(|c| c.kind == CandidateKind::Generated)
    {
        assert_eq!(c.layout.bloom.scope, BloomScope::None, "{}", c.name);
    }
    let best = a.best();
    assert!(best.relative < 0.5, "{} reads {}", best.name, best.relative);

    let urls = values(&store, "URL", 3).await;
    let log: String = urls
        .iter()
        .map(|u| format!("SELECT COUNT(*) FROM hits WHERE \"URL\" = '{u}'\n"))
        .collect();
    let a = advise(&store, "hits", &log, &options()).await.unwrap();
    for c in a
        .candidates
        .iter()
        .filter(|c| c.kind == CandidateKind::Generated)
    {
        // The URL stream's ranges find a URL's objects; any other layout needs its filter.
        let scope = match c.layout.stream.as_deref() {
            Some("URL") => BloomScope::None,
            _ => BloomScope::Columns(vec!["URL".into()]),
        };
        assert_eq!(c.layout.bloom.scope, scope, "{}", c.name);
    }
    assert!(
        a.candidates
            .iter()
            .any(|c| c.layout.stream.as_deref() == Some("URL"))
    );

    let log = "SELECT COUNT(*) FROM hits WHERE \"RegionID\" = 229 AND \"EventDate\" BETWEEN '2013-07-02' AND '2013-07-08'\n";
    let a = advise(&store, "hits", log, &options()).await.unwrap();
    let widths: Vec<String> = a
        .candidates
        .iter()
        .filter_map(|c| Some(c.layout.clustering_key.as_ref()?.bucket_width.to_string()))
        .collect();
    assert!(
        widths.iter().any(|w| w == "1w"),
        "a week's range gives a week's bucket: {widths:?}"
    );
    assert!(
        a.candidates
            .iter()
            .any(|c| c.layout.stream.as_deref() == Some("RegionID"))
    );
}

/// Whether `l` sorts by `column` first (as its stream, or its first key column without one).
fn leads_with(l: &Layout, column: &str) -> bool {
    match (&l.stream, &l.clustering_key) {
        (Some(s), _) => s == column,
        (None, Some(k)) => k.columns.first().is_some_and(|c| c == column),
        (None, None) => false,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn weights_choose_between_statements_and_group_by_columns_become_keys() {
    let (_dir, store) = hits_table().await;
    let users = values(&store, "UserID", 1).await;
    let user = format!(
        "SELECT \"EventTime\", \"URL\" FROM hits WHERE \"UserID\" = {}",
        users[0]
    );
    let region = "SELECT \"SearchEngineID\", COUNT(*) FROM hits WHERE \"RegionID\" = 229 GROUP BY \"SearchEngineID\"";
    let a = advise(
        &store,
        "hits",
        &format!("100\t{user}\n1\t{region}\n"),
        &options(),
    )
    .await
    .unwrap();
    assert_eq!(a.weight, 101);
    assert!(leads_with(&a.best().layout, "UserID"), "{}", a.best().name);
    let a = advise(
        &store,
        "hits",
        &format!("1\t{user}\n100\t{region}\n"),
        &options(),
    )
    .await
    .unwrap();
    assert!(
        leads_with(&a.best().layout, "RegionID"),
        "{}",
        a.best().name
    );
    assert!(
        a.candidates.iter().any(|c| c
            .layout
            .clustering_key
            .as_ref()
            .is_some_and(|k| k.columns.iter().any(|c| c == "SearchEngineID"))),
        "a GROUP BY column is a key candidate"
    );
    let few = AdviseOptions {
        candidates: 2,
        ..options()
    };
    let a = advise(&store, "hits", &format!("{user}\n{region}\n"), &few)
        .await
        .unwrap();
    let generated = a
        .candidates
        .iter()
        .filter(|c| c.kind == CandidateKind::Generated)
        .count();
    assert!((1..=2).contains(&generated), "{generated} generated");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_estimate_is_close_to_a_real_load_under_the_recommended_layout() {
    let (_dir, store) = hits_table().await;
    let users = values(&store, "UserID", 6).await;
    let log = user_log(&users);
    let a = advise(&store, "hits", &log, &options()).await.unwrap();
    let best = a.best().clone();
    assert_eq!(best.kind, CandidateKind::Generated);
    // A third of the rows holds a user's rows side by side as the table does: no whole groups.
    assert!(a.whole_groups.is_empty(), "{:?}", a.whole_groups);
    // At a fifteenth, a user has a row or none in the sample: the UserID stream is sized on
    // whole users, and recommended alike.
    let thin = AdviseOptions {
        sample_rows: 4_000,
        ..options()
    };
    let small = advise(&store, "hits", &log, &thin).await.unwrap();
    let drawn: Vec<&str> = small
        .whole_groups
        .iter()
        .map(|g| g.column.as_str())
        .collect();
    assert_eq!(drawn, ["UserID"]);
    assert!(small.whole_groups[0].rows > 0);
    let sized: Vec<bool> = small.candidates.iter().map(|c| c.whole_groups).collect();
    let streamed: Vec<bool> = small
        .candidates
        .iter()
        .map(|c| c.kind == CandidateKind::Generated && c.layout.stream.as_deref() == Some("UserID"))
        .collect();
    assert_eq!(
        sized, streamed,
        "exactly the UserID streams are sized on whole users"
    );
    assert_eq!(small.best().name, best.name);
    load(&store, "advised", &best.layout).await;
    let list = statements(&log);
    let opts = QueryOptions {
        sql_name: Some("hits".into()),
        ..QueryOptions::default()
    };
    let url = store.location().to_string();
    let runs = bench_statements(&url, "advised", &list, &opts, |_| {})
        .await
        .unwrap();
    let measured: u64 = runs.iter().map(|r| r.cold_bytes.unwrap()).sum();
    for (sample, advised) in [(20_000, &best), (4_000, small.best())] {
        let estimated: u64 = advised.statements.iter().map(|s| s.bytes).sum();
        let ratio = estimated as f64 / measured as f64;
        assert!(
            (0.75..=1.25).contains(&ratio),
            "{sample} sampled rows: estimated {estimated} bytes, measured {measured} ({ratio:.3})"
        );
    }
    // The current layout's estimate against the table as it is.
    let runs = bench_statements(&url, "hits", &list, &QueryOptions::default(), |_| {})
        .await
        .unwrap();
    let measured: u64 = runs.iter().map(|r| r.cold_bytes.unwrap()).sum();
    let current = a
        .candidates
        .iter()
        .find(|c| c.kind == CandidateKind::Current)
        .unwrap();
    let estimated: u64 = current.statements.iter().map(|s| s.bytes).sum();
    let ratio = estimated as f64 / measured as f64;
    assert!(
        (0.75..=1.25).contains(&ratio),
        "current: estimated {estimated} bytes, measured {measured} ({ratio:.3})"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_stores_the_layout_and_compact_reclusters_by_it() {
    let (_dir, store) = hits_table().await;
    let users = values(&store, "UserID", 4).await;
    let a = advise(&store, "hits", &user_log(&users), &options())
        .await
        .unwrap();
    let best = a.best().layout.clone();
    let applied = apply(&store, "hits", &best, a.table_bytes).await.unwrap();
    assert!(applied.reorders);
    assert_eq!(applied.rewrite_bytes, a.table_bytes);
    let stored = LayoutStore::new(&store, "hits")
        .unwrap()
        .load()
        .await
        .unwrap();
    assert_eq!(stored.generation, applied.generation);
    assert!(stored.same_settings(&Layout {
        generation: stored.generation,
        ..best.clone()
    }));
    let opts = ravel_compact::CompactOptions {
        load: load_options(),
        fan_in: None,
        max_input_bytes: None,
        dry_run: false,
        max_steps: None,
    };
    ravel_compact::compact(&store, "hits", &opts).await.unwrap();
    for m in ravel_testkit::published(&store, "hits").await {
        assert_eq!(
            m.sort_key,
            best.sort_key_names(),
            "every object sorted by the new layout"
        );
    }
    let report = ravel_verify::verify(&store, "hits", &ravel_verify::VerifyOptions::deep())
        .await
        .unwrap();
    assert!(report.violations.is_empty(), "{:?}", report.violations);
    // Advising again on the re-clustered table keeps it.
    let again = advise(&store, "hits", &user_log(&users), &options())
        .await
        .unwrap();
    assert_eq!(again.best().kind, CandidateKind::Current);
    // Applying the current layout stores nothing.
    let kept = apply(&store, "hits", &again.best().layout, again.table_bytes)
        .await
        .unwrap();
    assert!(!kept.changed && !kept.reorders, "{kept:?}");
    assert_eq!(kept.generation, applied.generation);
    // Arrival order has no key: compact keeps the objects, so nothing is to be rewritten.
    let arrival = again
        .candidates
        .iter()
        .find(|c| c.kind == CandidateKind::Arrival)
        .unwrap();
    let applied = apply(&store, "hits", &arrival.layout, again.table_bytes)
        .await
        .unwrap();
    assert!(applied.changed && !applied.reorders && applied.rewrite_bytes == 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_logs_and_samples_are_refused_and_bad_statements_listed() {
    let (_dir, store) = hits_table().await;
    let o = options();
    let err = advise(&store, "hits", "\n-- nothing\n", &o)
        .await
        .unwrap_err();
    assert!(matches!(err, AdviseError::EmptyLog) && err.is_invalid_input());
    let err = advise(&store, "hits", "SELECT 1\nSELECT COUNT(*) FROM hits\n", &o)
        .await
        .unwrap_err();
    assert!(
        matches!(err, AdviseError::NoColumn(_)) && err.is_invalid_input(),
        "{err}"
    );
    let err = advise(&store, "hits", "SELECT nope FROM nowhere\n", &o)
        .await
        .unwrap_err();
    assert!(matches!(err, AdviseError::NoStatement { line: 1, .. }) && err.is_invalid_input());
    let zero = AdviseOptions {
        sample_rows: 0,
        ..options()
    };
    let err = advise(&store, "hits", "SELECT \"UserID\" FROM hits\n", &zero)
        .await
        .unwrap_err();
    assert!(matches!(err, AdviseError::NoSampleRows) && err.is_invalid_input());
    let log = "SELECT \"Nope\" FROM hits\nSELECT COUNT(*) FROM hits WHERE \"CounterID\" = 62\n";
    let a = advise(&store, "hits", log, &o).await.unwrap();
    assert_eq!(a.statements, 1);
    assert_eq!(a.skipped.len(), 1);
    assert_eq!(a.skipped[0].line, 1);
    assert!(
        a.skipped[0].error.contains("Nope"),
        "{}",
        a.skipped[0].error
    );
}
