//! Maintenance through the binary: every load ends with the table's policy (`--no-maintain`
//! skips it), the depth stays within its bound, the answers are those of the same rows
//! compacted, `maintain` says when there is nothing to do, and impossible policies are refused.

use crate::common::{fails, ok, p};
use crate::compact::{answers, generated, hits_store, json, load};

/// Loads of similar size into a table whose policy merges tiers of two and allows depth 3.
#[test]
fn every_load_ends_with_maintenance_within_the_depth_bound() {
    let dir = tempfile::tempdir().unwrap();
    let store = hits_store(&dir.path().join("p"));
    let s = p(&store);
    ok(&format!(
        "layout --store {s} --table hits maintenance set --size-ratio 2 --max-depth 3"
    ));
    let shown = ok(&format!("layout --store {s} --table hits maintenance show"));
    assert!(
        shown.contains("size ratio: 2") && shown.contains("max depth: 3"),
        "{shown}"
    );
    let baseline = hits_store(&dir.path().join("c"));
    let mut merged = 0;
    for i in 0..6u64 {
        let input = generated(dir.path(), &format!("{i}.parquet"), 3_000, i + 1);
        let report = json(&format!(
            "load --store {s} --table hits --input {} --object-bytes 60000 --json",
            p(&input)
        ));
        let m = &report["maintenance"];
        assert_eq!(m["depth_bound"], 3, "{m}");
        assert!(m["depth_after"].as_u64().unwrap() <= 3, "{m}");
        merged += m["steps"].as_u64().unwrap();
        load(p(&baseline), &input);
    }
    assert!(merged > 0, "tiers of two similar loads merged");
    let again = ok(&format!("maintain --store {s} --table hits"));
    assert!(again.contains("nothing to maintain"), "{again}");
    let report = json(&format!("maintain --store {s} --table hits --json"));
    // The totals: every load's bytes, the merges' bytes; a merge of every run started the
    // since-full figures over.
    let loaded = report["loaded_bytes_total"].as_u64().unwrap();
    assert!(loaded > 0, "{report}");
    assert!(
        report["written_bytes_total"].as_u64().unwrap() > 0,
        "{report}"
    );
    assert!(
        report["loaded_since_full_bytes"].as_u64().unwrap() <= loaded,
        "{report}"
    );
    let deep = json(&format!("verify --store {s} --table hits --deep --json"));
    assert_eq!(deep["violations"], serde_json::json!([]), "{deep}");
    assert_eq!(deep["rows"], 18_000);
    ok(&format!("compact --store {} --table hits", p(&baseline)));
    assert_eq!(answers(s, None), answers(p(&baseline), None));
}

#[test]
fn no_maintain_leaves_the_runs_and_a_dry_run_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = hits_store(dir.path());
    let s = p(&store);
    ok(&format!(
        "layout --store {s} --table hits maintenance set --size-ratio 2 --max-depth 2"
    ));
    for i in 0..2u64 {
        let input = generated(dir.path(), &format!("{i}.parquet"), 3_000, i + 1);
        let report = json(&format!(
            "load --store {s} --table hits --input {} --no-maintain --json",
            p(&input)
        ));
        assert_eq!(report["maintenance"], serde_json::Value::Null, "{report}");
    }
    let dry = json(&format!(
        "maintain --store {s} --table hits --dry-run --json"
    ));
    assert_eq!(dry["version"], serde_json::Value::Null, "{dry}");
    assert!(dry["input_objects"].as_u64().unwrap() > 0, "{dry}");
    let done = json(&format!("maintain --store {s} --table hits --json"));
    assert_eq!(done["depth_after"], 1, "{done}");
    assert_eq!(done["read_version"], dry["read_version"]);
}

#[test]
fn impossible_policies_are_refused_naming_the_setting() {
    let dir = tempfile::tempdir().unwrap();
    let store = hits_store(dir.path());
    let s = p(&store);
    let before = ok(&format!("layout --store {s} --table hits show"));
    for (args, setting) in [
        ("--size-ratio 1", "size-ratio"),
        ("--size-ratio 4 --max-depth 3", "max-depth"),
        ("--max-depth 100", "max-depth"),
        ("--policy sometimes", "policy"),
    ] {
        let err = fails(
            2,
            &format!("layout --store {s} --table hits maintenance set {args}"),
        );
        assert!(err.contains(setting), "{args}: {err}");
    }
    assert_eq!(ok(&format!("layout --store {s} --table hits show")), before);
}
