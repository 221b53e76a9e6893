//! The sample's encoded chunk sizes: the sample cut into as many objects as the table has,
//! each column with a dictionary where the loader's trial would choose one for the run.

use arrow::array::{RecordBatch, UInt32Array};
use arrow::compute::take_record_batch;
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use rayon::prelude::*;

use super::Table;
use crate::AdviseError;

/// Bytes of a column chunk, and of its dictionary page among them (0: none).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ChunkSize {
    pub bytes: u64,
    pub dictionary: u64,
}

/// The bytes of each column of `sample` put in `order` and cut into as many objects as `table`
/// has, encoded as [`encode`](super::encode) does, summed over the objects: the sizes alone,
/// for a sample whose rows only tell how an order compresses.
pub fn column_totals(
    sample: &RecordBatch,
    order: &UInt32Array,
    table: &Table<'_>,
) -> Result<Vec<ChunkSize>, AdviseError> {
    let sorted = take_record_batch(sample, order)?;
    let sizes = object_sizes(&sorted, table)?;
    Ok(summed(sizes.iter().map(Vec::as_slice)))
}

/// Rows `j` of `k` objects cut from `n`.
pub(super) fn object_rows(j: usize, n: usize, k: usize) -> std::ops::Range<usize> {
    j * n / k..(j + 1) * n / k
}

/// The encoded chunk sizes of each object `sorted` is cut into (as many as `table` has), each
/// column with a dictionary where the loader's trial would choose one for the run.
pub(super) fn object_sizes(
    sorted: &RecordBatch,
    table: &Table<'_>,
) -> Result<Vec<Vec<ChunkSize>>, AdviseError> {
    let n = sorted.num_rows();
    let k = table.objects.clamp(1, n.max(1));
    let trial = with_trial(sorted, k, &properties()?, table.dictionaries)?;
    (0..k)
        .into_par_iter()
        .map(|j| match j == k / 2 {
            // The trial encoded the middle object both ways: its sizes are the winners'.
            true => Ok(trial.middle.clone()),
            false => {
                let rows = object_rows(j, n, k);
                chunk_sizes(&sorted.slice(rows.start, rows.len()), &trial.props)
            }
        })
        .collect()
}

/// Per column, the sum of the objects' chunk sizes.
pub(super) fn summed<'a>(objects: impl Iterator<Item = &'a [ChunkSize]> + Clone) -> Vec<ChunkSize> {
    let n = objects.clone().next().map_or(0, <[ChunkSize]>::len);
    (0..n)
        .map(|c| ChunkSize {
            bytes: objects.clone().map(|o| o[c].bytes).sum(),
            dictionary: objects.clone().map(|o| o[c].dictionary).sum(),
        })
        .collect()
}

/// The simulation's writer: zstd at its fastest level, without statistics. Its sizes are scaled
/// to the table's own per column, so only their ratios between orders count, and the fastest
/// level gives those as well (the trial's choice of a dictionary is made at that level too); a
/// simulated object's value ranges are taken from its rows.
pub(super) fn properties() -> Result<WriterProperties, AdviseError> {
    Ok(WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::try_new(1)?))
        .set_statistics_enabled(EnabledStatistics::None)
        .set_max_row_group_row_count(None)
        .build())
}

/// The writer properties of a run in one order, and its middle object's chunk sizes under them.
pub(super) struct Trial {
    props: WriterProperties,
    pub(super) middle: Vec<ChunkSize>,
}

/// `props` with each column's dictionary as the loader's trial decides it for a run: encoded
/// with and without one (the middle object's rows, as the loader tries the run's middle rows),
/// the smaller wins. A column of `dictionaries` (the table's objects hold it with one) keeps
/// one: a sample of a few percent repeats few of an object's values, so its trial is biased
/// against a dictionary that the whole object's rows choose.
pub(super) fn with_trial(
    sorted: &RecordBatch,
    objects: usize,
    props: &WriterProperties,
    dictionaries: &std::collections::BTreeSet<String>,
) -> Result<Trial, AdviseError> {
    let n = sorted.num_rows();
    let k = objects.clamp(1, n.max(1));
    let rows = object_rows(k / 2, n, k);
    let middle = sorted.slice(rows.start, rows.len());
    let plain = props
        .clone()
        .into_builder()
        .set_dictionary_enabled(false)
        .build();
    // Only the columns whose choice is open are tried without one.
    let open: Vec<usize> = (0..middle.num_columns())
        .filter(|&i| !dictionaries.contains(middle.schema_ref().field(i).name()))
        .collect();
    let (with, without) = rayon::join(
        || chunk_sizes(&middle, props),
        || match open.is_empty() {
            true => Ok(Vec::new()),
            false => chunk_sizes(&middle.project(&open)?, &plain),
        },
    );
    let (with, without) = (with?, without?);
    let mut b = props.clone().into_builder();
    let mut sizes = Vec::new();
    for (i, (f, w)) in sorted.schema_ref().fields().iter().zip(with).enumerate() {
        let p = open.iter().position(|&o| o == i).map(|at| without[at]);
        let dictionary = p.is_none_or(|p| w.bytes < p.bytes);
        b = b.set_column_dictionary_enabled(f.name().as_str().into(), dictionary);
        sizes.push(match p {
            Some(p) if !dictionary => p,
            _ => w,
        });
    }
    Ok(Trial {
        props: b.build(),
        middle: sizes,
    })
}

/// Encoded bytes of each column of `slice` written with `props`.
fn chunk_sizes(
    slice: &RecordBatch,
    props: &WriterProperties,
) -> Result<Vec<ChunkSize>, AdviseError> {
    let mut w = ArrowWriter::try_new(Vec::new(), slice.schema(), Some(props.clone()))?;
    w.write(slice)?;
    let meta = w.close()?;
    let names: Vec<&String> = slice
        .schema_ref()
        .fields()
        .iter()
        .map(|f| f.name())
        .collect();
    let mut out = vec![ChunkSize::default(); names.len()];
    for rg in meta.row_groups() {
        for c in rg.columns() {
            let top = &c.column_path().parts()[0];
            if let Some(i) = names.iter().position(|n| *n == top) {
                out[i].bytes += c.compressed_size() as u64;
                if let Some(d) = c.dictionary_page_offset() {
                    out[i].dictionary += (c.data_page_offset() - d).max(0) as u64;
                }
            }
        }
    }
    Ok(out)
}
