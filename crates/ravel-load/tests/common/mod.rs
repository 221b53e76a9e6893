//! Running the `ravel-load` binary from tests.
#![allow(dead_code)] // each test file uses its own share

use std::path::Path;
use std::process::{Command, Output};

/// The binary with `args`, without a store from the environment.
pub fn command(args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_ravel-load"));
    c.args(args).env_remove("RAVEL_STORE");
    c
}

/// Runs `c`, which must succeed; returns (stdout, stderr).
pub fn succeeds(mut c: Command) -> (String, String) {
    let out = c.output().expect("ravel-load runs");
    assert!(
        out.status.success(),
        "{c:?} failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

pub fn run(args: &[&str]) -> Output {
    command(args).output().expect("ravel-load runs")
}

/// Runs a command that must succeed; returns its stdout.
pub fn ok(args: &[&str]) -> String {
    succeeds(command(args)).0
}

/// Runs a command expected to fail with `code`, returns its stderr.
pub fn fails(code: i32, args: &[&str]) -> String {
    let out = run(args);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(code), "{args:?}: {err}");
    err
}

pub fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}
