//! The evidence: a sample of the table's rows (short blocks spread evenly over every object,
//! so that only their pages are fetched and decoded), and what the table's objects cost as
//! stored (each column's bytes, the bytes a reader fetches to open an object).

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use futures::{StreamExt, TryStreamExt};
use object_store::ObjectStore;
use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ArrowReaderOptions, RowSelection};
use parquet::arrow::{ParquetRecordBatchStreamBuilder, ProjectionMask};
use parquet::file::metadata::{PageIndexPolicy, ParquetMetaData};
use ravel_log::TableLog;
use ravel_manifest::ObjectEntry;
use ravel_store::{ObjectFile, Store, TablePaths};

use crate::AdviseError;

/// Rows of one sampled block: short enough that a sample of a few percent touches rows all
/// over each object, long enough that a block costs one page decode.
const BLOCK_ROWS: usize = 32;

/// Objects read at once.
const CONCURRENCY: usize = 8;

/// A sample of the table and what its objects cost.
#[derive(Debug)]
pub struct Sample {
    /// The sampled rows of the asked columns, in the table's order, as stored.
    pub batch: RecordBatch,
    /// The first row of each block of `batch`: rows spread evenly over the table, no two of
    /// one run of its order (none when the sample holds every row, or whole groups).
    pub block_starts: Vec<usize>,
    pub table_rows: u64,
    pub table_bytes: u64,
    pub objects: usize,
    /// Stored bytes of each column over the whole table.
    pub column_bytes: BTreeMap<String, u64>,
    /// Mean rows of one page of each column, by the objects' offset indexes.
    pub page_rows: BTreeMap<String, f64>,
    /// Mean bytes of an object's page index (column and offset indexes).
    pub page_index_bytes: f64,
    /// Mean bytes of an object.
    pub object_bytes: f64,
    /// Mean bytes of one object's filter of each column in the Bloom sidecars.
    pub bloom_bytes: BTreeMap<String, f64>,
    /// Bytes of each column's dictionary pages over the whole table.
    pub dictionary_bytes: BTreeMap<String, u64>,
}

impl Sample {
    /// The fraction of the table's rows the sample holds.
    pub fn fraction(&self) -> f64 {
        self.batch.num_rows() as f64 / self.table_rows.max(1) as f64
    }
}

/// The objects of the table's newest version, its own and other writers'.
struct Listed {
    objects: Vec<ObjectEntry>,
    /// Mean bytes of one object's filter in the Bloom sidecars, per column.
    bloom_bytes: BTreeMap<String, f64>,
}

async fn objects(store: &Store, table: &str) -> Result<Listed, AdviseError> {
    let log = TableLog::new(store.object_store().clone(), TablePaths::new(table)?);
    let snapshot = log.latest().await?;
    let manifests = log.manifests(&snapshot).await?;
    let mut objects: Vec<ObjectEntry> = manifests
        .iter()
        .flat_map(|m| m.objects().map(|(_, o)| o.clone()))
        .collect();
    let mut blooms: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for m in &manifests {
        let Some(index) = &m.manifest.blooms else {
            continue;
        };
        for (c, section) in &index.columns {
            let e = blooms.entry(c.clone()).or_default();
            e.0 += section.len;
            e.1 += m.manifest.objects.len() as u64;
        }
    }
    let foreign = snapshot.foreign(log.table());
    objects.extend(foreign.iter().map(|f| f.entry(0)));
    Ok(Listed {
        objects,
        bloom_bytes: blooms
            .into_iter()
            .map(|(c, (bytes, n))| (c, bytes as f64 / n.max(1) as f64))
            .collect(),
    })
}

/// How a sample's rows are drawn from each object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Draw<'a> {
    /// Short blocks spread evenly over the object.
    Blocks,
    /// Every row of the groups of a column (rows of one value) whose value hashes under the
    /// fraction: whole groups, whose rows an order led by the column puts side by side.
    WholeGroups(&'a str),
}

/// Reads about `target_rows` rows of `columns` (file schema `schema`) from `table`, drawn as
/// `draw` says.
pub async fn read(
    store: &Store,
    table: &str,
    schema: &SchemaRef,
    columns: &[String],
    target_rows: usize,
    draw: Draw<'_>,
) -> Result<Sample, AdviseError> {
    let Listed {
        objects,
        bloom_bytes,
    } = objects(store, table).await?;
    let table_rows: u64 = objects.iter().map(|o| o.rows).sum();
    let fraction = (target_rows as f64 / table_rows.max(1) as f64).min(1.0);
    let indices: Vec<usize> = columns
        .iter()
        .filter_map(|c| schema.index_of(c).ok())
        .collect();
    let projected = Arc::new(schema.project(&indices)?);
    let rows = match draw {
        Draw::Blocks => Rows::Blocks,
        Draw::WholeGroups(c) => Rows::WholeGroups(schema.index_of(c)?),
    };
    // A task per object: objects decode on every worker thread of the runtime.
    let tasks = objects.iter().map(|o| {
        let (store, o, indices) = (store.object_store().clone(), o.clone(), indices.clone());
        tokio::spawn(
            async move { read_object(store, &o, &indices, Drawn { rows, fraction }).await },
        )
    });
    let parts: Vec<Part> = futures::stream::iter(tasks)
        .buffered(CONCURRENCY)
        .map(|joined| joined?)
        .try_collect()
        .await?;
    let mut column_bytes = BTreeMap::new();
    let mut dictionary_bytes = BTreeMap::new();
    let mut pages: BTreeMap<String, u64> = BTreeMap::new();
    let mut page_index = 0u64;
    let mut batches = Vec::new();
    let mut block_starts = Vec::new();
    let mut at = 0;
    for p in parts {
        block_starts.extend(p.starts.iter().map(|s| at + s));
        at += p.batches.iter().map(RecordBatch::num_rows).sum::<usize>();
        for (c, cost) in p.columns {
            *column_bytes.entry(c.clone()).or_insert(0) += cost.bytes;
            *dictionary_bytes.entry(c.clone()).or_insert(0) += cost.dictionary;
            *pages.entry(c).or_insert(0) += cost.pages;
        }
        page_index += p.page_index_bytes;
        batches.extend(p.batches);
    }
    let n = objects.len().max(1) as f64;
    let page_rows = pages
        .into_iter()
        .filter(|(_, p)| *p > 0)
        .map(|(c, p)| (c, table_rows as f64 / p as f64))
        .collect();
    let batches: Vec<RecordBatch> = batches
        .into_iter()
        .map(|b| RecordBatch::try_new(projected.clone(), b.columns().to_vec()))
        .collect::<Result<_, _>>()?;
    Ok(Sample {
        batch: arrow::compute::concat_batches(&projected, &batches)?,
        block_starts,
        table_rows,
        table_bytes: objects.iter().map(|o| o.bytes).sum(),
        objects: objects.len(),
        column_bytes,
        page_rows,
        page_index_bytes: page_index as f64 / n,
        bloom_bytes,
        dictionary_bytes,
        object_bytes: objects.iter().map(|o| o.bytes).sum::<u64>() as f64 / n,
    })
}

/// One object's sampled rows and costs.
struct Part {
    batches: Vec<RecordBatch>,
    /// Where each block starts among the object's sampled rows (none for whole groups).
    starts: Vec<usize>,
    columns: BTreeMap<String, ColumnCost>,
    page_index_bytes: u64,
}

/// What one column of an object stores.
#[derive(Debug, Default)]
struct ColumnCost {
    bytes: u64,
    /// Data pages, by the offset index (0 without one).
    pages: u64,
    /// Bytes of its dictionary page.
    dictionary: u64,
}

/// How an object's rows are drawn: [`Draw`] with the group column by its index.
#[derive(Debug, Clone, Copy)]
enum Rows {
    Blocks,
    WholeGroups(usize),
}

/// The rows to draw from each object, and the share of them.
#[derive(Debug, Clone, Copy)]
struct Drawn {
    rows: Rows,
    fraction: f64,
}

async fn read_object(
    store: Arc<dyn ObjectStore>,
    o: &ObjectEntry,
    indices: &[usize],
    drawn: Drawn,
) -> Result<Part, AdviseError> {
    let mut reader =
        ObjectFile::new(store.clone(), &o.key, o.bytes).with_page_index(PageIndexPolicy::Optional);
    let options = ArrowReaderOptions::new().with_page_index_policy(PageIndexPolicy::Optional);
    let meta = ArrowReaderMetadata::load_async(&mut reader, options).await?;
    let (columns, page_index_bytes) = costs(meta.metadata());
    let rows = meta.metadata().file_metadata().num_rows() as usize;
    // The columns in groups of about equal stored bytes, each decoded on a task of its own: an
    // object's pages decode on every worker thread, not one.
    let root = meta.metadata().file_metadata().schema_descr().root_schema();
    let stored = |i: usize| {
        let name = root.get_fields().get(i).map(|f| f.name());
        name.and_then(|n| columns.get(n)).map_or(0, |c| c.bytes)
    };
    let (selection, starts) = match drawn.rows {
        Rows::Blocks => (
            blocks(rows, drawn.fraction),
            block_starts(rows, drawn.fraction),
        ),
        Rows::WholeGroups(column) => {
            let file = ObjectFile::new(store.clone(), &o.key, o.bytes);
            let selection = whole_groups(file, meta.clone(), column, drawn.fraction).await?;
            (selection, Vec::new())
        }
    };
    let tasks = column_groups(indices, stored).into_iter().map(|group| {
        let file = ObjectFile::new(store.clone(), &o.key, o.bytes);
        let meta = meta.clone();
        let selection = selection.clone();
        tokio::spawn(async move {
            let mask = ProjectionMask::roots(meta.metadata().file_metadata().schema_descr(), group);
            let batches: Vec<RecordBatch> =
                ParquetRecordBatchStreamBuilder::new_with_metadata(file, meta)
                    .with_projection(mask)
                    .with_row_selection(selection)
                    .with_batch_size(8192)
                    .build()?
                    .try_collect()
                    .await?;
            Ok::<_, AdviseError>(batches)
        })
    });
    let groups: Vec<Vec<RecordBatch>> = futures::future::try_join_all(tasks)
        .await?
        .into_iter()
        .collect::<Result<_, _>>()?;
    Ok(Part {
        batches: side_by_side(groups)?,
        starts,
        columns,
        page_index_bytes,
    })
}

/// Column groups an object's sample is decoded in.
const GROUPS: usize = 4;

/// `indices` (in file order) cut into up to [`GROUPS`] runs of about equal `stored` bytes.
fn column_groups(indices: &[usize], stored: impl Fn(usize) -> u64) -> Vec<Vec<usize>> {
    let sizes: Vec<u64> = indices.iter().map(|&i| stored(i)).collect();
    let share = sizes.iter().sum::<u64>().div_ceil(GROUPS as u64).max(1);
    let mut groups: Vec<Vec<usize>> = vec![Vec::new()];
    let mut filled = 0u64;
    for (&i, &b) in indices.iter().zip(&sizes) {
        if filled >= share && groups.len() < GROUPS {
            groups.push(Vec::new());
            filled = 0;
        }
        groups.last_mut().expect("one group at least").push(i);
        filled += b;
    }
    groups.retain(|g| !g.is_empty());
    groups
}

/// The groups' batches (the same rows, each group's columns) as batches of every column.
fn side_by_side(groups: Vec<Vec<RecordBatch>>) -> Result<Vec<RecordBatch>, AdviseError> {
    let mut whole: Vec<RecordBatch> = Vec::new();
    for batches in groups {
        let Some(first) = batches.first() else {
            continue;
        };
        whole.push(arrow::compute::concat_batches(&first.schema(), &batches)?);
    }
    let fields: Vec<_> = whole
        .iter()
        .flat_map(|b| b.schema_ref().fields().iter().cloned())
        .collect();
    let columns: Vec<_> = whole.iter().flat_map(|b| b.columns().to_vec()).collect();
    if columns.is_empty() {
        return Ok(Vec::new());
    }
    let schema = Arc::new(arrow::datatypes::Schema::new(fields));
    Ok(vec![RecordBatch::try_new(schema, columns)?])
}

/// Blocks of [`BLOCK_ROWS`] spread evenly over `rows`, about `fraction` of them in all.
fn blocks(rows: usize, fraction: f64) -> RowSelection {
    RowSelection::from_consecutive_ranges(block_ranges(rows, fraction).into_iter(), rows)
}

/// The rows of each block of [`blocks`]; one block of every row at a fraction of 1.
fn block_ranges(rows: usize, fraction: f64) -> Vec<std::ops::Range<usize>> {
    if fraction >= 1.0 {
        return std::iter::once(0..rows).collect();
    }
    // At least a row of every object: each object's rows are evidence.
    let want = ((rows as f64 * fraction).round() as usize).max(1).min(rows);
    let count = want.div_ceil(BLOCK_ROWS).max(1);
    // No longer than the blocks' spacing: blocks never overlap.
    let len = want.div_ceil(count).min(rows / count);
    (0..count)
        .map(|k| {
            let start = k * rows / count;
            start..(start + len).min(rows)
        })
        .collect()
}

/// Where each block of [`blocks`] starts among the rows it selects; none at a fraction of 1
/// (the whole object is one block).
fn block_starts(rows: usize, fraction: f64) -> Vec<usize> {
    if fraction >= 1.0 {
        return Vec::new();
    }
    block_ranges(rows, fraction)
        .iter()
        .scan(0, |at, r| {
            let start = *at;
            *at += r.len();
            Some(start)
        })
        .collect()
}

/// The rows of `file` whose value of `column` hashes under `fraction` of the hash range.
async fn whole_groups(
    file: ObjectFile,
    meta: ArrowReaderMetadata,
    column: usize,
    fraction: f64,
) -> Result<RowSelection, AdviseError> {
    let mask = ProjectionMask::roots(meta.metadata().file_metadata().schema_descr(), [column]);
    let batches: Vec<RecordBatch> = ParquetRecordBatchStreamBuilder::new_with_metadata(file, meta)
        .with_projection(mask)
        .with_batch_size(8192)
        .build()?
        .try_collect()
        .await?;
    let filters = batches
        .iter()
        .map(|b| Ok(under(b.column(0), fraction)?))
        .collect::<Result<Vec<_>, AdviseError>>()?;
    Ok(RowSelection::from_filters(&filters))
}

/// For each row of `a`, whether its value hashes under `fraction` of the hash range: the same
/// answer for every row of one value, in every object.
pub fn under(
    a: &arrow::array::ArrayRef,
    fraction: f64,
) -> Result<arrow::array::BooleanArray, datafusion::error::DataFusionError> {
    if fraction >= 1.0 {
        return Ok(std::iter::repeat_n(Some(true), a.len()).collect());
    }
    let limit = fraction.max(0.0) * u64::MAX as f64;
    Ok(hashes(a)?
        .iter()
        .map(|&h| Some((h as f64) < limit))
        .collect())
}

/// The hash of a row without a value: the rows without one are one group, drawn or not as a
/// value is.
const NULL_HASH: u64 = 0x9e37_79b9_7f4a_7c15;

/// A 64-bit hash of each row's value of `a`, by its type, with fixed keys (the same in every
/// run).
pub fn hashes(a: &arrow::array::ArrayRef) -> Result<Vec<u64>, datafusion::error::DataFusionError> {
    let mut out = vec![0u64; a.len()];
    let fixed = std::hash::BuildHasherDefault::<std::hash::DefaultHasher>::default();
    datafusion::common::hash_utils::create_hashes_with_hasher([a], &fixed, &mut out)?;
    if let Some(nulls) = a.logical_nulls() {
        for i in (0..a.len()).filter(|&i| nulls.is_null(i)) {
            out[i] = NULL_HASH;
        }
    }
    Ok(out)
}

/// Each top-level column's stored bytes and pages, and the bytes of the page index.
fn costs(meta: &ParquetMetaData) -> (BTreeMap<String, ColumnCost>, u64) {
    let mut columns: BTreeMap<String, ColumnCost> = BTreeMap::new();
    let mut page_index = 0u64;
    for (g, rg) in meta.row_groups().iter().enumerate() {
        let mut counted = std::collections::BTreeSet::new();
        for (i, c) in rg.columns().iter().enumerate() {
            let name = &c.column_path().parts()[0];
            let cost = columns.entry(name.clone()).or_default();
            cost.bytes += c.compressed_size() as u64;
            if let Some(d) = c.dictionary_page_offset() {
                cost.dictionary += (c.data_page_offset() - d).max(0) as u64;
            }
            // A nested column's pages: its first leaf's.
            if counted.insert(name.clone()) {
                let pages = meta
                    .offset_index()
                    .and_then(|o| o.get(g)?.get(i))
                    .map_or(0, |o| o.page_locations().len());
                cost.pages += pages as u64;
            }
            let len = |l: Option<i32>| l.unwrap_or(0).max(0) as u64;
            page_index += len(c.column_index_length()) + len(c.offset_index_length());
        }
    }
    (columns, page_index)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_groups_are_drawn_by_value_alike_in_every_batch() {
        use arrow::array::{ArrayRef, Int64Array};
        let values = |r: std::ops::Range<i64>| -> ArrayRef {
            Arc::new(Int64Array::from_iter_values(r.map(|i| i % 1_000)))
        };
        let (a, b) = (values(0..4_000), values(4_000..6_000));
        let (da, db) = (under(&a, 0.1).unwrap(), under(&b, 0.1).unwrap());
        // One value, one answer: in the same batch and in another.
        for i in 0..4_000 {
            assert_eq!(da.value(i), da.value(i % 1_000));
        }
        for i in 0..2_000 {
            assert_eq!(db.value(i), da.value(i));
        }
        let drawn = (0..1_000).filter(|&i| da.value(i)).count();
        assert!((50..=150).contains(&drawn), "{drawn} of 1000 values at 0.1");
        assert_eq!(under(&a, 0.0).unwrap().true_count(), 0);
        assert_eq!(under(&a, 1.0).unwrap().true_count(), 4_000);
        // Rows without a value are one group: all drawn or none, not always drawn.
        let nulls: ArrayRef = Arc::new(Int64Array::from(vec![None::<i64>; 100]));
        let h = hashes(&nulls).unwrap();
        assert!(h.iter().all(|&x| x == NULL_HASH));
        let at = NULL_HASH as f64 / u64::MAX as f64;
        assert_eq!(under(&nulls, at - 0.01).unwrap().true_count(), 0);
        assert_eq!(under(&nulls, at + 0.01).unwrap().true_count(), 100);
    }

    #[test]
    fn block_starts_are_where_each_block_begins_among_the_selected_rows() {
        // A tenth of 1,000 rows: 4 blocks of 25, 250 rows apart.
        let ranges = block_ranges(1_000, 0.1);
        assert_eq!(ranges, [0..25, 250..275, 500..525, 750..775]);
        assert_eq!(block_starts(1_000, 0.1), [0, 25, 50, 75]);
        // One block, and no blocks at all at a fraction of 1.
        assert_eq!(block_starts(1_000, 0.01), [0]);
        assert!(block_starts(1_000, 1.0).is_empty());
        // Near a fraction of 1 the blocks still never overlap.
        for (rows, fraction) in [(1_000, 0.995), (33, 0.99), (10_000, 0.9)] {
            let ranges = block_ranges(rows, fraction);
            assert!(
                ranges.windows(2).all(|w| w[0].end <= w[1].start),
                "{ranges:?}"
            );
            assert!(blocks(rows, fraction).row_count() <= rows);
        }
    }

    #[test]
    fn blocks_spread_over_the_object_and_hold_the_fraction() {
        let s = blocks(1_000_000, 0.05);
        let selected = s.row_count();
        assert!((49_900..=50_100).contains(&selected), "{selected}");
        let ranges: Vec<_> = s.iter().filter(|r| !r.skip).collect();
        assert!(ranges.len() > 1000, "{} blocks", ranges.len());
        assert_eq!(blocks(100, 1.0).row_count(), 100);
        assert_eq!(blocks(100, 0.05).row_count(), 5);
        assert_eq!(
            blocks(10, 0.01).row_count(),
            1,
            "a tenth of a row still samples one"
        );
    }

    /// Metadata of a file of one wide column (index 2) among narrow ones.
    fn metadata() -> (ParquetMetaData, RecordBatch) {
        use arrow::array::{ArrayRef, Int64Array, StringArray};
        let narrow = |v: i64| Arc::new(Int64Array::from(vec![v; 1000])) as ArrayRef;
        let wide = Arc::new(StringArray::from_iter_values(
            (0..1000).map(|i| format!("{i:x}-{}", "w".repeat(i % 97))),
        )) as ArrayRef;
        let batch = RecordBatch::try_from_iter([
            ("a", narrow(1)),
            ("b", narrow(2)),
            ("c", wide),
            ("d", narrow(3)),
            ("e", narrow(4)),
        ])
        .unwrap();
        let mut file = Vec::new();
        let mut w = parquet::arrow::ArrowWriter::try_new(&mut file, batch.schema(), None).unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        let meta = parquet::file::metadata::ParquetMetaDataReader::new()
            .parse_and_finish(&bytes::Bytes::from(file))
            .unwrap();
        (meta, batch)
    }

    #[test]
    fn column_groups_keep_file_order_and_split_by_stored_bytes() {
        let (meta, _) = metadata();
        let (columns, _) = costs(&meta);
        let names = ["a", "b", "c", "d", "e"];
        let stored = |i: usize| columns[names[i]].bytes;
        let groups = column_groups(&[0, 1, 2, 3, 4], stored);
        assert!(groups.len() > 1 && groups.len() <= GROUPS, "{groups:?}");
        assert_eq!(
            groups.concat(),
            vec![0, 1, 2, 3, 4],
            "every column once, in order"
        );
        // The wide column outweighs the others: the narrow ones after it share a group.
        let after = groups.iter().position(|g| g.contains(&2)).unwrap();
        assert_eq!(groups[after + 1..].concat().len(), 2, "{groups:?}");
        assert_eq!(column_groups(&[3], stored), vec![vec![3]]);
    }

    #[test]
    fn groups_read_side_by_side_are_the_rows_of_every_column() {
        let (_, batch) = metadata();
        let left = vec![batch.project(&[0, 1]).unwrap().slice(0, 600)];
        let right = vec![
            batch.project(&[2, 3, 4]).unwrap().slice(0, 400),
            batch.project(&[2, 3, 4]).unwrap().slice(400, 200),
        ];
        let whole = side_by_side(vec![left, right]).unwrap();
        assert_eq!(whole.len(), 1);
        assert_eq!(whole[0], batch.slice(0, 600));
    }
}
