//! The load's hot parts as plain functions, so micro-benchmarks (`benches/ravel-bench`) time
//! the code a load runs rather than a copy of it. Not an API for loading: use [`crate::Loader`].

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use ravel_layout::Layout;

use crate::LoadError;
use crate::object::{CutSettings, Run, RunProperties, cut_run, writer_properties};

/// The rows of `batches` in `order` (`(batch, row)` pairs, as
/// [`ravel_layout::ClusteringOrder::merge_order`] returns them), gathered as a sorted run is:
/// column by column in parallel, in batches as long as the longest of `batches`.
pub fn gather(
    schema: &SchemaRef,
    batches: Vec<RecordBatch>,
    order: &[(usize, usize)],
) -> Result<Vec<RecordBatch>, LoadError> {
    crate::gather::gather_consuming(schema, batches, order)
}

/// Encodes sorted rows into objects as a load does (dictionary trials, writer properties of
/// `layout`, zstd at `zstd_level`, cut near `object_bytes`), without ranges or sidecar
/// filters; returns each object's stored size.
pub fn encode_objects(
    layout: &Layout,
    batch: RecordBatch,
    zstd_level: i32,
    object_bytes: u64,
) -> Result<Vec<usize>, LoadError> {
    let run = Run::new(batch.schema(), vec![batch]);
    let RunProperties {
        props,
        bytes_per_row,
    } = writer_properties(layout, &run, zstd_level, object_bytes)?;
    let settings = CutSettings {
        order: None,
        range_columns: &[],
        stats_columns: &[],
        bloom_columns: &[],
        props: &props,
        object_bytes,
        bytes_per_row,
        cuts: &[],
    };
    let mut sizes = Vec::new();
    cut_run(&run, &settings, None, |o| {
        sizes.push(o.bytes.len());
        Ok(())
    })?;
    Ok(sizes)
}
