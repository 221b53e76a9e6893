//! The rules a load's inputs follow before any is read: one format, each file named once, and
//! a rejects file that is neither an input nor a file the user did not ask to replace. The
//! CLI and a library caller get the same refusals.

use std::path::{Path, PathBuf};

use crate::{BadRows, InputFormat, LoadError};

/// Why a load's inputs are refused before any is read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InputsRefused {
    #[error(
        "{input}: cannot tell the format from the extension; name it with --format parquet|tsv"
    )]
    UnknownFormat { input: PathBuf },
    #[error("inputs mix Parquet and TSV; load them separately")]
    MixedFormats,
    #[error("input {input} is named twice (also as {first}): it would be loaded twice")]
    NamedTwice { input: PathBuf, first: PathBuf },
    #[error("--max-bad-rows applies to TSV input only")]
    BadRowsNotTsv,
    #[error("--rejects and --overwrite-rejects need --max-bad-rows (lines to leave out)")]
    RejectsWithoutBadRows,
    #[error("rejects file {path} is an input of this load; name another with --rejects")]
    RejectsIsInput { path: PathBuf },
    #[error("rejects file {path} is a directory")]
    RejectsIsDirectory { path: PathBuf },
    #[error(
        "rejects file {path} exists already; move it away, name another with --rejects, or pass --overwrite-rejects"
    )]
    RejectsExists { path: PathBuf },
}

/// The format of `inputs`, from their extensions (.parquet, .tsv): one for all of them.
pub fn input_format(inputs: &[PathBuf]) -> Result<Option<InputFormat>, LoadError> {
    let mut found = None;
    for p in inputs {
        let f = InputFormat::from_path(p)
            .ok_or_else(|| InputsRefused::UnknownFormat { input: p.clone() })?;
        if found.is_some_and(|g| g != f) {
            return Err(InputsRefused::MixedFormats.into());
        }
        found = Some(f);
    }
    Ok(found)
}

/// The canonical paths of the input files (as given where a file cannot be resolved: the load
/// names it then). A file named twice, by the same or another path, would be loaded twice:
/// refused, naming it.
pub fn distinct_inputs(inputs: &[PathBuf]) -> Result<Vec<PathBuf>, LoadError> {
    let mut seen: Vec<(PathBuf, &PathBuf)> = Vec::with_capacity(inputs.len());
    for given in inputs {
        let canonical = std::fs::canonicalize(given).unwrap_or_else(|_| given.clone());
        if let Some((_, first)) = seen.iter().find(|(c, _)| *c == canonical) {
            return Err(InputsRefused::NamedTwice {
                input: given.clone(),
                first: (*first).clone(),
            }
            .into());
        }
        seen.push((canonical, given));
    }
    Ok(seen.into_iter().map(|(c, _)| c).collect())
}

/// Checks `bad` against the load's `format` and its `inputs` (canonical, see
/// [`distinct_inputs`]): bad lines are left out of TSV only, a rejects file needs lines to
/// leave out, and the rejects file (or its `.reasons` companion) is not an input, not a
/// directory, and not an existing file unless `bad.overwrite`.
pub fn check_bad_rows(
    bad: &BadRows,
    format: InputFormat,
    inputs: &[PathBuf],
) -> Result<(), LoadError> {
    if bad.max > 0 && format != InputFormat::Tsv {
        return Err(InputsRefused::BadRowsNotTsv.into());
    }
    if bad.max == 0 && (bad.rejects.is_some() || bad.overwrite) {
        return Err(InputsRefused::RejectsWithoutBadRows.into());
    }
    match &bad.rejects {
        Some(path) => check_rejects(path, inputs, bad.overwrite),
        None => Ok(()),
    }
}

fn check_rejects(path: &Path, inputs: &[PathBuf], overwrite: bool) -> Result<(), LoadError> {
    let mut reasons = path.as_os_str().to_owned();
    reasons.push(".reasons");
    for p in [path, Path::new(&reasons)] {
        let path = p.to_path_buf();
        if inputs.contains(&canonical_target(p)) {
            return Err(InputsRefused::RejectsIsInput { path }.into());
        }
        if p.is_dir() {
            return Err(InputsRefused::RejectsIsDirectory { path }.into());
        }
        if p.exists() && !overwrite {
            return Err(InputsRefused::RejectsExists { path }.into());
        }
    }
    Ok(())
}

/// The canonical path a file would have: itself resolved when it exists, else its resolved
/// directory joined with its name.
fn canonical_target(p: &Path) -> PathBuf {
    if let Ok(c) = std::fs::canonicalize(p) {
        return c;
    }
    let dir = match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    match (std::fs::canonicalize(dir), p.file_name()) {
        (Ok(d), Some(name)) => d.join(name),
        _ => p.to_path_buf(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(e: LoadError) -> InputsRefused {
        assert!(e.is_invalid_input(), "{e}");
        match e {
            LoadError::Inputs(r) => r,
            e => panic!("not an input refusal: {e}"),
        }
    }

    #[test]
    fn inputs_are_one_format_and_each_named_once() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.tsv");
        std::fs::write(&a, "1\n").unwrap();
        let again = dir.path().join(".").join("a.tsv");
        let e = distinct_inputs(&[a.clone(), again]).unwrap_err();
        assert!(matches!(refused(e), InputsRefused::NamedTwice { .. }));
        let mixed = [a.clone(), dir.path().join("b.parquet")];
        assert_eq!(
            refused(input_format(&mixed).unwrap_err()),
            InputsRefused::MixedFormats
        );
        let unknown = [dir.path().join("c.csv")];
        let e = refused(input_format(&unknown).unwrap_err());
        assert!(matches!(e, InputsRefused::UnknownFormat { .. }));
        assert_eq!(input_format(&[a]).unwrap(), Some(InputFormat::Tsv));
    }

    #[test]
    fn a_rejects_file_is_never_an_input_nor_replaced_unasked() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.tsv");
        std::fs::write(&a, "1\n").unwrap();
        let inputs = distinct_inputs(std::slice::from_ref(&a)).unwrap();
        let bad = |rejects: &Path, overwrite| BadRows {
            max: 1,
            rejects: Some(rejects.to_path_buf()),
            overwrite,
        };
        let e = check_bad_rows(&bad(&a, true), InputFormat::Tsv, &inputs).unwrap_err();
        assert!(matches!(refused(e), InputsRefused::RejectsIsInput { .. }));
        let e = check_bad_rows(&bad(dir.path(), true), InputFormat::Tsv, &inputs).unwrap_err();
        assert!(matches!(
            refused(e),
            InputsRefused::RejectsIsDirectory { .. }
        ));
        let old = dir.path().join("old.rejects");
        std::fs::write(&old, "").unwrap();
        let e = check_bad_rows(&bad(&old, false), InputFormat::Tsv, &inputs).unwrap_err();
        assert!(matches!(refused(e), InputsRefused::RejectsExists { .. }));
        check_bad_rows(&bad(&old, true), InputFormat::Tsv, &inputs).unwrap();
        let e = check_bad_rows(&bad(&old, true), InputFormat::Parquet, &inputs).unwrap_err();
        assert_eq!(refused(e), InputsRefused::BadRowsNotTsv);
        let no_max = BadRows {
            max: 0,
            ..bad(&old, false)
        };
        let e = check_bad_rows(&no_max, InputFormat::Tsv, &inputs).unwrap_err();
        assert_eq!(refused(e), InputsRefused::RejectsWithoutBadRows);
    }
}
