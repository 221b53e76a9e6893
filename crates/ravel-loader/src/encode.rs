//! The run encoder: rows of a run, sorted by the table's clustering order, cut into encoded
//! objects with what the manifest and the Bloom sidecar record of each. A load and anything
//! else that writes a table's objects (e.g. a compaction) go through it, so that the same rows
//! under the same layout give the same objects.

use std::collections::BTreeMap;
use std::time::Instant;

use arrow::array::RecordBatch;

use arrow::datatypes::{Schema, SchemaRef};
use ravel_layout::{ClusteringOrder, Layout};

use crate::LoadError;
use crate::gather::gather_consuming;
use crate::object::{
    CutSettings, EncodedObject, Run, RunProperties, cut_run, spill_properties, writer_properties,
};

/// What a run encoder's objects are made with, fixed for a load.
#[derive(Debug, Clone)]
pub struct EncodeSettings {
    /// The table's layout: clustering order, sort columns (the manifest's ranges), Bloom scope
    /// and false-positive rate, generation (in each object's footer).
    pub layout: Layout,
    /// zstd level of the objects.
    pub zstd_level: i32,
    /// Target stored size of one object.
    pub object_bytes: u64,
    /// Whether the objects are the table's or spill.
    pub objects: ObjectKind,
    /// Sort keys (each an array, as `ravel_manifest::key_value` encodes keys) that no object
    /// reaches across: an object also ends before the first row at or above each. Empty: objects
    /// are cut by size alone.
    pub cuts: Vec<serde_json::Value>,
}

/// What a run's objects are for, which decides how they are encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ObjectKind {
    /// The table's objects: zstd, encodings chosen by trial, statistics and Bloom filters.
    #[default]
    Table,
    /// Spill, not the table's: only a merge reads them back (a load that ends compacted merges
    /// its runs once). Encoded cheaply, LZ4 and plain, with no statistics or Bloom filters.
    Spill,
}

/// The columns whose statistics the Delta `add` of each object of `schema` carries under
/// `layout`: the first 32 and the layout's sort columns.
pub fn stats_columns(layout: &Layout, schema: &Schema) -> Vec<usize> {
    let sort: Vec<&str> = layout
        .sort_columns()
        .iter()
        .map(|(_, name)| *name)
        .collect();
    ravel_log::stats_columns(schema, &sort)
}

/// The table properties a commit of rows of `schema` records in the table's Delta metadata:
/// the layout's, and the columns the objects' statistics cover.
pub fn table_configuration(layout: &Layout, schema: &Schema) -> BTreeMap<String, String> {
    let mut p = layout.table_properties();
    let columns = stats_columns(layout, schema);
    p.insert(
        ravel_log::STATS_COLUMNS_PROPERTY.into(),
        ravel_log::stats_columns_property(schema, &columns),
    );
    p
}

/// Turns runs of one table's rows into encoded objects.
#[derive(Clone)]
pub struct RunEncoder {
    settings: EncodeSettings,
    schema: SchemaRef,
    order: Option<ClusteringOrder>,
    /// Columns whose value range each object records: the layout's sort columns.
    range_columns: Vec<usize>,
    /// Columns whose filter each object hands to the sidecar: the Bloom scope's string and
    /// binary columns.
    bloom_columns: Vec<usize>,
    /// Columns whose statistics each object's Delta `add` carries (none in spill).
    stats_columns: Vec<usize>,
}

/// A run in its clustering order, and the time that took.
pub struct SortedRun {
    pub run: Run,
    /// Computing the order (normalized keys, parallel sort).
    pub sort_s: f64,
    /// Taking every column in that order.
    pub gather_s: f64,
}

/// What encoding one run did: the objects it emitted and the time each step took.
#[derive(Debug, Clone, Default)]
pub struct EncodedRun {
    pub objects: usize,
    /// Reading input, when the encoder reads it itself (a load by columns).
    pub read_s: f64,
    pub sort_s: f64,
    pub gather_s: f64,
    /// Dictionary trials and encoding; includes `blooms_s`.
    pub encode_s: f64,
    /// Collecting the objects' Bloom filters for the sidecar.
    pub blooms_s: f64,
    /// Stored / estimated object size after this run, for the next (see [`RunEncoder::encode`]).
    pub calibration: Option<f64>,
    /// Bytes kept in local files until the run's objects were assembled (a load by columns'
    /// encoded pages).
    pub local_spill_bytes: u64,
}

impl RunEncoder {
    /// An encoder of rows of `schema`, which the layout must fit (see
    /// [`Layout::validate_for`]).
    pub fn new(settings: EncodeSettings, schema: SchemaRef) -> Result<RunEncoder, LoadError> {
        let layout = &settings.layout;
        let order = ClusteringOrder::try_new(layout, &schema)?;
        let range_columns: Vec<usize> = layout
            .sort_columns()
            .iter()
            .filter_map(|(_, name)| schema.index_of(name).ok())
            .collect();
        let stats_columns = match settings.objects {
            ObjectKind::Spill => Vec::new(),
            ObjectKind::Table => stats_columns(layout, &schema),
        };
        let bloom_columns = match settings.objects {
            ObjectKind::Spill => Vec::new(),
            ObjectKind::Table => layout
                .bloom
                .scope
                .columns(&schema)
                .into_iter()
                .filter_map(|name| schema.index_of(name).ok())
                .filter(|&c| ravel_bloom::supported(schema.field(c).data_type()))
                .collect(),
        };
        Ok(RunEncoder {
            settings,
            schema,
            order,
            range_columns,
            bloom_columns,
            stats_columns,
        })
    }

    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    pub fn settings(&self) -> &EncodeSettings {
        &self.settings
    }

    /// The columns each object has a sidecar filter of, in the order of
    /// [`EncodedObject::blooms`].
    pub fn bloom_column_names(&self) -> Vec<String> {
        self.bloom_columns
            .iter()
            .map(|&c| self.schema.field(c).name().clone())
            .collect()
    }

    /// Columns (indices in its schema) whose value range each object records.
    pub(crate) fn range_columns(&self) -> &[usize] {
        &self.range_columns
    }

    /// Columns whose filter each object hands to the sidecar.
    pub(crate) fn bloom_columns(&self) -> &[usize] {
        &self.bloom_columns
    }

    /// Columns whose statistics each object's Delta `add` carries.
    pub(crate) fn stats_columns(&self) -> &[usize] {
        &self.stats_columns
    }

    /// `batches` as a run in the clustering order (as they are, without a clustering key).
    /// The batches are consumed column by column as the sorted copy is made.
    pub fn sort(&self, batches: Vec<RecordBatch>) -> Result<SortedRun, LoadError> {
        let t = Instant::now();
        let Some(order) = &self.order else {
            return Ok(SortedRun {
                run: Run::new(self.schema.clone(), batches),
                sort_s: t.elapsed().as_secs_f64(),
                gather_s: 0.0,
            });
        };
        let sorted = order.merge_order(&batches)?;
        let sort_s = t.elapsed().as_secs_f64();
        let batches = gather_consuming(&self.schema, batches, &sorted)?;
        Ok(SortedRun {
            run: Run::new(self.schema.clone(), batches),
            sort_s,
            gather_s: t.elapsed().as_secs_f64() - sort_s,
        })
    }

    /// Cuts `run` (rows in the clustering order) into objects, handing each to `emit` as soon
    /// as it is encoded. `calibration` is the previous run's (`None` for the first); the
    /// returned one is for the next.
    pub fn encode(
        &self,
        run: &Run,
        calibration: Option<f64>,
        emit: impl FnMut(EncodedObject) -> Result<(), LoadError>,
    ) -> Result<EncodedRun, LoadError> {
        let t = Instant::now();
        // Encoding starts with the dictionary trials that choose the writer settings.
        let s = &self.settings;
        let RunProperties {
            props,
            bytes_per_row,
        } = match s.objects {
            ObjectKind::Spill => spill_properties(run)?,
            ObjectKind::Table => writer_properties(&s.layout, run, s.zstd_level, s.object_bytes)?,
        };
        let cut = CutSettings {
            order: self.order.as_ref(),
            range_columns: &self.range_columns,
            bloom_columns: &self.bloom_columns,
            stats_columns: &self.stats_columns,
            props: &props,
            object_bytes: s.object_bytes,
            bytes_per_row,
            cuts: &s.cuts,
        };
        let stats = cut_run(run, &cut, calibration, emit)?;
        Ok(EncodedRun {
            objects: stats.objects,
            encode_s: t.elapsed().as_secs_f64(),
            blooms_s: stats.blooms_s,
            calibration: stats.calibration,
            ..EncodedRun::default()
        })
    }

    /// Sorts `batches` as one run and encodes it ([`RunEncoder::sort`], then
    /// [`RunEncoder::encode`]); the run's rows are released before it returns.
    pub fn encode_batches(
        &self,
        batches: Vec<RecordBatch>,
        calibration: Option<f64>,
        emit: impl FnMut(EncodedObject) -> Result<(), LoadError>,
    ) -> Result<EncodedRun, LoadError> {
        let sorted = self.sort(batches)?;
        let encoded = self.encode(&sorted.run, calibration, emit)?;
        Ok(EncodedRun {
            sort_s: sorted.sort_s,
            gather_s: sorted.gather_s,
            ..encoded
        })
    }
}
