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

mod blooms;
mod chain;
mod delta;
mod depth;
mod footer;
mod foreign;
mod objects;
mod order;
mod problem;
mod report;
mod schema;

pub use problem::{Cause, Problem};
pub use ravel_manifest::ClusteringInfo;
pub use report::{Sizes, VerifyError, VerifyOptions, VerifyReport, Violation};

use std::sync::Arc;

use object_store::ObjectStore;
use ravel_layout::LayoutStore;
use ravel_log::{LiveManifest, References, Snapshot, TableLog};
use ravel_store::{Store, TablePaths};

use crate::foreign::Foreign;
use crate::objects::Scope;
use crate::report::Findings;

/// Verifies `table` in `store`: its newest version.
#[tracing::instrument(
    skip_all,
    fields(table = %table, deep = opts.deep, version = tracing::field::Empty)
)]
pub async fn verify(
    store: &Store,
    table: &str,
    opts: &VerifyOptions,
) -> Result<VerifyReport, VerifyError> {
    match verify_log(store, table, opts).await {
        Err(VerifyError::Log(e)) if e.is_damage() => Ok(VerifyReport::damaged(table, e)),
        other => other,
    }
}

/// [`verify`] of a log that reads.
async fn verify_log(
    store: &Store,
    table: &str,
    opts: &VerifyOptions,
) -> Result<VerifyReport, VerifyError> {
    let t = Table::open(store, table)?;
    let history = t.log.history().await?;
    let chain = chain::check_chain(&history);
    let snapshot = t.log.latest().await?;
    tracing::Span::current().record("version", snapshot.version);
    let mut found = Findings {
        violations: chain.violations,
        notes: Vec::new(),
    };
    found
        .violations
        .extend(delta::log_problems(&t.log, &chain.replayed, &history).await?);
    let live = t.log.manifests(&snapshot).await?;
    let stored = objects::stored(t.store.as_ref(), &t.paths).await?;
    if live.is_empty() && stored.is_empty() {
        t.ensure_stored().await?;
    }
    // Recorded, or declared by the Delta metadata of a table another writer created.
    let schema = t.layouts.schema().await?;
    let refs = check_version(&t, &snapshot, &live, schema.as_ref(), opts.deep, &mut found).await?;
    let unnamed_manifests =
        objects::unnamed_manifests(t.store.as_ref(), &t.paths, &history).await?;
    let foreign =
        foreign::check_foreign(&t.store, &snapshot.foreign(&t.paths), schema.as_ref()).await;
    let figures = Figures::of(&live, &foreign);
    found.violations.extend(foreign.violations);
    found.notes.extend(foreign.notes);
    Ok(VerifyReport {
        table: table.to_string(),
        version: snapshot.version,
        versions: history.len(),
        manifests: live.len(),
        objects: figures.objects,
        rows: figures.rows,
        bytes: figures.bytes,
        foreign: foreign.keys,
        sizes: Sizes::of(figures.sizes),
        overlap: depth::newest_key_depth(&live),
        deep: opts.deep,
        violations: found.violations,
        orphans: objects::orphans(&stored, &refs),
        unnamed_manifests,
        removed: refs.removed.len(),
        removed_stored: removed_stored(&stored, &refs),
        notes: found.notes,
    })
}

/// The table verified: its name, layouts, paths, store and log.
struct Table<'a> {
    name: &'a str,
    layouts: LayoutStore,
    paths: TablePaths,
    store: Arc<dyn ObjectStore>,
    log: TableLog,
}

impl<'a> Table<'a> {
    fn open(store: &Store, name: &'a str) -> Result<Self, VerifyError> {
        let layouts = LayoutStore::new(store, name)?;
        let paths = layouts.table().clone();
        let os = store.object_store().clone();
        Ok(Table {
            name,
            log: TableLog::new(os.clone(), paths.clone()),
            layouts,
            paths,
            store: os,
        })
    }

    /// A table is anything stored under its prefix (`gc` agrees): a layout, a schema, a lease,
    /// objects without manifests.
    async fn ensure_stored(&self) -> Result<(), VerifyError> {
        if objects::list(self.store.as_ref(), &self.paths.root())
            .await?
            .is_empty()
        {
            return Err(VerifyError::NoSuchTable {
                table: self.name.to_string(),
            });
        }
        Ok(())
    }
}

/// The version's loads: their schemas, objects listed twice, the Delta view and each load with
/// its objects. Returns what the version references.
async fn check_version(
    t: &Table<'_>,
    snapshot: &Snapshot,
    live: &[LiveManifest],
    table_schema: Option<&arrow::datatypes::Schema>,
    deep: bool,
    found: &mut Findings,
) -> Result<References, VerifyError> {
    found
        .violations
        .extend(schema::check_schemas(table_schema, live));
    if snapshot.from_manifests {
        found.violations.extend(objects::listed_twice(live));
    }
    let view = delta::DeltaView::of(snapshot, live.last().map(|m| &m.manifest.schema));
    if let Some(view) = &view {
        found.notes.extend(view.none.clone());
        found.violations(delta::LOG, view.protocol_problem());
    }
    let refs = t.log.references(snapshot, live).await?;
    let scope = Scope {
        store: &t.store,
        paths: &t.paths,
        snapshot,
        view: view.as_ref(),
        deep,
    };
    objects::check_loads(&scope, &t.layouts, live, found).await?;
    Ok(refs)
}

/// What the version's objects add up to: the loads' and those other Delta writers added.
struct Figures {
    objects: usize,
    rows: u64,
    bytes: u64,
    /// The stored size of each of the loads' objects.
    sizes: Vec<u64>,
}

impl Figures {
    fn of(live: &[LiveManifest], foreign: &Foreign) -> Figures {
        let own: Vec<_> = live
            .iter()
            .flat_map(|m| m.objects().map(|(_, o)| o))
            .collect();
        Figures {
            objects: own.len() + foreign.keys.len(),
            rows: own.iter().map(|o| o.rows).sum::<u64>() + foreign.rows,
            bytes: own.iter().map(|o| o.bytes).sum::<u64>() + foreign.bytes,
            sizes: own.iter().map(|o| o.bytes).collect(),
        }
    }
}

/// Of the stored keys, those the version no longer references (a compaction replaced them).
fn removed_stored(stored: &[String], refs: &References) -> usize {
    stored
        .iter()
        .filter(|k| refs.removed.contains_key(*k))
        .count()
}
