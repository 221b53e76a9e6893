//! A damaged checkpoint, on a real S3 server (s3s-fs, in-process): one `add` dropped from the
//! checkpoint a merge wrote. Readers check the snapshot they build against the version's
//! checksum file, replay the whole log instead, and answer with every row; a load and a
//! compaction after it lose nothing, and `verify` names the damage until a new checkpoint
//! replaces it.

use std::path::Path;

use object_store::ObjectStoreExt;
use object_store::path::Path as StorePath;
use ravel_testkit::S3Server;

use crate::common::{self, Args, line, p};

fn cmd(server: &S3Server, args: &(impl Args + ?Sized)) -> std::process::Command {
    let mut c = common::command(args);
    c.envs(server.env());
    c
}

fn ok(server: &S3Server, args: &(impl Args + ?Sized)) -> (String, String) {
    common::succeeds(cmd(server, args))
}

fn count(server: &S3Server, url: &str) -> String {
    let q = line(
        &format!("query --store {url} --table hits --format csv"),
        &["SELECT COUNT(*) FROM hits"],
    );
    ok(server, &q)
        .0
        .lines()
        .nth(1)
        .unwrap_or_default()
        .to_string()
}

fn load(server: &S3Server, url: &str, dir: &Path, seed: u64) {
    let input = dir.join(format!("{seed}.parquet"));
    common::ok(&format!(
        "gen --rows 20000 --seed {seed} --out {}",
        p(&input)
    ));
    ok(
        server,
        &format!(
            "load --store {url} --table hits --input {} --object-bytes 300000 --no-maintain",
            p(&input)
        ),
    );
}

/// Rewrites checkpoint `version` of the table without its first `add`.
fn drop_an_add(server: &S3Server, prefix: &str, version: u64) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let store = server.store(prefix);
        let os = store.object_store();
        let path = StorePath::from(format!("hits/_delta_log/{version:020}.checkpoint.parquet"));
        let bytes = os.get(&path).await.unwrap().bytes().await.unwrap();
        let mut actions = ravel_log::decode_checkpoint(bytes).unwrap();
        let first = actions.iter().position(|a| a.add.is_some()).unwrap();
        actions.remove(first);
        let damaged = ravel_log::encode_checkpoint(&actions).unwrap();
        os.put(&path, damaged.into()).await.unwrap();
    });
}

fn verify(server: &S3Server, url: &str) -> serde_json::Value {
    let out = cmd(server, &format!("verify --store {url} --table hits --json"))
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn a_checkpoint_missing_an_add_is_caught_by_the_checksum_and_nothing_is_lost() {
    let server = S3Server::start();
    let dir = tempfile::tempdir().unwrap();
    let url = server.url("ck");
    let layout = |args: &str| {
        ok(
            &server,
            &format!("layout --store {url} --table hits {args}"),
        )
    };
    layout("schema set --hits");
    layout("clustering-key set --column EventDate --column UserID --bucket-width 1d");
    load(&server, &url, dir.path(), 1);
    load(&server, &url, dir.path(), 2);
    // The merge is version 2, with a checkpoint and a checksum file.
    ok(
        &server,
        &format!("compact --store {url} --table hits --object-bytes 300000"),
    );
    drop_an_add(&server, "ck", 2);

    let (_, warned) = ok(
        &server,
        &line(
            &format!("query --store {url} --table hits --format csv"),
            &["SELECT COUNT(*) FROM hits"],
        ),
    );
    assert_eq!(count(&server, &url), "40000");
    assert!(warned.contains("checkpoint is damaged"), "{warned}");
    let v = verify(&server, &url);
    let kinds: Vec<&str> = v["violations"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["kind"].as_str())
        .collect();
    assert!(kinds.contains(&"checkpoint_files"), "{kinds:?}: {v}");

    // A load commits on the replayed version, and the merge after it takes every object.
    load(&server, &url, dir.path(), 3);
    assert_eq!(count(&server, &url), "60000");
    let (report, _) = ok(
        &server,
        &format!("compact --store {url} --table hits --object-bytes 300000 --json"),
    );
    let report: serde_json::Value = serde_json::from_str(&report).unwrap();
    assert_eq!(report["output_rows"], 60_000, "{report}");
    assert_eq!(report["depth_after"], 1, "{report}");
    assert_eq!(count(&server, &url), "60000");
    // The merge's checkpoint replaced the damaged one.
    let v = verify(&server, &url);
    assert_eq!(v["violations"], serde_json::json!([]), "{v}");
    assert_eq!(v["rows"], 60_000, "{v}");
}
