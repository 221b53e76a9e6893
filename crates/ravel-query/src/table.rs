//! The table as DataFusion sees it: exactly the objects its manifests list (no directory
//! listing, no HEAD: sizes come from the manifest), in file groups that keep each group's
//! rows in the stream column's order, with the manifest's ranges skipping objects before any
//! request.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use datafusion::arrow::datatypes::{Schema, SchemaRef};
use datafusion::catalog::Session;
use datafusion::catalog::TableProvider;
use datafusion::common::Result as DfResult;
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
use ravel_manifest::ObjectEntry;
use serde::Serialize;

use crate::prune::Pruner;

/// Objects a scan kept of those the manifests list.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ScanCounts {
    pub kept: usize,
    pub total: usize,
}

/// A ravel table: the objects of its manifests.
#[derive(Debug)]
pub struct RavelTable {
    /// The schema DataFusion sees (binary columns as strings).
    schema: SchemaRef,
    objects: Vec<ObjectEntry>,
    /// The column every object is sorted by first (nulls first), if the table is clustered.
    stream: Option<String>,
    store_url: ObjectStoreUrl,
    pruner: Option<Pruner>,
    last_scan: Arc<Mutex<ScanCounts>>,
}

impl RavelTable {
    pub fn new(
        file_schema: &Schema,
        objects: Vec<ObjectEntry>,
        stream: Option<String>,
        store_url: ObjectStoreUrl,
        manifest_pruning: bool,
    ) -> RavelTable {
        use datafusion::datasource::physical_plan::parquet::{
            transform_binary_to_string, transform_schema_to_view,
        };
        let schema = transform_schema_to_view(&transform_binary_to_string(file_schema));
        RavelTable {
            schema: Arc::new(schema),
            objects,
            stream,
            store_url,
            pruner: manifest_pruning.then(|| Pruner::new(file_schema)),
            last_scan: Arc::default(),
        }
    }

    /// A handle on the counts of the latest scan.
    pub fn scan_counts(&self) -> Arc<Mutex<ScanCounts>> {
        self.last_scan.clone()
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
            groups
                .last_mut()
                .expect("pushed above")
                .push(PartitionedFile::new(o.key.clone(), o.bytes));
        }
        groups.into_iter().map(FileGroup::new).collect()
    }
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
            Some(p) => self
                .objects
                .iter()
                .filter(|o| p.may_match(o, filters))
                .collect(),
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
        let format = ParquetFormat::default().with_options(state.table_options().parquet.clone());
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
