//! Exactly once past the inputs window: a rerun the table still remembers publishes nothing;
//! once a checkpoint forgot the load, the rerun is refused (exit 2, naming the file and the
//! window) and publishes nothing, unless `--reload`; a new table takes files far older than
//! its window (a backfill).

use std::path::Path;
use std::time::{Duration, SystemTime};

use super::{hits, load_json, rows};
use crate::common::p;
use crate::compact::generated;
use crate::place::Place;

/// Sets `path`'s modification time to `age` ago.
fn aged(path: &Path, age: Duration) {
    let file = std::fs::File::options().write(true).open(path).unwrap();
    file.set_modified(SystemTime::now() - age).unwrap();
}

fn rerun_past_the_window(place: &Place) {
    let dir = tempfile::tempdir().unwrap();
    let s = &hits(place);
    let year = Duration::from_secs(365 * 86_400);
    // A backfill: files a year old load into a new table, whose window forgot nothing.
    let old = generated(dir.path(), "old.parquet", 2_000, 1);
    let older = generated(dir.path(), "older.parquet", 2_000, 2);
    aged(&old, year);
    aged(&older, year);
    load_json(place, s, &old, "--no-maintain");
    load_json(place, s, &older, "--no-maintain");
    place.ok(&format!(
        "layout --store {s} --table hits retention set --inputs 4s"
    ));
    let fresh = generated(dir.path(), "fresh.parquet", 2_000, 3);
    load_json(place, s, &fresh, "--no-maintain");
    std::thread::sleep(Duration::from_millis(4_500));
    // Past the window, but no checkpoint forgot it yet: remembered, published already.
    let again = load_json(place, s, &fresh, "--no-maintain");
    assert_eq!(again["already_published"], true, "{again}");
    // The merge's checkpoint leaves out the identities older than the window.
    place.ok(&format!("compact --store {s} --table hits"));
    for input in [&fresh, &old] {
        let cmd = format!(
            "load --store {s} --table hits --input {} --no-maintain",
            p(input)
        );
        let err = place.fails(2, &cmd);
        let name = input.file_name().unwrap().to_str().unwrap();
        assert!(
            err.contains(name) && err.contains("interval 4 seconds") && err.contains("--reload"),
            "{err}"
        );
    }
    assert_eq!(rows(place, s), 6_000, "nothing published");
    // A file that changed within the window is new, and loads.
    let new = generated(dir.path(), "new.parquet", 1_000, 4);
    load_json(place, s, &new, "--no-maintain");
    assert_eq!(rows(place, s), 7_000);
    // On purpose: loaded again, its rows count twice.
    let reload = load_json(place, s, &fresh, "--no-maintain --reload");
    assert_eq!(reload["already_published"], false, "{reload}");
    assert_eq!(rows(place, s), 9_000);
}

#[test]
fn a_rerun_past_the_inputs_window_is_refused_once_forgotten_and_a_new_table_takes_old_files() {
    rerun_past_the_window(&Place::local());
}

#[test]
fn a_rerun_past_the_inputs_window_is_refused_once_forgotten_and_a_new_table_takes_old_files_on_s3()
{
    rerun_past_the_window(&Place::s3());
}
