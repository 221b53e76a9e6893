//! `query` and `bench-queries` only read: statements that write, define or set are refused
//! with exit 2 before anything runs; the `--as` name cannot smuggle SQL in; tables whose names
//! SQL would fold are queried by their quoted names; the table format stops at its cap; bad
//! statements are the user's input (exit 2); a benchmark with failed statements exits 1.

use std::path::{Path, PathBuf};

use crate::common::{self, fails, line, ok, p};

/// A small loaded table `name` in `dir/store`; returns the store.
fn table(dir: &Path, name: &str) -> PathBuf {
    let input = dir.join("h.parquet");
    let store = dir.join("store");
    std::fs::create_dir_all(&store).unwrap();
    let (s, i) = (p(&store), p(&input));
    ok(&format!("gen --rows 3000 --seed 3 --out {i}"));
    ok(&format!(
        "layout --store {s} --table {name} schema set --hits"
    ));
    ok(&format!(
        "load --store {s} --table {name} --input {i} --object-bytes 200000"
    ));
    store
}

/// The table's Parquet objects.
fn objects(store: &Path, name: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut dirs = vec![store.join(name)];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let path = e.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|x| x == "parquet") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// `query` on table `hits` of `store`, expected to be refused as a write: exit 2, said so.
fn refused(store: &Path, sql: &str) {
    let err = fails(2, &["query", "--store", p(store), "--table", "hits", sql]);
    assert!(err.contains("read-only"), "{sql}: {err}");
}

#[test]
fn copy_onto_a_table_object_is_refused_and_the_object_stays() {
    let dir = tempfile::tempdir().unwrap();
    let store = table(dir.path(), "hits");
    let objects = objects(&store, "hits");
    let target = &objects[0];
    let before = std::fs::read(target).unwrap();
    refused(
        &store,
        &format!(
            "COPY (SELECT * FROM hits LIMIT 10) TO '{}' STORED AS PARQUET",
            p(target)
        ),
    );
    assert_eq!(std::fs::read(target).unwrap(), before);
    ok(&format!("verify --store {} --table hits", p(&store)));
}

#[test]
fn copy_outside_the_store_is_refused_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = table(dir.path(), "hits");
    let outside = tempfile::tempdir().unwrap();
    let file = outside.path().join("out.parquet");
    let csv = outside.path().join("out.csv");
    refused(
        &store,
        &format!(
            "COPY (SELECT * FROM hits LIMIT 10) TO '{}' STORED AS PARQUET",
            p(&file)
        ),
    );
    refused(
        &store,
        &format!("COPY (SELECT 1 AS x) TO 'file://{}' STORED AS CSV", p(&csv)),
    );
    refused(
        &store,
        &format!("EXPLAIN ANALYZE COPY (SELECT 1 AS x) TO '{}'", p(&csv)),
    );
    assert!(!file.exists() && !csv.exists());
    assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
}

#[test]
fn writes_definitions_and_settings_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = table(dir.path(), "hits");
    let outside = tempfile::tempdir().unwrap();
    let object = &objects(&store, "hits")[0];
    for sql in [
        "INSERT INTO hits SELECT * FROM hits LIMIT 1".to_string(),
        "CREATE TABLE t AS SELECT 1 AS x".to_string(),
        "CREATE VIEW v AS SELECT 1 AS x".to_string(),
        "DROP TABLE hits".to_string(),
        "DROP VIEW hits".to_string(),
        "SET datafusion.execution.batch_size = 1".to_string(),
        format!(
            "CREATE EXTERNAL TABLE e STORED AS PARQUET LOCATION '{}/'",
            p(outside.path())
        ),
        format!(
            "CREATE EXTERNAL TABLE o STORED AS PARQUET LOCATION '{}'",
            p(object)
        ),
        format!(
            "CREATE EXTERNAL TABLE w (x INT) STORED AS CSV LOCATION '{}/w.csv'",
            p(outside.path())
        ),
    ] {
        refused(&store, &sql);
    }
    assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
    ok(&format!("verify --store {} --table hits", p(&store)));
}

#[test]
fn the_as_name_cannot_carry_sql() {
    let dir = tempfile::tempdir().unwrap();
    let store = table(dir.path(), "hits");
    let out = common::run(&line(
        &format!("query --store {} --table hits --format csv --as", p(&store)),
        &["v\" AS SELECT 42 AS answer --", "SELECT * FROM v"],
    ));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!stdout.contains("42"), "{stdout}");
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn names_sql_would_fold_are_queried_quoted() {
    let dir = tempfile::tempdir().unwrap();
    let store = table(dir.path(), "CON");
    // `query` on the table with `options`, then the statement `sql`.
    let q = |options: &str, sql: &str| {
        line(
            &format!("query --store {} --table CON {options}", p(&store)),
            &[sql],
        )
    };
    let out = ok(&q("--format csv", "SELECT count(*) AS n FROM \"CON\""));
    assert_eq!(out.lines().collect::<Vec<_>>(), ["n", "3000"]);
    // Unquoted, SQL folds the name: bad input, with a hint to quote it.
    let err = fails(2, &q("", "SELECT count(*) FROM CON"));
    assert!(err.contains("quote") && err.contains("\"CON\""), "{err}");
    // The same for a name given with --as.
    let out = ok(&q(
        "--as My-Hits --format csv",
        "SELECT count(*) AS n FROM \"My-Hits\"",
    ));
    assert_eq!(out.lines().collect::<Vec<_>>(), ["n", "3000"]);
}

#[test]
fn the_table_format_stops_at_its_cap_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let store = table(dir.path(), "hits");
    let sql = "SELECT a.\"CounterID\" FROM hits a CROSS JOIN hits b LIMIT 20000";
    let query = |options: &str| {
        line(
            &format!("query --store {} --table hits {options}", p(&store)),
            &[sql],
        )
    };
    let (out, err) = common::succeeds(common::command(&query("")));
    let rows = out.lines().filter(|l| l.starts_with("| ")).count() - 1; // the header
    assert_eq!(rows, 10_000, "{err}");
    assert!(
        err.contains("10000") && err.contains("--format csv"),
        "{err}"
    );
    // csv gives every row.
    let out = ok(&query("--format csv"));
    assert_eq!(out.lines().count(), 20_001);
}

#[test]
fn bad_statements_are_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let store = table(dir.path(), "hits");
    for sql in [
        "SELECT 1; SELECT 2",
        "DROP TABLE hits",
        "SELECT * FROM hits LIMIT 99999999999999999999999",
        "SELECT * FROM hits LIMIT -1",
        "SELECT \"NoSuchColumn\" FROM hits",
        "SELEC 1",
    ] {
        fails(
            2,
            &line(&format!("query --store {} --table hits", p(&store)), &[sql]),
        );
    }
}

#[test]
fn bench_queries_exits_1_when_a_statement_fails() {
    let dir = tempfile::tempdir().unwrap();
    let store = table(dir.path(), "hits");
    let queries = dir.path().join("q.sql");
    std::fs::write(
        &queries,
        "SELECT COUNT(*) FROM hits\nSELECT \"NoSuchColumn\" FROM hits\n",
    )
    .unwrap();
    let out = common::run(&format!(
        "bench-queries --store {} --table hits --queries {}",
        p(&store),
        p(&queries)
    ));
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("1 of 2 statements failed"), "{stdout}");
}

#[test]
fn bench_queries_refuses_a_write_in_its_file_before_running_any() {
    let dir = tempfile::tempdir().unwrap();
    let store = table(dir.path(), "hits");
    let outside = dir.path().join("out.csv");
    let queries = dir.path().join("q.sql");
    std::fs::write(
        &queries,
        format!(
            "SELECT COUNT(*) FROM hits\n-- a comment\nCOPY (SELECT 1 AS x) TO '{}' STORED AS CSV\n",
            p(&outside)
        ),
    )
    .unwrap();
    let out = common::run(&format!(
        "bench-queries --store {} --table hits --queries {}",
        p(&store),
        p(&queries)
    ));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("line 3") && err.contains("read-only"), "{err}");
    assert!(!outside.exists());
    // Nothing ran: no result rows, only (at most) the header.
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.lines().count() <= 1, "{stdout}");
}
