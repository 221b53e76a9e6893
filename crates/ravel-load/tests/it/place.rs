//! Where a test's tables live: a local directory or a real S3 server (s3s-fs, in-process). A
//! test written once against a [`Place`] runs on both; commands get the store's location and,
//! on S3, the environment that reaches the server.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;

use object_store::ObjectStore;
use ravel_testkit::S3Server;
use url::Url;

use crate::common::{self, Args};

/// A local directory or an S3 server, with its tables' stored files visible on disk.
pub(crate) enum Place {
    Local(tempfile::TempDir),
    S3(S3Server),
}

/// A table's store as a Delta reader is given it: the store, its root URL and the table's URL.
pub(crate) struct DeltaLocation {
    pub store: Arc<dyn ObjectStore>,
    pub root: Url,
    pub table: Url,
}

impl Place {
    pub(crate) fn local() -> Place {
        Place::Local(tempfile::tempdir().unwrap())
    }

    pub(crate) fn s3() -> Place {
        Place::S3(S3Server::start())
    }

    /// The `--store` of the stores under `prefix`.
    pub(crate) fn url(&self, prefix: &str) -> String {
        match self {
            Place::Local(dir) => common::p(&dir.path().join(prefix)).to_string(),
            Place::S3(server) => server.url(prefix),
        }
    }

    /// The directory that holds the stored files under `path` (a store prefix and a path
    /// inside it). s3s-fs keeps files of its own beside the objects.
    pub(crate) fn dir(&self, path: &str) -> PathBuf {
        match self {
            Place::Local(dir) => dir.path().join(path),
            Place::S3(server) => server.root().join(&server.bucket).join(path),
        }
    }

    /// The stored files under `path` that are Parquet objects, sorted.
    pub(crate) fn parquet_files(&self, path: &str) -> Vec<PathBuf> {
        let mut v = common::files(&self.dir(path));
        v.retain(|f| f.extension().is_some_and(|e| e == "parquet"));
        v
    }

    /// The environment that reaches this place's store (none for a local directory).
    pub(crate) fn env(&self) -> Vec<(&'static str, String)> {
        match self {
            Place::Local(_) => Vec::new(),
            Place::S3(server) => server.env(),
        }
    }

    /// The binary with `args`, reaching this place's store.
    pub(crate) fn command(&self, args: &(impl Args + ?Sized)) -> Command {
        let mut c = common::command(args);
        if let Place::S3(server) = self {
            c.envs(server.env());
        }
        c
    }

    /// Runs a command whatever its outcome.
    pub(crate) fn run(&self, args: &(impl Args + ?Sized)) -> Output {
        self.command(args).output().expect("ravel-load runs")
    }

    /// Runs a command that must succeed; returns its stdout.
    pub(crate) fn ok(&self, args: &(impl Args + ?Sized)) -> String {
        common::succeeds(self.command(args)).0
    }

    /// Runs a command that must succeed; its stdout as JSON.
    pub(crate) fn json(&self, args: &(impl Args + ?Sized)) -> serde_json::Value {
        serde_json::from_str(&self.ok(args)).unwrap()
    }

    /// Runs a command expected to fail with `code`; returns its stderr.
    pub(crate) fn fails(&self, code: i32, args: &(impl Args + ?Sized)) -> String {
        let out = self.run(args);
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(code), "{:?}: {err}", args.args());
        err
    }

    /// The store under `prefix` with the hits table's schema and layout set; its `--store`.
    pub(crate) fn hits_store(&self, prefix: &str) -> String {
        let url = self.url(prefix);
        let layout = |args: &str| self.ok(&format!("layout --store {url} --table hits {args}"));
        layout("schema set --hits");
        layout("clustering-key set --column EventDate --column UserID --bucket-width 1d");
        layout("bloom-scope set --scope text");
        url
    }

    /// The table at `path` (store prefix and table) as Delta readers are given it. A local
    /// table's directory is created if absent (a reader needs its canonical path).
    pub(crate) fn delta(&self, path: &str) -> DeltaLocation {
        match self {
            Place::Local(dir) => {
                let table = dir.path().join(path);
                std::fs::create_dir_all(&table).unwrap();
                DeltaLocation {
                    store: Arc::new(object_store::local::LocalFileSystem::new()),
                    root: Url::parse("file:///").unwrap(),
                    table: Url::from_directory_path(canonical(&table)).unwrap(),
                }
            }
            Place::S3(server) => {
                let root = Url::parse(&format!("s3://{}/", server.bucket)).unwrap();
                DeltaLocation {
                    store: server.store("").object_store().clone(),
                    table: root.join(&format!("{path}/")).unwrap(),
                    root,
                }
            }
        }
    }
}

fn canonical(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap()
}
