//! From the sample's encoded bytes to the table's: the scale every candidate shares, a
//! candidate's own resize, and the table's columns in file order.

use std::collections::BTreeMap;

use super::ChunkSize;

/// The scale from the sample's encoded bytes of a column to the table's, of its dictionary
/// page and of the rest apart: for a column of many distinct values, a sample of a few percent
/// holds about as many distinct values as rows, so its dictionary is a far larger share of the
/// chunk than the table's.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PartScale {
    pub dictionary: f64,
    pub data: f64,
}

impl PartScale {
    /// The scale that makes `simulated` (the sample in the table's own order) the table's
    /// `stored` bytes: of each part apart where both have a dictionary, else of the whole.
    pub fn new(simulated: ChunkSize, stored: ChunkSize) -> PartScale {
        let ratio = |real: u64, sim: u64| {
            if sim == 0 {
                0.0
            } else {
                real as f64 / sim as f64
            }
        };
        let whole = ratio(stored.bytes, simulated.bytes);
        let parts = simulated.dictionary > 0
            && stored.dictionary > 0
            && simulated.bytes > simulated.dictionary
            && stored.bytes > stored.dictionary;
        if !parts {
            return PartScale {
                dictionary: whole,
                data: whole,
            };
        }
        PartScale {
            dictionary: ratio(stored.dictionary, simulated.dictionary),
            data: ratio(
                stored.bytes - stored.dictionary,
                simulated.bytes - simulated.dictionary,
            ),
        }
    }

    /// The table's bytes of a simulated chunk (and of its dictionary page).
    pub fn scaled(&self, chunk: ChunkSize) -> ScaledChunk {
        let dictionary = chunk.dictionary as f64 * self.dictionary;
        ScaledChunk {
            bytes: dictionary + chunk.bytes.saturating_sub(chunk.dictionary) as f64 * self.data,
            dictionary,
        }
    }
}

/// A chunk's bytes scaled to the table's, and its dictionary page's among them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScaledChunk {
    pub bytes: f64,
    pub dictionary: f64,
}

/// The scale from the sample's encoded bytes of each column to the table's.
pub struct Scale {
    /// Per sampled column.
    pub per_column: Vec<PartScale>,
    /// Per sampled column, the sample's rows in one of the table's pages of it.
    pub page_rows: Vec<f64>,
    /// Bytes a kept object costs to open (footer and page index, as the query path reads
    /// them).
    pub open_object: f64,
    /// Bytes opening the table costs (its log and manifests).
    pub open_table: u64,
    /// The table's columns in file order: where each sampled column's chunk lies in an
    /// object.
    pub file_columns: Vec<FileColumn>,
    /// Bytes of one object's filter of a column in a Bloom sidecar.
    pub bloom_bytes: BTreeMap<String, f64>,
}

/// How a candidate's chunks are sized: the scale shared by every candidate, and the
/// candidate's own factor per file column (none: 1), from a sample of whole groups where its
/// order puts the rows of a group together (see [`crate::groups`]).
#[derive(Clone, Copy)]
pub struct Sizing<'a> {
    pub scale: &'a Scale,
    pub resize: &'a [Resize],
}

impl Sizing<'_> {
    /// File column `f`'s factor (none: 1).
    pub fn of(&self, f: usize) -> Resize {
        self.resize.get(f).copied().unwrap_or(Resize::NONE)
    }
}

/// The factors on a chunk's dictionary page and on the rest of it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Resize {
    pub dictionary: f64,
    pub data: f64,
}

impl Resize {
    pub const NONE: Resize = Resize {
        dictionary: 1.0,
        data: 1.0,
    };

    /// `chunk` resized, its dictionary page and the rest apart.
    pub fn apply(&self, chunk: ScaledChunk) -> ScaledChunk {
        let dictionary = chunk.dictionary * self.dictionary;
        ScaledChunk {
            bytes: dictionary + (chunk.bytes - chunk.dictionary) * self.data,
            dictionary,
        }
    }
}

/// One column of the table's files.
#[derive(Debug, Clone)]
pub struct FileColumn {
    pub name: String,
    /// Its index in the sample, if sampled (its size then follows the candidate's order);
    /// otherwise its stored size stands.
    pub sampled: Option<usize>,
    /// Mean stored bytes in an object (for a column not sampled).
    pub bytes: f64,
    /// The sample's rows in one of the table's pages of it.
    pub page_rows: f64,
    /// The share of its chunk that its dictionary page takes (read with any data page), for a
    /// column not sampled.
    pub dictionary_share: f64,
}
