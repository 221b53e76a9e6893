//! Inputs and settings a careless user gives `load` and the other commands: a rejects path
//! that is a file worth keeping or an input, a store path that is a file, an empty TSV line,
//! one file named twice, float clustering keys, and S3 stores that are silent, refuse, or are
//! not configured at all. Each once lost a file, loaded twice, hung or answered wrongly.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::{self, fails, line, ok, p};

/// A hits TSV of `rows` rows in `dir`.
fn tsv(dir: &Path, name: &str, rows: u64) -> PathBuf {
    let path = dir.join(name);
    ok(&format!("gen --rows {rows} --out {}", p(&path)));
    path
}

/// `load` of `input` into table `hits` of `dir/store` leaving out up to one bad line, with
/// `extra` arguments.
fn load_args(store: &Path, input: &Path, extra: &str) -> String {
    format!(
        "load --store {} --table hits --input {} --max-bad-rows 1 {extra}",
        p(store),
        p(input)
    )
}

/// `input` with its line `line` (1-based) made bad.
fn with_bad_line(input: &Path, out: &Path, line: usize) {
    let mut lines: Vec<String> = std::fs::read_to_string(input)
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    lines[line - 1] = lines[line - 1].replacen('\t', "\tnot-a-number-", 1);
    std::fs::write(out, lines.join("\n") + "\n").unwrap();
}

#[test]
fn an_existing_rejects_file_is_kept_and_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let input = tsv(dir.path(), "h.tsv", 200);
    let important = dir.path().join("imp.txt");
    let reasons = dir.path().join("imp.txt.reasons");
    std::fs::write(&important, "important\n").unwrap();
    std::fs::write(&reasons, "also important\n").unwrap();
    let err = fails(
        2,
        &load_args(&store, &input, &format!("--rejects {}", p(&important))),
    );
    assert!(
        err.contains("imp.txt exists already") && err.contains("--overwrite-rejects"),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&important).unwrap(), "important\n");
    assert_eq!(
        std::fs::read_to_string(&reasons).unwrap(),
        "also important\n"
    );

    // Only the reasons file there: refused as well, naming it.
    std::fs::remove_file(&important).unwrap();
    let err = fails(
        2,
        &load_args(&store, &input, &format!("--rejects {}", p(&important))),
    );
    assert!(err.contains("imp.txt.reasons exists already"), "{err}");
    assert!(!important.exists());

    // The default path, `<input>.rejects`, is kept just the same.
    let default = dir.path().join("h.tsv.rejects");
    std::fs::write(&default, "earlier\n").unwrap();
    let err = fails(2, &load_args(&store, &input, ""));
    assert!(err.contains("h.tsv.rejects exists already"), "{err}");
    assert_eq!(std::fs::read_to_string(&default).unwrap(), "earlier\n");
    assert!(!store.join("hits/_delta_log").exists(), "nothing published");
}

#[test]
fn overwrite_rejects_replaces_the_files_only_when_a_line_is_left_out() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let clean = tsv(dir.path(), "h.tsv", 200);
    let bad = dir.path().join("bad.tsv");
    with_bad_line(&clean, &bad, 7);
    let rejects = dir.path().join("r.txt");
    let reasons = dir.path().join("r.txt.reasons");
    std::fs::write(&rejects, "old\n").unwrap();
    std::fs::write(&reasons, "old reasons\n").unwrap();
    let overwrite = format!("--rejects {} --overwrite-rejects", p(&rejects));

    // A clean input leaves nothing out: the old files stay as they were and are not reported.
    let out = common::run(&load_args(&store, &clean, &overwrite));
    assert!(out.status.success(), "{out:?}");
    assert!(!String::from_utf8_lossy(&out.stderr).contains("left out"));
    assert_eq!(std::fs::read_to_string(&rejects).unwrap(), "old\n");

    // A bad line replaces both files.
    let out = common::run(&load_args(&store, &bad, &overwrite));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("left out 1 bad line(s)"), "{err}");
    let want = std::fs::read_to_string(&bad)
        .unwrap()
        .lines()
        .nth(6)
        .unwrap()
        .to_string()
        + "\n";
    assert_eq!(std::fs::read_to_string(&rejects).unwrap(), want);
    let why = std::fs::read_to_string(&reasons).unwrap();
    assert!(
        why.contains("line 7, column 2") && !why.contains("old"),
        "{why}"
    );
}

#[test]
fn a_rejects_path_that_is_an_input_is_refused_and_the_input_kept() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let input = tsv(dir.path(), "self.tsv", 200);
    let before = std::fs::read(&input).unwrap();
    // The same file, by its own path and by another spelling of it.
    let other_spelling = dir.path().join(".").join("self.tsv");
    for rejects in [&input, &other_spelling] {
        let err = fails(
            2,
            &load_args(&store, &input, &format!("--rejects {}", p(rejects))),
        );
        assert!(err.contains("is an input of this load"), "{err}");
        // Not even with leave to overwrite.
        let err = fails(
            2,
            &load_args(
                &store,
                &input,
                &format!("--rejects {} --overwrite-rejects", p(rejects)),
            ),
        );
        assert!(err.contains("is an input of this load"), "{err}");
    }
    assert_eq!(std::fs::read(&input).unwrap(), before);

    // The reasons file would be the input.
    let named = dir.path().join("x.reasons");
    std::fs::copy(&input, &named).unwrap();
    let stem = dir.path().join("x");
    let err = fails(
        2,
        &load_args(
            &store,
            &named,
            &format!("--format tsv --rejects {}", p(&stem)),
        ),
    );
    assert!(err.contains("x.reasons is an input of this load"), "{err}");
    assert_eq!(std::fs::read(&named).unwrap(), before);
    assert!(!stem.exists());
}

#[test]
fn a_clean_input_creates_no_rejects_file() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let input = tsv(dir.path(), "h.tsv", 200);
    let rejects = dir.path().join("r.txt");
    ok(&load_args(
        &store,
        &input,
        &format!("--rejects {}", p(&rejects)),
    ));
    ok(&load_args(&store, &input, ""));
    assert!(!rejects.exists() && !dir.path().join("r.txt.reasons").exists());
    assert!(!dir.path().join("h.tsv.rejects").exists());
}

#[test]
fn a_store_path_that_is_a_file_is_refused_by_every_command() {
    let dir = tempfile::tempdir().unwrap();
    let input = tsv(dir.path(), "h.tsv", 20);
    let file = dir.path().join("store.txt");
    std::fs::write(&file, "not a store\n").unwrap();
    let under = file.join("sub");
    for store in [&file, &under] {
        let s = p(store);
        let commands = [
            line(
                &format!("load --store {s} --table t --input {}", p(&input)),
                &[],
            ),
            line(&format!("verify --store {s} --table t"), &[]),
            line(&format!("gc --store {s} --table t"), &[]),
            line(&format!("query --store {s} --table t"), &["SELECT 1"]),
            line(&format!("layout --store {s} --table t show"), &[]),
            line(
                &format!("layout --store {s} --table t schema set --hits"),
                &[],
            ),
        ];
        for args in commands {
            let err = fails(2, &args);
            assert!(
                err.contains(&format!(
                    "store path {} is a file, not a directory",
                    p(&file)
                )),
                "{args:?}: {err}"
            );
        }
    }
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "not a store\n");
}

#[test]
fn an_empty_tsv_line_is_named_as_empty() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let input = tsv(dir.path(), "h.tsv", 50);
    let mut text = std::fs::read_to_string(&input).unwrap();
    let tenth = text.match_indices('\n').nth(9).unwrap().0;
    text.insert(tenth + 1, '\n');
    let gap = dir.path().join("gap.tsv");
    std::fs::write(&gap, text).unwrap();
    let args = format!(
        "load --store {} --table hits --input {}",
        p(&store),
        p(&gap)
    );
    let err = fails(2, &args);
    assert!(err.contains("line 11: is empty"), "{err}");
    assert!(!err.contains("is not an integer"), "{err}");
}

#[test]
fn the_same_input_named_twice_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let input = tsv(dir.path(), "h.tsv", 50);
    let again = dir.path().join(".").join("h.tsv");
    let glob = dir.path().join("h.*");
    for second in [&input, &again, &glob] {
        let args = format!(
            "load --store {} --table hits --input {} {}",
            p(&store),
            p(&input),
            p(second)
        );
        let err = fails(2, &args);
        assert!(err.contains("h.tsv is named twice"), "{err}");
    }
    assert!(!store.join("hits/_delta_log").exists(), "nothing published");
}

/// A Parquet file of `x` (Float64, from `values`) and `id` (Int64).
fn float_parquet(path: &Path, values: &[f64]) {
    use arrow::array::{ArrayRef, Float64Array, Int64Array, RecordBatch};
    let x: ArrayRef = Arc::new(Float64Array::from(values.to_vec()));
    let id: ArrayRef = Arc::new(Int64Array::from_iter_values(0..values.len() as i64));
    let batch = RecordBatch::try_from_iter([("x", x), ("id", id)]).unwrap();
    let file = std::fs::File::create(path).unwrap();
    let mut w = parquet::arrow::ArrowWriter::try_new(file, batch.schema(), None).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
}

#[test]
fn a_float_clustering_key_verifies_deep() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let s = p(&store);
    // Ratios at and above 0.9995817600514193, whose shortest decimal once read back one unit
    // lower; the smallest is an object's first key and the range minimum of its column.
    let low = 0.9995817600514193_f64;
    let mut state = 7_u64;
    let mut values = vec![low];
    values.extend((1..20_000).map(|_| {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        low + (1.0 - low) * ((state >> 11) as f64 / (1u64 << 53) as f64)
    }));
    let input = dir.path().join("f.parquet");
    float_parquet(&input, &values);
    let layout = |args: &str| ok(&format!("layout --store {s} --table f {args}"));
    layout(&format!("schema set --from {}", p(&input)));
    layout("stream clear");
    // Integer unix seconds, all in one 1d bucket: the rows sort by x.
    layout("time set --column id");
    layout("clustering-key set --column x");
    ok(&format!(
        "load --store {s} --table f --input {} --object-bytes 40000",
        p(&input)
    ));
    let out = common::run(&format!("verify --store {s} --table f --deep"));
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `verify` of an S3 store through `endpoint` with `env` (and no other AWS_* variable);
/// returns how it ended (None: killed after `limit`) and its stderr.
fn verify_s3(env: &[(&str, String)], limit: Duration) -> (Option<ExitStatus>, String) {
    let dir = tempfile::tempdir().unwrap();
    let err_path = dir.path().join("stderr");
    let mut c: Command = common::command("verify --store s3://b/p --table t");
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("AWS_") {
            c.env_remove(k);
        }
    }
    c.envs(env.iter().map(|(k, v)| (*k, v.as_str())));
    c.stdout(Stdio::null())
        .stderr(std::fs::File::create(&err_path).unwrap());
    let mut child = c.spawn().unwrap();
    let started = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if started.elapsed() > limit {
            child.kill().unwrap();
            child.wait().unwrap();
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    (status, std::fs::read_to_string(err_path).unwrap())
}

/// Settings that are complete but for the server at `endpoint`.
fn s3_env(endpoint: &str) -> Vec<(&'static str, String)> {
    vec![
        ("AWS_ENDPOINT", endpoint.to_string()),
        ("AWS_ACCESS_KEY_ID", "AKTEST".into()),
        ("AWS_SECRET_ACCESS_KEY", "SKTEST".into()),
        ("AWS_REGION", "us-east-1".into()),
        ("AWS_ALLOW_HTTP", "true".into()),
    ]
}

#[test]
fn a_silent_s3_endpoint_fails_instead_of_hanging() {
    // Accepts every connection and never answers.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming() {
            held.push(stream);
        }
    });
    let endpoint = format!("http://{addr}");
    let (status, err) = verify_s3(&s3_env(&endpoint), Duration::from_secs(90));
    let status = status.unwrap_or_else(|| panic!("still running after 90 s: {err}"));
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(err.contains(&endpoint), "{err}");
    assert!(!err.contains('\x1b'), "colour codes in a file: {err}");
}

#[test]
fn a_refused_s3_connection_fails_naming_the_endpoint() {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let endpoint = format!("http://127.0.0.1:{port}");
    let (status, err) = verify_s3(&s3_env(&endpoint), Duration::from_secs(90));
    let status = status.unwrap_or_else(|| panic!("still running after 90 s: {err}"));
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(err.contains(&endpoint), "{err}");
}

#[test]
fn an_http_endpoint_without_allow_http_is_bad_input_naming_the_setting() {
    let mut env = s3_env("http://127.0.0.1:9");
    env.retain(|(k, _)| *k != "AWS_ALLOW_HTTP");
    let (status, err) = verify_s3(&env, Duration::from_secs(90));
    let status = status.unwrap_or_else(|| panic!("still running after 90 s: {err}"));
    assert_eq!(status.code(), Some(2), "{err}");
    assert!(
        err.contains("AWS_ALLOW_HTTP=true") && err.contains("http://127.0.0.1:9"),
        "{err}"
    );
}

#[test]
fn s3_without_settings_names_the_missing_variables() {
    let (status, err) = verify_s3(&[], Duration::from_secs(90));
    let status = status.unwrap_or_else(|| panic!("still running after 90 s: {err}"));
    assert_eq!(status.code(), Some(2), "{err}");
    for name in [
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_ENDPOINT_URL",
        "AWS_REGION",
    ] {
        assert!(err.contains(name), "{name}: {err}");
    }
    assert!(!err.contains("169.254") && !err.contains('\x1b'), "{err}");
    // Keys without a server or a region: the server is what is missing.
    let keys = [
        ("AWS_ACCESS_KEY_ID", "AKTEST".to_string()),
        ("AWS_SECRET_ACCESS_KEY", "SKTEST".to_string()),
    ];
    let (status, err) = verify_s3(&keys, Duration::from_secs(90));
    assert_eq!(status.and_then(|s| s.code()), Some(2), "{err}");
    assert!(
        err.contains("no server") && !err.contains("no credentials"),
        "{err}"
    );
}
