//! Commits: the next version, created if absent, retried over the versions that won.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::time::{SystemTime, UNIX_EPOCH};

use arrow::datatypes::Schema;
use ravel_manifest::Manifest;
use ravel_store::TablePaths;
use serde_json::{Value, json};

use crate::actions::{
    ActionLine, Format, Metadata, Remove, TAG_CHAIN, TAG_MANIFEST, TAG_ORDER, TAG_POSITION,
    encode_entry,
};
use crate::consumed::{Consumed, InputsStand, Txn};
use crate::schema::{delta_schema, protocol_for};
use crate::snapshot::object_add;
use crate::{CHECKPOINT_INTERVAL, ChainOrigin, LogError, Snapshot, TableLog};

/// Attempts before a commit gives up: each lost one means another commit landed.
const MAX_ATTEMPTS: usize = 1000;

/// What a commit does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Operation {
    /// Adds a load's objects. Conflicts only when its version would leave partitioned objects
    /// behind (see [`LogError::PartitionedLeftBehind`]).
    Load,
    /// Replaces objects with their merge. Conflicts when an input left the table.
    Compaction,
}

/// One commit: a manifest whose objects join the table, and the objects that leave it.
#[derive(Debug, Clone)]
pub struct Commit<'a> {
    pub operation: Operation,
    /// Store path of the manifest, written before the commit.
    pub manifest_key: String,
    pub manifest: &'a Manifest,
    /// Per object of the manifest, its rank among equal sort keys; `None` ranks it by the
    /// version this commit creates (a load's objects).
    pub orders: Vec<Option<u64>>,
    /// Per object of the manifest, the run it continues (see [`ChainOrigin`]); missing or
    /// `None`: its own run.
    pub chains: Vec<Option<ChainOrigin>>,
    /// Store paths of the objects leaving the table (a compaction's inputs).
    pub removes: Vec<String>,
    /// Settings recorded in the table's `metaData` (the layout, for other engines).
    pub configuration: BTreeMap<String, String>,
    /// Bytes a merge stored for this commit, intermediate objects included (0 for a load:
    /// its objects count as loaded).
    pub written_bytes: u64,
    /// The commit leaves the table one sequence (a full compaction): the totals since the
    /// last full compaction start over.
    pub full: bool,
    /// What a load consumed: recorded as `txn` actions in its entry, and checked against
    /// every version it is tried on (see [`crate::consumed`]). Empty for a compaction.
    pub consumed: Consumed,
}

/// What a commit did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Committed {
    /// The version it created.
    Version(u64),
    /// Every object of the manifest is in the table already (a rerun of a load that was
    /// committed): nothing was written.
    AlreadyLive(Published),
}

impl Committed {
    /// The version that holds the commit's objects: the one created, or the newest read.
    pub fn version(&self) -> u64 {
        match self {
            Committed::Version(v) => *v,
            Committed::AlreadyLive(p) => p.version,
        }
    }
}

/// Where a manifest's objects are published already.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Published {
    /// The newest version read, which holds every object of the manifest.
    pub version: u64,
    /// Store path of the manifest that published them (a rerun's own manifest differs).
    pub manifest: String,
    /// That manifest's load id.
    pub load_id: String,
}

/// How `manifest`'s objects stand to the version `base`: `None` when it holds none of them,
/// `Some` when it holds all of them (the manifest is published already), an error when it
/// holds some (publishing would count their rows twice). Objects are named by their content:
/// the same key is the same rows.
pub fn published_in(
    table: &TablePaths,
    base: &Snapshot,
    manifest: &Manifest,
) -> Result<Option<Published>, LogError> {
    let held: Vec<&str> = manifest
        .objects
        .iter()
        .map(|o| table.relative(&o.key).unwrap_or(&o.key))
        .filter(|p| base.holds(p))
        .collect();
    let Some(first) = held.first() else {
        return Ok(None);
    };
    let version = base.version.unwrap_or(0);
    let by = table.absolute(base.files()[*first].tag(TAG_MANIFEST).unwrap_or_default());
    if held.len() < manifest.objects.len() {
        return Err(LogError::AlreadyLive {
            path: table.absolute(first),
            version,
            manifest: by,
        });
    }
    let load_id = by
        .rsplit('/')
        .next()
        .and_then(|f| f.strip_suffix(".json"))
        .unwrap_or(&by)
        .to_string();
    Ok(Some(Published {
        version,
        manifest: by,
        load_id,
    }))
}

impl TableLog {
    /// Commits `commit` as the next version: reads the newest version, checks the commit
    /// against it, creates the entry if absent; when another commit took the number, reads it
    /// and tries the next one.
    pub async fn commit(&self, commit: &Commit<'_>) -> Result<Committed, LogError> {
        let mut snapshot = self.latest().await?;
        let first_read = partition_columns(&snapshot);
        for attempt in 0..MAX_ATTEMPTS {
            snapshot.check_features(true)?;
            if snapshot.from_manifests {
                self.convert_legacy(&snapshot, attempt).await?;
                self.catch_up(&mut snapshot).await?;
                continue;
            }
            if let Some(version) = consumed_by(&snapshot, commit)? {
                return Ok(Committed::AlreadyLive(self.publication(version).await));
            }
            check_partitioning(self, &snapshot, commit, &first_read)?;
            if let Some(done) = check(self, &snapshot, commit)? {
                return Ok(done);
            }
            let version = snapshot.next_version();
            let totals = self.totals(&snapshot).await?;
            let entry = self.entry_for(&snapshot, commit, version, attempt, totals);
            if self.create(version, entry.clone()).await? {
                let merge = commit.operation == Operation::Compaction;
                self.after_commit(snapshot, version, &entry, merge).await;
                return Ok(Committed::Version(version));
            }
            tracing::debug!(version, "another commit took the version; reading it");
            self.catch_up(&mut snapshot).await?;
        }
        Err(LogError::TooManyConflicts(MAX_ATTEMPTS))
    }

    /// The load that `version` published, as its entry's `commitInfo` names it (empty names
    /// when the entry no longer reads: the log window, or another engine, cleaned it).
    pub async fn publication(&self, version: u64) -> Published {
        let info = match self.entry(version).await {
            Ok(entry) => entry.commit_info().map(|i| i["ravel"].clone()),
            Err(LogError::NoSuchVersion(_)) => {
                tracing::debug!(version, "the entry that published the load was cleaned");
                None
            }
            Err(e) => {
                tracing::warn!(version, error = %ravel_store::ErrorChain::new(&e), "the entry that published the load does not read");
                None
            }
        };
        let field = |name: &str| {
            info.as_ref()
                .and_then(|i| i[name].as_str())
                .unwrap_or_default()
                .to_string()
        };
        let manifest = field("manifest");
        Published {
            version,
            manifest: match manifest.is_empty() {
                true => manifest,
                false => self.table.absolute(&manifest),
            },
            load_id: field("id"),
        }
    }

    /// Commits the table properties `configuration` (the layout's) and the protocol they ask
    /// for (the fence on or off) as a version of their own, unless the newest version has them
    /// already. `None` when nothing was committed (no change, or a table with no version yet:
    /// its first commit records them).
    pub async fn commit_settings(
        &self,
        configuration: &BTreeMap<String, String>,
    ) -> Result<Option<u64>, LogError> {
        let mut snapshot = self.latest().await?;
        for attempt in 0..MAX_ATTEMPTS {
            snapshot.check_features(true)?;
            let (Some(protocol), Some(meta)) = (&snapshot.protocol, &snapshot.metadata) else {
                return Ok(None);
            };
            let mut actions = Vec::new();
            let configuration = &merged_configuration(Some(meta), configuration);
            let wanted = crate::fenced(protocol.clone(), is_fenced(configuration));
            if &wanted != protocol {
                actions.push(ActionLine {
                    protocol: Some(wanted),
                    ..ActionLine::default()
                });
            }
            if &meta.configuration != configuration {
                let mut meta = meta.clone();
                meta.configuration = configuration.clone();
                actions.push(ActionLine {
                    meta_data: Some(meta),
                    ..ActionLine::default()
                });
            }
            if actions.is_empty() {
                return Ok(None);
            }
            let version = snapshot.next_version();
            let info = json!({"kind": "settings"});
            let mut entry = vec![commit_info(
                "SET TBLPROPERTIES",
                json!({}),
                snapshot.version,
                false,
                info,
                attempt,
            )];
            entry.extend(actions);
            let entry = encode_entry(&entry);
            if self.create(version, entry.clone()).await? {
                self.after_commit(snapshot, version, &entry, false).await;
                return Ok(Some(version));
            }
            self.catch_up(&mut snapshot).await?;
        }
        Err(LogError::TooManyConflicts(MAX_ATTEMPTS))
    }

    /// Writes the checksum file of `version`, which `entry` created on `base`, and its
    /// checkpoint every [`CHECKPOINT_INTERVAL`] versions and after a merge (which replaces many
    /// objects: a reader that opens the table next starts from it instead of replaying the
    /// loads). A failure is only logged: the commit stands, and readers check against an older
    /// checksum and replay from an older checkpoint.
    async fn after_commit(&self, mut base: Snapshot, version: u64, entry: &[u8], merge: bool) {
        let actions = match crate::actions::decode_entry(entry) {
            Ok(a) => a,
            Err((line, e)) => {
                tracing::warn!(version, line, error = %ravel_store::ErrorChain::new(&e), "no checksum or checkpoint: the entry just written does not parse");
                return;
            }
        };
        let entry = crate::LogEntry { version, actions };
        base.apply(&entry);
        self.write_checksum(&base, crate::checksum::txn_id(&entry))
            .await;
        if version == 0 || (!version.is_multiple_of(CHECKPOINT_INTERVAL) && !merge) {
            return;
        }
        if let Err(e) = self.write_checkpoint(&base).await {
            tracing::warn!(version, error = %ravel_store::ErrorChain::new(&e), "the checkpoint was not written; readers replay from an older one");
        }
    }

    /// Creates entry `version` unless taken: `Ok(false)` when another writer's entry is there.
    async fn create(&self, version: u64, entry: Vec<u8>) -> Result<bool, LogError> {
        let path = self.table.log_entry(version);
        match ravel_store::create_or_confirm(self.store.as_ref(), &path, entry.into()).await {
            Ok(()) => Ok(true),
            Err(e) if e.is_taken() => Ok(false),
            Err(ravel_store::CreateError::Write { key, source }) => Err(LogError::Store {
                what: "writing",
                key,
                source,
            }),
            Err(ravel_store::CreateError::Unknown { key, write, read }) => {
                Err(LogError::CommitUnknown { key, write, read })
            }
        }
    }

    /// Converts a table that has manifests but no log (an older build's) into the log's entry
    /// 0, Delta's CONVERT: every object of its manifests. ("Adopt", elsewhere, means taking in
    /// other writers' objects; the commit info keeps the kind it was first written with.)
    async fn convert_legacy(&self, legacy: &Snapshot, attempt: usize) -> Result<(), LogError> {
        let schema = legacy
            .known
            .values()
            .map(|m| m.schema.clone())
            .reduce(|a, b| ravel_manifest::widen(&a, &b))
            .unwrap_or_else(Schema::empty);
        let mut actions = vec![
            commit_info(
                "CONVERT",
                json!({}),
                None,
                false,
                json!({"kind": "adopt"}),
                attempt,
            ),
            ActionLine {
                protocol: Some(protocol_for(&delta_schema(&schema))),
                ..ActionLine::default()
            },
            ActionLine {
                meta_data: Some(metadata(None, &schema, BTreeMap::new())),
                ..ActionLine::default()
            },
        ];
        actions.extend(legacy.files().values().map(|add| ActionLine {
            add: Some(add.clone()),
            ..ActionLine::default()
        }));
        if self.create(0, encode_entry(&actions)).await? {
            tracing::info!(
                objects = legacy.files().len(),
                "wrote the table's manifests as the log's first version"
            );
        }
        Ok(())
    }

    /// The entry of `commit` as version `version` after `base`.
    fn entry_for(
        &self,
        base: &Snapshot,
        commit: &Commit<'_>,
        version: u64,
        attempt: usize,
        totals: crate::Totals,
    ) -> Vec<u8> {
        let m = commit.manifest;
        let load = commit.operation == Operation::Load;
        let loaded = if load {
            m.objects.iter().map(|o| o.bytes).sum()
        } else {
            0
        };
        let (operation, parameters) = if load {
            ("WRITE", json!({"mode": "Append"}))
        } else {
            ("OPTIMIZE", json!({}))
        };
        let mut ravel = json!({
            "kind": if load { "load" } else { "compaction" },
            "id": m.load_id,
            "manifest": self.table.relative(&commit.manifest_key),
            "layoutGeneration": m.layout_generation,
            "writtenBytes": commit.written_bytes,
            "totals": totals.after(loaded, commit.written_bytes, commit.full),
        });
        if !commit.consumed.inputs.is_empty() {
            ravel["inputs"] = json!(commit.consumed.inputs);
            ravel["loadIdentity"] = json!(commit.consumed.load_identity(m.layout_generation));
            ravel["reload"] = json!(commit.consumed.reload);
        }
        let mut actions = vec![commit_info(
            operation,
            parameters,
            base.version,
            load && commit.removes.is_empty(),
            ravel,
            attempt,
        )];
        actions.extend(table_changes(base, m, &commit.configuration));
        let now = now_ms();
        actions.extend(consumed_txns(&commit.consumed, version, now));
        // An input whose rows a bounded step writes back unchanged is the same object (the
        // same content, the same name): it stays, re-added below with its new tags. Delta
        // forbids a remove and an add of one path in one version (readers would drop it).
        let added: HashSet<&str> = m
            .objects
            .iter()
            .map(|o| self.table.relative(&o.key).unwrap_or(&o.key))
            .collect();
        for path in &commit.removes {
            let rel = self.table.relative(path).unwrap_or(path);
            if !added.contains(rel) {
                actions.push(remove(base, rel, now));
            }
        }
        let manifest_path = self
            .table
            .relative(&commit.manifest_key)
            .unwrap_or_default();
        for (position, o) in m.objects.iter().enumerate() {
            let order = commit
                .orders
                .get(position)
                .copied()
                .flatten()
                .unwrap_or(version);
            let path = self.table.relative(&o.key).unwrap_or(&o.key);
            let add = object_add(path, o, m.committed_at_ms, load, |tags| {
                tags.insert(TAG_MANIFEST.into(), manifest_path.to_string());
                tags.insert(TAG_POSITION.into(), position.to_string());
                tags.insert(TAG_ORDER.into(), order.to_string());
                if let Some(Some(c)) = commit.chains.get(position) {
                    tags.insert(TAG_CHAIN.into(), c.tag(&self.table));
                }
            });
            actions.push(ActionLine {
                add: Some(add),
                ..ActionLine::default()
            });
        }
        encode_entry(&actions)
    }
}

/// The `txn` actions that record what a load consumed as version `version`: one per input,
/// and one per input's name (see [`crate::consumed`]).
fn consumed_txns(consumed: &Consumed, version: u64, now: u64) -> Vec<ActionLine> {
    let ids = consumed.inputs.iter().map(|i| i.app_id());
    let names: BTreeSet<String> = consumed.inputs.iter().map(|i| i.name_app_id()).collect();
    ids.chain(names)
        .map(|app_id| ActionLine {
            txn: Some(Txn {
                app_id,
                version: version as i64,
                last_updated: Some(now as i64),
            }),
            ..ActionLine::default()
        })
        .collect()
}

/// The version of `base` that consumed every input of a load `commit`, if one did; an error
/// when versions consumed only some of them, or the name of one and not the input itself.
fn consumed_by(base: &Snapshot, commit: &Commit<'_>) -> Result<Option<u64>, LogError> {
    if commit.operation != Operation::Load {
        return Ok(None);
    }
    match base.inputs_stand(&commit.consumed) {
        InputsStand::New => base
            .check_new(&commit.consumed, crate::now_ms())
            .map(|()| None),
        InputsStand::Published { version } => Ok(Some(version)),
        InputsStand::Partly {
            input,
            version,
            new,
        } => Err(LogError::PartlyConsumed {
            input,
            version,
            new,
        }),
    }
}

/// Whether `commit` may land on `base`: `Some` when it is there already, an error when it
/// conflicts.
fn check(
    log: &TableLog,
    base: &Snapshot,
    commit: &Commit<'_>,
) -> Result<Option<Committed>, LogError> {
    let version = base.version.unwrap_or(0);
    for path in &commit.removes {
        let rel = log.table.relative(path).unwrap_or(path);
        if !base.holds(rel) {
            return Err(LogError::TableChanged {
                path: path.clone(),
                version: base.removed().get(rel).map_or(version, |r| r.version),
            });
        }
    }
    if commit.operation == Operation::Compaction {
        return Ok(None);
    }
    Ok(published_in(&log.table, base, commit.manifest)?.map(Committed::AlreadyLive))
}

/// The partition columns of `snapshot`'s Delta metadata (none without metadata).
fn partition_columns(snapshot: &Snapshot) -> Vec<String> {
    snapshot
        .metadata
        .as_ref()
        .map(|m| m.partition_columns.clone())
        .unwrap_or_default()
}

/// Fails as a conflict when `commit` would leave partitioned objects behind: its version ends
/// the table's partitioning (ravel's metadata lists no partition column, see
/// [`table_changes`]), so every object of `base` that another writer added with partition
/// values must be one the commit removes. Also when a version read after the commit's first
/// read (`first_read`: the partition columns then) partitioned the table anew. The caller
/// takes the partitioned objects in and tries again.
fn check_partitioning(
    log: &TableLog,
    base: &Snapshot,
    commit: &Commit<'_>,
    first_read: &[String],
) -> Result<(), LogError> {
    let removed: HashSet<&str> = commit
        .removes
        .iter()
        .map(|p| log.table.relative(p).unwrap_or(p))
        .collect();
    let left = base
        .foreign(&log.table)
        .into_iter()
        .find(|f| !f.partition_values.is_empty() && !removed.contains(f.path.as_str()));
    if let Some(f) = left {
        return Err(LogError::PartitionedLeftBehind {
            key: f.key,
            version: f.version,
            columns: f.partition_values.into_keys().collect(),
        });
    }
    let now = partition_columns(base);
    if !now.is_empty() && now != first_read {
        return Err(LogError::PartitionedMeanwhile {
            version: base.version.unwrap_or(0),
            columns: now,
        });
    }
    Ok(())
}

/// `protocol` and `metaData` when the table has none yet or `m` changes them: a schema whose
/// columns became nullable, new settings.
fn table_changes(
    base: &Snapshot,
    m: &Manifest,
    configuration: &BTreeMap<String, String>,
) -> Vec<ActionLine> {
    let mut out = Vec::new();
    let ours = delta_schema(&m.schema);
    let schema_string = match &base.metadata {
        Some(old) => widened(&old.schema_string, &m.schema),
        None => ours.schema_string.clone(),
    };
    let protocol = crate::foreign::keep_others(
        base.protocol.as_ref(),
        crate::fenced(protocol_for(&ours), is_fenced(configuration)),
    );
    let configuration = &merged_configuration(base.metadata.as_ref(), configuration);
    if base.protocol.as_ref() != Some(&protocol) {
        out.push(ActionLine {
            protocol: Some(protocol),
            ..ActionLine::default()
        });
    }
    // Another writer's partitioning ends with ravel's first commit (which takes in or refuses
    // its partitioned objects first): ravel's objects hold every column.
    let changed = base.metadata.as_ref().is_none_or(|old| {
        old.schema_string != schema_string
            || &old.configuration != configuration
            || !old.partition_columns.is_empty()
    });
    if changed {
        let mut meta = metadata(base.metadata.as_ref(), &m.schema, configuration.clone());
        meta.schema_string = schema_string;
        out.push(ActionLine {
            meta_data: Some(meta),
            ..ActionLine::default()
        });
    }
    out
}

/// The table properties after a commit that records `ours`: ravel's own (`ravel.*` and the
/// statistics columns) as given, every other engine's as they were.
fn merged_configuration(
    old: Option<&Metadata>,
    ours: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut out: BTreeMap<String, String> = old
        .map(|m| m.configuration.clone())
        .unwrap_or_default()
        .into_iter()
        .filter(|(k, _)| !k.starts_with("ravel.") && k != crate::STATS_COLUMNS_PROPERTY)
        .collect();
    out.extend(ours.iter().map(|(k, v)| (k.clone(), v.clone())));
    out
}

/// Whether `configuration` (the layout's table properties) fences other writers off.
fn is_fenced(configuration: &BTreeMap<String, String>) -> bool {
    configuration
        .get(crate::FENCE_PROPERTY)
        .is_some_and(|v| v == "true")
}

/// The Delta schema of `ours` widened by the table's declared one (`old`, a Delta
/// `schemaString`): a column nullable in any load stays nullable, by ravel-manifest's rule
/// ([`ravel_manifest::widen`]). The loads agree on names and types; the log only reads which
/// columns Delta declares nullable (Delta's form does not carry Arrow's types back).
fn widened(old: &str, ours: &Schema) -> String {
    let declared: HashSet<String> = serde_json::from_str::<Value>(old)
        .ok()
        .and_then(|v| v["fields"].as_array().cloned())
        .unwrap_or_default()
        .iter()
        .filter(|f| f["nullable"] == json!(true))
        .filter_map(|f| f["name"].as_str().map(str::to_string))
        .collect();
    let old_view = Schema::new(
        ours.fields()
            .iter()
            .map(|f| {
                f.as_ref()
                    .clone()
                    .with_nullable(declared.contains(f.name()))
            })
            .collect::<Vec<_>>(),
    );
    delta_schema(&ravel_manifest::widen(ours, &old_view)).schema_string
}

fn metadata(
    old: Option<&Metadata>,
    schema: &Schema,
    configuration: BTreeMap<String, String>,
) -> Metadata {
    let now = now_ms() as i64;
    Metadata {
        id: old.map_or_else(|| table_id(now), |m| m.id.clone()),
        name: None,
        format: Format::default(),
        schema_string: delta_schema(schema).schema_string,
        partition_columns: Vec::new(),
        configuration,
        created_time: Some(old.and_then(|m| m.created_time).unwrap_or(now)),
    }
}

/// A table id in the UUID shape Delta readers expect, from the time and process.
fn table_id(now_ms: i64) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let a = now_ms as u64;
    let b = (u64::from(std::process::id()) << 32) | u64::from(nanos);
    format!(
        "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
        (a >> 16) as u32,
        (a & 0xffff) as u16,
        (b >> 52) & 0xfff,
        (b >> 40) & 0xfff,
        b & 0xff_ffff_ffff
    )
}

fn commit_info(
    operation: &str,
    parameters: Value,
    read_version: Option<u64>,
    blind_append: bool,
    ravel: Value,
    attempt: usize,
) -> ActionLine {
    let mut info = json!({
        "timestamp": now_ms(),
        "operation": operation,
        "operationParameters": parameters,
        "isBlindAppend": blind_append,
        "engineInfo": concat!("ravel-load/", env!("CARGO_PKG_VERSION")),
        "ravel": ravel,
        // Two attempts never write the same bytes: a create that finds its own bytes won.
        "txnId": format!("{}-{}-{attempt}", now_ms(), std::process::id()),
    });
    if let Some(v) = read_version {
        info["readVersion"] = json!(v);
    }
    ActionLine {
        commit_info: Some(info),
        ..ActionLine::default()
    }
}

fn remove(base: &Snapshot, path: &str, now: u64) -> ActionLine {
    let added = base.files().get(path);
    ActionLine {
        remove: Some(Remove {
            path: path.to_string(),
            deletion_timestamp: Some(now as i64),
            data_change: false,
            extended_file_metadata: Some(true),
            partition_values: Some(BTreeMap::new()),
            size: added.map(|a| a.size),
            tags: added.and_then(|a| a.tags.clone()),
        }),
        ..ActionLine::default()
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::datatypes::{DataType, Field};

    #[test]
    fn a_column_nullable_in_the_declared_schema_stays_nullable() {
        let earlier = Schema::new(vec![
            Field::new("a", DataType::Int64, true),
            Field::new("b", DataType::UInt16, false),
        ]);
        let ours = Schema::new(vec![
            Field::new("a", DataType::Int64, false),
            Field::new("b", DataType::UInt16, false),
        ]);
        let declared = delta_schema(&earlier).schema_string;
        let wide: Value = serde_json::from_str(&widened(&declared, &ours)).unwrap();
        let nullable: Vec<&Value> = wide["fields"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| &f["nullable"])
            .collect();
        assert_eq!(nullable, vec![&json!(true), &json!(false)]);
        // A declared schema that does not read leaves ours as it is.
        let same: Value = serde_json::from_str(&widened("not json", &ours)).unwrap();
        assert_eq!(same["fields"][0]["nullable"], json!(false));
    }
}
