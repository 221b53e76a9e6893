//! The manifest: one per load, written last, create-if-absent. The table is the union of its
//! manifests' objects.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Format of manifests this build writes.
pub const MANIFEST_FORMAT: u32 = 1;

/// One load's published objects.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub format: u32,
    pub load_id: String,
    /// Unix milliseconds at commit.
    pub committed_at_ms: u64,
    /// The layout generation the load applied.
    pub layout_generation: u64,
    /// Sort key column names in order (stream, bucket, key…, time), empty without clustering.
    pub sort_key: Vec<String>,
    /// The Arrow schema of every object.
    pub schema: arrow::datatypes::Schema,
    pub objects: Vec<ObjectEntry>,
}

/// One stored object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ObjectEntry {
    /// Path inside the store: `<table>/data/<hash>.parquet`.
    pub key: String,
    pub rows: u64,
    pub bytes: u64,
    /// The run the object was cut from (objects of one run do not overlap in key range).
    pub run: u64,
    /// Sort key of the first and last row, values in `sort_key` order.
    pub first_key: Option<Vec<Value>>,
    pub last_key: Option<Vec<Value>>,
}
