//! Running the `ravel-load` binary from tests.
//!
//! A command line is written as one string and split on whitespace, so a test reads as the
//! command a user types: `ok(&format!("load --store {s} --table hits --input {input}"))`. An
//! argument that holds whitespace (a path with a space, a SQL statement) is given on its own
//! after the others with [`line`]: `ok(&line(&format!("query --store {s} --table t"), &[sql]))`.
//! Arguments given as a slice or array are taken as they are. Temporary directories hold no
//! whitespace, so paths from [`p`] can be written into a command line.
#![allow(dead_code)] // each test module uses its own share

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The arguments of a command line: a string is split on whitespace; a slice, array or vector
/// of strings is taken argument by argument.
pub trait Args {
    /// The arguments, in order.
    fn args(&self) -> Vec<&str>;
}

impl Args for str {
    fn args(&self) -> Vec<&str> {
        self.split_whitespace().collect()
    }
}

impl Args for String {
    fn args(&self) -> Vec<&str> {
        self.as_str().args()
    }
}

impl<S: AsRef<str>> Args for [S] {
    fn args(&self) -> Vec<&str> {
        self.iter().map(AsRef::as_ref).collect()
    }
}

impl<S: AsRef<str>, const N: usize> Args for [S; N] {
    fn args(&self) -> Vec<&str> {
        self.as_slice().args()
    }
}

impl<S: AsRef<str>> Args for Vec<S> {
    fn args(&self) -> Vec<&str> {
        self.as_slice().args()
    }
}

/// The words of `words` split on whitespace, then `extra` as they are (arguments that hold
/// whitespace).
pub fn line(words: &str, extra: &[&str]) -> Vec<String> {
    words
        .split_whitespace()
        .chain(extra.iter().copied())
        .map(String::from)
        .collect()
}

/// The binary with `args`, without a store from the environment.
pub fn command(args: &(impl Args + ?Sized)) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_ravel-load"));
    c.args(args.args()).env_remove("RAVEL_STORE");
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

/// Runs a command whatever its outcome.
pub fn run(args: &(impl Args + ?Sized)) -> Output {
    command(args).output().expect("ravel-load runs")
}

/// Runs a command that must succeed; returns its stdout.
pub fn ok(args: &(impl Args + ?Sized)) -> String {
    succeeds(command(args)).0
}

/// Runs a command expected to fail with `code`, returns its stderr.
pub fn fails(code: i32, args: &(impl Args + ?Sized)) -> String {
    let out = run(args);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(code), "{:?}: {err}", args.args());
    err
}

/// The paths in the directory `dir`, sorted; none when it does not exist.
pub fn files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = match std::fs::read_dir(dir) {
        Ok(rd) => rd.map(|e| e.unwrap().path()).collect(),
        Err(_) => Vec::new(),
    };
    v.sort();
    v
}

/// How many entries the directory `dir` holds; 0 when it does not exist.
pub fn entries(dir: &Path) -> usize {
    files(dir).len()
}

/// How many versions the log directory `dir` holds: its `<version>.json` entries (beside them
/// are checksum files and checkpoints).
pub fn versions(dir: &Path) -> usize {
    files(dir)
        .iter()
        .filter(|f| {
            f.extension().is_some_and(|e| e == "json")
                && f.file_stem().is_some_and(|s| s.len() == 20)
        })
        .count()
}

/// The first row of `query --format csv`'s answer (the line after the header), its fields
/// parsed.
pub fn first_row<T: std::str::FromStr>(csv: &str) -> Vec<T>
where
    T::Err: std::fmt::Debug,
{
    let row = csv.lines().nth(1).expect("a row after the header");
    row.split(',').map(|v| v.parse().unwrap()).collect()
}

/// The path as a `&str` (test paths are UTF-8).
pub fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

#[cfg(test)]
mod tests {
    use super::{Args, line};

    #[test]
    fn a_command_line_splits_on_whitespace_and_extra_arguments_stay_whole() {
        assert_eq!(
            "load  --store s\t--table hits ".args(),
            ["load", "--store", "s", "--table", "hits"]
        );
        assert_eq!(
            line("query --sql", &["SELECT 1 FROM t"]).args(),
            ["query", "--sql", "SELECT 1 FROM t"]
        );
        assert_eq!(["a b", "c"].args(), ["a b", "c"]);
    }
}
