//! Sources: Parquet files streamed in batches (never read whole).

use crate::InputProblem;
use std::path::{Path, PathBuf};
use std::time::Instant;

use std::io::Read;
use std::ops::ControlFlow;
use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch, RecordBatchOptions};
use arrow::datatypes::SchemaRef;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::file::metadata::ParquetMetaData;
use parquet::schema::types::SchemaDescriptor;
use ravel_log::{Consumed, InputFile};
use ravel_store::Store;

use crate::{InputStep, LoadError, LoadOptions, LoadReport, Loader};

/// Most rows per batch read from Parquet.
pub const READ_BATCH_ROWS: usize = 65_536;

/// Most decoded bytes per batch read from Parquet (also at most 1/16 of the load budget):
/// rows of 1 MB strings come 64 to a batch, not 65,536 (64 GB, and past Binary's 2 GB offsets).
pub const READ_BATCH_BYTES: u64 = 64 << 20;

/// Rows per batch for a file whose widest row group holds `bytes_per_row` uncompressed bytes a
/// row, so that a batch stays near `batch_bytes`.
fn batch_rows(bytes_per_row: u64, batch_bytes: u64) -> usize {
    (batch_bytes / bytes_per_row.max(1)).clamp(1, READ_BATCH_ROWS as u64) as usize
}

fn input_err(path: &Path, problem: InputProblem) -> LoadError {
    LoadError::Input {
        input: path.display().to_string(),
        problem,
    }
}

/// A batch read from an input, with the input it came from (named in the loader's errors).
struct InputBatch {
    batch: RecordBatch,
    input: String,
}

/// Where a reader thread sends its batches, or the error that ended it.
type BatchSender = tokio::sync::mpsc::Sender<Result<InputBatch, LoadError>>;

/// Streams the batches of Parquet files in file order. Each file is decoded by several
/// threads at once, each reading a share of the columns (balanced by compressed size) over the
/// same rows; their batches are joined column-wise, so the rows arrive in file order and the
/// decoding uses every core.
fn read_parquet(paths: Vec<PathBuf>, batch_bytes: u64, tx: BatchSender) {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    for path in paths {
        if let Err(e) = read_parquet_file(&path, threads, batch_bytes, &tx) {
            let _ = tx.blocking_send(Err(e));
            return;
        }
        if tx.is_closed() {
            return;
        }
    }
}

fn read_parquet_file(
    path: &Path,
    threads: usize,
    batch_bytes: u64,
    tx: &BatchSender,
) -> Result<(), LoadError> {
    let builder = open_parquet(path)?;
    let schema = builder.schema().clone();
    let rows_per_batch = file_batch_rows(builder.metadata(), batch_bytes);
    let shares = column_shares(
        builder.metadata(),
        builder.parquet_schema(),
        schema.fields().len(),
        threads,
    );
    let input = path.display().to_string();
    std::thread::scope(|scope| -> Result<(), LoadError> {
        let readers = shares
            .into_iter()
            .map(|fields| spawn_column_reader(scope, path, fields, rows_per_batch))
            .collect::<Result<Vec<_>, _>>()?;
        while let Some(batch) = join_next(&readers, &schema, path)? {
            let input = input.clone();
            if tx.blocking_send(Ok(InputBatch { batch, input })).is_err() {
                return Ok(());
            }
        }
        Ok(())
    })
}

fn open_parquet(path: &Path) -> Result<ParquetRecordBatchReaderBuilder<std::fs::File>, LoadError> {
    let file = std::fs::File::open(path).map_err(LoadError::input(path, InputStep::Open))?;
    ParquetRecordBatchReaderBuilder::try_new(file)
        .map_err(LoadError::input(path, InputStep::Footer))
}

/// Rows per batch of a file: its widest row group's bytes per row kept near `batch_bytes`.
fn file_batch_rows(meta: &ParquetMetaData, batch_bytes: u64) -> usize {
    let widest_row = meta
        .row_groups()
        .iter()
        .map(|rg| (rg.total_byte_size().max(0) as u64).div_ceil(rg.num_rows().max(1) as u64))
        .max()
        .unwrap_or(1);
    batch_rows(widest_row, batch_bytes)
}

/// A thread's share of a file's top-level fields and their compressed bytes.
#[derive(Debug, Clone, Default)]
struct Share {
    bytes: u64,
    fields: Vec<usize>,
}

/// The `fields` top-level fields of a file in at most `threads` shares of about equal
/// compressed size (greedy: heaviest field first, each to the lightest share), each share's
/// fields in schema order; no share is empty.
fn column_shares(
    meta: &ParquetMetaData,
    descr: &SchemaDescriptor,
    fields: usize,
    threads: usize,
) -> Vec<Vec<usize>> {
    let mut weight = vec![0u64; fields];
    for rg in meta.row_groups() {
        for (i, c) in rg.columns().iter().enumerate() {
            weight[descr.get_column_root_idx(i)] += c.compressed_size().max(0) as u64;
        }
    }
    let mut by_weight: Vec<usize> = (0..fields).collect();
    by_weight.sort_by_key(|&i| std::cmp::Reverse(weight[i]));
    let mut shares = vec![Share::default(); threads.clamp(1, fields.max(1))];
    for f in by_weight {
        let share = shares
            .iter_mut()
            .min_by_key(|s| s.bytes)
            .expect("one share");
        share.bytes += weight[f];
        share.fields.push(f);
    }
    shares
        .into_iter()
        .filter(|s| !s.fields.is_empty())
        .map(|mut s| {
            s.fields.sort_unstable();
            s.fields
        })
        .collect()
}

/// A thread decoding some of a file's fields: which, and where its batches arrive.
struct ColumnReader {
    fields: Vec<usize>,
    batches: std::sync::mpsc::Receiver<Result<RecordBatch, LoadError>>,
}

/// Starts a thread of `scope` that decodes `fields` of the file at `path`, a batch ahead.
fn spawn_column_reader<'scope>(
    scope: &'scope std::thread::Scope<'scope, '_>,
    path: &'scope Path,
    fields: Vec<usize>,
    rows_per_batch: usize,
) -> Result<ColumnReader, LoadError> {
    let (tx, batches) = std::sync::mpsc::sync_channel(1);
    let builder = open_parquet(path)?;
    let mask = ProjectionMask::roots(builder.parquet_schema(), fields.iter().copied());
    let reader = builder
        .with_projection(mask)
        .with_batch_size(rows_per_batch)
        .build()
        .map_err(LoadError::input(path, InputStep::Decode))?;
    scope.spawn(move || {
        for batch in reader {
            let item = batch.map_err(LoadError::input(path, InputStep::Read));
            let stop = item.is_err();
            if tx.send(item).is_err() || stop {
                return;
            }
        }
    });
    Ok(ColumnReader { fields, batches })
}

/// The next batch of the file, its columns joined from every reader; `None` at its end.
fn join_next(
    readers: &[ColumnReader],
    schema: &SchemaRef,
    path: &Path,
) -> Result<Option<RecordBatch>, LoadError> {
    let mut columns: Vec<Option<ArrayRef>> = vec![None; schema.fields().len()];
    let mut rows = None;
    for reader in readers {
        let Ok(part) = reader.batches.recv() else {
            break;
        };
        let part = part?;
        rows = Some(part.num_rows());
        for (f, col) in reader.fields.iter().zip(part.columns()) {
            columns[*f] = Some(col.clone());
        }
    }
    let Some(rows) = rows else { return Ok(None) };
    let columns: Option<Vec<_>> = columns.into_iter().collect();
    let columns = columns.ok_or_else(|| input_err(path, InputProblem::ReadersDisagree))?;
    let options = RecordBatchOptions::new().with_row_count(Some(rows));
    Ok(Some(RecordBatch::try_new_with_options(
        schema.clone(),
        columns,
        &options,
    )?))
}

/// How many bad TSV lines a load may leave out, and where they go.
#[derive(Debug, Clone, Default)]
pub struct BadRows {
    /// Bad lines left out before the load fails (0: the first bad line fails it).
    pub max: u64,
    /// File that receives the left-out lines as they were (a TSV to fix and load again); the
    /// reasons go to the same path with `.reasons` appended. Both are created on the first
    /// reject, and only if absent unless `overwrite` is set.
    pub rejects: Option<PathBuf>,
    /// Replace existing rejects files instead of failing on them.
    pub overwrite: bool,
}

/// How TSV inputs are read: a TSV has no header, so its columns come from the table's recorded
/// schema or from here; and how many bad lines a load may leave out.
#[derive(Debug, Clone, Default)]
pub struct TsvOptions {
    /// The columns of TSV inputs, in order, for a table that has no recorded schema (a
    /// recorded schema takes precedence). A dataset's own crate supplies it, e.g. the hits
    /// schema for hits.tsv.
    pub schema: Option<SchemaRef>,
    /// Bad lines to leave out, and where they go.
    pub bad_rows: BadRows,
}

/// The columns TSV inputs are read with: the table's recorded schema, else the one given;
/// with neither, [`LoadError::NoTsvSchema`] naming the first input.
fn tsv_columns(
    loader: &Loader,
    given: Option<SchemaRef>,
    paths: &[PathBuf],
) -> Result<SchemaRef, LoadError> {
    if let Some(recorded) = loader.table_schema() {
        return Ok(Arc::new(recorded.clone()));
    }
    given.ok_or_else(|| LoadError::NoTsvSchema {
        input: paths
            .first()
            .map_or_else(String::new, |p| p.display().to_string()),
    })
}

/// Streams the batches of hits-style TSV files, parsed in parallel blocks, in file order.
fn read_tsv(paths: Vec<PathBuf>, schema: SchemaRef, bad: BadRows, tx: BatchSender) {
    read_tsv_chunked(paths, schema, bad, tx, TSV_CHUNK_BYTES)
}

/// The rejects file and its reasons file.
struct RejectFiles {
    lines: std::fs::File,
    reasons: std::fs::File,
}

/// The rejects file and its reasons, opened on the first reject.
struct Rejects {
    bad: BadRows,
    files: Option<RejectFiles>,
    count: u64,
}

impl Rejects {
    /// Records a chunk's rejects; the error when they exceed the allowance.
    fn take(&mut self, input: &str, rejects: Vec<crate::tsv::Reject>) -> Result<(), LoadError> {
        use std::io::Write;
        for r in rejects {
            self.count += 1;
            if self.count > self.bad.max {
                return Err(LoadError::Input {
                    input: input.into(),
                    problem: InputProblem::TooManyBadLines {
                        max: self.bad.max,
                        last: r.problem,
                    },
                });
            }
            let Some(path) = &self.bad.rejects else {
                continue;
            };
            if self.files.is_none() {
                let mut why = path.clone().into_os_string();
                why.push(".reasons");
                let overwrite = self.bad.overwrite;
                let open = |p: &Path| {
                    let mut options = std::fs::OpenOptions::new();
                    options.write(true);
                    if overwrite {
                        options.create(true).truncate(true);
                    } else {
                        options.create_new(true);
                    }
                    options
                        .open(p)
                        .map_err(LoadError::input(p, InputStep::CreateRejects))
                };
                self.files = Some(RejectFiles {
                    lines: open(path)?,
                    reasons: open(Path::new(&why))?,
                });
            }
            let RejectFiles { lines, reasons } = self.files.as_mut().expect("opened above");
            let written = lines
                .write_all(&r.text)
                .and_then(|()| lines.write_all(b"\n"))
                .and_then(|()| writeln!(reasons, "{input}: {}", r.problem));
            written.map_err(LoadError::input(path, InputStep::WriteRejects))?;
        }
        Ok(())
    }
}

/// [`read_tsv`], reading `chunk_bytes` at a time.
fn read_tsv_chunked(
    paths: Vec<PathBuf>,
    schema: SchemaRef,
    bad: BadRows,
    tx: BatchSender,
    chunk_bytes: usize,
) {
    let mut rejects = Rejects {
        bad,
        files: None,
        count: 0,
    };
    for path in paths {
        match read_tsv_file(&path, &schema, &mut rejects, &tx, chunk_bytes) {
            Ok(ControlFlow::Continue(())) => {}
            Ok(ControlFlow::Break(())) => return,
            Err(e) => {
                let _ = tx.blocking_send(Err(e));
                return;
            }
        }
    }
}

/// Parses one TSV file chunk by chunk and sends its batches; `Break` when the receiver is gone.
fn read_tsv_file(
    path: &Path,
    schema: &SchemaRef,
    rejects: &mut Rejects,
    tx: &BatchSender,
    chunk_bytes: usize,
) -> Result<ControlFlow<()>, LoadError> {
    let input = path.display().to_string();
    let skip = rejects.bad.max > 0;
    let mut file = std::fs::File::open(path).map_err(LoadError::input(path, InputStep::Open))?;
    let mut chunks = LineChunks {
        carry: Vec::new(),
        chunk_bytes,
        eof: false,
    };
    let mut line = 1u64;
    while let Some(data) = chunks
        .next(&mut file)
        .map_err(LoadError::input(path, InputStep::Read))?
    {
        if data.is_empty() {
            continue;
        }
        let parsed =
            crate::tsv::parse_chunk_with(schema, &input, &data, line, TSV_BLOCK_BYTES, skip)?;
        rejects.take(&input, parsed.rejects)?;
        for batch in parsed.batches {
            let input = input.clone();
            if tx.blocking_send(Ok(InputBatch { batch, input })).is_err() {
                return Ok(ControlFlow::Break(()));
            }
        }
        line += data.iter().filter(|&&b| b == b'\n').count() as u64;
    }
    Ok(ControlFlow::Continue(()))
}

/// A file read in chunks of whole lines: a line longer than a chunk is not cut, the chunk
/// grows until the line ends.
struct LineChunks {
    /// What followed the last whole line of the previous chunk.
    carry: Vec<u8>,
    chunk_bytes: usize,
    eof: bool,
}

impl LineChunks {
    /// The next chunk of whole lines (empty when no line ended in what was read; the rest of
    /// the file at its end); `None` once the file is done.
    fn next(&mut self, file: &mut impl Read) -> std::io::Result<Option<Vec<u8>>> {
        if self.eof {
            return Ok(None);
        }
        let mut chunk = std::mem::take(&mut self.carry);
        let have = chunk.len();
        chunk.resize(have + self.chunk_bytes, 0);
        let mut filled = have;
        while filled < chunk.len() {
            match file.read(&mut chunk[filled..])? {
                0 => {
                    self.eof = true;
                    break;
                }
                k => filled += k,
            }
        }
        chunk.truncate(filled);
        let cut = if self.eof {
            chunk.len()
        } else {
            chunk.iter().rposition(|&b| b == b'\n').map_or(0, |p| p + 1)
        };
        self.carry = chunk.split_off(cut);
        Ok(Some(chunk))
    }
}

/// Bytes of a TSV file read at once; lines are parsed in blocks of [`TSV_BLOCK_BYTES`].
const TSV_CHUNK_BYTES: usize = 64 << 20;
const TSV_BLOCK_BYTES: usize = 4 << 20;

/// Expands inputs: a path with `*`, `?` or `[` is a glob (its matches in name order, at least
/// one); other paths are kept as given.
pub fn expand_inputs(inputs: &[PathBuf]) -> Result<Vec<PathBuf>, LoadError> {
    let mut out = Vec::new();
    for p in inputs {
        let s = p.to_string_lossy();
        if !s.contains(['*', '?', '[']) {
            out.push(p.clone());
            continue;
        }
        let failed =
            |step, source: Box<dyn std::error::Error + Send + Sync>| LoadError::InputFailed {
                input: s.to_string(),
                step,
                source,
            };
        let mut matched: Vec<PathBuf> = glob::glob(&s)
            .map_err(|e| failed(InputStep::Glob, e.into()))?
            .collect::<Result<_, _>>()
            .map_err(|e| failed(InputStep::List, e.into()))?;
        if matched.is_empty() {
            return Err(LoadError::Input {
                input: s.to_string(),
                problem: InputProblem::NoMatch,
            });
        }
        matched.sort();
        out.extend(matched);
    }
    Ok(out)
}

/// Input file formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum InputFormat {
    Parquet,
    Tsv,
}

impl InputFormat {
    /// The format a path's extension names (`.parquet`, `.tsv`), if any.
    pub fn from_path(path: &Path) -> Option<InputFormat> {
        match path.extension()?.to_str()? {
            "parquet" => Some(InputFormat::Parquet),
            "tsv" => Some(InputFormat::Tsv),
            _ => None,
        }
    }
}

/// Files a load reads, and how.
#[derive(Debug, Clone)]
pub struct Files<'a> {
    /// The inputs, loaded in order; a path with `*`, `?` or `[` is a glob ([`expand_inputs`]).
    pub paths: &'a [PathBuf],
    pub format: InputFormat,
    /// How TSV inputs are read.
    pub tsv: TsvOptions,
    /// Load the files even when a version consumed them already: their rows then count twice.
    pub reload: bool,
    /// What the files stand for in the log, one per path after glob expansion, when that is
    /// not the files themselves: a local copy of a landing object is recorded as the object
    /// (its URL, size and ETag), so that the object, not the copy, is loaded once. `None`:
    /// each file's own identity ([`input_files`]).
    pub identities: Option<Vec<InputFile>>,
}

impl<'a> Files<'a> {
    /// `paths` in `format`, TSV read with the table's recorded schema, each file loaded once.
    pub fn new(paths: &'a [PathBuf], format: InputFormat) -> Files<'a> {
        Files {
            paths,
            format,
            tsv: TsvOptions::default(),
            reload: false,
            identities: None,
        }
    }

    /// Refuses inputs that break the rules checked before any is read (see
    /// [`crate::InputsRefused`]): a file named twice, or a rejects file that is an input, a
    /// directory, or an existing file not to be replaced. [`crate::load_files_with`] and the
    /// sorted load call it first, as the CLI does.
    pub fn check(&self) -> Result<(), LoadError> {
        let inputs = crate::distinct_inputs(&expand_inputs(self.paths)?)?;
        crate::check_bad_rows(&self.tsv.bad_rows, self.format, &inputs)
    }

    /// What a load of these files consumes: each file's identity ([`input_files`]), or the
    /// identities given for them.
    pub fn consumed(&self) -> Result<Consumed, LoadError> {
        let inputs = match &self.identities {
            Some(given) => given.clone(),
            None => input_files(&expand_inputs(self.paths)?)?,
        };
        Ok(Consumed {
            inputs,
            reload: self.reload,
        })
    }
}

/// The identities of local input files, as the log records what a load consumed: each file's
/// canonical path, size and modification time (nanoseconds since the epoch, and milliseconds
/// for the inputs window).
pub fn input_files(paths: &[PathBuf]) -> Result<Vec<InputFile>, LoadError> {
    paths
        .iter()
        .map(|p| {
            let failed = |source: std::io::Error| LoadError::InputFailed {
                input: p.display().to_string(),
                step: InputStep::Open,
                source: source.into(),
            };
            let canonical = std::fs::canonicalize(p).map_err(failed)?;
            let meta = std::fs::metadata(&canonical).map_err(failed)?;
            let modified = meta
                .modified()
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok());
            Ok(InputFile {
                name: canonical.display().to_string(),
                size: meta.len(),
                version: modified.map_or(0, |d| d.as_nanos()).to_string(),
                modified_ms: modified.and_then(|d| i64::try_from(d.as_millis()).ok()),
            })
        })
        .collect()
}

/// Loads files into a table: reads them in order on a reader thread, pushes every batch,
/// finishes. TSV columns follow the table's recorded schema; a table without one cannot take
/// TSV here ([`LoadError::NoTsvSchema`]): [`load_files_with`] can name the columns. `progress`
/// sees the rows pushed so far.
pub async fn load_files(
    store: &Store,
    table: &str,
    opts: LoadOptions,
    paths: &[PathBuf],
    format: InputFormat,
    progress: impl FnMut(u64, &Loader),
) -> Result<LoadReport, LoadError> {
    load_files_with(store, table, opts, &Files::new(paths, format), progress).await
}

/// Loads `files` as [`load_files`] does, reading TSV inputs as `files.tsv` says: with its
/// columns when the table has no recorded schema, leaving out up to `tsv.bad_rows.max` bad
/// lines. Each file is loaded once: the version that publishes the rows records the files
/// ([`Files::consumed`]), and a load of files a version consumed already reads nothing and
/// publishes nothing (unless `files.reload`); its report names that version.
pub async fn load_files_with(
    store: &Store,
    table: &str,
    opts: LoadOptions,
    files: &Files<'_>,
    progress: impl FnMut(u64, &Loader),
) -> Result<LoadReport, LoadError> {
    files.check()?;
    let mut loader = Loader::new(store, table, opts).await?;
    if let Some(published) = loader.consume(files.consumed()?).await? {
        return Ok(loader.published_already(published));
    }
    loader.check_other_writers().await?;
    let result = feed_files(
        &mut loader,
        files.paths,
        files.format,
        files.tsv.clone(),
        progress,
    );
    match result.await {
        Ok(()) => loader.finish().await,
        Err(e) => Err(loader.abandon(e).await),
    }
}

/// Reads the files `paths` into `loader` (as [`load_files_with`] does), without finishing it:
/// the caller finishes, prepares or abandons it. `progress` is called with the rows read after
/// each batch.
pub async fn feed_files(
    loader: &mut Loader,
    paths: &[PathBuf],
    format: InputFormat,
    tsv: TsvOptions,
    mut progress: impl FnMut(u64, &Loader),
) -> Result<(), LoadError> {
    let opts_budget = loader.options().load_budget;
    let (tx, mut rx) = tokio::sync::mpsc::channel(2);
    let paths = expand_inputs(paths)?;
    // Each file as the read begins: one that changes before the read ends is not published.
    let before = input_files(&paths)?;
    let read = paths.clone();
    let reader = match format {
        InputFormat::Parquet => {
            let batch_bytes = READ_BATCH_BYTES.min(opts_budget / 16).max(1);
            tokio::task::spawn_blocking(move || read_parquet(paths, batch_bytes, tx))
        }
        InputFormat::Tsv => {
            let schema = tsv_columns(loader, tsv.schema, &paths)?;
            let bad = tsv.bad_rows;
            tokio::task::spawn_blocking(move || read_tsv(paths, schema, bad, tx))
        }
    };
    let mut rows = 0u64;
    let result: Result<(), LoadError> = async {
        loop {
            let t = Instant::now();
            // While input pauses, the age trigger still flushes what is buffered.
            let next = match loader.until_aged() {
                Some(wait) => match tokio::time::timeout(wait, rx.recv()).await {
                    Ok(next) => next,
                    Err(_) => {
                        loader.tick().await?;
                        continue;
                    }
                },
                None => rx.recv().await,
            };
            let Some(item) = next else { break };
            loader.add_read_time(t.elapsed());
            let InputBatch { batch, input } = item?;
            rows += batch.num_rows() as u64;
            loader.push_from(batch, &input).await?;
            progress(rows, loader);
        }
        Ok(())
    }
    .await;
    drop(rx);
    // A reader that died (panicked) ended its stream early: that is a failure, not the end.
    result.and(
        reader
            .await
            .map_err(LoadError::internal("reader: the reader thread failed")),
    )?;
    unchanged_since(&read, &before)
}

/// Refuses the read of `paths` when one of them is no longer the file `before` names: its
/// size or modification time changed while it was read. A pipe or another stream is read as
/// it comes, whatever its times say.
fn unchanged_since(paths: &[PathBuf], before: &[InputFile]) -> Result<(), LoadError> {
    let after = input_files(paths)?;
    let regular = |p: &PathBuf| std::fs::metadata(p).is_ok_and(|m| m.is_file());
    let mut changed = paths.iter().zip(before.iter().zip(&after));
    match changed.find(|(p, (b, a))| b != a && regular(p)) {
        None => Ok(()),
        Some((path, (b, a))) => Err(LoadError::Input {
            input: path.display().to_string(),
            problem: InputProblem::ChangedWhileRead {
                before_bytes: b.size,
                after_bytes: a.size,
            },
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::AsArray;
    use arrow::datatypes::{DataType, Field, Schema};

    #[test]
    fn parquet_batches_are_sized_by_bytes() {
        assert_eq!(batch_rows(1 << 20, READ_BATCH_BYTES), 64);
        assert_eq!(batch_rows(700, READ_BATCH_BYTES), READ_BATCH_ROWS);
        assert_eq!(batch_rows(u64::MAX, READ_BATCH_BYTES), 1);
        assert_eq!(batch_rows(0, READ_BATCH_BYTES), READ_BATCH_ROWS);
    }

    #[tokio::test]
    async fn tsv_without_recorded_or_given_columns_is_refused_naming_the_input() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::create(dir.path().join("store").to_str().unwrap()).unwrap();
        let path = dir.path().join("plain.tsv");
        std::fs::write(&path, "1\tx\n").unwrap();
        let opts = LoadOptions::from_tier(&ravel_tier::Tier::detect().unwrap());
        let load = |tsv: TsvOptions| {
            let (store, opts, path) = (store.clone(), opts.clone(), path.clone());
            async move {
                let paths = [path];
                let files = Files {
                    tsv,
                    ..Files::new(&paths, InputFormat::Tsv)
                };
                load_files_with(&store, "t", opts, &files, |_, _| {}).await
            }
        };
        let err = load(TsvOptions::default()).await.unwrap_err();
        assert!(
            matches!(&err, LoadError::NoTsvSchema { input } if input.ends_with("plain.tsv")),
            "{err}"
        );
        assert!(err.is_invalid_input());
        assert!(!dir.path().join("store/t/manifests").exists());
        // Given the columns, the same file loads.
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("s", DataType::Utf8, false),
        ]));
        let tsv = TsvOptions {
            schema: Some(schema),
            ..TsvOptions::default()
        };
        assert_eq!(load(tsv).await.unwrap().rows, 1);
    }

    #[test]
    fn tsv_lines_longer_than_a_chunk_are_read_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("long.tsv");
        let long = "x".repeat(10_000);
        std::fs::write(&path, format!("1\tshort\n2\t{long}\n3\tend\n")).unwrap();
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("s", DataType::Utf8, false),
        ]));
        let (tx, mut rx) = tokio::sync::mpsc::channel(1024);
        read_tsv_chunked(vec![path], schema, BadRows::default(), tx, 1_000);
        let mut values = Vec::new();
        while let Ok(item) = rx.try_recv() {
            let InputBatch { batch: b, input } = item.unwrap();
            assert!(input.ends_with("long.tsv"), "{input}");
            let s = b.column(1).as_string::<i32>();
            values.extend((0..b.num_rows()).map(|i| s.value(i).len()));
        }
        assert_eq!(values, vec![5, 10_000, 3]);
    }
}
