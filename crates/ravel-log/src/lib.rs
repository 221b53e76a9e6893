//! A ravel table's versions. Each commit (a load or a compaction) creates the next entry of
//! the table's log, `<table>/_delta_log/<version, 20 digits>.json`, if absent: a Delta Lake
//! log entry whose `add` and `remove` actions name the objects the version gains and loses.
//! Each `add` carries tags naming the manifest that describes the object (`ravel.manifest`,
//! `ravel.position`) and its rank among equal sort keys (`ravel.order`).
//!
//! A reader starts from the newest checkpoint (Delta's classic Parquet checkpoint, written
//! every 10 versions and after every merge, named by `_last_checkpoint`), lists the log from
//! there and replays
//! the entries after it, then reads the manifests the newest version names; it reads exactly
//! that version's objects, whatever commits land after. A table written before the log existed
//! (manifests under `<table>/manifests/`, no log) reads as its first version, the union of
//! those manifests; its first commit writes that version as entry 0 (`CONVERT`) and itself as
//! entry 1.
//!
//! Delta Lake readers read every version as it is: each `add` carries Delta `stats` from the
//! object's footer ([`delta_stats`]), the schema maps each Arrow type to the Delta type readers
//! read its stored Parquet type as ([`delta_type`], [`parquet_reads_as`]), and a table with a
//! column Delta has no type for lists a reader feature Delta readers refuse
//! ([`NO_DELTA_VIEW_FEATURE`], [`no_delta_view`]).
//!
//! Conflicts follow Delta's optimistic commits: a commit that finds its version taken reads
//! the entries that won and tries the next number. A load only adds; a compaction conflicts
//! when one of its inputs is no longer in the table ([`LogError::TableChanged`]). Either
//! conflicts when the version it would create leaves an object another writer added
//! partitioned in the table ([`LogError::PartitionedLeftBehind`]; a ravel version ends the
//! partitioning) or when a version read after its first partitioned the table anew
//! ([`LogError::PartitionedMeanwhile`]).

mod actions;
mod checkpoint;
mod checksum;
mod cleanup;
mod commit;
pub mod consumed;
mod error;
mod foreign;
mod references;
mod retained;
mod retention;
mod schema;
mod snapshot;
mod stats;
mod totals;

pub use actions::{
    ActionLine, Add, Format, Metadata, Protocol, Remove, TAG_CHAIN, TAG_MANIFEST, TAG_ORDER,
    TAG_POSITION, decode_entry, encode_entry,
};
pub use checkpoint::{
    CHECKPOINT_INTERVAL, LastCheckpoint, checkpoint_actions, checkpoint_actions_at,
    checkpoint_schema, decode_checkpoint, encode_checkpoint,
};
pub use checksum::{CheckpointDamage, ChecksumDisagreement, Counts, Culprit, VersionChecksum};
pub use cleanup::{DeletedLog, ExpiredLog, LogFile};
pub use commit::{Commit, Committed, Operation, Published, published_in};
pub use consumed::{Consumed, InputFile, InputsStand, Txn};
pub use error::{LogError, Mismatch};
pub use foreign::{
    DeclaredSchemaError, ExtraColumn, FENCE_FEATURE, FENCE_PROPERTY, ForeignObject, arrow_schema,
    fenced,
};
pub use references::References;
pub use retained::History;
pub use retention::{
    DEFAULT_FILES_S, DEFAULT_INPUTS_S, DEFAULT_LOG_S, Expiry, FILES_PROPERTY, FORGOTTEN_PROPERTY,
    INPUTS_PROPERTY, LOG_PROPERTY, files_window_ms, inputs_window_ms, interval, log_window_ms,
    now_ms, parse_interval,
};
pub use schema::{
    DeltaSchema, NO_DELTA_VIEW_FEATURE, UnmappedColumn, delta_schema, delta_type, no_delta_view,
    parquet_reads_as, protocol_for,
};
pub use snapshot::{ChainOrigin, LiveManifest, LiveObject, LogEntry, Removed, Snapshot};
pub use stats::{
    DELTA_INDEXED_COLUMNS, STATS_COLUMNS_PROPERTY, delta_stats, stats_columns,
    stats_columns_property,
};
pub use totals::{Totals, ratio};

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};
use ravel_manifest::Manifest;
use ravel_store::TablePaths;

/// Log entries read at once.
const READ_CONCURRENCY: usize = 16;

/// The log of one table.
#[derive(Debug, Clone)]
pub struct TableLog {
    store: Arc<dyn ObjectStore>,
    table: TablePaths,
}

impl TableLog {
    pub fn new(store: Arc<dyn ObjectStore>, table: TablePaths) -> TableLog {
        TableLog { store, table }
    }

    pub fn table(&self) -> &TablePaths {
        &self.table
    }

    /// The readable versions of the log, oldest first: from 0, or from the checkpoint it starts
    /// at when the log window cleaned the entries before it; checks that they follow on without
    /// a gap.
    pub async fn versions(&self) -> Result<Vec<u64>, LogError> {
        Ok(self.retained().await?.versions())
    }

    /// Reads the entries of `versions`, in order.
    pub async fn entries(&self, versions: &[u64]) -> Result<Vec<LogEntry>, LogError> {
        let reads: Vec<_> = versions.iter().map(|&v| self.entry(v)).collect();
        futures::stream::iter(reads)
            .buffered(READ_CONCURRENCY)
            .try_collect()
            .await
    }

    /// Reads the entry of `version`.
    pub async fn entry(&self, version: u64) -> Result<LogEntry, LogError> {
        let path = self.table.log_entry(version);
        let bytes = match get(self.store.as_ref(), &path).await {
            Err(LogError::Store {
                source: object_store::Error::NotFound { .. },
                ..
            }) => return Err(LogError::NoSuchVersion(version)),
            other => other?,
        };
        let actions = decode_entry(&bytes).map_err(|(line, source)| LogError::Parse {
            key: path.to_string(),
            line,
            source,
        })?;
        Ok(LogEntry { version, actions })
    }

    /// The newest version: from the newest checkpoint, the entries after it. A table with no
    /// log reads as the union of its manifests; one with neither has no version (`version`
    /// is `None`).
    ///
    /// The version is checked against the newest checksum file of its last versions
    /// ([`VersionChecksum`]). When a snapshot started from a checkpoint disagrees with it, the
    /// whole log is replayed to tell which is wrong (see [`TableLog::replay_checked`]).
    pub async fn latest(&self) -> Result<Snapshot, LogError> {
        let Some(mut s) = self.read_checkpoint().await else {
            let replayed = self.replay_checked(None).await?;
            if replayed.version.is_none() {
                return self.read_legacy().await;
            }
            return Ok(replayed);
        };
        let checkpoint = s.version.unwrap_or(0);
        let mut built = vec![(checkpoint, Counts::of(&s))];
        let versions = self.versions_from(s.next_version()).await?;
        for e in self.entries(&versions).await? {
            s.apply(&e);
            built.push((e.version, Counts::of(&s)));
        }
        match self.newest_checksum(&built).await? {
            Some(checked) if !checked.agrees() => {
                let read = FromCheckpoint {
                    version: checkpoint,
                    checked,
                };
                self.replay_checked(Some(read)).await
            }
            _ => Ok(s),
        }
    }

    /// The whole log replayed (from the checkpoint it starts at, when it was cleaned), checked against the newest checksum file of its last versions.
    /// `from_checkpoint`: what a checkpoint (and the entries after it) gave at that file's
    /// version, which the file contradicted.
    ///
    /// A checkpoint that disagrees with the replay is damaged: a warning names it
    /// ([`Snapshot::damaged_checkpoint`]). A checksum file that disagrees with the replay is
    /// weighed ([`Culprit`]): when the file is what is wrong, a warning names it
    /// ([`Snapshot::wrong_checksum`]) and the replay is read; otherwise the read fails with
    /// [`LogError::ChecksumDisagrees`] (an entry was lost or changed).
    async fn replay_checked(
        &self,
        from_checkpoint: Option<FromCheckpoint>,
    ) -> Result<Snapshot, LogError> {
        let history = self.history().await?;
        let mut s = Snapshot::default();
        let mut built = Vec::new();
        for e in history.all() {
            s.apply(e);
            built.push((e.version, Counts::of(&s)));
        }
        let Some(checked) = self.newest_checksum(&built).await? else {
            return Ok(s);
        };
        let mut witness = false;
        if let Some(read) = &from_checkpoint {
            let agree = read.checked.counts == checked.counts;
            witness = agree && read.version == checked.version;
            if !agree {
                let damage = self.checkpoint_damage(read, &checked);
                let what = format!(
                    "{damage}; replaying the whole log instead (verify reports it; the next checkpoint replaces it)"
                );
                checksum::warn_once(self.table.name(), ("checkpoint", read.version), &what);
                s.damaged_checkpoint = Some(damage);
            }
        }
        let entry = history
            .entries
            .iter()
            .find(|e| e.version == checked.version);
        match self.disagreement(&checked, entry, witness).await? {
            None => Ok(s),
            Some(d) if d.culprit == Culprit::ChecksumFile => {
                let what = format!("{d}; reading the log (verify reports it)");
                checksum::warn_once(self.table.name(), ("checksum", d.version), &what);
                s.wrong_checksum = Some(d);
                Ok(s)
            }
            Some(d) => Err(LogError::ChecksumDisagrees(Box::new(d))),
        }
    }

    /// The damage of a checkpoint that gave `read`, where the whole log replayed gives
    /// `replayed` (at the same checksum file's version).
    fn checkpoint_damage(
        &self,
        read: &FromCheckpoint,
        replayed: &checksum::Checked,
    ) -> CheckpointDamage {
        CheckpointDamage {
            file: self.checkpoint_path(read.version).to_string(),
            version: replayed.version,
            built: read.checked.counts,
            replayed: replayed.counts,
            checksum_file: self.checksum_path(replayed.version).to_string(),
        }
    }

    /// Applies to `snapshot` the entries committed after it. Returns them.
    pub async fn catch_up(&self, snapshot: &mut Snapshot) -> Result<Vec<LogEntry>, LogError> {
        if snapshot.from_manifests {
            *snapshot = Snapshot::default();
        }
        let next = snapshot.next_version();
        let versions = match self.versions_from(next).await {
            Err(LogError::Cleaned { .. }) => return self.catch_up_cleaned(snapshot, next).await,
            other => other?,
        };
        let entries = self.entries(&versions).await?;
        for e in &entries {
            snapshot.apply(e);
        }
        Ok(entries)
    }

    /// [`TableLog::catch_up`] of a snapshot older than the checkpoint the log starts at now (the
    /// log window cleaned the entries after it): the snapshot is read again from that checkpoint
    /// on. Returns the entries from version `next` on that the log still holds.
    async fn catch_up_cleaned(
        &self,
        snapshot: &mut Snapshot,
        next: u64,
    ) -> Result<Vec<LogEntry>, LogError> {
        let history = self.history().await?;
        tracing::info!(
            table = self.table.name(),
            from = next,
            oldest = history.oldest(),
            "the log window cleaned entries after the version read: reading from its oldest checkpoint"
        );
        *snapshot = history.replay();
        Ok(history
            .entries
            .into_iter()
            .filter(|e| e.version >= next)
            .collect())
    }

    /// The versions from `first` on, oldest first (one LIST from there); checks they follow
    /// on without a gap, and that no checksum file lacks its entry ([`LogError::LostEntry`]).
    /// Fails with [`LogError::Cleaned`] when the log window cleaned the entries from `first`.
    async fn versions_from(&self, first: u64) -> Result<Vec<u64>, LogError> {
        let r = self.readable_from(first).await?;
        match r.checkpoint {
            Some(oldest) => Err(LogError::Cleaned {
                version: first,
                oldest,
            }),
            None => Ok(r.entries),
        }
    }

    /// Whether the entry of `version` is stored, asked with one HEAD, not a listing: how a
    /// poller learns cheaply that a version was committed after the one it read.
    pub async fn entry_stored(&self, version: u64) -> Result<bool, LogError> {
        let path = self.table.log_entry(version);
        match self.store.head(&path).await {
            Ok(_) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(source) => Err(LogError::Store {
                what: "reading",
                key: path.to_string(),
                source,
            }),
        }
    }

    /// The log's files from version `first`'s on (one listing; after the entry before it).
    async fn list_log(&self, first: u64) -> Result<Vec<object_store::ObjectMeta>, LogError> {
        let dir = self.table.log_dir();
        let listing = match first {
            0 => self.store.list(Some(&dir)),
            _ => {
                let offset = dir.clone().join(format!("{:020}.json", first - 1));
                self.store.list_with_offset(Some(&dir), &offset)
            }
        };
        listing
            .try_collect()
            .await
            .map_err(|source| LogError::Store {
                what: "listing",
                key: dir.to_string(),
                source,
            })
    }

    /// `_delta_log/_last_checkpoint`.
    fn last_checkpoint_path(&self) -> Path {
        self.table.log_dir().join("_last_checkpoint")
    }

    /// `_delta_log/<version>.checkpoint.parquet`.
    pub fn checkpoint_path(&self, version: u64) -> Path {
        self.table
            .log_dir()
            .join(format!("{version:020}.checkpoint.parquet"))
    }

    /// The version the newest checkpoint holds, if one can be read (any failure is logged and
    /// the caller replays the whole log instead).
    async fn read_checkpoint(&self) -> Option<Snapshot> {
        match self.newest_checkpoint().await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %ravel_store::ErrorChain::new(&e), "the checkpoint could not be read; replaying the log");
                None
            }
        }
    }

    /// The version the checkpoint `_last_checkpoint` names holds, as Delta readers start from
    /// it: `None` when there is no `_last_checkpoint`, an error when it or its checkpoint does
    /// not read.
    pub async fn newest_checkpoint(&self) -> Result<Option<Snapshot>, LogError> {
        let path = self.last_checkpoint_path();
        let last = match get(self.store.as_ref(), &path).await {
            Ok(bytes) => serde_json::from_slice::<LastCheckpoint>(&bytes).map_err(|e| {
                LogError::Checkpoint {
                    what: format!("{path} does not read"),
                    source: Box::new(e),
                }
            })?,
            Err(LogError::Store {
                source: object_store::Error::NotFound { .. },
                ..
            }) => {
                return Ok(None);
            }
            Err(e) => return Err(e),
        };
        let bytes = get(self.store.as_ref(), &self.checkpoint_path(last.version)).await?;
        let mut s = Snapshot::default();
        s.apply(&LogEntry {
            version: last.version,
            actions: decode_checkpoint(bytes)?,
        });
        Ok(Some(s))
    }

    /// Writes the checkpoint of `snapshot`'s version and points `_last_checkpoint` to it.
    pub async fn write_checkpoint(&self, snapshot: &Snapshot) -> Result<(), LogError> {
        let Some(version) = snapshot.version else {
            return Ok(());
        };
        let actions = checkpoint_actions(snapshot);
        let file = encode_checkpoint(&actions)?;
        let put = |path: Path, bytes: Bytes| async move {
            self.store
                .put(&path, bytes.into())
                .await
                .map_err(|source| LogError::Store {
                    what: "writing",
                    key: path.to_string(),
                    source,
                })
        };
        put(self.checkpoint_path(version), file).await?;
        let last = LastCheckpoint {
            version,
            size: actions.len() as u64,
            num_of_add_files: Some(snapshot.files().len() as u64),
        };
        let json = serde_json::to_vec(&last).expect("serializes");
        put(self.last_checkpoint_path(), Bytes::from(json)).await?;
        Ok(())
    }

    async fn read_legacy(&self) -> Result<Snapshot, LogError> {
        let manifests = ravel_manifest::read_manifests(self.store.as_ref(), &self.table)
            .await
            .map_err(|source| LogError::Manifest {
                key: self.table.manifests_dir().to_string(),
                source,
            })?;
        Ok(Snapshot::from_manifests(&self.table, manifests))
    }

    /// The manifests of `snapshot`'s objects, each with the objects the version holds of it,
    /// oldest rank first. Checks that each object is the one its manifest lists.
    /// Fails on a table whose protocol lists a feature this build cannot read.
    pub async fn manifests(&self, snapshot: &Snapshot) -> Result<Vec<LiveManifest>, LogError> {
        snapshot.check_features(false)?;
        let mut by_manifest: BTreeMap<String, Vec<LiveObject>> = BTreeMap::new();
        // Objects other writers added are read apart ([`Snapshot::foreign`]).
        let ours = snapshot
            .files()
            .iter()
            .filter(|(_, add)| add.tag(TAG_MANIFEST).is_some());
        for (path, add) in ours {
            let (manifest, live) = self.place(snapshot, path, add)?;
            by_manifest.entry(manifest).or_default().push(live);
        }
        let reads: Vec<_> = by_manifest
            .into_iter()
            .map(|(key, live)| async move {
                let manifest = self.manifest(snapshot, &key).await?;
                Ok::<_, LogError>((key, manifest, live))
            })
            .collect();
        let read: Vec<_> = futures::stream::iter(reads)
            .buffered(READ_CONCURRENCY)
            .try_collect()
            .await?;
        let mut out = Vec::with_capacity(read.len());
        for (key, manifest, mut live) in read {
            live.sort_by_key(|l| l.position);
            for l in &live {
                check_listed(&self.table, snapshot, &key, &manifest, l)?;
            }
            out.push(LiveManifest {
                key,
                manifest,
                live,
            });
        }
        out.sort_by(|a, b| (a.order(), &a.key).cmp(&(b.order(), &b.key)));
        Ok(out)
    }

    /// The manifest (store path) and place of the object `add` adds.
    fn place(
        &self,
        snapshot: &Snapshot,
        path: &str,
        add: &Add,
    ) -> Result<(String, LiveObject), LogError> {
        let foreign = |problem: &str| LogError::ForeignAdd {
            version: snapshot.version.unwrap_or(0),
            path: path.to_string(),
            problem: problem.to_string(),
        };
        let manifest = add
            .tag(TAG_MANIFEST)
            .ok_or_else(|| foreign("no ravel.manifest tag"))?;
        let number = |tag: &str| -> Result<u64, LogError> {
            add.tag(tag)
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| foreign(&format!("no numeric {tag} tag")))
        };
        let live = LiveObject {
            position: number(TAG_POSITION)? as usize,
            order: number(TAG_ORDER)?,
            chain: match add.tag(TAG_CHAIN) {
                Some(t) => Some(
                    ChainOrigin::parse(&self.table, t)
                        .ok_or_else(|| foreign("a ravel.chain tag that is not <manifest>#<run>"))?,
                ),
                None => None,
            },
        };
        Ok((self.table.absolute(manifest), live))
    }

    async fn manifest(&self, snapshot: &Snapshot, key: &str) -> Result<Arc<Manifest>, LogError> {
        if let Some(m) = snapshot.known.get(key) {
            return Ok(m.clone());
        }
        let key = key.to_string();
        match ravel_manifest::read_manifest(self.store.as_ref(), &key).await {
            Ok(Some(m)) => Ok(Arc::new(m)),
            Ok(None) => Err(LogError::ManifestMissing { key }),
            Err(source) => Err(LogError::Manifest { key, source }),
        }
    }
}

/// What a checkpoint and the entries after it gave at the version of a checksum file that
/// contradicts it.
struct FromCheckpoint {
    /// The checkpoint's version.
    version: u64,
    checked: checksum::Checked,
}

/// The version of a checksum file's name (`<20 digits>.crc`), if it is one.
fn checksum_version(name: Option<&str>) -> Option<u64> {
    version_of(name?.strip_suffix(".crc")?)
}

fn version_of(stem: &str) -> Option<u64> {
    (stem.len() == 20 && stem.bytes().all(|b| b.is_ascii_digit()))
        .then(|| stem.parse().ok())
        .flatten()
}

/// The object a live entry names must be the manifest's object at that position, of that size.
fn check_listed(
    table: &TablePaths,
    snapshot: &Snapshot,
    key: &str,
    manifest: &Manifest,
    live: &LiveObject,
) -> Result<(), LogError> {
    let problem = match manifest.objects.get(live.position) {
        None => Mismatch::NoPosition {
            objects: manifest.objects.len(),
            position: live.position,
        },
        Some(o) => {
            let path = table.relative(&o.key).unwrap_or(&o.key);
            match snapshot.files().get(path) {
                Some(add) if add.size == o.bytes => return Ok(()),
                Some(add) => Mismatch::Size {
                    object: o.key.clone(),
                    listed: o.bytes,
                    logged: add.size,
                },
                None => Mismatch::OtherObject {
                    object: o.key.clone(),
                    position: live.position,
                },
            }
        }
    };
    Err(LogError::ManifestMismatch {
        key: key.to_string(),
        problem,
    })
}

pub(crate) async fn get(store: &dyn ObjectStore, path: &Path) -> Result<bytes::Bytes, LogError> {
    let err = |source| LogError::Store {
        what: "reading",
        key: path.to_string(),
        source,
    };
    store
        .get(path)
        .await
        .map_err(err)?
        .bytes()
        .await
        .map_err(err)
}
