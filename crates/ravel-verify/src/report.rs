//! What [`crate::verify`] is asked and what it answers: options, violations, the report and
//! why a table could not be verified at all.

use ravel_layout::LayoutError;
use ravel_manifest::{ClusteringInfo, ManifestError};
use ravel_store::StoreError;
use serde::ser::SerializeStruct;
use serde::{Serialize, Serializer};

use crate::Problem;

/// What to check: by default the table's metadata (log, manifests, objects' footers and
/// sizes); [`VerifyOptions::deep`] also reads every object's rows.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct VerifyOptions {
    /// Read every object's rows: clustering order and the true key range.
    pub deep: bool,
}

impl VerifyOptions {
    /// Every check, every object's rows read.
    pub fn deep() -> VerifyOptions {
        VerifyOptions { deep: true }
    }
}

/// A broken promise, naming the object (or manifest) it concerns.
///
/// In JSON: `object`, `problem` (the wording of the text report) and `kind` (see
/// [`Problem::kind`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Violation {
    pub object: String,
    pub problem: Problem,
}

impl Violation {
    pub fn new(object: impl Into<String>, problem: Problem) -> Self {
        Violation {
            object: object.into(),
            problem,
        }
    }

    /// The stable name of the problem's kind.
    pub fn kind(&self) -> &'static str {
        self.problem.kind()
    }
}

impl Serialize for Violation {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut s = serializer.serialize_struct("Violation", 3)?;
        s.serialize_field("object", &self.object)?;
        s.serialize_field("problem", &self.problem)?;
        s.serialize_field("kind", self.kind())?;
        s.end()
    }
}

/// Stored object sizes, bytes.
#[derive(Debug, Clone, Serialize)]
pub struct Sizes {
    pub min: u64,
    pub p10: u64,
    pub median: u64,
    pub p90: u64,
    pub max: u64,
}

impl Sizes {
    /// The quantiles of `sizes` (nearest rank); `None` when there are none.
    pub(crate) fn of(mut sizes: Vec<u64>) -> Option<Sizes> {
        sizes.sort_unstable();
        let last = sizes.len().checked_sub(1)?;
        let q = |p: f64| sizes[(last as f64 * p).round() as usize];
        Some(Sizes {
            min: sizes[0],
            p10: q(0.1),
            median: q(0.5),
            p90: q(0.9),
            max: sizes[last],
        })
    }
}

/// The outcome of [`crate::verify`].
#[derive(Debug, Clone, Serialize)]
pub struct VerifyReport {
    pub table: String,
    /// The version verified (the newest); `None` when nothing was ever committed.
    pub version: Option<u64>,
    /// Entries in the table's log (0 for a table written before the log).
    pub versions: usize,
    pub manifests: usize,
    pub objects: usize,
    pub rows: u64,
    pub bytes: u64,
    /// Of the objects, those other Delta writers added (see the `foreign` module): counted in
    /// the objects, rows and bytes, not clustered.
    pub foreign: Vec<String>,
    pub sizes: Option<Sizes>,
    /// How well the objects of the newest load's sort key are clustered (touching ends counted
    /// once); `None` when none has a key range (a table in arrival order).
    pub overlap: Option<ClusteringInfo>,
    pub deep: bool,
    pub violations: Vec<Violation>,
    /// Objects under `data/` and sidecars under `_ravel/blooms/` that no version lists: left by
    /// loads or compactions that failed or were killed before their commit (`gc` collects them).
    pub orphans: Vec<String>,
    /// Manifests under `_ravel/manifests/` that no version names: written by loads or
    /// compactions killed before their commit (`gc` collects them), or left by a lost entry.
    pub unnamed_manifests: Vec<String>,
    /// Objects (and sidecars) the current version no longer references (a compaction replaced them); readers of
    /// older versions may still read them until `gc` deletes them after its retention.
    pub removed: usize,
    /// Of those, still stored.
    pub removed_stored: usize,
    /// What verify could not check and why (not violations: the table's promises hold).
    pub notes: Vec<String>,
}

impl VerifyReport {
    /// The report on a table whose log is damaged (`damage`, see
    /// [`ravel_log::LogError::is_damage`]): one violation, nothing else checked.
    pub fn damaged(table: &str, damage: ravel_log::LogError) -> VerifyReport {
        let problem = crate::Problem::LogDamaged {
            cause: damage.into(),
        };
        VerifyReport {
            table: table.to_string(),
            version: None,
            versions: 0,
            manifests: 0,
            objects: 0,
            rows: 0,
            bytes: 0,
            foreign: Vec::new(),
            sizes: None,
            overlap: None,
            deep: false,
            violations: vec![Violation::new(crate::delta::LOG, problem)],
            orphans: Vec::new(),
            unnamed_manifests: Vec::new(),
            removed: 0,
            removed_stored: 0,
            notes: vec!["the log is damaged: nothing else was checked".into()],
        }
    }

    /// Whether the table holds its promises.
    pub fn holds(&self) -> bool {
        self.violations.is_empty()
    }
}

/// What the checks found: violations, and notes on what could not be checked.
#[derive(Debug, Default)]
pub(crate) struct Findings {
    pub violations: Vec<Violation>,
    pub notes: Vec<String>,
}

impl Findings {
    pub fn violation(&mut self, object: impl Into<String>, problem: Problem) {
        self.violations.push(Violation::new(object, problem));
    }

    /// Adds `problems`, each about `object`.
    pub fn violations(&mut self, object: &str, problems: impl IntoIterator<Item = Problem>) {
        for problem in problems {
            self.violation(object, problem);
        }
    }
}

/// Why a table could not be verified at all (as opposed to violations found in it).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum VerifyError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Layout(#[from] LayoutError),
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    #[error(transparent)]
    Log(#[from] ravel_log::LogError),
    #[error("listing {prefix}")]
    List {
        prefix: String,
        #[source]
        source: object_store::Error,
    },
    #[error(
        "table {table:?} has nothing stored under its prefix in this store (no layout, schema, objects or loads)"
    )]
    NoSuchTable { table: String },
}

impl VerifyError {
    /// Errors the user can fix by asking differently (exit code 2).
    pub fn is_invalid_input(&self) -> bool {
        match self {
            VerifyError::NoSuchTable { .. } => true,
            VerifyError::Layout(e) => e.is_invalid_input(),
            _ => false,
        }
    }
}
