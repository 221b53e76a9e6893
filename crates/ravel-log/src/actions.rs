//! The actions of a log entry, as Delta Lake's `PROTOCOL.md` spells them: one JSON object per
//! line, each with one key naming the action. Fields this build does not use are kept out of
//! what it writes and ignored when it reads.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Tag on an `add` naming the manifest (path relative to the table) that describes the object.
pub const TAG_MANIFEST: &str = "ravel.manifest";
/// Tag on an `add`: the object's position among its manifest's objects.
pub const TAG_POSITION: &str = "ravel.position";
/// Tag on an `add`: the object's rank among equal sort keys. A load's objects carry the
/// version that added them; a compaction's output the highest rank among its inputs, so that
/// rows loaded later keep sorting after them.
pub const TAG_ORDER: &str = "ravel.order";
/// Tag on an `add` of rows a compaction of a key range took out of an input object and wrote
/// back: the run they continue, as `<manifest path>#<run>`. They keep that run's place among
/// equal sort keys (see [`crate::ChainOrigin`]).
pub const TAG_CHAIN: &str = "ravel.chain";

/// One line of a log entry. Exactly one field is set.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ActionLine {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub commit_info: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub protocol: Option<Protocol>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub meta_data: Option<Metadata>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub add: Option<Add>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remove: Option<Remove>,
    /// What a load consumed (see [`crate::consumed`]), or another application's progress.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub txn: Option<crate::Txn>,
}

/// The reader and writer versions a table needs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Protocol {
    pub min_reader_version: u32,
    pub min_writer_version: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reader_features: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub writer_features: Option<Vec<String>>,
}

/// The table's identity, schema and settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Metadata {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub format: Format,
    pub schema_string: String,
    pub partition_columns: Vec<String>,
    #[serde(default)]
    pub configuration: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_time: Option<i64>,
}

/// The data files' format: always Parquet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Format {
    pub provider: String,
    #[serde(default)]
    pub options: BTreeMap<String, String>,
}

impl Default for Format {
    fn default() -> Format {
        Format {
            provider: "parquet".into(),
            options: BTreeMap::new(),
        }
    }
}

/// An object joining the table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Add {
    /// Relative to the table's root: `data/<hash>.parquet`.
    pub path: String,
    pub partition_values: BTreeMap<String, Option<String>>,
    pub size: u64,
    /// Unix milliseconds.
    pub modification_time: i64,
    pub data_change: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stats: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<BTreeMap<String, String>>,
}

impl Add {
    /// The value of tag `name`, if set.
    pub fn tag(&self, name: &str) -> Option<&str> {
        self.tags.as_ref()?.get(name).map(String::as_str)
    }
}

/// An object leaving the table (a tombstone: readers of older versions may still read it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Remove {
    pub path: String,
    /// Unix milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_timestamp: Option<i64>,
    pub data_change: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extended_file_metadata: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition_values: Option<BTreeMap<String, Option<String>>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<BTreeMap<String, String>>,
}

/// Writes `actions` as a log entry: one JSON object per line.
pub fn encode_entry(actions: &[ActionLine]) -> Vec<u8> {
    let mut out = Vec::new();
    for a in actions {
        serde_json::to_writer(&mut out, a).expect("an action serializes");
        out.push(b'\n');
    }
    out
}

/// Reads a log entry: one action per non-empty line. Returns the line (1-based) that fails.
pub fn decode_entry(bytes: &[u8]) -> Result<Vec<ActionLine>, (usize, serde_json::Error)> {
    bytes
        .split(|b| *b == b'\n')
        .enumerate()
        .filter(|(_, line)| !line.iter().all(u8::is_ascii_whitespace))
        .map(|(i, line)| serde_json::from_slice(line).map_err(|e| (i + 1, e)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actions_read_as_delta_spells_them() {
        let entry = br#"{"commitInfo":{"timestamp":1,"operation":"WRITE"}}
{"protocol":{"minReaderVersion":1,"minWriterVersion":2}}
{"metaData":{"id":"x","format":{"provider":"parquet","options":{}},"schemaString":"{}","partitionColumns":[],"configuration":{}}}
{"add":{"path":"data/a.parquet","partitionValues":{},"size":10,"modificationTime":5,"dataChange":true,"tags":{"ravel.order":"3"}}}
{"remove":{"path":"data/b.parquet","deletionTimestamp":7,"dataChange":false}}
{"txn":{"appId":"someone","version":3}}
{"cdc":{"path":"x"}}
"#;
        let actions = decode_entry(entry).unwrap();
        assert_eq!(actions.len(), 7);
        assert_eq!(actions[1].protocol.as_ref().unwrap().min_writer_version, 2);
        let add = actions[3].add.as_ref().unwrap();
        assert_eq!((add.size, add.tag(TAG_ORDER)), (10, Some("3")));
        assert_eq!(
            actions[4].remove.as_ref().unwrap().deletion_timestamp,
            Some(7)
        );
        let txn = actions[5].txn.as_ref().unwrap();
        assert_eq!((txn.app_id.as_str(), txn.version), ("someone", 3));
        // An action this build does not know reads as a line with nothing set.
        assert_eq!(actions[6], ActionLine::default());
        let again = decode_entry(&encode_entry(&actions[..6])).unwrap();
        assert_eq!(again, actions[..6]);
        let err = decode_entry(b"{\"add\":{}}\nnot json\n").unwrap_err();
        assert_eq!(err.0, 1);
    }
}
