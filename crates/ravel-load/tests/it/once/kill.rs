//! Exactly once against kill -9 and concurrent loads, with real `ravel-load load` processes: a
//! load killed right after its maintenance committed its merge, and loads racing each other's
//! maintenance (some exit 4: published, maintenance failed), are run again; the table ends with
//! every input's rows once. On a local store and on a real S3 server (s3s-fs, in-process).

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use crate::common::{line, p};
use crate::compact::generated;
use crate::place::Place;

/// How long a load may take to reach its merge.
const TIMEOUT: Duration = Duration::from_secs(180);

/// (rows, distinct WatchIDs) of the newest version, as `query` counts them.
fn counts(place: &Place, store: &str) -> (u64, u64) {
    let sql = "SELECT COUNT(*), COUNT(DISTINCT \"WatchID\") FROM hits";
    let csv = place.ok(&line(
        &format!("query --store {store} --table hits --format csv"),
        &[sql],
    ));
    let row: Vec<u64> = crate::common::first_row(&csv);
    (row[0], row[1])
}

/// The versions in the log directory `log`.
fn versions(log: &Path) -> Vec<u64> {
    let mut v: Vec<u64> = crate::common::files(log)
        .iter()
        .filter(|f| f.extension().is_some_and(|e| e == "json"))
        .filter_map(|f| f.file_stem()?.to_str()?.parse().ok())
        .collect();
    v.sort_unstable();
    v
}

/// Watches the log directory for the first version after `after` whose entry's commitInfo is a
/// merge (`OPTIMIZE`, what maintenance commits). It looks only at the entries it has not ruled
/// out, by name, so that polling every millisecond costs the load it races almost nothing.
struct MergeWatch<'a> {
    log: &'a Path,
    /// The next version to look at: every one before it is there and is not a merge.
    next: u64,
}

impl<'a> MergeWatch<'a> {
    fn after(log: &'a Path, after: u64) -> Self {
        MergeWatch {
            log,
            next: after + 1,
        }
    }

    /// Whether a merge is committed; `false` while there is none. An entry whose first line
    /// (its commitInfo) does not parse yet is being written: it is read again.
    fn merged(&mut self) -> bool {
        loop {
            let entry = self.log.join(format!("{:020}.json", self.next));
            let Ok(text) = std::fs::read_to_string(&entry) else {
                return false;
            };
            let first = text.lines().next().unwrap_or_default();
            match serde_json::from_str::<serde_json::Value>(first) {
                Ok(action) if action["commitInfo"]["operation"] == "OPTIMIZE" => return true,
                Ok(_) => self.next += 1,
                Err(_) => return false,
            }
        }
    }
}

/// How a load watched for its merge ended.
#[derive(Debug, PartialEq)]
enum Ending {
    /// Killed after the merge's entry was there.
    Killed,
    /// Ended on its own first (a local store gives the test a short moment).
    Finished,
}

/// Waits until `child`'s maintenance committed a merge after version `after`, then kills it
/// with SIGKILL unless it ended on its own first (then it must have succeeded).
fn kill_after_merge(mut child: Child, log: &Path, after: u64) -> Ending {
    use std::os::unix::process::ExitStatusExt;
    let started = Instant::now();
    let mut watch = MergeWatch::after(log, after);
    while !watch.merged() {
        let ended = child.try_wait().unwrap();
        if let Some(status) = ended.filter(|_| !watch.merged()) {
            let out = child.wait_with_output().unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            panic!("the load ended ({status}) without a merge: {err}");
        }
        assert!(started.elapsed() < TIMEOUT, "no merge committed");
        std::thread::sleep(Duration::from_millis(1));
    }
    if child.try_wait().unwrap().is_none() {
        child.kill().unwrap(); // SIGKILL
    }
    let out = child.wait_with_output().unwrap();
    match out.status.signal() {
        Some(9) => Ending::Killed,
        _ => {
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success(), "{err}");
            Ending::Finished
        }
    }
}

/// Loads each of `inputs` after a first one, each killed right after its maintenance committed
/// its merge (policy full: every load's maintenance merges the table into one sequence), then
/// run again. On S3 the server holds the merge's checksum file (written right after its entry),
/// so every kill lands there; on a local store the kill lands when the test is quick enough.
fn killed_after_the_merge(place: &Place) -> Vec<Ending> {
    let dir = tempfile::tempdir().unwrap();
    let s = &place.hits_store("store");
    place.ok(&format!(
        "layout --store {s} --table hits maintenance set --policy full"
    ));
    let log = place.dir("store/hits/_delta_log");
    let inputs: Vec<PathBuf> = (0..4)
        .map(|i| generated(dir.path(), &format!("in{i}.parquet"), 12_000, 70 + i))
        .collect();
    let args = |input: &Path| {
        format!(
            "load --store {s} --table hits --input {} --object-bytes 250000 --zstd-level 1 --json",
            p(input)
        )
    };
    place.ok(&format!("{} --no-maintain", args(&inputs[0])));
    let mut endings = Vec::new();
    for (i, input) in inputs.iter().enumerate().skip(1) {
        let newest = *versions(&log).last().unwrap();
        // The load takes newest + 1, its merge newest + 2.
        if let Place::S3(server) = place {
            let crc = format!("/hits/_delta_log/{:020}.crc", newest + 2);
            server.stall(http::Method::PUT, &crc, 0);
        }
        let child = place
            .command(&args(input))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        endings.push(kill_after_merge(child, &log, newest + 1));
        if let Place::S3(server) = place {
            server.clear_stalls();
        }
        // The same command again: published already (the killed run's version), maintained.
        let again = place.json(&args(input));
        assert_eq!(again["already_published"], true, "{again}");
        assert_eq!(again["version"], newest + 1, "{again}");
        let rows = 12_000 * (i as u64 + 1);
        assert_eq!(counts(place, s), (rows, rows), "load {i}: every row once");
    }
    let report = place.json(&format!("verify --store {s} --table hits --deep --json"));
    assert_eq!(report["violations"], serde_json::json!([]), "{report}");
    assert_eq!(report["rows"], 48_000, "{report}");
    endings
}

#[test]
fn a_load_killed_right_after_its_maintenance_merged_reruns_to_every_row_once() {
    let endings = killed_after_the_merge(&Place::local());
    eprintln!("local loads after their merge: {endings:?}");
}

#[test]
fn a_load_killed_right_after_its_maintenance_merged_reruns_to_every_row_once_on_s3() {
    let endings = killed_after_the_merge(&Place::s3());
    assert_eq!(endings, [Ending::Killed, Ending::Killed, Ending::Killed]);
}

/// Rounds of loads started at once into one table, each followed by its maintenance (policy
/// full: every one merges the whole table, so they race each other's merges). A load exits 0,
/// or 4 when its maintenance lost every retry (its rows published); a load that exits 4 is run
/// again and must then publish nothing. Every load is finally run again too. Whatever the race
/// did, the table holds each input's rows once.
fn concurrent_loads_racing_their_maintenance(place: &Place) -> usize {
    let dir = tempfile::tempdir().unwrap();
    let s = &place.hits_store("store");
    place.ok(&format!(
        "layout --store {s} --table hits maintenance set --policy full"
    ));
    let args = |input: &Path| {
        format!(
            "load --store {s} --table hits --input {} --object-bytes 250000 --zstd-level 1 --json",
            p(input)
        )
    };
    let mut inputs = Vec::new();
    let mut exits4 = 0;
    for round in 0..2u64 {
        let batch: Vec<PathBuf> = (0..4)
            .map(|i| {
                generated(
                    dir.path(),
                    &format!("r{round}-{i}.parquet"),
                    3_000,
                    80 + round * 4 + i,
                )
            })
            .collect();
        let children: Vec<Child> = batch
            .iter()
            .map(|input| {
                place
                    .command(&args(input))
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for (child, input) in children.into_iter().zip(&batch) {
            let out = child.wait_with_output().unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            match out.status.code() {
                Some(0) => {}
                Some(4) => {
                    exits4 += 1;
                    assert!(err.contains("published as version"), "{err}");
                    let again = place.json(&args(input));
                    assert_eq!(again["already_published"], true, "{again}");
                }
                other => panic!("round {round}: exit {other:?}: {err}"),
            }
        }
        inputs.extend(batch);
        let rows = 3_000 * inputs.len() as u64;
        assert_eq!(counts(place, s), (rows, rows), "round {round}");
    }
    for input in &inputs {
        let again = place.json(&args(input));
        assert_eq!(again["already_published"], true, "{again}");
    }
    assert_eq!(counts(place, s), (24_000, 24_000));
    let report = place.json(&format!("verify --store {s} --table hits --json"));
    assert_eq!(report["violations"], serde_json::json!([]), "{report}");
    exits4
}

#[test]
fn concurrent_loads_racing_their_maintenance_end_with_every_row_once() {
    let exits4 = concurrent_loads_racing_their_maintenance(&Place::local());
    eprintln!("loads that exited 4: {exits4}");
}

#[test]
fn concurrent_loads_racing_their_maintenance_end_with_every_row_once_on_s3() {
    let exits4 = concurrent_loads_racing_their_maintenance(&Place::s3());
    eprintln!("loads that exited 4: {exits4}");
}
