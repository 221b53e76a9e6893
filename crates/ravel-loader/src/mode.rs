//! What a loader makes, chosen when it is made ([`crate::Loader::with_mode`]): the table's
//! objects, spill that a merge reads back, or a merge's output; where they are stored; where
//! they are cut.

use crate::Writing;

/// How a loader's rows arrive and what its objects are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Rows {
    /// Rows in any order, each run sorted: the table's objects.
    #[default]
    Unsorted,
    /// Rows in any order, each run sorted: spill that a merge reads back (see
    /// [`crate::ObjectKind::Spill`]). A load of spill is prepared
    /// ([`crate::Loader::prepare`]), never committed.
    Spill,
    /// Rows in the table's clustering order, each batch continuing the one before (a merge's
    /// output): runs are encoded without sorting them again. Rows out of order would make
    /// objects whose key ranges are wrong; `verify --deep` finds them.
    Presorted,
}

/// What a loader makes: one value given when the loader is made, rather than setters called
/// in order. The default makes the table's objects from rows in any order; for instance
/// `LoadMode::spill().in_scratch(operation)` makes spill under an operation's scratch prefix.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LoadMode {
    rows: Rows,
    purpose: Option<Writing>,
    scratch: Option<String>,
    cuts: Vec<serde_json::Value>,
}

impl LoadMode {
    /// The table's objects, from rows in any order (the default).
    pub fn table() -> Self {
        LoadMode::default()
    }

    /// Spill that a merge reads back ([`Rows::Spill`]).
    pub fn spill() -> Self {
        LoadMode {
            rows: Rows::Spill,
            ..LoadMode::default()
        }
    }

    /// A merge's output, in clustering order already ([`Rows::Presorted`]).
    pub fn presorted() -> Self {
        LoadMode {
            rows: Rows::Presorted,
            ..LoadMode::default()
        }
    }

    /// Stores the objects under the scratch prefix of `operation` (see
    /// [`ravel_store::TablePaths::scratch_dir`]) rather than with the table's: objects a merge
    /// reads back and never publishes, which no other operation can then name, read or delete.
    pub fn in_scratch(self, operation: impl Into<String>) -> Self {
        LoadMode {
            scratch: Some(operation.into()),
            ..self
        }
    }

    /// Cuts every object at each of `cuts` (sort keys, as `ravel_manifest::key_value` encodes
    /// them) as well as by size, so that no object holds rows on both sides of one: the spill
    /// of a distributed load, whose merge steps each read only the objects of their key range.
    pub fn cut_at(self, cuts: Vec<serde_json::Value>) -> Self {
        LoadMode { cuts, ..self }
    }

    /// Names what the objects are for in the loader's errors; otherwise that follows from
    /// [`LoadMode::rows`].
    pub fn for_purpose(self, purpose: Writing) -> Self {
        LoadMode {
            purpose: Some(purpose),
            ..self
        }
    }

    pub fn rows(&self) -> Rows {
        self.rows
    }

    /// The scratch operation the objects are stored under, if any.
    pub fn scratch(&self) -> Option<&str> {
        self.scratch.as_deref()
    }

    pub fn cuts(&self) -> &[serde_json::Value] {
        &self.cuts
    }

    /// What the objects are for, as errors name it.
    pub fn writing(&self) -> Writing {
        self.purpose.unwrap_or(match self.rows {
            Rows::Spill => Writing::Spill,
            Rows::Presorted => Writing::Merge,
            Rows::Unsorted => Writing::Load,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mode_says_what_its_objects_are_for() {
        assert_eq!(LoadMode::default(), LoadMode::table());
        assert_eq!(LoadMode::table().writing(), Writing::Load);
        let spill = LoadMode::spill()
            .in_scratch("op")
            .cut_at(vec![serde_json::json!([1])]);
        assert_eq!(spill.rows(), Rows::Spill);
        assert_eq!(spill.writing(), Writing::Spill);
        assert_eq!(spill.scratch(), Some("op"));
        assert_eq!(spill.cuts().len(), 1);
        assert_eq!(LoadMode::presorted().writing(), Writing::Merge);
        let adopted = LoadMode::table().for_purpose(Writing::Merge);
        assert_eq!(
            (adopted.rows(), adopted.writing()),
            (Rows::Unsorted, Writing::Merge)
        );
    }
}
