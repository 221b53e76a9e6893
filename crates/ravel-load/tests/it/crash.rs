//! Crash and resume, and loaders running side by side, against a real S3 server (s3s-fs,
//! in-process): `ravel-load load` processes killed with SIGKILL while reading, while uploading,
//! and between their last object and their manifest; the same command run again leaves the
//! table with exactly the input's rows, once. Objects of a killed run are reused by the rerun
//! (content-addressed names) or reported by `gc`. Concurrent loads of different inputs into one
//! table all become visible, every row once, no manifest overwriting another. `ravel-load
//! compact` killed while merging, while uploading and before its log entry leaves the version
//! before it; the rerun compacts, and `gc` collects what the killed run left. So does
//! `ravel-load maintain` killed while merging.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use ravel_testkit::{S3Server, StallHandle};

const TIMEOUT: Duration = Duration::from_secs(120);

use crate::common::{self, Args, p};

fn cmd(server: &S3Server, args: &(impl Args + ?Sized)) -> Command {
    let mut c = common::command(args);
    c.envs(server.env());
    c
}

fn ok(server: &S3Server, args: &(impl Args + ?Sized)) -> String {
    common::succeeds(cmd(server, args)).0
}

/// Starts the command `args` with its output captured.
fn spawn(server: &S3Server, args: &str) -> Child {
    cmd(server, args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Runs the load `args` until the server holds it at `stall` (`reached` says where), kills it
/// there, and returns what the table under `prefix` holds then: no manifest.
fn killed_at(
    server: &S3Server,
    prefix: &str,
    args: &str,
    stall: StallHandle,
    reached: &str,
) -> Table {
    let child = spawn(server, args);
    assert!(stall.wait(TIMEOUT), "{reached}");
    kill(child);
    server.clear_stalls();
    let left = table(server, prefix);
    assert!(
        left.manifests.is_empty(),
        "nothing published by the killed run"
    );
    left
}

fn generate(dir: &Path, name: &str, rows: u64, seed: u64) -> PathBuf {
    let path = dir.join(name);
    common::ok(&format!(
        "gen --rows {rows} --seed {seed} --out {}",
        p(&path)
    ));
    path
}

/// A store on the server with the hits table's schema and layout set.
fn hits_table(server: &S3Server, prefix: &str) -> String {
    let url = server.url(prefix);
    let layout = |args: &str| ok(server, &format!("layout --store {url} --table hits {args}"));
    layout("schema set --hits");
    layout("clustering-key set --column EventDate --column UserID --bucket-width 1d");
    layout("bloom-scope set --scope text");
    url
}

/// The load command of these tests: small objects, a small budget, so that a load of 60k rows
/// makes several runs of several objects, left as they are (no maintenance).
fn load_args(url: &str, input: &Path) -> String {
    format!(
        "load --store {url} --table hits --input {} --object-bytes 700000 --target-bytes 6000000 \
         --load-budget 60000000 --pipeline-depth 2 --zstd-level 1 --no-maintain --json",
        p(input)
    )
}

/// Manifests of the table as (key, rows, object and sidecar keys), and every object under
/// data/ and sidecar under _ravel/blooms/.
struct Table {
    manifests: Vec<(String, u64, Vec<String>)>,
    objects: Vec<String>,
    /// Manifests no version names (written by a run killed before its log entry).
    unnamed: Vec<String>,
}

fn table(server: &S3Server, prefix: &str) -> Table {
    let root = server.root().join(&server.bucket).join(prefix).join("hits");
    let list = |dir: &str| -> Vec<PathBuf> {
        let mut v = common::files(&root.join(dir));
        // s3s-fs keeps its own metadata and upload files next to objects: only ours count.
        v.retain(|p| {
            p.extension()
                .is_some_and(|e| e == "json" || e == "parquet" || e == "blooms")
        });
        v
    };
    // Published manifests are those a version of the log names.
    let named: std::collections::BTreeSet<String> = list("_delta_log")
        .iter()
        .flat_map(|p| {
            let text = std::fs::read_to_string(p).unwrap();
            text.lines()
                .filter_map(|l| {
                    let a: serde_json::Value = serde_json::from_str(l).unwrap();
                    Some(a["add"]["tags"]["ravel.manifest"].as_str()?.to_string())
                })
                .collect::<Vec<_>>()
        })
        .collect();
    let manifests = named
        .iter()
        .map(|m| root.join(m))
        .map(|p| {
            let m: serde_json::Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
            // The load's objects and its Bloom sidecar, which gc must keep like them.
            let objects: Vec<String> = m["objects"]
                .as_array()
                .unwrap()
                .iter()
                .map(|o| o["key"].as_str().unwrap().to_string())
                .chain(m["blooms"]["key"].as_str().map(str::to_string))
                .collect();
            let rows = m["objects"]
                .as_array()
                .unwrap()
                .iter()
                .map(|o| o["rows"].as_u64().unwrap())
                .sum();
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                rows,
                objects,
            )
        })
        .collect();
    let name = |p: PathBuf| p.file_name().unwrap().to_string_lossy().into_owned();
    let objects = list("data")
        .into_iter()
        .map(|p| format!("hits/data/{}", name(p)))
        .chain(
            list("_ravel/blooms")
                .into_iter()
                .map(|p| format!("hits/_ravel/blooms/{}", name(p))),
        )
        .collect();
    let unnamed = list("_ravel/manifests")
        .into_iter()
        .map(|p| {
            format!(
                "_ravel/manifests/{}",
                p.file_name().unwrap().to_string_lossy()
            )
        })
        .filter(|m| !named.contains(m))
        .map(|m| format!("hits/{m}"))
        .collect();
    Table {
        manifests,
        objects,
        unnamed,
    }
}

/// Kills a load with SIGKILL; it must still have been running (not ended on its own).
fn kill(mut child: Child) -> Output {
    use std::os::unix::process::ExitStatusExt;
    assert!(
        child.try_wait().unwrap().is_none(),
        "the command already ended"
    );
    child.kill().unwrap(); // SIGKILL
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.signal(),
        Some(9),
        "killed, not ended: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The rerun of the killed command: it succeeds, the table holds `rows` rows in one manifest,
/// deep verification passes, and the killed run's objects were reused or are reported by gc
/// (which then deletes them and leaves the table whole).
fn rerun_and_check(server: &S3Server, prefix: &str, args: &str, rows: u64, left: &[String]) {
    let report: serde_json::Value = serde_json::from_str(&ok(server, args)).unwrap();
    assert_eq!(report["rows"], rows);
    let t = table(server, prefix);
    assert_eq!(t.manifests.len(), 1, "one load published");
    assert_eq!(t.manifests[0].1, rows, "every row once");
    let url = server.url(prefix);
    ok(server, &format!("verify --store {url} --table hits --deep"));
    let referenced = &t.manifests[0].2;
    let gc: serde_json::Value = serde_json::from_str(&ok(
        server,
        &format!("gc --store {url} --table hits --dry-run --json"),
    ))
    .unwrap();
    let unreferenced: Vec<&str> = gc["unreferenced"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["key"].as_str().unwrap())
        .collect();
    for key in left {
        assert!(
            referenced.contains(key) || unreferenced.contains(&key.as_str()),
            "{key} of the killed run is neither reused nor reported by gc"
        );
    }
    // What gc reports is exactly what no version lists.
    let expected: Vec<&String> = t
        .objects
        .iter()
        .filter(|k| !referenced.contains(k))
        .chain(&t.unnamed)
        .collect();
    assert_eq!(
        unreferenced.len(),
        expected.len(),
        "{unreferenced:?} vs {expected:?}"
    );
    ok(
        server,
        &format!("gc --store {url} --table hits --older-than 0s"),
    );
    let after = table(server, prefix);
    assert_eq!(after.objects.len(), referenced.len());
    assert!(after.unnamed.is_empty(), "{:?}", after.unnamed);
    ok(server, &format!("verify --store {url} --table hits --deep"));
}

/// Killed after its manifest landed and before its log entry: the manifest publishes nothing.
#[test]
fn killed_between_the_manifest_and_the_log_entry_then_rerun_loads_every_row_once() {
    let server = S3Server::start();
    let dir = tempfile::tempdir().unwrap();
    let input = generate(dir.path(), "in.parquet", 60_000, 23);
    let url = hits_table(&server, "lg");
    let args = load_args(&url, &input);
    let stall = server.stall(http::Method::PUT, "/lg/hits/_delta_log/", 0);
    let left = killed_at(
        &server,
        "lg",
        &args,
        stall,
        "the load reached its log entry",
    );
    assert_eq!(
        left.unnamed.len(),
        1,
        "the killed run's manifest is there, unnamed"
    );
    rerun_and_check(&server, "lg", &args, 60_000, &left.objects);
}

#[test]
fn killed_while_uploading_then_rerun_loads_every_row_once() {
    let server = S3Server::start();
    let dir = tempfile::tempdir().unwrap();
    let input = generate(dir.path(), "in.parquet", 60_000, 21);
    let url = hits_table(&server, "up");
    let args = load_args(&url, &input);
    // The server takes three objects, then hangs on the fourth.
    let stall = server.stall(http::Method::PUT, "/up/hits/data/", 3);
    let left = killed_at(
        &server,
        "up",
        &args,
        stall,
        "the load reached its fourth upload",
    );
    assert_eq!(left.objects.len(), 3, "{:?}", left.objects);
    rerun_and_check(&server, "up", &args, 60_000, &left.objects);
    // Content-addressed names: the rerun encoded the same objects and reused them.
    let t = table(&server, "up");
    for key in &left.objects {
        assert!(t.manifests[0].2.contains(key), "{key} reused");
    }
}

#[test]
fn killed_between_the_last_object_and_the_manifest_then_rerun_loads_every_row_once() {
    let server = S3Server::start();
    let dir = tempfile::tempdir().unwrap();
    let input = generate(dir.path(), "in.parquet", 60_000, 22);
    let url = hits_table(&server, "mf");
    let args = load_args(&url, &input);
    let stall = server.stall(http::Method::PUT, "/mf/hits/_ravel/manifests/", 0);
    let left = killed_at(&server, "mf", &args, stall, "the load reached its manifest");
    assert!(left.objects.len() >= 4, "{:?}", left.objects);
    rerun_and_check(&server, "mf", &args, 60_000, &left.objects);
    let t = table(&server, "mf");
    assert_eq!(
        t.manifests[0].2.len(),
        left.objects.len(),
        "every object reused"
    );

    // Killed after the manifest landed (before the command could say so): the same command
    // again recognizes the published load and publishes nothing.
    let again: serde_json::Value = serde_json::from_str(&ok(&server, &args)).unwrap();
    assert_eq!(again["already_published"], true);
    let after = table(&server, "mf");
    assert_eq!(after.manifests.len(), 1, "not published twice");
    assert_eq!(after.manifests[0].1, 60_000);
    assert_eq!(
        again["load_id"].as_str().map(|id| format!("{id}.json")),
        Some(after.manifests[0].0.clone())
    );
}

#[test]
fn killed_while_reading_then_rerun_loads_every_row_once() {
    let server = S3Server::start();
    let dir = tempfile::tempdir().unwrap();
    let tsv = std::fs::read(generate(dir.path(), "in.tsv", 60_000, 23)).unwrap();
    let url = hits_table(&server, "rd");
    // The input is a named pipe: the load reads what the test writes, and waits for more.
    let fifo = dir.path().join("pipe.tsv");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let args = load_args(&url, &fifo);
    // The writer keeps the pipe open until told to close it: no end of input before the kill.
    let feed = |bytes: Vec<u8>| {
        let fifo = fifo.clone();
        let (written_tx, written_rx) = std::sync::mpsc::channel::<()>();
        let (close_tx, close_rx) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            let mut w = std::fs::OpenOptions::new().write(true).open(&fifo).unwrap();
            // The reader may be killed mid-write: a broken pipe is expected then.
            let _ = w.write_all(&bytes);
            let _ = written_tx.send(());
            let _ = close_rx.recv();
        });
        (thread, written_rx, close_tx)
    };
    let child = spawn(&server, &args);
    // Half the input, cut mid-line; write_all returns once the load has taken most of it.
    let (writer, written, close) = feed(tsv[..tsv.len() / 2].to_vec());
    written.recv_timeout(TIMEOUT).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    kill(child);
    drop(close);
    writer.join().unwrap();
    let left = table(&server, "rd");
    assert!(
        left.manifests.is_empty(),
        "nothing published by the killed run"
    );

    let (writer, _written, close) = feed(tsv);
    drop(close); // the whole input, then the end of it
    rerun_and_check(&server, "rd", &args, 60_000, &left.objects);
    writer.join().unwrap();
}

#[test]
fn concurrent_loaders_of_different_inputs_all_become_visible() {
    let server = S3Server::start();
    let dir = tempfile::tempdir().unwrap();
    let url = hits_table(&server, "cc");
    let inputs: Vec<PathBuf> = (0..3)
        .map(|i| generate(dir.path(), &format!("part-{i}.parquet"), 30_000, 40 + i))
        .collect();
    // Three loaders at once, as three machines each with a share of the files would run.
    let children: Vec<Child> = inputs
        .iter()
        .map(|input| spawn(&server, &load_args(&url, input)))
        .collect();
    let mut load_ids = Vec::new();
    for c in children {
        let out = c.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(report["rows"], 30_000);
        load_ids.push(report["load_id"].as_str().unwrap().to_string());
    }
    let t = table(&server, "cc");
    assert_eq!(t.manifests.len(), 3, "no manifest overwrote another");
    for id in &load_ids {
        assert!(
            t.manifests
                .iter()
                .any(|(k, _, _)| k == &format!("{id}.json"))
        );
    }
    let rows: u64 = t.manifests.iter().map(|m| m.1).sum();
    assert_eq!(rows, 90_000);
    let report: serde_json::Value = serde_json::from_str(&ok(
        &server,
        &format!("verify --store {url} --table hits --deep --json"),
    ))
    .unwrap();
    assert_eq!(report["rows"], 90_000);
    assert_eq!(report["manifests"], 3);
}

/// A table under `prefix` of two loads of several runs each, and the command that compacts it in
/// passes of three runs (intermediate objects), with small objects.
fn overlapping_table(server: &S3Server, prefix: &str, dir: &Path) -> (String, String) {
    let url = hits_table(server, prefix);
    for (i, seed) in [(0, 31), (1, 32)] {
        let input = generate(dir, &format!("{i}.parquet"), 20_000, seed);
        ok(server, &load_args(&url, &input));
    }
    let compact = format!(
        "compact --store {url} --table hits --object-bytes 700000 --load-budget 60000000 \
         --pipeline-depth 2 --fan-in 3 --zstd-level 1 --json"
    );
    (url, compact)
}

fn verified(server: &S3Server, url: &str) -> serde_json::Value {
    let out = ok(
        server,
        &format!("verify --store {url} --table hits --deep --json"),
    );
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["violations"], serde_json::json!([]), "{v}");
    v
}

/// Kills the compaction when the server holds it at `stall`; the table must still read as the
/// version before, a rerun must compact it, and gc must collect what the killed run left.
fn compaction_killed_at(server: &S3Server, url: &str, compact: &str, stall: StallHandle) {
    let before = verified(server, url);
    let child = spawn(server, compact);
    assert!(stall.wait(TIMEOUT), "the compaction reached the stall");
    kill(child);
    server.clear_stalls();
    let after_kill = verified(server, url);
    assert_eq!(
        after_kill["version"], before["version"],
        "the old version stands"
    );
    assert_eq!(after_kill["rows"], 40_000);
    assert_eq!(after_kill["objects"], before["objects"]);

    let report: serde_json::Value = serde_json::from_str(&ok(server, compact)).unwrap();
    assert_eq!(report["output_rows"], 40_000, "{report}");
    assert_eq!(report["depth_after"], 1, "{report}");
    ok(
        server,
        &format!("gc --store {url} --table hits --older-than 0s"),
    );
    let done = verified(server, url);
    assert_eq!(done["rows"], 40_000);
    assert_eq!(done["overlap"]["max_depth"], 1, "{done}");
    assert_eq!(done["orphans"], serde_json::json!([]), "{done}");
    assert_eq!(done["removed_stored"], 0, "{done}");
    let gc: serde_json::Value = serde_json::from_str(&ok(
        server,
        &format!("gc --store {url} --table hits --dry-run --json"),
    ))
    .unwrap();
    assert_eq!(gc["unreferenced"], serde_json::json!([]), "{gc}");
}

#[test]
fn a_compaction_killed_while_merging_leaves_the_old_version_and_reruns() {
    let server = S3Server::start();
    let dir = tempfile::tempdir().unwrap();
    let (url, compact) = overlapping_table(&server, "cm", dir.path());
    // Reads of the inputs' pages: the merge is under way.
    let stall = server.stall(http::Method::GET, "/cm/hits/data/", 40);
    compaction_killed_at(&server, &url, &compact, stall);
}

#[test]
fn a_compaction_killed_while_uploading_leaves_the_old_version_and_reruns() {
    let server = S3Server::start();
    let dir = tempfile::tempdir().unwrap();
    let (url, compact) = overlapping_table(&server, "cu", dir.path());
    let stall = server.stall(http::Method::PUT, "/cu/hits/data/", 2);
    compaction_killed_at(&server, &url, &compact, stall);
}

#[test]
fn a_compaction_killed_before_its_log_entry_leaves_the_old_version_and_reruns() {
    let server = S3Server::start();
    let dir = tempfile::tempdir().unwrap();
    let (url, compact) = overlapping_table(&server, "cc", dir.path());
    let stall = server.stall(http::Method::PUT, "/cc/hits/_delta_log/", 0);
    compaction_killed_at(&server, &url, &compact, stall);
}

#[test]
fn maintenance_killed_while_merging_leaves_the_old_version_and_reruns() {
    let server = S3Server::start();
    let dir = tempfile::tempdir().unwrap();
    let (url, _) = overlapping_table(&server, "mm", dir.path());
    // Two loads of similar size are one tier of two: the policy merges them.
    ok(
        &server,
        &format!("layout --store {url} --table hits maintenance set --size-ratio 2 --max-depth 2"),
    );
    let maintain = format!(
        "maintain --store {url} --table hits --object-bytes 700000 --load-budget 60000000 \
         --pipeline-depth 2 --fan-in 3 --zstd-level 1 --json"
    );
    let stall = server.stall(http::Method::GET, "/mm/hits/data/", 40);
    compaction_killed_at(&server, &url, &maintain, stall);
}

/// Loads at once into one table on s3s-fs as it serves conditional creates (not atomic: two
/// creates of one key can both succeed), each followed by its maintenance: every load lands,
/// none overwrites another's log entry, and gc deletes nothing a version needs.
#[test]
fn concurrent_loads_on_a_server_without_atomic_creates_all_land_once() {
    let server = S3Server::start_as_served();
    let dir = tempfile::tempdir().unwrap();
    let url = hits_table(&server, "na");
    let caps: serde_json::Value = serde_json::from_slice(
        &std::fs::read(
            server
                .root()
                .join(&server.bucket)
                .join("na/_ravel/capabilities.json"),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(
        caps["atomic_create"], false,
        "the probe saw creates race: {caps}"
    );
    let inputs: Vec<PathBuf> = (0..4)
        .map(|i| generate(dir.path(), &format!("part-{i}.parquet"), 8_000, 60 + i))
        .collect();
    let args = |input: &Path| {
        format!(
            "load --store {url} --table hits --input {} --object-bytes 200000 --zstd-level 1 --json",
            p(input)
        )
    };
    for round in 0..2 {
        let children: Vec<Child> = inputs.iter().map(|i| spawn(&server, &args(i))).collect();
        for c in children {
            let out = c.wait_with_output().unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success(), "round {round}: {err}");
            let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            // The second round reruns every load: each finds its inputs published.
            assert_eq!(report["already_published"], round == 1, "{report}");
        }
    }
    let sql = "SELECT COUNT(*), COUNT(DISTINCT \"WatchID\") FROM hits";
    let counts = ok(
        &server,
        &common::line(
            &format!("query --store {url} --table hits --format csv"),
            &[sql],
        ),
    );
    assert!(counts.contains("32000,32000"), "every row once: {counts}");
    ok(
        &server,
        &format!("gc --store {url} --table hits --older-than 0s"),
    );
    let report: serde_json::Value = serde_json::from_str(&ok(
        &server,
        &format!("verify --store {url} --table hits --deep --json"),
    ))
    .unwrap();
    assert_eq!(report["rows"], 32_000, "{report}");
    assert_eq!(report["violations"], serde_json::json!([]), "{report}");
}
