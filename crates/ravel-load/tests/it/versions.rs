//! Table versions through the binary: a table written before the log reads as its first
//! version and takes new loads; older versions stay readable.

use std::path::Path;

use crate::common::{line, ok, p};

/// Copies the table of `fixtures/legacy-table` (written before the log) into `dir`.
fn legacy_store(dir: &Path) -> std::path::PathBuf {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/legacy-table/store");
    let store = dir.join("store");
    copy_dir(&fixture, &store);
    store
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), &target).unwrap();
        }
    }
}

/// The count and a sum, as one CSV line.
fn count_and_sum(store: &str, version: Option<u64>) -> String {
    let at = version.map_or(String::new(), |v| format!(" --version {v}"));
    let out = ok(&line(
        &format!("query --store {store} --table hits --format csv{at}"),
        &["SELECT COUNT(*), SUM(\"UserID\" % 1000) FROM hits"],
    ));
    out.lines().nth(1).unwrap_or_default().to_string()
}

#[test]
fn a_table_from_before_the_log_reads_as_its_first_version_and_takes_loads() {
    let dir = tempfile::tempdir().unwrap();
    let store = legacy_store(dir.path());
    let s = p(&store);
    assert!(!store.join("hits/_delta_log").exists());
    assert_eq!(count_and_sum(s, None), "2500,1171107");
    assert_eq!(count_and_sum(s, Some(0)), "2500,1171107");
    let verified: serde_json::Value = serde_json::from_str(&ok(&format!(
        "verify --store {s} --table hits --deep --json"
    )))
    .unwrap();
    assert_eq!(verified["violations"], serde_json::json!([]), "{verified}");
    assert_eq!(
        (verified["version"].as_u64(), verified["versions"].as_u64()),
        (Some(0), Some(0))
    );

    let input = dir.path().join("c.parquet");
    ok(&format!("gen --rows 700 --seed 9 --out {}", p(&input)));
    ok(&format!(
        "load --store {s} --table hits --input {}",
        p(&input)
    ));
    // Entry 0 is the table as it was; entry 1 the load.
    assert!(
        store
            .join("hits/_delta_log/00000000000000000000.json")
            .is_file()
    );
    assert!(
        store
            .join("hits/_delta_log/00000000000000000001.json")
            .is_file()
    );
    assert_eq!(count_and_sum(s, Some(0)), "2500,1171107");
    let now = count_and_sum(s, None);
    assert!(now.starts_with("3200,"), "{now}");
    let verified: serde_json::Value = serde_json::from_str(&ok(&format!(
        "verify --store {s} --table hits --deep --json"
    )))
    .unwrap();
    assert_eq!(verified["violations"], serde_json::json!([]), "{verified}");
    assert_eq!(verified["version"], 1);
    assert_eq!(verified["manifests"], 3);
    assert_eq!(verified["rows"], 3200);
    // Nothing of the old table is unreferenced.
    let gc: serde_json::Value = serde_json::from_str(&ok(&format!(
        "gc --store {s} --table hits --dry-run --json"
    )))
    .unwrap();
    assert_eq!(gc["unreferenced"], serde_json::json!([]), "{gc}");
}
