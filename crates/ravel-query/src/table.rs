//! The table as DataFusion sees it: exactly the objects its manifests list (no directory
//! listing, no HEAD: sizes come from the manifest), in file groups that keep each group's
//! rows in the stream column's order, with the manifest's ranges (and, for equalities on
//! string columns, the loads' Bloom sidecars) skipping objects before any object request.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use datafusion::arrow::array::ArrayRef;
use datafusion::arrow::datatypes::{Schema, SchemaRef};
use datafusion::catalog::Session;
use datafusion::catalog::TableProvider;
use datafusion::common::stats::Precision;
use datafusion::common::{Result as DfResult, ScalarValue, Statistics};
use datafusion::datasource::TableType;
use datafusion::datasource::file_format::FileFormat;
use datafusion::datasource::file_format::parquet::ParquetFormat;
use datafusion::datasource::listing::PartitionedFile;
use datafusion::datasource::physical_plan::{FileGroup, FileScanConfigBuilder};
use datafusion::execution::object_store::ObjectStoreUrl;
use datafusion::logical_expr::{SortExpr, TableProviderFilterPushDown};
use datafusion::physical_expr::create_lex_ordering;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::empty::EmptyExec;
use datafusion::prelude::{Expr, col};
use object_store::{ObjectStore, ObjectStoreExt};
use ravel_bloom::Filter;
use ravel_log::{ForeignObject, LiveManifest};
use ravel_manifest::{BloomIndex, ObjectEntry};
use serde::Serialize;

use crate::prune::Pruner;

/// Objects a scan kept of those the manifests list.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ScanCounts {
    pub kept: usize,
    pub total: usize,
}

/// Sidecar sections read so far: the filters of every object of a load, by (load, column).
type Sections = HashMap<(usize, String), Arc<Vec<Filter>>>;

/// A ravel table: the objects of its manifests.
#[derive(Debug)]
pub struct RavelTable {
    /// The schema DataFusion sees (binary columns as strings).
    schema: SchemaRef,
    objects: Vec<ObjectEntry>,
    /// Per object, its load (index into `blooms`) and its position in that load.
    origins: Vec<(usize, usize)>,
    /// Per load, its Bloom sidecar and the number of objects its manifest lists (the filters
    /// a sidecar section holds).
    blooms: Vec<Option<BloomIndex>>,
    listed: Vec<usize>,
    /// Sidecar sections read so far, by (load, column): a hot statement reads none again.
    sections: tokio::sync::Mutex<Sections>,
    /// The store the sidecars are read from (the counting one).
    store: Arc<dyn ObjectStore>,
    /// The column every object is sorted by first (nulls first), if the table is clustered.
    stream: Option<String>,
    store_url: ObjectStoreUrl,
    pruner: Option<Pruner>,
    last_scan: Arc<Mutex<ScanCounts>>,
    /// Per object another writer partitioned, by key: statistics that give each of its
    /// partition columns its one value, which the Parquet reader then reads the column as (it
    /// is not in the object).
    partitioned: HashMap<String, Arc<Statistics>>,
}

impl RavelTable {
    /// The table of a version's objects (`manifests`, oldest rank first), read through
    /// `store`, which is registered in the session under `store_url`.
    pub fn new(
        file_schema: &Schema,
        manifests: &[LiveManifest],
        foreign: &[ForeignObject],
        stream: Option<String>,
        store_url: ObjectStoreUrl,
        store: Arc<dyn ObjectStore>,
        manifest_pruning: bool,
    ) -> RavelTable {
        use datafusion::datasource::physical_plan::parquet::{
            transform_binary_to_string, transform_schema_to_view,
        };
        let schema = transform_schema_to_view(&transform_binary_to_string(file_schema));
        let mut objects = Vec::new();
        let mut origins = Vec::new();
        for (i, m) in manifests.iter().enumerate() {
            // Runs are numbered per load: make them distinct across loads.
            for (live, o) in m.objects() {
                let mut o = o.clone();
                o.run |= (i as u64) << 32;
                objects.push(o);
                origins.push((i, live.position));
            }
        }
        // Other writers' objects: one pseudo-load with no sidecar, a run each.
        for (position, f) in foreign.iter().enumerate() {
            objects.push(f.entry(u64::MAX - position as u64));
            origins.push((manifests.len(), position));
        }
        RavelTable {
            schema: Arc::new(schema),
            objects,
            origins,
            blooms: manifests
                .iter()
                .map(|m| m.manifest.blooms.clone())
                .chain(std::iter::once(None))
                .collect(),
            listed: manifests
                .iter()
                .map(|m| m.manifest.objects.len())
                .chain(std::iter::once(foreign.len()))
                .collect(),
            sections: Default::default(),
            store,
            stream,
            store_url,
            pruner: manifest_pruning.then(|| Pruner::new(file_schema)),
            last_scan: Arc::default(),
            partitioned: foreign
                .iter()
                .filter_map(|f| Some((f.key.clone(), Arc::new(partitioned(file_schema, f)?))))
                .collect(),
        }
    }

    /// A handle on the counts of the latest scan.
    pub fn scan_counts(&self) -> Arc<Mutex<ScanCounts>> {
        self.last_scan.clone()
    }

    /// Reads the filters of `column` for every object of load `load`, if it has a sidecar.
    async fn read_section(&self, load: usize, column: &str) -> DfResult<Option<Vec<Filter>>> {
        let Some(index) = &self.blooms[load] else {
            return Ok(None);
        };
        let Some(s) = index.columns.get(column) else {
            return Ok(None);
        };
        // A sidecar of another format is not read: its objects are kept, as if it had none.
        if index.format != ravel_bloom::FORMAT {
            return Ok(None);
        }
        let path = object_store::path::Path::from(index.key.as_str());
        let bytes = match self
            .store
            .get_range(&path, s.offset..s.offset + s.len)
            .await
        {
            Ok(b) => b,
            // Deleted by another engine's vacuum (a sidecar of an older build, under data/):
            // its objects are kept, as if it had none; `verify` names it.
            Err(object_store::Error::NotFound { .. }) => {
                tracing::warn!(key = %index.key, "a Bloom sidecar is missing: its load's objects are read unfiltered");
                return Ok(None);
            }
            Err(e) => return Err(e.into()),
        };
        let filters = ravel_bloom::decode_section(&bytes, self.listed[load]).map_err(|e| {
            datafusion::error::DataFusionError::External(
                format!("Bloom sidecar {}: {e}", index.key).into(),
            )
        })?;
        Ok(Some(filters))
    }

    /// The objects that may hold rows matching `filters`: first by the manifest's ranges, then,
    /// for the string columns the statement compares for equality, by the Bloom sidecars of the
    /// loads that still have objects in play (read concurrently, once per table).
    async fn kept(&self, p: &Pruner, filters: &[Expr]) -> DfResult<Vec<&ObjectEntry>> {
        let by_range: Vec<usize> = (0..self.objects.len())
            .filter(|&i| p.may_match(&self.objects[i], filters))
            .collect();
        let columns = p.equality_columns(filters);
        if columns.is_empty() || by_range.is_empty() {
            return Ok(by_range.into_iter().map(|i| &self.objects[i]).collect());
        }
        let loads: std::collections::BTreeSet<usize> =
            by_range.iter().map(|&i| self.origins[i].0).collect();
        let missing: Vec<(usize, String)> = {
            let cache = self.sections.lock().await;
            loads
                .iter()
                .flat_map(|&l| columns.iter().map(move |c| (l, c.clone())))
                .filter(|k| !cache.contains_key(k))
                .collect()
        };
        let read = futures::future::try_join_all(missing.into_iter().map(|(l, c)| async move {
            let f = self.read_section(l, &c).await?;
            Ok::<_, datafusion::error::DataFusionError>(((l, c), f))
        }))
        .await?;
        let mut cache = self.sections.lock().await;
        for (k, f) in read {
            // A load without a filter of this column keeps its objects.
            if let Some(f) = f {
                cache.insert(k, Arc::new(f));
            }
        }
        Ok(by_range
            .into_iter()
            .filter(|&i| {
                let (load, pos) = self.origins[i];
                let blooms: Vec<(&str, &Filter)> = columns
                    .iter()
                    .filter_map(|c| {
                        let f = cache.get(&(load, c.clone()))?;
                        Some((c.as_str(), &f[pos]))
                    })
                    .collect();
                p.may_match_with(&self.objects[i], &blooms, filters)
            })
            .map(|i| &self.objects[i])
            .collect())
    }

    /// Whether a scan of these columns (all when `None`) reads a float column.
    fn reads_float(&self, projection: Option<&Vec<usize>>) -> bool {
        let fields = self.schema.fields();
        match projection {
            Some(p) => p.iter().any(|&i| fields[i].data_type().is_floating()),
            None => fields.iter().any(|f| f.data_type().is_floating()),
        }
    }

    /// File groups of about `target` groups: contiguous objects of one run (which are in key
    /// order and do not overlap), so that each group's rows stay in the stream's order.
    fn groups(&self, kept: &[&ObjectEntry], target: usize) -> Vec<FileGroup> {
        let per_group = kept.len().div_ceil(target.max(1)).max(1);
        let mut groups: Vec<Vec<PartitionedFile>> = Vec::new();
        let mut run = None;
        for o in kept {
            let same_run = run == Some(o.run);
            let open = groups.last().is_some_and(|g| g.len() < per_group);
            if !(same_run && open) {
                groups.push(Vec::new());
            }
            run = Some(o.run);
            let mut file = PartitionedFile::new(o.key.clone(), o.bytes);
            if let Some(stats) = self.partitioned.get(&o.key) {
                file = file.with_statistics(stats.clone());
            }
            groups.last_mut().expect("pushed above").push(file);
        }
        groups.into_iter().map(FileGroup::new).collect()
    }
}

/// The statistics of object `f` that give each of its partition columns (in the table's
/// `schema`) its partition value, min = max and no nulls, or all nulls: the Parquet reader
/// reads a column so described as that value. `None` when `f` is not partitioned. A value
/// that does not parse as its column's type is left out (the column reads as null); adopting
/// the object names it.
fn partitioned(schema: &Schema, f: &ForeignObject) -> Option<Statistics> {
    if f.partition_values.is_empty() {
        return None;
    }
    let mut stats = Statistics::new_unknown(schema);
    if let Some(rows) = f.rows {
        stats.num_rows = Precision::Exact(rows as usize);
    }
    for (field, column) in schema.fields().iter().zip(&mut stats.column_statistics) {
        let Some(values) = f.partition_column(field, 1) else {
            continue;
        };
        let scalar = |v: ArrayRef| ScalarValue::try_from_array(&v, 0).map_err(|e| e.to_string());
        let value = match values.map_err(|e| e.to_string()).and_then(scalar) {
            Ok(value) => value,
            Err(e) => {
                tracing::warn!(key = %f.key, column = %field.name(), error = %e, "a partition value does not read as its column's type");
                continue;
            }
        };
        if value.is_null() {
            column.null_count = stats.num_rows;
        } else {
            column.null_count = Precision::Exact(0);
            column.min_value = Precision::Exact(value.clone());
            column.max_value = Precision::Exact(value);
        }
    }
    Some(stats)
}

#[async_trait]
impl TableProvider for RavelTable {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let kept: Vec<&ObjectEntry> = match &self.pruner {
            Some(p) => self.kept(p, filters).await?,
            None => self.objects.iter().collect(),
        };
        *self.last_scan.lock().expect("scan counts") = ScanCounts {
            kept: kept.len(),
            total: self.objects.len(),
        };
        if kept.is_empty() {
            let schema = match projection {
                Some(p) => Arc::new(self.schema.project(p)?),
                None => self.schema.clone(),
            };
            return Ok(Arc::new(EmptyExec::new(schema)));
        }
        let mut parquet = state.table_options().parquet.clone();
        if self.reads_float(projection) {
            // Parquet's statistics and page index leave NaN out of min and max, and DataFusion's
            // pruning trusts them (fixed upstream by apache/datafusion PR #24804), Bloom filters
            // hash -0.0 and 0.0 apart: a scan that reads a float column (to filter by it, to
            // order by it) skips nothing by them, and only the manifest prunes it.
            parquet.global.pruning = false;
            parquet.global.enable_page_index = false;
            parquet.global.bloom_filter_on_read = false;
        }
        let format = ParquetFormat::default().with_options(parquet);
        let source = format.file_source(self.schema.clone().into());
        let ordering = match &self.stream {
            Some(s) if self.schema.index_of(s).is_ok() => {
                let sort: Vec<SortExpr> = vec![col(s.as_str()).sort(true, true)];
                create_lex_ordering(&self.schema, &[sort], state.execution_props())?
            }
            _ => vec![],
        };
        let config = FileScanConfigBuilder::new(self.store_url.clone(), source)
            .with_file_groups(self.groups(&kept, state.config().target_partitions()))
            .with_projection_indices(projection.cloned())?
            .with_limit(limit)
            .with_output_ordering(ordering)
            .build();
        format.create_physical_plan(state, config).await
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> DfResult<Vec<TableProviderFilterPushDown>> {
        // Inexact: the filters reach `scan` (for the manifest's ranges and Parquet's pruning)
        // and DataFusion still applies them to the rows.
        Ok(vec![TableProviderFilterPushDown::Inexact; filters.len()])
    }
}
