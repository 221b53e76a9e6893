//! The layout service: reads a table's layout from its store and changes it by
//! compare-and-swap.
//!
//! Each generation of the layout is its own document, `<table>/_layout/<generation>.json`,
//! written with create-if-absent (object_store `PutMode::Create`). An update reads the newest
//! generation `g` and creates `g + 1`: of two concurrent updates from `g`, exactly one creates
//! `g + 1`; the other finds it present and gets [`LayoutError::Conflict`]. This needs only
//! conditional create, which local directories, S3 (`If-None-Match`) and s3s-fs all provide,
//! whereas overwriting one document in place by ETag is not supported by object_store's local
//! store. Past generations stay as the layout's history: a load records the generation it used.

use std::sync::Arc;

use arrow::datatypes::Schema;
use futures::TryStreamExt;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};
use ravel_store::{Store, TablePaths};

use crate::{LAYOUT_FORMAT, Layout, LayoutError};

/// The outcome of an update.
#[derive(Debug, Clone, PartialEq)]
pub struct Updated {
    /// The layout in force after the update.
    pub layout: Layout,
    /// False when the requested settings equalled the stored ones: nothing was written and the
    /// generation is unchanged.
    pub changed: bool,
}

/// A table's schema and where it comes from.
#[derive(Debug, Clone, PartialEq)]
pub struct TableSchema {
    pub schema: Schema,
    /// Recorded by ravel-load (`<table>/_schema.json`); `false`: declared by the Delta
    /// metadata of a table another Delta writer created, until ravel-load's first write
    /// records it.
    pub recorded: bool,
}

/// Reads and updates the layout document and the recorded schema of one table.
#[derive(Debug, Clone)]
pub struct LayoutStore {
    store: Arc<dyn ObjectStore>,
    handle: Store,
    table: TablePaths,
}

impl LayoutStore {
    pub fn new(store: &Store, table: &str) -> Result<LayoutStore, LayoutError> {
        Ok(LayoutStore {
            store: store.object_store().clone(),
            handle: store.clone(),
            table: TablePaths::new(table)?,
        })
    }

    pub fn table(&self) -> &TablePaths {
        &self.table
    }

    /// The newest stored generation, or `None` when the table has no layout document.
    async fn newest_generation(&self) -> Result<Option<u64>, LayoutError> {
        let listed: Vec<_> = self
            .store
            .list(Some(&self.table.layout_dir()))
            .try_collect()
            .await?;
        Ok(listed
            .iter()
            .filter_map(|m| {
                m.location
                    .filename()?
                    .strip_suffix(".json")?
                    .parse::<u64>()
                    .ok()
            })
            .max())
    }

    /// The table's layout: the newest stored generation, or the defaults (generation 0).
    pub async fn load(&self) -> Result<Layout, LayoutError> {
        match self.newest_generation().await? {
            None => Ok(Layout::default()),
            Some(g) => self.load_generation(g).await,
        }
    }

    /// One stored generation of the layout.
    pub async fn load_generation(&self, generation: u64) -> Result<Layout, LayoutError> {
        let path = self.table.layout_doc(generation);
        let bytes = self.store.get(&path).await?.bytes().await?;
        let layout = parse_layout(&path, &bytes)?;
        if layout.generation != generation {
            return Err(LayoutError::Json {
                path: path.to_string(),
                source: serde::de::Error::custom(format!(
                    "document says generation {}, its name says {generation}",
                    layout.generation
                )),
            });
        }
        Ok(layout)
    }

    /// The table's schema: the recorded one, else the one the Delta metadata of its newest
    /// version declares (a table another Delta writer created, see [`TableSchema`]); `None`
    /// when it has neither.
    pub async fn schema(&self) -> Result<Option<Schema>, LayoutError> {
        Ok(self.table_schema().await?.map(|s| s.schema))
    }

    /// The table's schema ([`LayoutStore::schema`]) and whether it is recorded.
    pub async fn table_schema(&self) -> Result<Option<TableSchema>, LayoutError> {
        if let Some(schema) = self.recorded_schema().await? {
            return Ok(Some(TableSchema {
                schema,
                recorded: true,
            }));
        }
        let log = ravel_log::TableLog::new(self.store.clone(), self.table.clone());
        let snapshot = log.latest().await.map_err(Box::new)?;
        match snapshot.declared_schema() {
            None => Ok(None),
            Some(declared) => Ok(Some(TableSchema {
                schema: declared?,
                recorded: false,
            })),
        }
    }

    /// The table's recorded schema (`_schema.json`), if any.
    pub async fn recorded_schema(&self) -> Result<Option<Schema>, LayoutError> {
        let path = self.table.schema_doc();
        match self.store.get(&path).await {
            Ok(r) => {
                let bytes = r.bytes().await?;
                let schema =
                    serde_json::from_slice(&bytes).map_err(|source| LayoutError::Json {
                        path: path.to_string(),
                        source,
                    })?;
                Ok(Some(schema))
            }
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Records the table's schema once (create-if-absent). Recording a schema that agrees with
    /// the recorded one (by [`ravel_manifest::schema_difference`], the rule load, query and
    /// verify share) is a no-op that returns `false`; one that differs is
    /// [`LayoutError::SchemaMismatch`]. The stored layout must be valid for the schema, or
    /// nothing is written.
    pub async fn record_schema(&self, schema: &Schema) -> Result<bool, LayoutError> {
        let schema = Schema::new(schema.fields().clone());
        if let Some(existing) = self.recorded_schema().await? {
            return if ravel_manifest::schema_difference(&existing, &schema).is_none() {
                Ok(false)
            } else {
                Err(LayoutError::SchemaMismatch {
                    table: self.table.name().into(),
                })
            };
        }
        let layout = self.load().await?;
        if layout.generation > 0 {
            layout.validate_for(&schema)?;
        }
        let json = serde_json::to_vec_pretty(&schema).expect("a schema serializes");
        let path = self.table.schema_doc();
        match ravel_store::create_or_confirm(self.store.as_ref(), &path, json.into()).await {
            Ok(()) => Ok(true),
            // Someone recorded one concurrently: fine if it is the same.
            Err(e) if e.is_taken() => Box::pin(self.record_schema(&schema)).await,
            Err(e) => Err(e.into()),
        }
    }

    /// Reads the newest layout, applies `change`, validates the result (against the recorded
    /// schema when there is one) and stores it as the next generation by compare-and-swap.
    /// Nothing is written when the result equals the stored settings.
    pub async fn update(
        &self,
        change: impl FnOnce(&mut Layout) -> Result<(), LayoutError>,
    ) -> Result<Updated, LayoutError> {
        let base = self.load().await?;
        let mut next = base.clone();
        change(&mut next)?;
        self.update_from(&base, next).await
    }

    /// Stores `next` as the generation after `base`, if `base` is still the newest; otherwise
    /// [`LayoutError::Conflict`].
    pub async fn update_from(
        &self,
        base: &Layout,
        mut next: Layout,
    ) -> Result<Updated, LayoutError> {
        next.format = LAYOUT_FORMAT;
        next.generation = base.generation;
        match self.schema().await? {
            Some(schema) => next.validate_change_for(base, &schema)?,
            None => next.validate()?,
        }
        if next.same_settings(base) {
            return Ok(Updated {
                layout: base.clone(),
                changed: false,
            });
        }
        // Generations are created if absent, exclusively whatever the server (the probe says
        // whether creates need claims).
        self.handle.capabilities().await?;
        next.generation = base.generation + 1;
        let path = self.table.layout_doc(next.generation);
        let json = serde_json::to_vec_pretty(&next).expect("a layout serializes");
        // A retry whose first attempt was stored (its response lost) finds this very document:
        // that is our write, not a conflict.
        match ravel_store::create_or_confirm(self.store.as_ref(), &path, json.into()).await {
            Ok(()) => {
                tracing::info!(
                    table = self.table.name(),
                    generation = next.generation,
                    "layout stored"
                );
                Ok(Updated {
                    layout: next,
                    changed: true,
                })
            }
            Err(e) if e.is_taken() => Err(LayoutError::Conflict {
                table: self.table.name().into(),
                generation: next.generation,
            }),
            Err(e) => Err(e.into()),
        }
    }
}

fn parse_layout(path: &Path, bytes: &[u8]) -> Result<Layout, LayoutError> {
    #[derive(serde::Deserialize)]
    struct Head {
        format: u32,
    }
    let json_err = |source| LayoutError::Json {
        path: path.to_string(),
        source,
    };
    let head: Head = serde_json::from_slice(bytes).map_err(json_err)?;
    if head.format != LAYOUT_FORMAT {
        return Err(LayoutError::UnsupportedFormat {
            path: path.to_string(),
            format: head.format,
        });
    }
    serde_json::from_slice(bytes).map_err(json_err)
}
