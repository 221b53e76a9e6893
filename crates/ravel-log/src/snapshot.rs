//! A version of the table: the objects it holds, replayed from the log's entries in order.

use std::collections::BTreeMap;
use std::sync::Arc;

use ravel_manifest::{Manifest, ObjectEntry};
use ravel_store::TablePaths;

use crate::actions::{
    ActionLine, Add, Metadata, Protocol, Remove, TAG_MANIFEST, TAG_ORDER, TAG_POSITION,
};
use crate::consumed::{Consumed, InputFile, InputsStand, Txn};

/// One log entry, read.
#[derive(Debug, Clone)]
pub struct LogEntry {
    pub version: u64,
    pub actions: Vec<ActionLine>,
}

impl LogEntry {
    /// The entry's `commitInfo`, if it has one.
    pub fn commit_info(&self) -> Option<&serde_json::Value> {
        self.actions.iter().find_map(|a| a.commit_info.as_ref())
    }
}

/// An object a version removed, and when.
#[derive(Debug, Clone, PartialEq)]
pub struct Removed {
    /// The version whose entry removed it.
    pub version: u64,
    /// Unix milliseconds of the removal, as its entry records it.
    pub deletion_timestamp: Option<i64>,
    pub size: Option<u64>,
    /// The manifest that listed it (relative to the table), from the removal's tags.
    pub manifest: Option<String>,
    /// The `remove` action, as a checkpoint records it.
    pub(crate) action: Remove,
}

/// The state of the table at one version.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// The newest version applied; `None` before the first commit.
    pub version: Option<u64>,
    /// The table has no log: this is its first version, the union of the manifests written
    /// under `manifests/` by builds before the log.
    pub from_manifests: bool,
    pub protocol: Option<Protocol>,
    pub metadata: Option<Metadata>,
    /// The objects of this version, by path relative to the table.
    files: BTreeMap<String, Add>,
    /// Objects removed by this version or an earlier one and not added again since.
    removed: BTreeMap<String, Removed>,
    /// The totals the newest entry applied records (`None` when read from a checkpoint and
    /// no entry was applied since; see [`crate::TableLog::totals`]).
    pub totals: Option<crate::Totals>,
    /// Manifests already read (a table without a log reads them to build its version).
    pub(crate) known: BTreeMap<String, Arc<Manifest>>,
    /// The checkpoint this version was first built from disagreed with the log, and this is
    /// the whole log replayed instead (see [`crate::TableLog::latest`]).
    pub damaged_checkpoint: Option<crate::CheckpointDamage>,
    /// The checksum file of this version (or of one of its last) disagrees with the log, and
    /// the evidence says the file is wrong: this is the log as it reads.
    pub wrong_checksum: Option<crate::ChecksumDisagreement>,
    /// Per object of this version, the version that added it.
    pub(crate) added_in: BTreeMap<String, u64>,
    /// The newest `txn` action of each application, by `appId` (a load's inputs among them:
    /// see [`crate::consumed`]).
    txns: BTreeMap<String, Txn>,
}

impl Snapshot {
    /// Applies the entries after this version, in order (the caller checks they follow on).
    pub fn apply(&mut self, entry: &LogEntry) {
        for a in &entry.actions {
            if let Some(p) = &a.protocol {
                self.protocol = Some(p.clone());
            }
            if let Some(m) = &a.meta_data {
                self.metadata = Some(m.clone());
            }
            if let Some(r) = &a.remove {
                self.files.remove(&r.path);
                self.added_in.remove(&r.path);
                self.removed.insert(
                    r.path.clone(),
                    Removed {
                        version: entry.version,
                        deletion_timestamp: r.deletion_timestamp,
                        size: r.size,
                        manifest: r.tags.as_ref().and_then(|t| t.get(TAG_MANIFEST).cloned()),
                        action: r.clone(),
                    },
                );
            }
            if let Some(t) = &a.txn {
                self.txns.insert(t.app_id.clone(), t.clone());
            }
            if let Some(add) = &a.add {
                self.removed.remove(&add.path);
                self.files.insert(add.path.clone(), add.clone());
                self.added_in.insert(add.path.clone(), entry.version);
            }
        }
        // An entry without totals (another engine's commit) keeps the last known ones.
        if let Some(t) = crate::Totals::of_entry(entry) {
            self.totals = Some(t);
        }
        self.version = Some(entry.version);
    }

    /// The first version of a table with no log: every object of `manifests` (store path and
    /// manifest, oldest load first), ranked equal, ties broken by manifest.
    pub fn from_manifests(table: &TablePaths, manifests: Vec<(String, Manifest)>) -> Snapshot {
        let mut s = Snapshot {
            version: (!manifests.is_empty()).then_some(0),
            from_manifests: !manifests.is_empty(),
            ..Snapshot::default()
        };
        for (key, m) in manifests {
            let manifest_path = table.relative(&key).unwrap_or(&key).to_string();
            for (position, o) in m.objects.iter().enumerate() {
                let path = table.relative(&o.key).unwrap_or(&o.key).to_string();
                let add = object_add(&path, o, m.committed_at_ms, true, |tags| {
                    tags.insert(TAG_MANIFEST.into(), manifest_path.clone());
                    tags.insert(TAG_POSITION.into(), position.to_string());
                    tags.insert(TAG_ORDER.into(), "0".into());
                });
                s.files.insert(path, add);
            }
            s.known.insert(key, Arc::new(m));
        }
        s
    }

    /// The objects of this version, by path relative to the table.
    pub fn files(&self) -> &BTreeMap<String, Add> {
        &self.files
    }

    /// Whether `path` (relative to the table) is in this version.
    pub fn holds(&self, path: &str) -> bool {
        self.files.contains_key(path)
    }

    /// Objects removed at or before this version and not added again: readers of older
    /// versions may still read them until `gc` deletes them.
    pub fn removed(&self) -> &BTreeMap<String, Removed> {
        &self.removed
    }

    /// The `remove` actions of [`Snapshot::removed`], for a checkpoint.
    pub fn tombstones(&self) -> impl Iterator<Item = Remove> + '_ {
        self.removed.values().map(|r| r.action.clone())
    }

    /// The newest `txn` action of each application, by `appId`.
    pub fn txns(&self) -> &BTreeMap<String, Txn> {
        &self.txns
    }

    /// The version that consumed `input`, if one did.
    pub fn consumed_by(&self, input: &InputFile) -> Option<u64> {
        let t = self.txns.get(&input.app_id())?;
        u64::try_from(t.version).ok()
    }

    /// The version that consumed an input named as `input` is, whatever its size and
    /// version, if one did (versions that recorded their inputs' names: see
    /// [`crate::consumed`]).
    pub fn name_consumed_by(&self, input: &InputFile) -> Option<u64> {
        let t = self.txns.get(&input.name_app_id())?;
        u64::try_from(t.version).ok()
    }

    /// Refuses a load of `consumed` when a version consumed the name of one of its inputs
    /// and not the input itself: the file changed under that name since (rewritten, touched,
    /// copied over), and its name was loaded once already ([`crate::LogError::NameConsumed`],
    /// naming the first such input). A reload is never refused.
    pub fn check_names(&self, consumed: &Consumed) -> Result<(), crate::LogError> {
        if consumed.reload {
            return Ok(());
        }
        let changed = consumed.inputs.iter().find_map(|i| {
            let version = self.name_consumed_by(i)?;
            self.consumed_by(i).is_none().then_some((i, version))
        });
        match changed {
            None => Ok(()),
            Some((input, version)) => Err(crate::LogError::NameConsumed {
                input: input.name.clone(),
                version,
            }),
        }
    }

    /// Refuses a load of `consumed` at `now_ms` when one of its inputs no version remembers
    /// last changed before the table's inputs window and the table is older than the window:
    /// a version may have loaded it, and its identity left the checkpoints since
    /// ([`crate::LogError::BeyondInputsWindow`], naming the first). An input whose
    /// modification time is unknown counts as older. A new table takes old files; a reload is
    /// never refused.
    pub fn check_window(&self, consumed: &Consumed, now_ms: i64) -> Result<(), crate::LogError> {
        let Some(before) = crate::Expiry::forgotten_before(self.metadata.as_ref(), now_ms) else {
            return Ok(());
        };
        if consumed.reload {
            return Ok(());
        }
        let old = |i: &&InputFile| {
            i.modified_ms.is_none_or(|m| m < before) && self.consumed_by(i).is_none()
        };
        let Some(input) = consumed.inputs.iter().find(old) else {
            return Ok(());
        };
        let changed = match input.modified_ms {
            Some(m) => format!("last changed {} ago", crate::retention::span(now_ms - m)),
            None => "has no known modification time".to_string(),
        };
        Err(crate::LogError::BeyondInputsWindow {
            input: input.name.clone(),
            changed,
            limit: self.window_limit(before, now_ms),
        })
    }

    /// What a file older than `before` is older than: the inputs window as the metadata
    /// records it, or the moment an earlier, shorter window began to forget.
    fn window_limit(&self, before: i64, now_ms: i64) -> String {
        let window = crate::inputs_window_ms(self.metadata.as_ref());
        let text = crate::interval(u64::try_from(window / 1000).unwrap_or(0));
        match before > now_ms.saturating_sub(window) {
            false => format!("the table's inputs window ({text})"),
            true => format!(
                "{} ago, when an earlier, shorter inputs window began to forget loads ({}; the window is now {text})",
                crate::retention::span(now_ms - before),
                crate::FORGOTTEN_PROPERTY
            ),
        }
    }

    /// Refuses a load of `consumed`'s new inputs that the table cannot vouch for: a file
    /// changed under a consumed name ([`Snapshot::check_names`]), or one older than the inputs
    /// window ([`Snapshot::check_window`]), at `now_ms`.
    pub fn check_new(&self, consumed: &Consumed, now_ms: i64) -> Result<(), crate::LogError> {
        self.check_names(consumed)?;
        self.check_window(consumed, now_ms)
    }

    /// Drops what a checkpoint written at `now_ms` would leave out ([`crate::Expiry`]):
    /// tombstones older than the files window and `txn`s older than the inputs window, so a
    /// snapshot kept up to date for a long time holds the windows, not the history.
    pub fn forget_expired(&mut self, now_ms: i64) {
        let expiry = crate::Expiry::at(self.metadata.as_ref(), now_ms);
        self.removed
            .retain(|_, r| expiry.keeps_tombstone(r.deletion_timestamp));
        self.txns.retain(|_, t| expiry.keeps_txn(t.last_updated));
    }

    /// How `consumed`'s inputs stand to this version (see [`InputsStand`]).
    pub fn inputs_stand(&self, consumed: &Consumed) -> InputsStand {
        if consumed.reload || consumed.inputs.is_empty() {
            return InputsStand::New;
        }
        let by: Vec<Option<u64>> = consumed
            .inputs
            .iter()
            .map(|i| self.consumed_by(i))
            .collect();
        let new = by.iter().filter(|v| v.is_none()).count();
        let first = consumed
            .inputs
            .iter()
            .zip(&by)
            .find_map(|(i, v)| Some((i, (*v)?)));
        match first {
            None => InputsStand::New,
            Some(_) if new == 0 => InputsStand::Published {
                version: by.iter().flatten().copied().max().unwrap_or(0),
            },
            Some((input, version)) => InputsStand::Partly {
                input: input.name.clone(),
                version,
                new,
            },
        }
    }

    /// The version the next commit creates.
    pub fn next_version(&self) -> u64 {
        self.version.map_or(0, |v| v + 1)
    }
}

/// An `add` for object `o` at `path`, with tags set by `tag`.
pub(crate) fn object_add(
    path: &str,
    o: &ObjectEntry,
    modification_time_ms: u64,
    data_change: bool,
    tag: impl FnOnce(&mut BTreeMap<String, String>),
) -> Add {
    let mut tags = BTreeMap::new();
    tag(&mut tags);
    Add {
        path: path.to_string(),
        partition_values: BTreeMap::new(),
        size: o.bytes,
        modification_time: modification_time_ms as i64,
        data_change,
        stats: Some(
            o.delta_stats
                .clone()
                .unwrap_or_else(|| serde_json::json!({ "numRecords": o.rows }).to_string()),
        ),
        tags: Some(tags),
    }
}

/// An object of a version, as its manifest describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveObject {
    /// Its position among the manifest's objects.
    pub position: usize,
    /// Its rank among equal sort keys (lower first); see [`crate::actions::TAG_ORDER`].
    pub order: u64,
    /// The run it continues, when a compaction wrote it back (see [`ChainOrigin`]).
    pub chain: Option<ChainOrigin>,
}

/// The run an object continues. A compaction that merges one key range reads whole objects;
/// their rows outside the range go back into objects of their own that keep the place of the
/// run they came from among equal sort keys, so that a later merge orders ties as the first
/// would have.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ChainOrigin {
    /// Store path of the manifest that listed the run.
    pub manifest: String,
    pub run: u64,
}

impl ChainOrigin {
    /// The tag's value: the manifest's path relative to the table, `#`, the run.
    pub fn tag(&self, table: &ravel_store::TablePaths) -> String {
        let path = table.relative(&self.manifest).unwrap_or(&self.manifest);
        format!("{path}#{}", self.run)
    }

    /// Reads a tag's value (see [`ChainOrigin::tag`]).
    pub fn parse(table: &ravel_store::TablePaths, tag: &str) -> Option<ChainOrigin> {
        let (path, run) = tag.rsplit_once('#')?;
        Some(ChainOrigin {
            manifest: table.absolute(path),
            run: run.parse().ok()?,
        })
    }
}

/// A manifest with the objects a version holds of it.
#[derive(Debug, Clone)]
pub struct LiveManifest {
    /// Store path of the manifest.
    pub key: String,
    pub manifest: Arc<Manifest>,
    /// The manifest's objects in the version, by position.
    pub live: Vec<LiveObject>,
}

impl LiveManifest {
    /// The version's objects of this manifest, with their entries.
    pub fn objects(&self) -> impl Iterator<Item = (&LiveObject, &ObjectEntry)> {
        self.live
            .iter()
            .map(|l| (l, &self.manifest.objects[l.position]))
    }

    /// The lowest rank of its objects in the version.
    pub fn order(&self) -> u64 {
        self.live.iter().map(|l| l.order).min().unwrap_or(0)
    }
}

#[cfg(test)]
#[path = "window_tests.rs"]
mod window_tests;
