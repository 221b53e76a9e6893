//! `compact` through the binary: a table of several overlapping runs ends as one sequence in
//! clustering order with the same answers; older versions stay readable until gc's retention;
//! a second compaction writes nothing; changing the key and compacting re-clusters the table.

use std::path::{Path, PathBuf};

use crate::common::{fails, line, ok, p};

pub(crate) fn hits_store(dir: &Path) -> PathBuf {
    let store = dir.join("store");
    let layout = |args: &str| ok(&format!("layout --store {} --table hits {args}", p(&store)));
    layout("schema set --hits");
    layout("clustering-key set --column EventDate --column UserID --bucket-width 1d");
    layout("bloom-scope set --scope text");
    store
}

pub(crate) fn generated(dir: &Path, name: &str, rows: u64, seed: u64) -> PathBuf {
    let out = dir.join(name);
    ok(&format!(
        "gen --rows {rows} --seed {seed} --out {}",
        p(&out)
    ));
    out
}

/// A load into objects of about 60 KB, its runs left as they are (no maintenance).
pub(crate) fn load(store: &str, input: &Path) {
    ok(&format!(
        "load --store {store} --table hits --input {} --object-bytes 60000 --no-maintain",
        p(input)
    ));
}

pub(crate) fn json(args: &str) -> serde_json::Value {
    serde_json::from_str(&ok(args)).unwrap()
}

/// COUNT, a sum and a filtered count, as CSV.
pub(crate) fn answers(store: &str, version: Option<u64>) -> String {
    let at = version.map_or(String::new(), |v| format!(" --version {v}"));
    let sql = "SELECT COUNT(*), SUM(\"UserID\" % 1000), SUM(CASE WHEN \"CounterID\" < 100 THEN 1 ELSE 0 END) FROM hits";
    ok(&line(
        &format!("query --store {store} --table hits --format csv{at}"),
        &[sql],
    ))
}

#[test]
fn compaction_ends_with_one_sequence_and_the_same_answers() {
    let dir = tempfile::tempdir().unwrap();
    let store = hits_store(dir.path());
    let s = p(&store);
    // Four loads: four runs, each across the key space.
    for (i, rows) in [6_000, 5_000, 5_000, 4_000].into_iter().enumerate() {
        let input = generated(dir.path(), &format!("{i}.parquet"), rows, i as u64 + 1);
        load(s, &input);
    }
    let before = answers(s, None);
    let verified = json(&format!("verify --store {s} --table hits --json"));
    assert!(
        verified["overlap"]["max_depth"].as_u64().unwrap() > 2,
        "{verified}"
    );

    let dry = json(&format!(
        "compact --store {s} --table hits --dry-run --json"
    ));
    assert_eq!(dry["version"], serde_json::Value::Null);
    assert!(dry["input_objects"].as_u64().unwrap() > 2, "{dry}");
    let report = json(&format!(
        "compact --store {s} --table hits --object-bytes 60000 --fan-in 3 --json"
    ));
    assert_eq!(report["read_version"], 3, "{report}");
    assert_eq!(report["output_rows"], 20_000);
    assert_eq!(report["input_rows"], 20_000);
    assert_eq!(report["depth_after"], 1, "{report}");
    assert!(report["passes"].as_u64().unwrap() >= 2, "{report}");
    let version = report["version"].as_u64().unwrap();
    assert!(version >= 2);

    assert_eq!(answers(s, None), before);
    // A reader of the version before the compaction reads the objects it replaced.
    assert_eq!(answers(s, Some(3)), before);
    let deep = json(&format!("verify --store {s} --table hits --deep --json"));
    assert_eq!(deep["violations"], serde_json::json!([]), "{deep}");
    assert_eq!(deep["rows"], 20_000);
    assert!(deep["removed"].as_u64().unwrap() > 0);
    assert_eq!(deep["removed_stored"], deep["removed"]);
    // The replaced objects' sidecars are counted with them, not as orphans.
    assert_eq!(deep["orphans"], serde_json::json!([]), "{deep}");

    let again = ok(&format!("compact --store {s} --table hits"));
    assert!(again.contains("nothing to compact"), "{again}");

    // Within the retention gc keeps the replaced objects; past it, deletes them.
    let kept = json(&format!("gc --store {s} --table hits --dry-run --json"));
    assert!(
        kept["unreferenced"]
            .as_array()
            .unwrap()
            .iter()
            .all(|u| u["removed"] == true),
        "{kept}"
    );
    ok(&format!("gc --store {s} --table hits"));
    assert_eq!(answers(s, Some(3)), before, "kept within 24h");
    ok(&format!("gc --store {s} --table hits --older-than 0s"));
    assert_eq!(answers(s, None), before);
    // The version before the compaction reads objects gc has collected: said so, not a
    // Parquet error.
    let err = fails(
        1,
        &line(
            &format!("query --store {s} --table hits --version 3"),
            &["SELECT COUNT(*) FROM hits"],
        ),
    );
    assert!(
        err.contains("version 3 can no longer be read: gc collected"),
        "{err}"
    );
    let after = json(&format!("verify --store {s} --table hits --deep --json"));
    assert_eq!(after["violations"], serde_json::json!([]), "{after}");
    assert_eq!(after["removed_stored"], 0);
    assert_eq!(after["orphans"], serde_json::json!([]));
}

#[test]
fn a_bounded_compaction_commits_key_ranges_in_steps() {
    let dir = tempfile::tempdir().unwrap();
    let store = hits_store(dir.path());
    let s = p(&store);
    for (i, rows) in [6_000, 5_000, 5_000].into_iter().enumerate() {
        let input = generated(dir.path(), &format!("{i}.parquet"), rows, i as u64 + 11);
        load(s, &input);
    }
    let before = answers(s, None);
    let dry = json(&format!(
        "compact --store {s} --table hits --dry-run --json"
    ));
    let total = dry["input_bytes"].as_u64().unwrap();
    let report = json(&format!(
        "compact --store {s} --table hits --object-bytes 60000 --max-input-bytes {} --json",
        total / 4
    ));
    let steps = report["steps"].as_u64().unwrap();
    assert!(steps >= 2, "{report}");
    assert_eq!(report["read_version"], 2, "{report}");
    assert_eq!(
        report["version"],
        2 + steps,
        "one version per step: {report}"
    );
    assert_eq!(report["depth_after"], 1, "{report}");
    assert_eq!(report["output_rows"], 16_000, "{report}");
    assert_eq!(report["input_rows"], 16_000, "{report}");
    assert!(report["written_bytes"].as_u64() >= report["output_bytes"].as_u64());
    assert_eq!(answers(s, None), before);
    let deep = json(&format!("verify --store {s} --table hits --deep --json"));
    assert_eq!(deep["violations"], serde_json::json!([]), "{deep}");
    assert_eq!(deep["rows"], 16_000);
    assert_eq!(deep["overlap"]["max_depth"], 1, "{deep}");
    let again = ok(&format!(
        "compact --store {s} --table hits --max-input-bytes 1"
    ));
    assert!(again.contains("nothing to compact"), "{again}");
}

#[test]
fn load_with_compact_ends_globally_clustered_in_one_command() {
    let dir = tempfile::tempdir().unwrap();
    let store = hits_store(dir.path());
    let s = p(&store);
    // Three inputs, each past the run trigger: three runs across the key space.
    let inputs: Vec<PathBuf> = (0..3)
        .map(|i| generated(dir.path(), &format!("{i}.parquet"), 4_000, 21 + i))
        .collect();
    let named: Vec<&str> = inputs.iter().map(|i| p(i)).collect();
    let r = json(&format!(
        "load --store {s} --table hits --input {} --object-bytes 60000 --target-bytes 600000 --compact --json",
        named.join(" ")
    ));
    assert!(r["runs"].as_u64().unwrap() >= 3, "{r}");
    assert_eq!(r["rows"], 12_000, "{r}");
    assert_eq!(r["version"], 0, "one version, the load's: {r}");
    assert!(
        r["written_bytes"].as_u64() > r["stored_bytes"].as_u64(),
        "{r}"
    );
    let deep = json(&format!("verify --store {s} --table hits --deep --json"));
    assert_eq!(deep["violations"], serde_json::json!([]), "{deep}");
    assert_eq!(deep["overlap"]["max_depth"], 1, "{deep}");
    assert_eq!(deep["rows"], 12_000);
    assert_eq!(deep["objects"], r["objects"], "{deep}");
    // The spill is gone: nothing is left unreferenced.
    assert_eq!(deep["orphans"], serde_json::json!([]), "{deep}");
    assert!(ok(&format!("compact --store {s} --table hits")).contains("nothing to compact"));
    // The table's totals count the spill as written and the published objects as loaded.
    let totals = json(&format!(
        "compact --store {s} --table hits --dry-run --json"
    ));
    let stored = r["stored_bytes"].as_u64().unwrap();
    assert_eq!(
        totals["loaded_bytes_total"].as_u64(),
        Some(stored),
        "{totals}"
    );
    assert_eq!(
        totals["written_bytes_total"].as_u64(),
        Some(r["written_bytes"].as_u64().unwrap() - stored),
        "{totals}"
    );

    // Rows that fit one run are published as it, nothing spilled; rows already in the table
    // are left to `compact`.
    let small = generated(dir.path(), "small.parquet", 1_500, 31);
    let r = json(&format!(
        "load --store {s} --table hits --input {} --object-bytes 60000 --compact --json",
        p(&small)
    ));
    assert_eq!(
        (r["runs"].as_u64(), r["spill_bytes"].as_u64()),
        (Some(1), Some(0)),
        "{r}"
    );
    assert_eq!(r["version"], 1, "{r}");
    let both = json(&format!("verify --store {s} --table hits --json"));
    assert_eq!(both["overlap"]["max_depth"], 2, "{both}");
    let c = json(&format!(
        "compact --store {s} --table hits --object-bytes 60000 --json"
    ));
    assert_eq!(c["depth_after"], 1, "{c}");

    // Without a clustering key there is no order to end in: refused, nothing loaded.
    ok(&format!(
        "layout --store {s} --table flat schema set --hits"
    ));
    let err = fails(
        2,
        &format!(
            "load --store {s} --table flat --input {} --compact",
            named[0]
        ),
    );
    assert!(err.contains("no clustering key"), "{err}");
    let versions = json(&format!("verify --store {s} --table flat --json"));
    assert_eq!(versions["rows"], 0, "{versions}");
}

#[test]
fn load_with_compact_reads_parquet_a_column_at_a_time_when_the_rows_pass_one_run() {
    let dir = tempfile::tempdir().unwrap();
    let store = hits_store(&dir.path().join("by-columns"));
    let s = p(&store);
    let inputs: Vec<PathBuf> = (0..3)
        .map(|i| generated(dir.path(), &format!("{i}.parquet"), 4_000, 41 + i))
        .collect();
    let named = inputs.iter().map(|i| p(i)).collect::<Vec<_>>().join(" ");
    // A budget whose run trigger the 12,000 rows pass, while their order fits it.
    let r = json(&format!(
        "load --store {s} --table hits --input {named} --object-bytes 60000 --load-budget 20000000 --compact --no-maintain --json"
    ));
    assert_eq!(r["by_columns"], true, "{r}");
    assert_eq!(
        (r["runs"].as_u64(), r["spill_bytes"].as_u64()),
        (Some(1), Some(0)),
        "{r}"
    );
    assert_eq!(
        r["written_bytes"], r["stored_bytes"],
        "nothing spilled to the store: {r}"
    );
    assert!(r["write"]["local_spill_bytes"].as_u64() > Some(0), "{r}");
    assert!(r["objects"].as_u64() > Some(3), "{r}");
    let deep = json(&format!("verify --store {s} --table hits --deep --json"));
    assert_eq!(deep["violations"], serde_json::json!([]), "{deep}");
    assert_eq!(deep["overlap"]["max_depth"], 1, "{deep}");
    assert_eq!(deep["rows"], 12_000);
    assert_eq!(deep["orphans"], serde_json::json!([]), "{deep}");
    // The same rows as a load that sorts them in runs.
    let runs = hits_store(&dir.path().join("runs"));
    let r = json(&format!(
        "load --store {} --table hits --input {named} --object-bytes 60000 --target-bytes 600000 --compact --no-maintain --json",
        p(&runs)
    ));
    assert_eq!(r["by_columns"], false, "{r}");
    assert_eq!(answers(p(&runs), None), answers(s, None));
}

#[test]
fn a_new_key_and_a_compaction_recluster_the_table() {
    let dir = tempfile::tempdir().unwrap();
    let store = hits_store(dir.path());
    let s = p(&store);
    load(s, &generated(dir.path(), "a.parquet", 12_000, 3));
    let before = answers(s, None);
    let layout = |args: &str| ok(&format!("layout --store {s} --table hits {args}"));
    layout("stream clear");
    layout("clustering-key set --column URLHash --bucket-width 5200w");
    let report = json(&format!(
        "compact --store {s} --table hits --object-bytes 60000 --json"
    ));
    assert_eq!(report["output_rows"], 12_000, "{report}");
    assert_eq!(answers(s, None), before);
    let deep = json(&format!("verify --store {s} --table hits --deep --json"));
    assert_eq!(deep["violations"], serde_json::json!([]), "{deep}");
    assert_eq!(deep["overlap"]["max_depth"], 1, "{deep}");
    // A point statement on the new key touches one object.
    let hash = ok(&line(
        &format!("query --store {s} --table hits --format csv"),
        &["SELECT \"URLHash\" FROM hits ORDER BY \"URLHash\" LIMIT 1 OFFSET 6000"],
    ));
    let hash = hash.lines().nth(1).unwrap().to_string();
    let out = crate::common::run(&line(
        &format!("query --store {s} --table hits --stats"),
        &[&format!(
            "SELECT COUNT(*) FROM hits WHERE \"URLHash\" = {hash}"
        )],
    ));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("objects touched 1 of"), "{stderr}");
}

#[test]
fn compacting_a_table_without_a_clustering_key_is_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let s = p(&store);
    ok(&format!(
        "layout --store {s} --table flat schema set --hits"
    ));
    let input = generated(dir.path(), "a.parquet", 2_000, 4);
    ok(&format!(
        "load --store {s} --table flat --input {}",
        p(&input)
    ));
    let err = fails(2, &format!("compact --store {s} --table flat"));
    assert!(err.contains("no clustering key"), "{err}");
    let err = fails(2, &format!("compact --store {s} --table nothing"));
    assert!(err.contains("nothing"), "{err}");
    // The library's refusal, in its words.
    let err = fails(2, &format!("compact --store {s} --table flat --fan-in 1"));
    assert!(err.contains("fan-in must be at least 2"), "{err}");
}
