//! A restart costs the window, not the history: `serve --once` on a table of a few hundred
//! versions and on the same table thousands of versions later makes the same requests to the
//! store and lists the same keys. The versions between are loads of one input each, committed
//! straight into the server's directory (fast), as a service fed for months leaves them.

use std::path::Path;
use std::sync::Arc;

use object_store::ObjectStore;
use object_store::local::LocalFileSystem;
use ravel_testkit::{RequestCounts, S3Server};

use super::{generated, land_on_s3, once, table_toml, write_config};
use crate::common;

/// Commits `n` loads of one input each, no objects, into table `hits` of the store in
/// `dir`, as versions after its newest; `first` numbers the inputs.
async fn loads(dir: &Path, first: u64, n: u64) {
    let os: Arc<dyn ObjectStore> = Arc::new(LocalFileSystem::new_with_prefix(dir).unwrap());
    let served = ravel_store::Store::new("served", os);
    ravel_testkit::commit_empty_loads(&served, "hits", first, n).await;
}

/// The requests `serve --once` made, on a landing with nothing new.
fn restart(server: &S3Server, config: &Path) -> RequestCounts {
    server.take_requests();
    let (doc, code) = once(config, &server.env());
    assert_eq!(code, 0, "{doc:#}");
    server.take_requests()
}

#[test]
fn a_restart_after_over_a_thousand_versions_costs_what_it_cost_after_hundreds() {
    let server = S3Server::start();
    let dir = tempfile::tempdir().unwrap();
    let store = server.url("tables");
    for args in [
        "schema set --hits",
        "clustering-key set --column EventDate --column UserID --bucket-width 1d",
    ] {
        let mut c = common::command(format!("layout --store {store} --table hits {args}").as_str());
        c.envs(server.env());
        common::succeeds(c);
    }
    let landing = server.url("landing/hits");
    let config = write_config(dir.path(), &[table_toml(&store, "hits", &landing, "")]);
    let file = generated(dir.path(), "a.parquet", 2_000, 80);
    land_on_s3(&server, "landing/hits", "a.parquet", &file);
    assert_eq!(once(&config, &server.env()).1, 0);
    let on_disk = server.root().join(&server.bucket).join("tables");
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(loads(&on_disk, 0, 200));
    let early = restart(&server, &config);
    rt.block_on(loads(&on_disk, 200, 1_300));
    let late = restart(&server, &config);
    let listed = |c: &RequestCounts| c.listed.values().map(|l| l.keys).sum::<u64>();
    let figures = format!("after 200 versions: {early:?}\nafter 1,500: {late:?}");
    println!("{figures}");
    assert!(late.total() <= early.total() + 2, "{figures}");
    assert!(listed(&late) <= listed(&early) + 2, "{figures}");
    assert!(late.total() <= 50, "{figures}");
}
