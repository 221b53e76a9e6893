//! Each input loads once: the version that publishes a load's rows records its inputs, so the
//! same command run again publishes nothing, whatever merged the load's objects since
//! (maintenance, `compact`, a sorted load), and names the version that published them. A load
//! whose maintenance failed says it is published (exit 4); its rerun retries the maintenance.
//! `--reload` loads the inputs again on purpose; a load of inputs of which only some were
//! loaded is refused, and so is a file changed under a name a version loaded. The reruns run
//! on a local store and on a real S3 server (s3s-fs, in-process).

mod kill;
mod window;

use crate::common::{line, p};
use crate::compact::generated;
use crate::place::Place;

/// Rows of the newest version, as `verify` counts them.
fn rows(place: &Place, store: &str) -> u64 {
    let report = place.json(&format!("verify --store {store} --table hits --json"));
    report["rows"].as_u64().unwrap()
}

/// Distinct WatchIDs of the newest version.
fn distinct(place: &Place, store: &str) -> String {
    let sql = "SELECT COUNT(DISTINCT \"WatchID\") FROM hits";
    place.ok(&line(
        &format!("query --store {store} --table hits --format csv"),
        &[sql],
    ))
}

fn load_json(
    place: &Place,
    store: &str,
    input: &std::path::Path,
    extra: &str,
) -> serde_json::Value {
    place.json(&format!(
        "load --store {store} --table hits --input {} --object-bytes 60000 --json {extra}",
        p(input)
    ))
}

/// The hits table under prefix `store` of `place`; its `--store`.
fn hits(place: &Place) -> String {
    place.hits_store("store")
}

fn rerun_after_maintenance_merged_the_load(place: &Place) {
    let dir = tempfile::tempdir().unwrap();
    let s = &hits(place);
    place.ok(&format!(
        "layout --store {s} --table hits maintenance set --policy full"
    ));
    let one = generated(dir.path(), "s1.parquet", 4_000, 1);
    let two = generated(dir.path(), "s2.parquet", 4_000, 2);
    load_json(place, s, &one, "");
    let first = load_json(place, s, &two, "");
    let version = first["version"].as_u64().unwrap();
    assert!(
        first["maintenance"]["steps"].as_u64().unwrap() > 0,
        "{first}"
    );
    let before = distinct(place, s);
    // The merge replaced the load's objects: the rerun finds its inputs, not its objects.
    let again = load_json(place, s, &two, "");
    assert_eq!(again["already_published"], true, "{again}");
    assert_eq!(
        again["version"], version,
        "names the version that published it"
    );
    assert_eq!(again["load_id"], first["load_id"]);
    assert_eq!(rows(place, s), 8_000);
    assert_eq!(distinct(place, s), before);
    let text = place.ok(&format!(
        "load --store {s} --table hits --input {}",
        p(&two)
    ));
    assert!(
        text.contains(&format!("published already by version {version}")),
        "{text}"
    );
}

#[test]
fn a_rerun_after_maintenance_merged_the_load_publishes_nothing() {
    rerun_after_maintenance_merged_the_load(&Place::local());
}

#[test]
fn a_rerun_after_maintenance_merged_the_load_publishes_nothing_on_s3() {
    rerun_after_maintenance_merged_the_load(&Place::s3());
}

fn rerun_after_compact_and_reload(place: &Place) {
    let dir = tempfile::tempdir().unwrap();
    let s = &hits(place);
    let one = generated(dir.path(), "s1.parquet", 4_000, 1);
    let two = generated(dir.path(), "s2.parquet", 4_000, 2);
    load_json(place, s, &one, "--no-maintain");
    load_json(place, s, &two, "--no-maintain");
    place.ok(&format!("compact --store {s} --table hits"));
    let again = load_json(place, s, &two, "--no-maintain");
    assert_eq!(again["already_published"], true, "{again}");
    // A sorted load of the same file finds it too.
    let sorted = load_json(place, s, &two, "--compact --no-maintain");
    assert_eq!(sorted["already_published"], true, "{sorted}");
    assert_eq!(rows(place, s), 8_000);
    // Both files at once: both consumed, nothing to do.
    let both = place.json(&format!(
        "load --store {s} --table hits --input {} {} --json --no-maintain",
        p(&one),
        p(&two)
    ));
    assert_eq!(both["already_published"], true, "{both}");
    // On purpose: the rows count twice, and the version says so.
    let reload = load_json(place, s, &two, "--no-maintain --reload");
    assert_eq!(reload["already_published"], false, "{reload}");
    assert_eq!(rows(place, s), 12_000);
}

#[test]
fn a_rerun_after_compact_publishes_nothing_and_reload_loads_again_on_purpose() {
    rerun_after_compact_and_reload(&Place::local());
}

#[test]
fn a_rerun_after_compact_publishes_nothing_and_reload_loads_again_on_purpose_on_s3() {
    rerun_after_compact_and_reload(&Place::s3());
}

#[test]
fn a_load_of_inputs_some_of_which_were_loaded_is_refused() {
    let place = Place::local();
    let dir = tempfile::tempdir().unwrap();
    let s = &hits(&place);
    let one = generated(dir.path(), "s1.parquet", 2_000, 1);
    let two = generated(dir.path(), "s2.parquet", 2_000, 2);
    load_json(&place, s, &one, "--no-maintain");
    let err = place.fails(
        2,
        &format!(
            "load --store {s} --table hits --input {} {} --no-maintain",
            p(&one),
            p(&two)
        ),
    );
    assert!(
        err.contains("s1.parquet")
            && err.contains("loaded by version 0")
            && err.contains("--reload"),
        "{err}"
    );
    assert_eq!(rows(&place, s), 2_000, "nothing published");
    // A file rewritten in place: its name was loaded once already. Refused, naming it and
    // the version that loaded the name, unless loaded again on purpose.
    std::fs::copy(&two, &one).unwrap();
    let err = place.fails(
        2,
        &format!(
            "load --store {s} --table hits --input {} --no-maintain",
            p(&one)
        ),
    );
    assert!(
        err.contains("s1.parquet is not the file version 0 loaded under that name")
            && err.contains("--reload"),
        "{err}"
    );
    assert_eq!(rows(&place, s), 2_000, "nothing published");
    let changed = load_json(&place, s, &one, "--no-maintain --reload");
    assert_eq!(changed["already_published"], false, "{changed}");
    assert_eq!(rows(&place, s), 4_000);
}

fn maintenance_failed_then_retried(place: &Place) {
    let dir = tempfile::tempdir().unwrap();
    let s = &hits(place);
    place.ok(&format!(
        "layout --store {s} --table hits maintenance set --policy full"
    ));
    let one = generated(dir.path(), "s1.parquet", 4_000, 1);
    let two = generated(dir.path(), "s2.parquet", 4_000, 2);
    load_json(place, s, &one, "--no-maintain");
    // An object of the first load goes missing: the merge after the second load cannot read it.
    let victim = place.parquet_files("store/hits/data").remove(0);
    let aside = dir.path().join("aside.parquet");
    std::fs::rename(&victim, &aside).unwrap();
    let load = format!(
        "load --store {s} --table hits --input {} --object-bytes 60000",
        p(&two)
    );
    let out = place.run(&load);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{err}");
    assert!(err.contains("published as version 1"), "{err}");
    std::fs::rename(&aside, &victim).unwrap();
    // The rerun publishes nothing and maintains the table.
    let again = load_json(place, s, &two, "");
    assert_eq!(again["already_published"], true, "{again}");
    assert_eq!(again["version"], 1);
    assert!(
        again["maintenance"]["steps"].as_u64().unwrap() > 0,
        "{again}"
    );
    assert_eq!(rows(place, s), 8_000);
}

#[test]
fn a_published_load_whose_maintenance_failed_says_so_and_its_rerun_retries_it() {
    maintenance_failed_then_retried(&Place::local());
}

#[test]
fn a_published_load_whose_maintenance_failed_says_so_and_its_rerun_retries_it_on_s3() {
    maintenance_failed_then_retried(&Place::s3());
}

fn lost_newest_entry(place: &Place) {
    let dir = tempfile::tempdir().unwrap();
    let s = &hits(place);
    for (i, seed) in [(0, 1), (1, 2)] {
        let input = generated(dir.path(), &format!("s{i}.parquet"), 2_000, seed);
        load_json(place, s, &input, "--no-maintain");
    }
    let log = place.dir("store/hits/_delta_log");
    std::fs::remove_file(log.join("00000000000000000001.json")).unwrap();
    let objects = place.parquet_files("store/hits/data");
    let out = place.run(&format!("verify --store {s} --table hits --json"));
    assert_eq!(out.status.code(), Some(1));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let damaged = violation_of_kind(&report, "log_damaged");
    assert!(damaged.contains("version 1"), "{report}");
    let err = place.fails(
        1,
        &line(
            &format!("query --store {s} --table hits"),
            &["SELECT COUNT(*) FROM hits"],
        ),
    );
    assert!(err.contains("lost version 1"), "{err}");
    let err = place.fails(1, &format!("gc --store {s} --table hits --older-than 0s"));
    assert!(err.contains("lost version 1"), "{err}");
    assert_eq!(place.parquet_files("store/hits/data"), objects);
    // The checksum file gone too, the log reads as version 0; the manifest that version 1
    // wrote is still the evidence, and verify names it.
    std::fs::remove_file(log.join("00000000000000000001.crc")).unwrap();
    let report = place.json(&format!("verify --store {s} --table hits --json"));
    assert_eq!(report["version"], 0, "{report}");
    let unnamed = report["unnamed_manifests"].as_array().unwrap();
    assert_eq!(unnamed.len(), 1, "{report}");
    let text = place.ok(&format!("verify --store {s} --table hits"));
    assert!(
        text.contains("1 manifest(s) under _ravel/manifests/ that no version names"),
        "{text}"
    );
}

#[test]
fn a_lost_newest_entry_is_reported_and_nothing_is_read_or_collected() {
    lost_newest_entry(&Place::local());
}

#[test]
fn a_lost_newest_entry_is_reported_and_nothing_is_read_or_collected_on_s3() {
    lost_newest_entry(&Place::s3());
}

#[test]
fn a_checksum_file_that_disagrees_with_the_log_is_named_and_the_log_read() {
    let place = Place::local();
    let dir = tempfile::tempdir().unwrap();
    let s = &hits(&place);
    let input = generated(dir.path(), "s0.parquet", 2_000, 1);
    load_json(&place, s, &input, "--no-maintain");
    let crc = place.dir("store/hits/_delta_log/00000000000000000000.crc");
    let mut recorded: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&crc).unwrap()).unwrap();
    recorded["numFiles"] = serde_json::json!(recorded["numFiles"].as_u64().unwrap() + 1);
    std::fs::write(&crc, serde_json::to_vec(&recorded).unwrap()).unwrap();
    // The entry is the one the file was written for: the file is wrong, the log reads.
    let out = place.run(&line(
        &format!("query --store {s} --table hits --format csv"),
        &["SELECT COUNT(*) FROM hits"],
    ));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("2000"));
    assert!(
        err.contains("checksum file hits/_delta_log/00000000000000000000.crc records numFiles")
            && !err.contains("checkpoint is damaged"),
        "{err}"
    );
    let out = place.run(&format!("verify --store {s} --table hits --json"));
    assert_eq!(out.status.code(), Some(1));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["rows"], 2_000, "{report}");
    let wrong = violation_of_kind(&report, "checksum_mismatch");
    assert!(
        wrong.starts_with("records numFiles") && wrong.contains("the checksum file is wrong"),
        "{report}"
    );
}

/// The problem of `report`'s violation of kind `kind`, which must be there.
fn violation_of_kind(report: &serde_json::Value, kind: &str) -> String {
    let violations = report["violations"].as_array().expect("violations");
    let found = violations.iter().find(|v| v["kind"] == kind);
    let v = found.unwrap_or_else(|| panic!("no violation of kind {kind}: {report}"));
    v["problem"].as_str().expect("problem").to_string()
}
