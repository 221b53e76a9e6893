//! Objects other Delta writers added (delta-rs, Spark, DuckDB...): an `add` without the
//! `ravel.manifest` tag. A version reads them as they are, unsorted and without Bloom filters;
//! a compaction or maintenance takes them back in (see `ravel-compact`'s adoption), sorted under
//! the table's layout. Also the table features this build reads and writes: a table whose
//! protocol lists another is refused, rather than read or written wrongly.

use std::collections::BTreeMap;

use ravel_manifest::ObjectEntry;
use ravel_store::TablePaths;

use crate::actions::TAG_MANIFEST;
use crate::schema::NO_DELTA_VIEW_FEATURE;
use crate::{LogError, Protocol, Snapshot};

/// The writer feature that fences other Delta writers off the table: writers that do not know
/// it refuse to write (Delta requires that of every writer), while readers read on. Set through
/// the table's layout (`layout fence set`).
pub const FENCE_FEATURE: &str = "ravelSoleWriter";

/// The table property that records the fence (the layout's setting, in the Delta metadata).
pub const FENCE_PROPERTY: &str = "ravel.fence";

/// Reader features this build reads correctly.
const READS: &[&str] = &["timestampNtz", NO_DELTA_VIEW_FEATURE];

/// Writer features this build honours when it writes (the legacy ones of writer version 2:
/// it writes no null into a NOT NULL column and sets no constraint or append-only table).
const WRITES: &[&str] = &[
    "timestampNtz",
    NO_DELTA_VIEW_FEATURE,
    FENCE_FEATURE,
    "appendOnly",
    "invariants",
];

/// An object another Delta writer added.
#[derive(Debug, Clone, PartialEq)]
pub struct ForeignObject {
    /// Path inside the store.
    pub key: String,
    /// Path relative to the table, as the log names it (URL-encoded).
    pub path: String,
    pub bytes: u64,
    /// Rows, from its Delta statistics (`numRecords`), when it has them.
    pub rows: Option<u64>,
    /// The version whose entry added it (its rank among equal sort keys once adopted); for an
    /// object read from a checkpoint, the checkpoint's version (later than or equal to it).
    pub version: u64,
    /// Its Delta statistics, as its `add` carries them.
    pub stats: Option<String>,
}

impl ForeignObject {
    /// The object as a manifest entry: no key range (it is in no order) and no Bloom
    /// filters, so that no reader skips it. `run` tells it apart from every other object.
    pub fn entry(&self, run: u64) -> ObjectEntry {
        ObjectEntry {
            key: self.key.clone(),
            rows: self.rows.unwrap_or(0),
            bytes: self.bytes,
            run,
            first_key: None,
            last_key: None,
            ranges: BTreeMap::new(),
            delta_stats: self.stats.clone(),
        }
    }
}

impl Snapshot {
    /// The objects of this version that other Delta writers added, by path.
    pub fn foreign(&self, table: &TablePaths) -> Vec<ForeignObject> {
        self.files()
            .iter()
            .filter(|(_, add)| add.tag(TAG_MANIFEST).is_none())
            .map(|(path, add)| ForeignObject {
                key: table.absolute(&decoded(path)),
                path: path.clone(),
                bytes: add.size,
                rows: add
                    .stats
                    .as_deref()
                    .and_then(|s| serde_json::from_str::<serde_json::Value>(s).ok())
                    .and_then(|v| v["numRecords"].as_u64()),
                version: self.added_in.get(path).copied().unwrap_or(0),
                stats: add.stats.clone(),
            })
            .collect()
    }

    /// Fails when the table's protocol lists a feature this build cannot read, or, with
    /// `writing`, one whose rules it does not follow when it writes.
    pub fn check_features(&self, writing: bool) -> Result<(), LogError> {
        let Some(p) = &self.protocol else {
            return Ok(());
        };
        let unknown = unknown_features(p, writing);
        if unknown.is_empty() {
            return Ok(());
        }
        Err(LogError::UnsupportedFeatures {
            version: self.version.unwrap_or(0),
            features: unknown,
            writing,
        })
    }
}

/// The features of `p` this build does not support for reading (or writing).
fn unknown_features(p: &Protocol, writing: bool) -> Vec<String> {
    let mut out: Vec<String> = p
        .reader_features
        .iter()
        .flatten()
        .filter(|f| !READS.contains(&f.as_str()))
        .cloned()
        .collect();
    // Reader version 2 is column mapping without a feature list.
    if p.min_reader_version == 2 || p.min_reader_version > 3 {
        out.push(format!("reader version {}", p.min_reader_version));
    }
    if writing {
        for f in p.writer_features.iter().flatten() {
            if !WRITES.contains(&f.as_str()) && !out.contains(f) {
                out.push(f.clone());
            }
        }
        if p.min_writer_version > 7 || (3..7).contains(&p.min_writer_version) {
            out.push(format!("writer version {}", p.min_writer_version));
        }
    }
    out
}

/// Table features ravel-load sets and clears itself; any other one a table lists was set by
/// another engine, and ravel's commits keep it.
const OWN: &[&str] = &["timestampNtz", NO_DELTA_VIEW_FEATURE, FENCE_FEATURE];

/// `ours` (the protocol ravel's columns and settings ask for) with the features another engine
/// set in `base` kept (those this build supports: it refuses tables with others).
pub(crate) fn keep_others(base: Option<&Protocol>, mut ours: Protocol) -> Protocol {
    let Some(base) = base else {
        return ours;
    };
    let others = |features: &Option<Vec<String>>| -> Vec<String> {
        features
            .iter()
            .flatten()
            .filter(|f| !OWN.contains(&f.as_str()))
            .cloned()
            .collect()
    };
    let (readers, writers) = (others(&base.reader_features), others(&base.writer_features));
    if !readers.is_empty() {
        ours.min_reader_version = 3;
        ours.reader_features.get_or_insert_default().extend(readers);
    }
    if !writers.is_empty() {
        ours.min_writer_version = 7;
        ours.writer_features.get_or_insert_default().extend(writers);
    }
    ours
}

/// A log path as a store path: Delta paths are URL-encoded.
fn decoded(path: &str) -> String {
    object_store::path::Path::from_url_path(path)
        .map_or_else(|_| path.to_string(), |p| p.to_string())
}

/// `protocol` with the fence on or off.
pub fn fenced(mut protocol: Protocol, on: bool) -> Protocol {
    let mut writers = protocol.writer_features.take().unwrap_or_default();
    writers.retain(|f| f != FENCE_FEATURE);
    if on {
        writers.push(FENCE_FEATURE.to_string());
    }
    if writers.is_empty() && protocol.reader_features.is_none() {
        return Protocol {
            min_reader_version: 1,
            min_writer_version: 2,
            reader_features: None,
            writer_features: None,
        };
    }
    protocol.min_writer_version = 7;
    protocol.writer_features = Some(writers);
    protocol
}

#[cfg(test)]
mod tests {
    use super::*;

    fn protocol(readers: Option<&[&str]>, writers: Option<&[&str]>) -> Protocol {
        let own = |f: Option<&[&str]>| f.map(|f| f.iter().map(|s| s.to_string()).collect());
        Protocol {
            min_reader_version: if readers.is_some() { 3 } else { 1 },
            min_writer_version: if writers.is_some() { 7 } else { 2 },
            reader_features: own(readers),
            writer_features: own(writers),
        }
    }

    #[test]
    fn the_fence_is_a_writer_feature_that_comes_and_goes() {
        let open = protocol(None, None);
        let on = fenced(open.clone(), true);
        assert_eq!(on, protocol(None, Some(&[FENCE_FEATURE])));
        assert_eq!(fenced(on, false), open);
        let no_view = protocol(
            Some(&[NO_DELTA_VIEW_FEATURE]),
            Some(&[NO_DELTA_VIEW_FEATURE]),
        );
        let on = fenced(no_view.clone(), true);
        assert_eq!(
            on.writer_features.as_deref().unwrap(),
            [NO_DELTA_VIEW_FEATURE, FENCE_FEATURE]
        );
        assert_eq!(fenced(on, false), no_view);
    }

    #[test]
    fn features_another_engine_set_are_kept() {
        let base = protocol(None, Some(&["appendOnly", FENCE_FEATURE]));
        let ours = fenced(protocol(None, None), false);
        let kept = keep_others(Some(&base), ours);
        assert_eq!(kept, protocol(None, Some(&["appendOnly"])));
        assert_eq!(
            keep_others(None, protocol(None, None)),
            protocol(None, None)
        );
    }

    #[test]
    fn features_it_does_not_know_are_named() {
        let dv = protocol(Some(&["deletionVectors"]), Some(&["deletionVectors"]));
        assert_eq!(unknown_features(&dv, false), ["deletionVectors"]);
        assert_eq!(unknown_features(&dv, true), ["deletionVectors"]);
        let checks = protocol(None, Some(&["checkConstraints", FENCE_FEATURE]));
        assert!(unknown_features(&checks, false).is_empty());
        assert_eq!(unknown_features(&checks, true), ["checkConstraints"]);
        let mut v4 = protocol(None, None);
        v4.min_writer_version = 4;
        assert_eq!(unknown_features(&v4, true), ["writer version 4"]);
        let mut mapped = protocol(None, None);
        mapped.min_reader_version = 2;
        assert_eq!(unknown_features(&mapped, false), ["reader version 2"]);
    }
}
