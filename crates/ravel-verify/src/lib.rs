//! Verification of a stored table: does it hold the promises a load makes?
//!
//! Reads every manifest and every listed object's footer (with `deep`, its rows too) and
//! checks: the object exists with the recorded size and row count; it has exactly one row group;
//! its footer's layout generation, sort key, first and last key match the manifest; Bloom
//! filters sit exactly on the columns the layout's Bloom scope covers; `sorting_columns` names
//! the stream column of a clustered table; objects of one run do not overlap in key range; and,
//! deep, the rows are in clustering order and span the recorded key range. Objects under
//! `data/` that no manifest lists are orphans (a failed or killed load leaves them), reported
//! but not violations.
//!
//! The report also measures how well the table is clustered, exactly and as Snowflake's
//! `SYSTEM$CLUSTERING_INFORMATION` does (see [`ravel_manifest::clustering`]): the depth at a key
//! is the number of objects covering it, an object covering its first key up to but not
//! including its last (a one-key object its key), so that neighbours whose boundary keys are
//! equal count once; the report gives the largest depth, the average depth and overlaps per
//! object and the objects by depth, over the objects of the newest load's sort key.

mod delta;
mod foreign;

pub use ravel_manifest::ClusteringInfo;

use std::cmp::Ordering;
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use arrow::array::RecordBatch;
use futures::TryStreamExt;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::file::metadata::{FooterTail, ParquetMetaData, ParquetMetaDataReader};
use ravel_layout::{ClusteringOrder, Layout, LayoutError, LayoutStore};
use ravel_log::TableLog;
use ravel_manifest::{
    Manifest, ManifestError, ObjectEntry, clustering_info, compare_keys, key_value,
};
use ravel_store::{Store, StoreError};
use serde::Serialize;
use serde_json::Value;

/// What to check.
#[derive(Debug, Clone)]
pub struct VerifyOptions {
    /// Read every object's rows: clustering order and the true key range.
    pub deep: bool,
    /// Not used: the clustering figures are exact over every object, none is sampled. Kept
    /// so that callers that set it (and `verify --sample-points`) still work.
    pub sample_points: usize,
}

impl Default for VerifyOptions {
    fn default() -> Self {
        VerifyOptions {
            deep: false,
            sample_points: 1000,
        }
    }
}

/// A broken promise, naming the object (or manifest) it concerns.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Violation {
    pub object: String,
    pub problem: String,
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

/// The outcome of [`verify`].
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
    /// Objects (and sidecars) the current version no longer references (a compaction replaced them); readers of
    /// older versions may still read them until `gc` deletes them after its retention.
    pub removed: usize,
    /// Of those, still stored.
    pub removed_stored: usize,
    /// What verify could not check and why (not violations: the table's promises hold).
    pub notes: Vec<String>,
}

impl VerifyReport {
    /// Whether the table holds its promises.
    pub fn holds(&self) -> bool {
        self.violations.is_empty()
    }
}

/// Why a table could not be verified at all (as opposed to violations found in it).
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Layout(#[from] LayoutError),
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    #[error(transparent)]
    Log(#[from] ravel_log::LogError),
    #[error("listing {prefix}: {source}")]
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

/// Verifies `table` in `store`: its newest version.
pub async fn verify(
    store: &Store,
    table: &str,
    opts: &VerifyOptions,
) -> Result<VerifyReport, VerifyError> {
    let layouts = LayoutStore::new(store, table)?;
    let paths = layouts.table().clone();
    let os = store.object_store().clone();
    let log = TableLog::new(os.clone(), paths.clone());
    let history = log.history().await?;
    let (mut violations, replayed) = check_chain(&history);
    let snapshot = log.latest().await?;
    let checkpoint = match log.newest_checkpoint().await {
        Ok(Some(mut from)) => log
            .catch_up(&mut from)
            .await
            .map(|_| delta::checkpoint_problems(&from, &replayed)),
        Ok(None) => Ok(Vec::new()),
        Err(e) => Err(e),
    };
    let checkpoint = checkpoint.unwrap_or_else(|e| {
        vec![format!(
            "the newest checkpoint does not read ({e}): Delta readers start there"
        )]
    });
    violations.extend(checkpoint.into_iter().map(|problem| Violation {
        object: "the Delta log".into(),
        problem,
    }));
    violations.extend(delta::checksum_problem(&log, &replayed).await?);
    let live = log.manifests(&snapshot).await?;
    let manifests: Vec<(String, Manifest)> = live
        .iter()
        .map(|m| (m.key.clone(), m.manifest.as_ref().clone()))
        .collect();
    let mut stored = list(os.as_ref(), &paths.data_dir()).await?;
    stored.extend(list(os.as_ref(), &paths.blooms_dir()).await?);
    if manifests.is_empty() && stored.is_empty() {
        // A table is anything stored under its prefix (`gc` agrees): a layout, a schema, a
        // lease, objects without manifests.
        let anything = list(os.as_ref(), &paths.root()).await?;
        if anything.is_empty() {
            return Err(VerifyError::NoSuchTable {
                table: table.to_string(),
            });
        }
    }
    violations.extend(check_schemas(layouts.schema().await?.as_ref(), &manifests));
    if snapshot.from_manifests {
        violations.extend(listed_twice(&manifests));
    }
    let mut notes = Vec::new();
    let view = delta::DeltaView::of(&snapshot, live.last().map(|m| m.manifest.schema.as_ref()));
    if let Some(view) = &view {
        notes.extend(view.none.clone());
        violations.extend(view.protocol_problem().map(|problem| Violation {
            object: "the Delta log".into(),
            problem,
        }));
    }
    let mut layouts_by_generation: BTreeMap<u64, Layout> = BTreeMap::new();
    let refs = log.references(&snapshot, &live).await?;
    let mut all: Vec<&ObjectEntry> = Vec::new();
    for lm in &live {
        let (key, m) = (&lm.key, lm.manifest.as_ref());
        let layout = match layouts_by_generation.get(&m.layout_generation) {
            Some(l) => l.clone(),
            None => {
                let l = if m.layout_generation == 0 {
                    Layout::default()
                } else {
                    layouts.load_generation(m.layout_generation).await?
                };
                layouts_by_generation.insert(m.layout_generation, l.clone());
                l
            }
        };
        check_runs(key, m, &mut violations);
        if layout.clustering_key.is_some() && m.sort_key != layout.sort_key_names() {
            violations.push(Violation {
                object: key.clone(),
                problem: format!(
                    "sort key {:?}, layout generation {} says {:?}",
                    m.sort_key,
                    m.layout_generation,
                    layout.sort_key_names()
                ),
            });
        }
        let blooms = check_blooms(&os, key, m, &layout, &mut violations, &mut notes).await;
        for (live, entry) in lm.objects() {
            all.push(entry);
            let filters: Vec<(&str, &ravel_bloom::Filter)> = blooms
                .iter()
                .map(|(name, per_object)| (name.as_str(), &per_object[live.position]))
                .collect();
            let footer =
                check_object(&os, m, &layout, entry, opts.deep, &filters, &mut violations).await;
            if let (Some(meta), Some(view)) = (footer, &view) {
                let add = paths
                    .relative(&entry.key)
                    .and_then(|p| snapshot.files().get(p));
                let problems = view.problems(add, entry, &m.schema, &meta);
                violations.extend(problems.into_iter().map(|problem| Violation {
                    object: entry.key.clone(),
                    problem,
                }));
            }
        }
    }
    let foreign_objects = snapshot.foreign(&paths);
    let foreign = foreign::check_foreign(&os, &foreign_objects).await;
    violations.extend(foreign.violations);
    notes.extend(foreign.notes);
    let mut orphans: Vec<String> = stored
        .iter()
        .filter(|(k, _)| !refs.contains(k))
        .map(|(k, _)| k.clone())
        .collect();
    orphans.sort();
    let removed_stored = stored
        .iter()
        .filter(|(k, _)| refs.removed.contains_key(k))
        .count();
    let mut sizes: Vec<u64> = all.iter().map(|o| o.bytes).collect();
    sizes.sort_unstable();
    let q = |p: f64| sizes[((sizes.len() - 1) as f64 * p).round() as usize];
    Ok(VerifyReport {
        table: table.to_string(),
        version: snapshot.version,
        versions: history.len(),
        manifests: manifests.len(),
        objects: all.len() + foreign_objects.len(),
        rows: all.iter().map(|o| o.rows).sum::<u64>() + foreign.rows,
        bytes: all.iter().map(|o| o.bytes).sum::<u64>() + foreign.bytes,
        foreign: foreign_objects.iter().map(|f| f.key.clone()).collect(),
        sizes: (!sizes.is_empty()).then(|| Sizes {
            min: sizes[0],
            p10: q(0.1),
            median: q(0.5),
            p90: q(0.9),
            max: sizes[sizes.len() - 1],
        }),
        // Keys of different layouts do not compare: the depth is over the newest load's key.
        overlap: clustering_info(
            &manifests
                .last()
                .map(|(_, newest)| {
                    live.iter()
                        .filter(|m| m.manifest.sort_key == newest.sort_key)
                        .flat_map(|m| m.objects().map(|(_, o)| o))
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default(),
        ),
        deep: opts.deep,
        violations,
        orphans,
        removed: refs.removed.len(),
        removed_stored,
        notes,
    })
}

/// The log's entries, replayed: each has a `commitInfo`; an entry adds only objects the table
/// does not hold (else their rows would count twice) and removes only objects it holds.
fn check_chain(history: &[ravel_log::LogEntry]) -> (Vec<Violation>, ravel_log::Snapshot) {
    let mut out = Vec::new();
    let mut snapshot = ravel_log::Snapshot::default();
    for entry in history {
        let name = format!("log entry {}", entry.version);
        if entry.commit_info().is_none() {
            out.push(Violation {
                object: name.clone(),
                problem: "has no commitInfo".into(),
            });
        }
        let removes: HashSet<&str> = entry
            .actions
            .iter()
            .filter_map(|a| Some(a.remove.as_ref()?.path.as_str()))
            .collect();
        for a in &entry.actions {
            if let Some(r) = &a.remove
                && !snapshot.holds(&r.path)
            {
                out.push(Violation {
                    object: name.clone(),
                    problem: format!("removes {}, which the table does not hold", r.path),
                });
            }
            let Some(add) = &a.add else { continue };
            if removes.contains(add.path.as_str()) {
                out.push(Violation {
                    object: name.clone(),
                    problem: format!(
                        "removes and adds {} in one entry: Delta readers drop it",
                        add.path
                    ),
                });
            } else if snapshot.holds(&add.path) && add.data_change {
                // A compaction re-adds an object it writes back unchanged (dataChange=false):
                // one file per path, its tags replaced.
                out.push(Violation {
                    object: name.clone(),
                    problem: format!(
                        "adds {}, which the table holds already: its rows count twice",
                        add.path
                    ),
                });
            }
        }
        snapshot.apply(entry);
    }
    (out, snapshot)
}

async fn list(store: &dyn ObjectStore, prefix: &Path) -> Result<Vec<(String, u64)>, VerifyError> {
    store
        .list(Some(prefix))
        .map_ok(|m| (m.location.to_string(), m.size))
        .try_collect()
        .await
        .map_err(|source| VerifyError::List {
            prefix: prefix.to_string(),
            source,
        })
}

/// The loads' schemas against each other and the table's recorded one: every load must agree
/// with the first (names, types, order; see [`ravel_manifest::schema_difference`]) and with the
/// recorded schema, and be NOT NULL wherever the recorded schema is (a load writes the table's
/// schema, so its objects keep every promise of a NOT NULL column). Metadata does not count.
fn check_schemas(
    recorded: Option<&arrow::datatypes::Schema>,
    manifests: &[(String, Manifest)],
) -> Vec<Violation> {
    let mut out = Vec::new();
    let Some((first_key, first)) = manifests.first() else {
        return out;
    };
    for (key, m) in manifests {
        let mut bad = |problem: String| {
            out.push(Violation {
                object: key.clone(),
                problem,
            })
        };
        if let Some(d) = ravel_manifest::schema_difference(&first.schema, &m.schema) {
            bad(format!(
                "schema disagrees with the first load's ({first_key}): {d}; queries refuse the table"
            ));
            continue;
        }
        let Some(table) = recorded else { continue };
        if let Some(d) = ravel_manifest::schema_difference(table, &m.schema) {
            bad(format!(
                "schema disagrees with the table's recorded schema: {d}"
            ));
            continue;
        }
        // A load stricter than the table (NOT NULL where the table allows nulls) breaks no
        // promise: older builds wrote the input's nullability, and queries read such a column
        // as nullable.
        let loose = ravel_manifest::nullability_differences(table, &m.schema)
            .into_iter()
            .filter(|d| !d.table_nullable);
        for d in loose {
            bad(format!(
                "schema has {} nullable, the table's recorded schema says NOT NULL",
                d.path
            ));
        }
    }
    out
}

/// An object listed by two manifests counts its rows twice: each object (and Bloom sidecar)
/// belongs to one manifest of the table. Loads refuse to publish such a manifest; two
/// concurrent reruns of one load may still both publish, and this is where that shows.
fn listed_twice(manifests: &[(String, Manifest)]) -> Vec<Violation> {
    let mut first: BTreeMap<&str, &str> = BTreeMap::new();
    let mut out = Vec::new();
    for (key, m) in manifests {
        for object in m.stored_keys() {
            match first.get(object) {
                Some(earlier) => out.push(Violation {
                    object: object.to_string(),
                    problem: format!(
                        "is listed by manifests {earlier} and {key}: its rows count twice"
                    ),
                }),
                None => {
                    first.insert(object, key);
                }
            }
        }
    }
    out
}

/// Objects of one run follow each other in key order and must not overlap.
fn check_runs(manifest: &str, m: &Manifest, out: &mut Vec<Violation>) {
    for pair in m.objects.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        if a.run != b.run {
            continue;
        }
        if let (Some(last), Some(first)) = (&a.last_key, &b.first_key)
            && compare_keys(last, first) == Ordering::Greater
        {
            out.push(Violation {
                object: b.key.clone(),
                problem: format!(
                    "overlaps {} in key range within run {} of manifest {manifest}: {} > {}",
                    a.key,
                    a.run,
                    Value::from(last.clone()),
                    Value::from(first.clone())
                ),
            });
        }
    }
}

/// Checks one object against its manifest and layout; returns its footer when it read.
async fn check_object(
    store: &Arc<dyn ObjectStore>,
    m: &Manifest,
    layout: &Layout,
    entry: &ObjectEntry,
    deep: bool,
    filters: &[(&str, &ravel_bloom::Filter)],
    out: &mut Vec<Violation>,
) -> Option<ParquetMetaData> {
    let mut bad = |problem: String| {
        out.push(Violation {
            object: entry.key.clone(),
            problem,
        })
    };
    let path = Path::from(entry.key.as_str());
    let head = match store.head(&path).await {
        Ok(h) => h,
        Err(object_store::Error::NotFound { .. }) => {
            bad(format!("is missing: manifest {} lists it", m.load_id));
            return None;
        }
        Err(e) => {
            bad(format!("cannot be read: {e}"));
            return None;
        }
    };
    if head.size != entry.bytes {
        bad(format!(
            "has {} bytes, the manifest says {}",
            head.size, entry.bytes
        ));
    }
    let meta = match read_footer(store.as_ref(), &path, head.size).await {
        Ok(meta) => meta,
        Err(e) => {
            bad(format!("is not a readable Parquet file: {e}"));
            return None;
        }
    };
    for problem in footer_problems(m, layout, entry, &meta) {
        bad(problem);
    }
    if deep {
        let rows = async {
            let bytes = store.get(&path).await?.bytes().await?;
            let reader = ParquetRecordBatchReaderBuilder::try_new(bytes)?;
            let schema = reader.schema().clone();
            let batches = reader.build()?.collect::<Result<Vec<_>, _>>()?;
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>((schema, batches))
        }
        .await;
        match rows {
            Ok((schema, batches)) => {
                for problem in row_problems(layout, entry, &schema, &batches) {
                    bad(problem);
                }
                for problem in bloom_problems(filters, &schema, &batches) {
                    bad(problem);
                }
            }
            Err(e) => bad(format!("rows cannot be read: {e}")),
        }
    }
    Some(meta)
}

/// The load's Bloom sidecar: stored with the recorded size, one section per string column of
/// the layout's Bloom scope, each holding one readable filter per object. Returns the filters
/// (per column, per object) for the deep check, empty when there is nothing to check.
async fn check_blooms(
    store: &Arc<dyn ObjectStore>,
    manifest: &str,
    m: &Manifest,
    layout: &Layout,
    out: &mut Vec<Violation>,
    notes: &mut Vec<String>,
) -> Vec<(String, Vec<ravel_bloom::Filter>)> {
    let expected: Vec<&str> = layout
        .bloom
        .scope
        .columns(&m.schema)
        .into_iter()
        .filter(|c| {
            m.schema
                .field_with_name(c)
                .is_ok_and(|f| ravel_bloom::supported(f.data_type()))
        })
        .collect();
    // A manifest without a sidecar is valid (readers then prune by ranges alone).
    let Some(index) = &m.blooms else {
        return Vec::new();
    };
    let mut bad = |problem: String| {
        out.push(Violation {
            object: index.key.clone(),
            problem,
        })
    };
    if index.format != ravel_bloom::FORMAT {
        // Readers of this build skip it (they keep every object of the load), so no answer
        // depends on it: a note, not a violation.
        notes.push(format!(
            "Bloom sidecar {} of manifest {manifest} has format {}, which this build does not \
             read (it reads format {}): statements keep every object of that load instead of \
             pruning by it; loading the data again writes a sidecar of the current format",
            index.key,
            index.format,
            ravel_bloom::FORMAT
        ));
        return Vec::new();
    }
    let recorded: Vec<&str> = index.columns.keys().map(|c| c.as_str()).collect();
    let mut sorted_expected = expected.clone();
    sorted_expected.sort_unstable();
    if recorded != sorted_expected {
        bad(format!(
            "holds filters of {recorded:?}; the Bloom scope's string columns are {sorted_expected:?}"
        ));
    }
    let bytes = match store.get(&Path::from(index.key.as_str())).await {
        Ok(got) => match got.bytes().await {
            Ok(b) => b,
            Err(e) => {
                bad(format!("cannot be read: {e}"));
                return Vec::new();
            }
        },
        Err(object_store::Error::NotFound { .. }) => {
            bad(format!("is missing: manifest {manifest} lists it"));
            return Vec::new();
        }
        Err(e) => {
            bad(format!("cannot be read: {e}"));
            return Vec::new();
        }
    };
    if bytes.len() as u64 != index.bytes || !bytes.starts_with(ravel_bloom::MAGIC) {
        bad(format!(
            "has {} bytes (the manifest says {}) or no sidecar magic",
            bytes.len(),
            index.bytes
        ));
        return Vec::new();
    }
    let mut filters = Vec::new();
    for (column, s) in &index.columns {
        let section = bytes.get(s.offset as usize..(s.offset + s.len) as usize);
        match section.map(|sec| ravel_bloom::decode_section(sec, m.objects.len())) {
            Some(Ok(f)) => filters.push((column.clone(), f)),
            Some(Err(e)) => bad(format!("section {column}: {e}")),
            None => bad(format!("section {column} lies outside the sidecar")),
        }
    }
    filters
}

/// Every value of an object's Bloom columns must pass the object's filter (no false
/// negatives: a reader that trusts the filter would otherwise lose rows).
fn bloom_problems(
    filters: &[(&str, &ravel_bloom::Filter)],
    schema: &arrow::datatypes::SchemaRef,
    batches: &[RecordBatch],
) -> Vec<String> {
    let mut out = Vec::new();
    for (column, filter) in filters {
        let Ok(c) = schema.index_of(column) else {
            out.push(format!(
                "has no column {column}, which its Bloom filter covers"
            ));
            continue;
        };
        let mut missing = None;
        'batches: for (b, batch) in batches.iter().enumerate() {
            let a = batch.column(c);
            for r in 0..a.len() {
                if let Some(v) = ravel_bloom::value_bytes(a.as_ref(), r)
                    && !filter.may_contain(v)
                {
                    missing = Some((b, r));
                    break 'batches;
                }
            }
        }
        if let Some((b, r)) = missing {
            out.push(format!(
                "value of {column} at batch {b} row {r} is not in the object's Bloom filter"
            ));
        }
    }
    out
}

/// The footer of a Parquet object: two ranged reads (the 8-byte tail, then the metadata).
async fn read_footer(
    store: &dyn ObjectStore,
    path: &Path,
    size: u64,
) -> Result<ParquetMetaData, Box<dyn std::error::Error + Send + Sync>> {
    if size < 12 {
        return Err(format!("{size} bytes is too short for Parquet").into());
    }
    let tail = store.get_range(path, size - 8..size).await?;
    let tail = FooterTail::try_new(tail[..].try_into().expect("8 bytes"))?;
    let len = tail.metadata_length() as u64;
    if len + 12 > size {
        return Err(format!("footer length {len} exceeds the object").into());
    }
    let footer = store.get_range(path, size - 8 - len..size - 8).await?;
    Ok(ParquetMetaDataReader::decode_metadata(&footer)?)
}

/// What the footer says against what the manifest and the layout say.
fn footer_problems(
    m: &Manifest,
    layout: &Layout,
    entry: &ObjectEntry,
    meta: &ParquetMetaData,
) -> Vec<String> {
    let mut out = Vec::new();
    let groups = meta.num_row_groups();
    if groups != 1 {
        out.push(format!("has {groups} row groups, not 1"));
    }
    match parquet::arrow::parquet_to_arrow_schema(
        meta.file_metadata().schema_descr(),
        meta.file_metadata().key_value_metadata(),
    ) {
        Ok(schema) => {
            let columns =
                |s: &arrow::datatypes::Schema| -> Vec<(String, arrow::datatypes::DataType)> {
                    s.fields()
                        .iter()
                        .map(|f| (f.name().clone(), f.data_type().clone()))
                        .collect()
                };
            if columns(&schema) != columns(&m.schema) {
                out.push("has other columns than the manifest's schema".to_string());
            }
        }
        Err(e) => out.push(format!("has no readable Arrow schema: {e}")),
    }
    let rows = meta.file_metadata().num_rows() as u64;
    if rows != entry.rows {
        out.push(format!("has {rows} rows, the manifest says {}", entry.rows));
    }
    let kv: BTreeMap<&str, &str> = meta
        .file_metadata()
        .key_value_metadata()
        .map(|kv| {
            kv.iter()
                .filter_map(|e| Some((e.key.as_str(), e.value.as_deref()?)))
                .collect()
        })
        .unwrap_or_default();
    let generation = m.layout_generation.to_string();
    if kv.get("ravel.layout_generation") != Some(&generation.as_str()) {
        out.push(format!(
            "footer layout generation {:?}, the manifest says {generation}",
            kv.get("ravel.layout_generation")
        ));
    }
    let clustered = layout.clustering_key.is_some();
    if clustered {
        let sort_key = m.sort_key.join(", ");
        if kv.get("ravel.sort_key") != Some(&sort_key.as_str()) {
            out.push(format!(
                "footer sort key {:?}, the manifest says {sort_key:?}",
                kv.get("ravel.sort_key")
            ));
        }
    }
    for (name, recorded) in [
        ("ravel.first_key", &entry.first_key),
        ("ravel.last_key", &entry.last_key),
    ] {
        let footer: Option<Vec<Value>> = kv.get(name).and_then(|v| serde_json::from_str(v).ok());
        if &footer != recorded {
            out.push(format!(
                "footer {name} {:?}, the manifest says {:?}",
                footer.map(Value::from),
                recorded.clone().map(Value::from)
            ));
        }
    }
    let schema = &m.schema;
    let scope: HashSet<&str> = layout.bloom.scope.columns(schema).into_iter().collect();
    for group in meta.row_groups() {
        for column in group.columns() {
            let name = column.column_path().string();
            if column.column_index_offset().is_none() || column.offset_index_offset().is_none() {
                out.push(format!("has no page index for column {name:?}"));
            }
            let has = column.bloom_filter_offset().is_some();
            let wants = scope.contains(name.as_str());
            if has && !wants {
                out.push(format!(
                    "has a Bloom filter on column {name:?}, which the Bloom scope ({}) does not cover",
                    layout.bloom.scope
                ));
            } else if wants && !has {
                out.push(format!(
                    "has no Bloom filter on column {name:?}, which the Bloom scope ({}) covers",
                    layout.bloom.scope
                ));
            }
        }
        if clustered && let Some(stream) = &layout.stream {
            let want = schema.index_of(stream).ok();
            let got = group
                .sorting_columns()
                .and_then(|s| s.first())
                .map(|s| s.column_idx as usize);
            if want.is_some() && got != want {
                out.push(format!(
                    "sorting_columns {:?} do not start with the stream column {stream:?}",
                    group.sorting_columns()
                ));
            }
        }
    }
    out
}

/// The rows against the clustering order and the recorded key range.
fn row_problems(
    layout: &Layout,
    entry: &ObjectEntry,
    schema: &arrow::datatypes::SchemaRef,
    batches: &[RecordBatch],
) -> Vec<String> {
    let mut out = Vec::new();
    let order = match ClusteringOrder::try_new(layout, schema) {
        Ok(Some(o)) => o,
        Ok(None) => return out, // arrival order: nothing to check
        Err(e) => return vec![format!("its columns do not fit the layout: {e}")],
    };
    let batch = match arrow::compute::concat_batches(schema, batches) {
        Ok(b) => b,
        Err(e) => return vec![format!("rows cannot be joined: {e}")],
    };
    if batch.num_rows() == 0 {
        return out;
    }
    let rows = match order.key_rows(&batch) {
        Ok(r) => r,
        Err(e) => return vec![format!("sort key cannot be computed: {e}")],
    };
    if let Some(i) = (1..batch.num_rows()).find(|&i| rows.row(i - 1) > rows.row(i)) {
        out.push(format!(
            "is not in clustering order: row {} sorts after row {i}",
            i - 1
        ));
    }
    match order.key_columns(&batch) {
        Ok(cols) => {
            let at = |i: usize| -> Vec<Value> {
                cols.iter().map(|c| key_value(c.as_ref(), i)).collect()
            };
            let (first, last) = (at(0), at(batch.num_rows() - 1));
            if entry.first_key.as_ref() != Some(&first) || entry.last_key.as_ref() != Some(&last) {
                out.push(format!(
                    "rows span {} .. {}, the manifest says {:?} .. {:?}",
                    Value::from(first),
                    Value::from(last),
                    entry.first_key.clone().map(Value::from),
                    entry.last_key.clone().map(Value::from)
                ));
            }
        }
        Err(e) => out.push(format!("sort key cannot be computed: {e}")),
    }
    out
}
