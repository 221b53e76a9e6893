//! `ravel-load query` and `ravel-load bench-queries` on a loaded local table.

use crate::common::{Args, command, line, p, run, succeeds};

fn ok(args: &(impl Args + ?Sized)) -> (String, String) {
    succeeds(command(args))
}

/// Runs a benchmark in which a statement fails: exit 1, the results on stdout.
fn failed_bench(args: &str) -> String {
    let out = run(args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("1 of 3 statements"), "{err}");
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn query_and_bench_queries_on_a_loaded_table() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("h.parquet");
    let store = dir.path().join("store");
    let (s, i) = (p(&store), p(&input));
    ok(&format!("gen --rows 50000 --seed 4 --out {i}"));
    std::fs::create_dir_all(&store).unwrap();
    ok(&format!(
        "layout --store {s} --table hits schema set --hits"
    ));
    ok(&format!(
        "layout --store {s} --table hits clustering-key set --column EventDate --column UserID"
    ));
    ok(&format!(
        "load --store {s} --table hits --input {i} --object-bytes 1000000"
    ));
    // `query` on the table with the statement `sql`, after the options `options`.
    let query = |options: &str, sql: &str| {
        line(&format!("query --store {s} --table hits {options}"), &[sql])
    };

    let (out, err) = ok(&query(
        "--format csv --stats",
        "SELECT COUNT(*) AS n, MIN(\"EventDate\") AS d FROM hits",
    ));
    assert_eq!(out.lines().collect::<Vec<_>>(), ["n,d", "50000,2013-07-01"]);
    assert!(
        err.contains("GET(s)") && err.contains("objects touched"),
        "{err}"
    );
    let (out, _) = ok(&query(
        "--format json",
        "SELECT \"CounterID\", COUNT(*) AS c FROM hits WHERE \"CounterID\" = 62 GROUP BY \"CounterID\"",
    ));
    let rows: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(rows[0]["CounterID"], 62);
    assert!(rows[0]["c"].as_u64().unwrap() > 0);
    let (out, _) = ok(&query("", "SELECT 1 + 1 AS two"));
    assert!(out.contains("| two |") && out.contains("| 2   |"), "{out}");

    // Bad SQL and a missing table are the user's input: exit 2, named.
    let bad = run(&query("", "SELEC nothing"));
    assert_eq!(
        bad.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
    let bad = run(&line(
        &format!("query --store {s} --table nope"),
        &["SELECT 1"],
    ));
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("\"nope\""));

    // bench-queries: every statement cold and hot; a failing one is reported, the run goes on,
    // and the run exits 1.
    let queries = dir.path().join("q.sql");
    std::fs::write(
        &queries,
        "SELECT COUNT(*) FROM hits;\n\nSELECT \"NoSuchColumn\" FROM hits;\nSELECT \"URL\", COUNT(*) FROM hits WHERE \"CounterID\" = 62 GROUP BY \"URL\";\n",
    )
    .unwrap();
    let bench = format!(
        "bench-queries --store {s} --table hits --queries {}",
        p(&queries)
    );
    let out = failed_bench(&format!("{bench} --json"));
    let runs: serde_json::Value = serde_json::from_str(&out).unwrap();
    let runs = runs.as_array().unwrap();
    assert_eq!(runs.len(), 3);
    assert_eq!(runs[0]["number"], 1);
    assert_eq!(runs[0]["rows"], 1);
    assert!(runs[0]["cold_gets"].as_u64().unwrap() >= 2, "{}", runs[0]);
    assert!(runs[0]["hot_s"].as_f64().is_some());
    assert_eq!(runs[1]["number"], 3);
    assert!(runs[1]["error"].as_str().unwrap().contains("NoSuchColumn"));
    assert!(runs[2]["rows"].as_u64().unwrap() > 0);
    assert!(
        runs[2]["objects_kept"].as_u64().unwrap() < runs[2]["objects_total"].as_u64().unwrap(),
        "{}",
        runs[2]
    );
    let out = failed_bench(&bench);
    assert!(
        out.contains("total: cold") && out.contains("1 of 3 statements failed"),
        "{out}"
    );
}
