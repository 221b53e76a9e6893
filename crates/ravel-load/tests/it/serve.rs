//! `ravel-load serve`, the real binary on 127.0.0.1 with an ephemeral port, against a local
//! store and the in-process S3 server: files dropped into landing become visible once, whatever
//! moment the service is killed; files that fail are reported and do not block the others;
//! `/metrics` parses as Prometheus text; SIGTERM stops it with exit 0; two services on one
//! table and a foreign Delta append while it runs lose and double nothing.

mod restart;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use ravel_testkit::S3Server;

use crate::common::{self, fails, p};
use crate::compact::{generated, hits_store, json};

const TIMEOUT: Duration = Duration::from_secs(120);

/// A table entry of a configuration: quick polls and batches for tests.
fn table_toml(store: &str, name: &str, landing: &str, extra: &str) -> String {
    format!(
        "[[table]]\nstore = \"{store}\"\nname = \"{name}\"\nlanding = \"{landing}\"\npattern = \"*.parquet\"\nbatch_age = \"1s\"\n{extra}\n"
    )
}

fn write_config(dir: &Path, tables: &[String]) -> PathBuf {
    let path = dir.join("serve.toml");
    let text = format!("poll_interval = \"200ms\"\n{}", tables.concat());
    std::fs::write(&path, text).unwrap();
    path
}

/// A running service and the address of its endpoints.
struct Service {
    child: Child,
    addr: String,
}

impl Service {
    /// Starts `ravel-load serve --config config` with `env`, and waits for its address.
    fn start(config: &Path, env: &[(&'static str, String)]) -> Service {
        let args = format!(
            "serve --config {} --listen 127.0.0.1:0 --object-bytes 200000",
            p(config)
        );
        let mut child = common::command(args.as_str())
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, rx) = mpsc::channel();
        let stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(addr) = line.strip_prefix("ravel-load serve: listening on http://") {
                    let _ = tx.send(addr.to_string());
                }
            }
        });
        let addr = rx
            .recv_timeout(TIMEOUT)
            .expect("the service says where it listens");
        Service { child, addr }
    }

    /// GET `path`: the status code and the body.
    fn get(&self, path: &str) -> (u16, String) {
        let mut s = TcpStream::connect(&self.addr).unwrap();
        write!(
            s,
            "GET {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
            self.addr
        )
        .unwrap();
        let mut response = String::new();
        s.read_to_string(&mut response).unwrap();
        let (head, body) = response.split_once("\r\n\r\n").unwrap();
        let code = head.split(' ').nth(1).unwrap().parse().unwrap();
        (code, body.to_string())
    }

    fn status(&self, table: &str) -> serde_json::Value {
        let (code, body) = self.get(&format!("/v1/tables/{table}"));
        assert_eq!(code, 200, "{body}");
        serde_json::from_str(&body).unwrap()
    }

    /// Polls the table's status until `done` holds; returns it.
    fn until(&self, table: &str, done: impl Fn(&serde_json::Value) -> bool) -> serde_json::Value {
        let start = Instant::now();
        loop {
            let s = self.status(table);
            if done(&s) {
                return s;
            }
            assert!(start.elapsed() < TIMEOUT, "never reached: {s:#}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn signal(&self, signal: &str) {
        let ok = Command::new("kill")
            .args([&format!("-{signal}"), &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(ok.success());
    }

    /// SIGTERM, and the exit status (within 30 s).
    fn terminate(mut self) -> std::process::ExitStatus {
        self.signal("TERM");
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "still running 30 s after SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn kill(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

/// `serve --once` on `config`: the JSON status it prints, and its exit code.
fn once(config: &Path, env: &[(&'static str, String)]) -> (serde_json::Value, i32) {
    let out = common::command(
        format!(
            "serve --config {} --once --listen 127.0.0.1:0 --object-bytes 200000",
            p(config)
        )
        .as_str(),
    )
    .envs(env.iter().map(|(k, v)| (k, v)))
    .output()
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let doc = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {stderr}"));
    (doc, out.status.code().unwrap())
}

/// (rows, distinct WatchIDs) of table `hits` in `store`.
fn rows_and_distinct(store: &str, env: &[(&'static str, String)]) -> (u64, u64) {
    let sql = "SELECT COUNT(*), COUNT(DISTINCT \"WatchID\") FROM hits";
    let args = common::line(
        &format!("query --store {store} --table hits --format csv"),
        &[sql],
    );
    let mut c = common::command(&args);
    c.envs(env.iter().map(|(k, v)| (k, v)));
    let out = common::succeeds(c).0;
    let row: Vec<u64> = crate::common::first_row(&out);
    (row[0], row[1])
}

fn table_of<'a>(doc: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    doc["tables"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == name)
        .unwrap()
}

#[test]
fn a_bad_config_exits_2_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("serve.toml");
    std::fs::write(&config, table_toml("s", "hits", "l", "batch_bytez = 5")).unwrap();
    let err = fails(2, format!("serve --config {} --once", p(&config)).as_str());
    assert!(err.contains("batch_bytez"), "{err}");
    std::fs::write(
        &config,
        table_toml("s", "hits", "l", "batch_age = \"later\""),
    )
    .unwrap();
    let err = fails(2, format!("serve --config {} --once", p(&config)).as_str());
    assert!(err.contains("batch_age") && err.contains("later"), "{err}");
}

#[test]
fn once_loads_each_landed_file_once_and_reports_the_files_that_fail_or_were_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let store = hits_store(dir.path());
    let landing = dir.path().join("landing");
    std::fs::create_dir(&landing).unwrap();
    for i in 0..3 {
        generated(&landing, &format!("p{i}.parquet"), 4_000, 40 + i);
    }
    std::fs::write(landing.join("broken.parquet"), b"not parquet").unwrap();
    // Another table's rows: columns the hits table does not have.
    crate::foreign::write_rows(&landing.join("other.parquet"), 0, 100);
    let config = write_config(
        dir.path(),
        &[table_toml(p(&store), "hits", p(&landing), "")],
    );
    // The broken file and the other table's fail alone: the others load, and --once exits 1
    // naming both.
    let (doc, code) = once(&config, &[]);
    let t = table_of(&doc, "hits");
    assert_eq!(code, 1, "{doc:#}");
    assert_eq!(t["rows"], 12_000, "{t:#}");
    let failed = t["failed_files"].as_array().unwrap();
    assert_eq!(failed.len(), 2, "{t:#}");
    let error_of = |name: &str| {
        let f = failed
            .iter()
            .find(|f| f["name"].as_str().unwrap().ends_with(name));
        let f = f.unwrap_or_else(|| panic!("{name} not failed: {t:#}"));
        f["error"].as_str().unwrap().to_string()
    };
    assert!(error_of("broken.parquet").contains("Parquet"), "{t:#}");
    assert!(error_of("other.parquet").contains("column"), "{t:#}");
    // Again: nothing new is loaded.
    std::fs::remove_file(landing.join("broken.parquet")).unwrap();
    std::fs::remove_file(landing.join("other.parquet")).unwrap();
    let (doc, code) = once(&config, &[]);
    assert_eq!(
        (code, table_of(&doc, "hits")["loads"].as_u64()),
        (0, Some(0)),
        "{doc:#}"
    );
    // A file replaced under a consumed name is reported, not loaded (--once exits 1: its
    // rows never load); a new file is.
    generated(&landing, "p0.parquet", 1_000, 50);
    generated(&landing, "p3.parquet", 2_000, 43);
    let (doc, code) = once(&config, &[]);
    let t = table_of(&doc, "hits");
    assert_eq!((code, t["rows"].as_u64()), (1, Some(14_000)), "{t:#}");
    let replaced = t["replaced_files"].as_array().unwrap();
    assert!(
        replaced[0]["name"]
            .as_str()
            .unwrap()
            .ends_with("p0.parquet"),
        "{t:#}"
    );
    assert_eq!(rows_and_distinct(p(&store), &[]), (14_000, 14_000));
}

#[test]
fn dry_run_decides_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = hits_store(dir.path());
    let landing = dir.path().join("landing");
    std::fs::create_dir(&landing).unwrap();
    generated(&landing, "p0.parquet", 2_000, 60);
    let config = write_config(
        dir.path(),
        &[table_toml(p(&store), "hits", p(&landing), "")],
    );
    let out = common::command(
        format!(
            "serve --config {} --once --dry-run --listen 127.0.0.1:0",
            p(&config)
        )
        .as_str(),
    )
    .output()
    .unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let t = table_of(&doc, "hits");
    assert_eq!(t["next"]["action"], "load", "{t:#}");
    assert!(
        t["next"]["reason"].as_str().unwrap().contains("1 file(s)"),
        "{t:#}"
    );
    assert_eq!(t["loads"], 0, "{t:#}");
    assert!(
        !store.join("hits/_delta_log").exists(),
        "a dry run writes nothing"
    );
}

/// Puts `file` into the S3 landing prefix `prefix` under `name`.
fn land_on_s3(server: &S3Server, prefix: &str, name: &str, file: &Path) {
    use object_store::ObjectStoreExt;
    let bytes = std::fs::read(file).unwrap();
    let store = server.store(prefix);
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(store.object_store().put(&name.into(), bytes.into()))
        .unwrap();
}

#[test]
fn files_landing_on_s3_become_visible_with_metrics_and_status_and_sigterm_stops_it() {
    let server = S3Server::start();
    let dir = tempfile::tempdir().unwrap();
    let store = server.url("tables");
    let layout = |args: &str| {
        let mut c = common::command(format!("layout --store {store} --table hits {args}").as_str());
        c.envs(server.env());
        common::succeeds(c);
    };
    layout("schema set --hits");
    layout("clustering-key set --column EventDate --column UserID --bucket-width 1d");
    let landing = server.url("landing/hits");
    // Loaded files are moved away once their version committed; listings start after the
    // cursor (S3's StartAfter).
    let moved = format!(
        "after_load = \"move:{}\"\ncursor_lookback = \"0s\"",
        server.url("loaded/hits")
    );
    let config = write_config(dir.path(), &[table_toml(&store, "hits", &landing, &moved)]);
    let svc = Service::start(&config, &server.env());
    assert_eq!(svc.get("/healthz"), (200, "ok\n".to_string()));
    assert_eq!(svc.get("/v1/tables/nope").0, 404);
    let first = generated(dir.path(), "a.parquet", 3_000, 70);
    land_on_s3(&server, "landing/hits", "a.parquet", &first);
    svc.until("hits", |s| s["rows"] == 3_000);
    let second = generated(dir.path(), "b.parquet", 2_000, 71);
    land_on_s3(&server, "landing/hits", "b.parquet", &second);
    let s = svc.until("hits", |s| s["rows"] == 5_000 && s["pending_files"] == 0);
    assert!(
        s["next"]["reason"].as_str().unwrap().contains("depth"),
        "{s:#}"
    );
    let (code, text) = svc.get("/metrics");
    assert_eq!(code, 200);
    let metrics = prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_string()))).unwrap();
    let value = |name: &str| -> f64 {
        let sample = metrics
            .samples
            .iter()
            .find(|s| s.metric == name && s.labels.get("table") == Some("hits"))
            .unwrap_or_else(|| panic!("no {name} in {text}"));
        match &sample.value {
            prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Counter(v)
            | prometheus_parse::Value::Untyped(v) => *v,
            prometheus_parse::Value::Histogram(h) => h.iter().map(|b| b.count).fold(0.0, f64::max),
            other => panic!("{name}: {other:?}"),
        }
    };
    assert_eq!(value("ravel_table_rows"), 5_000.0);
    assert_eq!(value("ravel_files_loaded_total"), 2.0);
    assert_eq!(value("ravel_pending_files"), 0.0);
    assert!(value("ravel_loads_total") >= 1.0);
    assert_eq!(
        value("ravel_landing_to_visible_seconds"),
        2.0,
        "two files observed"
    );
    let start = Instant::now();
    while !keys(&server, "landing/hits").is_empty() {
        assert!(
            start.elapsed() < TIMEOUT,
            "the loaded objects are never moved"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(keys(&server, "loaded/hits"), ["a.parquet", "b.parquet"]);
    // A late key before the cursor is not listed; one after it is.
    let late = generated(dir.path(), "c.parquet", 1_000, 72);
    land_on_s3(&server, "landing/hits", "a0.parquet", &late);
    land_on_s3(&server, "landing/hits", "c.parquet", &late);
    let s = svc.until("hits", |s| s["rows"] == 6_000 && s["cursor"] == "c.parquet");
    assert_eq!(s["pending_files"], 0, "{s:#}");
    assert_eq!(keys(&server, "landing/hits"), ["a0.parquet"]);
    let status = svc.terminate();
    assert!(status.success(), "SIGTERM exits 0: {status:?}");
    assert_eq!(rows_and_distinct(&store, &server.env()), (6_000, 6_000));
}

/// The keys under `prefix` of the test server, relative to it, in order.
fn keys(server: &S3Server, prefix: &str) -> Vec<String> {
    use futures::TryStreamExt;
    let store = server.store(prefix);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let listed: Vec<object_store::ObjectMeta> = rt
        .block_on(store.object_store().list(None).try_collect())
        .unwrap();
    let mut keys: Vec<String> = listed.into_iter().map(|m| m.location.to_string()).collect();
    keys.sort();
    keys
}

#[test]
fn killed_at_moments_spread_over_loads_and_merges_the_service_loads_every_file_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = hits_store(dir.path());
    common::ok(
        format!(
            "layout --store {} --table hits maintenance set --policy full",
            p(&store)
        )
        .as_str(),
    );
    let landing = dir.path().join("landing");
    std::fs::create_dir(&landing).unwrap();
    let config = write_config(
        dir.path(),
        &[table_toml(p(&store), "hits", p(&landing), "")],
    );
    let mut rows = 0;
    // Fixed kill moments, spread over loads and the merges after them.
    for (round, after_ms) in [900u64, 1500, 300, 2200, 1200].into_iter().enumerate() {
        for j in 0..2 {
            let seed = 100 + round as u64 * 2 + j;
            generated(&landing, &format!("r{round}-{j}.parquet"), 5_000, seed);
            rows += 5_000;
        }
        let svc = Service::start(&config, &[]);
        std::thread::sleep(Duration::from_millis(after_ms));
        svc.kill();
    }
    let (doc, code) = once(&config, &[]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(rows_and_distinct(p(&store), &[]), (rows, rows));
    let v = json(&format!("verify --store {} --table hits --json", p(&store)));
    assert_eq!(v["violations"], serde_json::json!([]), "{v:#}");
}

#[test]
fn two_services_on_one_table_load_each_file_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = hits_store(dir.path());
    let landing = dir.path().join("landing");
    std::fs::create_dir(&landing).unwrap();
    for i in 0..6 {
        generated(&landing, &format!("p{i}.parquet"), 3_000, 200 + i);
    }
    // The second cuts its batches differently: a file each.
    let one = write_config(
        dir.path(),
        &[table_toml(p(&store), "hits", p(&landing), "")],
    );
    let other_dir = dir.path().join("other");
    std::fs::create_dir(&other_dir).unwrap();
    let two = write_config(
        &other_dir,
        &[table_toml(
            p(&store),
            "hits",
            p(&landing),
            "batch_bytes = 1",
        )],
    );
    let a = std::thread::spawn(move || once(&one, &[]));
    let b = once(&two, &[]);
    let a = a.join().unwrap();
    assert_eq!((a.1, b.1), (0, 0), "{:#} {:#}", a.0, b.0);
    assert_eq!(rows_and_distinct(p(&store), &[]), (18_000, 18_000));
}

#[test]
fn a_foreign_append_while_the_service_runs_is_seen_and_maintained() {
    let place = crate::place::Place::s3();
    let dir = tempfile::tempdir().unwrap();
    let t = crate::foreign::Table::new(&place, dir.path());
    let schema = dir.path().join("schema.parquet");
    crate::foreign::write_rows(&schema, 0, 1);
    t.ok(&format!("layout schema set --from {}", p(&schema)));
    t.ok("layout time set --column time");
    t.ok("layout clustering-key set --column k --bucket-width 1d");
    t.ok("layout maintenance set --policy full");
    let landing = dir.path().join("landing");
    std::fs::create_dir(&landing).unwrap();
    crate::foreign::write_rows(&landing.join("a.parquet"), 0, 3_000);
    let config = write_config(dir.path(), &[table_toml(&t.url, "t", p(&landing), "")]);
    let svc = Service::start(&config, &place.env());
    svc.until("t", |s| s["rows"] == 3_000);
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(t.delta_append(3_000, 5_000)).unwrap();
    crate::foreign::write_rows(&landing.join("b.parquet"), 5_000, 6_000);
    // The service reads the foreign version, loads the new file, and merges the overlap.
    let s = svc.until("t", |s| {
        s["rows"] == 6_000 && s["merges"].as_u64() > Some(0) && s["depth"] == 1
    });
    assert_eq!(s["last_error"], serde_json::Value::Null, "{s:#}");
    assert!(svc.terminate().success());
    assert_eq!(t.ravel(), crate::foreign::expected(6_000));
}

#[test]
fn a_table_without_a_layout_is_reported_and_not_loaded() {
    let dir = tempfile::tempdir().unwrap();
    let store = hits_store(dir.path());
    let landing = dir.path().join("landing");
    std::fs::create_dir(&landing).unwrap();
    generated(&landing, "p0.parquet", 1_000, 80);
    // Table `fresh` has no layout in the store; `hits` beside it loads.
    let config = write_config(
        dir.path(),
        &[
            table_toml(p(&store), "fresh", p(&landing), ""),
            table_toml(p(&store), "hits", p(&landing), ""),
        ],
    );
    let (doc, code) = once(&config, &[]);
    assert_eq!(code, 1, "{doc:#}");
    let fresh = table_of(&doc, "fresh");
    let error = fresh["last_error"].as_str().unwrap();
    assert!(error.contains("no layout"), "{fresh:#}");
    assert_eq!(fresh["loads"], 0);
    assert!(!store.join("fresh/_delta_log").exists());
    assert_eq!(table_of(&doc, "hits")["rows"], 1_000);
}

#[test]
fn sigterm_during_a_load_exits_0_and_a_restart_loses_and_doubles_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = hits_store(dir.path());
    let landing = dir.path().join("landing");
    std::fs::create_dir(&landing).unwrap();
    let config = write_config(
        dir.path(),
        &[table_toml(p(&store), "hits", p(&landing), "")],
    );
    let svc = Service::start(&config, &[]);
    generated(&landing, "big.parquet", 120_000, 90);
    // The batch is due a second after the file landed: stop the service while it loads.
    svc.until("hits", |s| s["pending_files"] == 1);
    std::thread::sleep(Duration::from_millis(1_300));
    assert!(svc.terminate().success(), "SIGTERM exits 0");
    let (doc, code) = once(&config, &[]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(rows_and_distinct(p(&store), &[]), (120_000, 120_000));
}
