//! What a load consumed, recorded in the very commit that publishes its rows: one Delta
//! `txn` action per input file (`appId` `ravel.input.<hash>`, `version` the table version that
//! published it), as Spark's streaming sinks record their batches. Whether an input was
//! loaded is then a question to the snapshot, which merges, compactions, adoptions and
//! checkpoints all keep: a rerun of a published load finds its inputs there, whatever
//! happened to the objects since.
//!
//! Each input's name is recorded too, in a `txn` action of its own (`appId` `ravel.name.<hash>`):
//! a file changed under a name a version consumed (rewritten, touched, copied over) is another
//! input, and the snapshot tells that its name was loaded once already.
//!
//! The commit's `commitInfo` repeats the inputs in clear (name, size, version) for people and
//! tools that read the log.

use serde::{Deserialize, Serialize};

/// Prefix of the `appId` of an input's `txn` action.
pub const INPUT_APP_PREFIX: &str = "ravel.input.";

/// Prefix of the `appId` of the `txn` action that records an input's name.
pub const NAME_APP_PREFIX: &str = "ravel.name.";

/// One input of a load, as the load found it: its identity in the log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputFile {
    /// Where it was read: a canonical local path, or an object's URL.
    pub name: String,
    pub size: u64,
    /// What changes when its content does: an object's ETag, or a local file's modification
    /// time in nanoseconds since the epoch.
    pub version: String,
    /// When it last changed, in Unix milliseconds, when known: a file older than the inputs
    /// window may have been loaded and forgotten (see [`crate::Snapshot::check_window`]).
    /// Not part of its identity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modified_ms: Option<i64>,
}

impl InputFile {
    /// The `appId` of the `txn` action that records it: [`INPUT_APP_PREFIX`] and 32 hex digits
    /// of the BLAKE3 hash of its name, size and version.
    pub fn app_id(&self) -> String {
        let mut h = blake3::Hasher::new();
        for part in [
            self.name.as_bytes(),
            &self.size.to_le_bytes(),
            self.version.as_bytes(),
        ] {
            h.update(&(part.len() as u64).to_le_bytes());
            h.update(part);
        }
        format!("{INPUT_APP_PREFIX}{}", &h.finalize().to_hex()[..32])
    }

    /// The `appId` of the `txn` action that records its name: [`NAME_APP_PREFIX`] and 32 hex
    /// digits of the BLAKE3 hash of its name, whatever its size and version.
    pub fn name_app_id(&self) -> String {
        let hash = blake3::hash(self.name.as_bytes());
        format!("{NAME_APP_PREFIX}{}", &hash.to_hex()[..32])
    }
}

/// What a load consumes: its inputs, and whether it loads them again on purpose.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Consumed {
    pub inputs: Vec<InputFile>,
    /// Load the inputs even when a version consumed them already (their rows then count
    /// twice): the user asked for it (`--reload`).
    pub reload: bool,
}

impl Consumed {
    /// A load of `inputs`, refused when they were loaded already.
    pub fn once(inputs: Vec<InputFile>) -> Consumed {
        Consumed {
            inputs,
            reload: false,
        }
    }

    /// The load's identity: 32 hex digits of the BLAKE3 hash of its inputs' `appId`s, in
    /// order, and the layout generation it loads under.
    pub fn load_identity(&self, layout_generation: u64) -> String {
        let mut h = blake3::Hasher::new();
        for input in &self.inputs {
            h.update(input.app_id().as_bytes());
            h.update(b"\n");
        }
        h.update(&layout_generation.to_le_bytes());
        h.finalize().to_hex()[..32].to_string()
    }

    /// What the load's objects are named by besides their bytes: its identity, so that the
    /// same rows read from other inputs (a copy under a new name) are other objects, and a
    /// rerun of the load stores the same objects again. A reload also names the version it
    /// read (`read`), so that each reload adds its rows again. `None` without inputs: pushed
    /// batches are named by their bytes alone.
    pub fn object_salt(&self, layout_generation: u64, read: Option<u64>) -> Option<String> {
        if self.inputs.is_empty() {
            return None;
        }
        let identity = self.load_identity(layout_generation);
        Some(match (self.reload, read) {
            (false, _) => identity,
            (true, Some(version)) => format!("{identity}.reload.{version}"),
            (true, None) => format!("{identity}.reload"),
        })
    }
}

/// A Delta `txn` action: the newest `version` of application `app_id` that the table holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Txn {
    pub app_id: String,
    pub version: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_updated: Option<i64>,
}

/// How a load's inputs stand to a version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InputsStand {
    /// No version consumed any of them (or the load reloads them on purpose).
    New,
    /// Every one was consumed; `version` is the newest version that consumed one.
    Published { version: u64 },
    /// Some were consumed: loading the rest with them would count the consumed rows twice.
    Partly {
        /// The first consumed input, and the version that consumed it.
        input: String,
        version: u64,
        /// Inputs no version consumed.
        new: usize,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(name: &str, size: u64, version: &str) -> InputFile {
        InputFile {
            name: name.into(),
            size,
            version: version.into(),
            modified_ms: None,
        }
    }

    #[test]
    fn an_input_is_named_by_its_name_size_and_version() {
        let a = input("/in/a.parquet", 10, "1");
        assert_eq!(a.app_id(), input("/in/a.parquet", 10, "1").app_id());
        assert_ne!(a.app_id(), input("/in/a.parquet", 11, "1").app_id());
        assert_ne!(a.app_id(), input("/in/a.parquet", 10, "2").app_id());
        assert_ne!(a.app_id(), input("/in/b.parquet", 10, "1").app_id());
        // Lengths are hashed with the parts: moving a byte between them is another input.
        assert_ne!(
            input("/in/a1", 10, "0").app_id(),
            input("/in/a", 10, "10").app_id()
        );
        assert!(a.app_id().starts_with(INPUT_APP_PREFIX));
        assert_eq!(a.app_id().len(), INPUT_APP_PREFIX.len() + 32);
        // Its name alone names the name's record.
        assert_eq!(
            a.name_app_id(),
            input("/in/a.parquet", 11, "2").name_app_id()
        );
        assert_ne!(
            a.name_app_id(),
            input("/in/b.parquet", 10, "1").name_app_id()
        );
        assert!(a.name_app_id().starts_with(NAME_APP_PREFIX));
    }

    #[test]
    fn objects_are_named_by_the_load_and_a_reload_by_the_version_it_read() {
        let once = Consumed::once(vec![input("a", 1, "1")]);
        assert_eq!(once.object_salt(3, Some(5)), once.object_salt(3, Some(6)));
        let copy = Consumed::once(vec![input("a-copy", 1, "1")]);
        assert_ne!(once.object_salt(3, None), copy.object_salt(3, None));
        let reload = Consumed {
            reload: true,
            ..once.clone()
        };
        assert_ne!(reload.object_salt(3, Some(5)), once.object_salt(3, Some(5)));
        assert_ne!(
            reload.object_salt(3, Some(5)),
            reload.object_salt(3, Some(6))
        );
        assert_eq!(Consumed::default().object_salt(3, Some(5)), None);
    }

    #[test]
    fn a_load_identity_follows_its_inputs_and_layout() {
        let one = Consumed::once(vec![input("a", 1, "1"), input("b", 1, "1")]);
        let other = Consumed::once(vec![input("b", 1, "1"), input("a", 1, "1")]);
        assert_eq!(one.load_identity(3), one.load_identity(3));
        assert_ne!(one.load_identity(3), one.load_identity(4));
        assert_ne!(one.load_identity(3), other.load_identity(3));
    }
}

#[cfg(test)]
mod sizes {
    use super::*;
    use crate::{ActionLine, LogEntry, Snapshot, checkpoint_actions, encode_checkpoint};

    /// A version that consumed one input, as its entry records it: the input and its name.
    fn load(version: u64) -> LogEntry {
        let input = InputFile {
            name: format!("/landing/2026/12/06/hits-{version:06}.parquet"),
            size: 46_000_000,
            version: "1733490000123456789".into(),
            modified_ms: None,
        };
        let txn = |app_id: String| ActionLine {
            txn: Some(Txn {
                app_id,
                version: version as i64,
                last_updated: Some(1_733_490_000_000),
            }),
            ..ActionLine::default()
        };
        LogEntry {
            version,
            actions: vec![txn(input.app_id()), txn(input.name_app_id())],
        }
    }

    #[test]
    fn ten_thousand_consumed_inputs_with_their_names_cost_the_checkpoint_under_128_bytes_each() {
        let line = crate::encode_entry(&load(1).actions).len();
        let mut s = Snapshot::default();
        let empty = encode_checkpoint(&checkpoint_actions(&s)).unwrap().len();
        for v in 0..10_000 {
            s.apply(&load(v));
        }
        let file = encode_checkpoint(&checkpoint_actions(&s)).unwrap();
        let full = file.len();
        let read = crate::decode_checkpoint(file).unwrap();
        assert_eq!(
            read.iter().filter(|a| a.txn.is_some()).count(),
            20_000,
            "an input and its name"
        );
        let per_input = (full - empty) as f64 / 10_000.0;
        println!(
            "txn lines {line} bytes; checkpoint {empty} -> {full} bytes, {per_input:.1} a consumed input"
        );
        assert!(line < 240, "{line}");
        assert!(per_input < 128.0, "{per_input}");
    }
}
