//! The objects the manifests list: each belongs to one manifest, is stored with the recorded
//! size, and its footer (see [`crate::footer`]) and, deep, its rows (see [`crate::order`] and
//! [`crate::blooms`]) keep the load's promises. Stored objects no version lists are orphans.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use futures::TryStreamExt;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::file::metadata::ParquetMetaData;
use ravel_layout::{Layout, LayoutError, LayoutStore};
use ravel_log::{LiveManifest, References, Snapshot};
use ravel_manifest::{Manifest, ObjectEntry};
use ravel_store::TablePaths;

use crate::blooms::{self, ObjectFilter};
use crate::delta::DeltaView;
use crate::footer::{self, read_footer};
use crate::report::Findings;
use crate::{Problem, VerifyError, Violation, order};

/// The keys stored under `prefix`.
pub(crate) async fn list(
    store: &dyn ObjectStore,
    prefix: &Path,
) -> Result<Vec<String>, VerifyError> {
    store
        .list(Some(prefix))
        .map_ok(|m| m.location.to_string())
        .try_collect()
        .await
        .map_err(|source| VerifyError::List {
            prefix: prefix.to_string(),
            source,
        })
}

/// The keys stored under `data/` and `_ravel/blooms/`: objects and sidecars.
pub(crate) async fn stored(
    store: &dyn ObjectStore,
    paths: &TablePaths,
) -> Result<Vec<String>, VerifyError> {
    let mut stored = list(store, &paths.data_dir()).await?;
    stored.extend(list(store, &paths.blooms_dir()).await?);
    Ok(stored)
}

/// The manifests stored under `_ravel/manifests/` that no entry of `history` names (by its
/// `commitInfo` or an `add`'s tag; the checkpoint the log starts at by its `add`s' and
/// tombstones' tags), sorted: written by loads or compactions killed before their commit,
/// evidence of an entry that was lost, or named only by entries the log window cleaned.
pub(crate) async fn unnamed_manifests(
    store: &dyn ObjectStore,
    paths: &TablePaths,
    history: &ravel_log::History,
) -> Result<Vec<String>, VerifyError> {
    let mut named: std::collections::HashSet<String> = std::collections::HashSet::new();
    if let Some(c) = &history.checkpoint {
        let removes = c.actions.iter().filter_map(|a| a.remove.as_ref());
        named.extend(
            removes
                .filter_map(|r| r.tags.as_ref()?.get(ravel_log::TAG_MANIFEST))
                .map(|m| paths.absolute(m)),
        );
    }
    for e in history.all() {
        if let Some(m) = e
            .commit_info()
            .and_then(|i| i["ravel"]["manifest"].as_str())
        {
            named.insert(paths.absolute(m));
        }
        let adds = e.actions.iter().filter_map(|a| a.add.as_ref());
        named.extend(
            adds.filter_map(|a| a.tag(ravel_log::TAG_MANIFEST))
                .map(|m| paths.absolute(m)),
        );
    }
    let mut unnamed: Vec<String> = list(store, &paths.commit_manifests_dir())
        .await?
        .into_iter()
        .filter(|k| !named.contains(k))
        .collect();
    unnamed.sort();
    Ok(unnamed)
}

/// The stored keys no version references, sorted.
pub(crate) fn orphans(stored: &[String], refs: &References) -> Vec<String> {
    let mut orphans: Vec<String> = stored
        .iter()
        .filter(|k| !refs.contains(k))
        .cloned()
        .collect();
    orphans.sort();
    orphans
}

/// An object listed by two manifests counts its rows twice: each object (and Bloom sidecar)
/// belongs to one manifest of the table. Loads refuse to publish such a manifest; two
/// concurrent reruns of one load may still both publish, and this is where that shows.
pub(crate) fn listed_twice(live: &[LiveManifest]) -> Vec<Violation> {
    let mut first: BTreeMap<&str, &str> = BTreeMap::new();
    let mut out = Vec::new();
    for lm in live {
        for object in lm.manifest.stored_keys() {
            match first.get(object) {
                Some(earlier) => out.push(Violation::new(
                    object,
                    Problem::ListedTwice {
                        first: earlier.to_string(),
                        second: lm.key.clone(),
                    },
                )),
                None => {
                    first.insert(object, &lm.key);
                }
            }
        }
    }
    out
}

/// The layouts of the generations the loads name, each read once.
pub(crate) struct Generations<'a> {
    layouts: &'a LayoutStore,
    read: BTreeMap<u64, Layout>,
}

impl<'a> Generations<'a> {
    pub fn new(layouts: &'a LayoutStore) -> Self {
        Generations {
            layouts,
            read: BTreeMap::new(),
        }
    }

    /// Generation `generation` of the layout (0: the default layout).
    pub async fn get(&mut self, generation: u64) -> Result<Layout, LayoutError> {
        if let Some(l) = self.read.get(&generation) {
            return Ok(l.clone());
        }
        let l = match generation {
            0 => Layout::default(),
            _ => self.layouts.load_generation(generation).await?,
        };
        self.read.insert(generation, l.clone());
        Ok(l)
    }
}

/// What every object check reads: the store, the table, the version and its Delta view.
pub(crate) struct Scope<'a> {
    pub store: &'a Arc<dyn ObjectStore>,
    pub paths: &'a TablePaths,
    pub snapshot: &'a Snapshot,
    pub view: Option<&'a DeltaView>,
    pub deep: bool,
}

/// Checks each load of the version: its runs, sort key, Bloom sidecar and objects.
pub(crate) async fn check_loads(
    scope: &Scope<'_>,
    layouts: &LayoutStore,
    live: &[LiveManifest],
    out: &mut Findings,
) -> Result<(), VerifyError> {
    let mut generations = Generations::new(layouts);
    for lm in live {
        let layout = generations.get(lm.manifest.layout_generation).await?;
        check_load(scope, lm, &layout, out).await;
    }
    Ok(())
}

/// One load against its layout, then each of its objects the version holds.
async fn check_load(scope: &Scope<'_>, lm: &LiveManifest, layout: &Layout, out: &mut Findings) {
    let (key, m) = (&lm.key, lm.manifest.as_ref());
    out.violations.extend(order::check_runs(key, m));
    out.violations(key, order::sort_key_problem(m, layout));
    let sidecar = blooms::check_sidecar(scope.store, key, m, layout, out).await;
    for (live, entry) in lm.objects() {
        let object = Object {
            m,
            layout,
            entry,
            filters: sidecar.of_object(live.position),
        };
        let checked = check_object(scope, &object).await;
        out.violations(&entry.key, checked.problems);
        if let (Some(meta), Some(view)) = (checked.footer, scope.view) {
            let add = scope
                .paths
                .relative(&entry.key)
                .and_then(|p| scope.snapshot.files().get(p));
            out.violations(&entry.key, view.problems(add, entry, &m.schema, &meta));
        }
    }
}

/// An object with what it is checked against.
struct Object<'a> {
    m: &'a Manifest,
    layout: &'a Layout,
    entry: &'a ObjectEntry,
    /// Its filters in the load's sidecar, for the deep check.
    filters: Vec<ObjectFilter<'a>>,
}

/// What checking an object found, and its footer when it read.
struct Checked {
    problems: Vec<Problem>,
    footer: Option<ParquetMetaData>,
}

/// Checks one object against its manifest and layout.
async fn check_object(scope: &Scope<'_>, object: &Object<'_>) -> Checked {
    let mut problems = Vec::new();
    let path = Path::from(object.entry.key.as_str());
    let store = scope.store.as_ref();
    let footer = match stored_footer(store, object, &path, &mut problems).await {
        Some(meta) => meta,
        None => {
            return Checked {
                problems,
                footer: None,
            };
        }
    };
    problems.extend(footer::footer_problems(
        object.m,
        object.layout,
        object.entry,
        &footer,
    ));
    if scope.deep {
        problems.extend(deep_problems(store, object, &path).await);
    }
    Checked {
        problems,
        footer: Some(footer),
    }
}

/// The object's stored size and its footer; `None` when either does not read.
async fn stored_footer(
    store: &dyn ObjectStore,
    object: &Object<'_>,
    path: &Path,
    problems: &mut Vec<Problem>,
) -> Option<ParquetMetaData> {
    let head = match store.head(path).await {
        Ok(h) => h,
        Err(object_store::Error::NotFound { .. }) => {
            problems.push(Problem::Missing {
                manifest: object.m.load_id.clone(),
            });
            return None;
        }
        Err(e) => {
            problems.push(Problem::Unreadable { cause: e.into() });
            return None;
        }
    };
    if head.size != object.entry.bytes {
        problems.push(Problem::SizeMismatch {
            stored: head.size,
            manifest: object.entry.bytes,
        });
    }
    read_footer(store, path, head.size)
        .await
        .map_err(|e| problems.push(Problem::NotParquet { cause: e.into() }))
        .ok()
}

/// Why an object's rows do not read.
#[derive(Debug, thiserror::Error)]
enum RowsError {
    #[error(transparent)]
    Store(#[from] object_store::Error),
    #[error(transparent)]
    Parquet(#[from] parquet::errors::ParquetError),
    #[error(transparent)]
    Arrow(#[from] arrow::error::ArrowError),
}

/// The rows of an object, with their schema.
struct Rows {
    schema: SchemaRef,
    batches: Vec<RecordBatch>,
}

async fn read_rows(store: &dyn ObjectStore, path: &Path) -> Result<Rows, RowsError> {
    let bytes = store.get(path).await?.bytes().await?;
    let reader = ParquetRecordBatchReaderBuilder::try_new(bytes)?;
    let schema = reader.schema().clone();
    let batches = reader.build()?.collect::<Result<Vec<_>, _>>()?;
    Ok(Rows { schema, batches })
}

/// The rows: clustering order, key range and Bloom filters.
async fn deep_problems(store: &dyn ObjectStore, object: &Object<'_>, path: &Path) -> Vec<Problem> {
    let rows = match read_rows(store, path).await {
        Ok(rows) => rows,
        Err(e) => return vec![Problem::RowsUnreadable { cause: e.into() }],
    };
    let mut out = order::row_problems(object.layout, object.entry, &rows.schema, &rows.batches);
    out.extend(blooms::value_problems(
        &object.filters,
        &rows.schema,
        &rows.batches,
    ));
    out
}
