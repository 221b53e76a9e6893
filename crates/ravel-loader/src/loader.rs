//! The loader: push batches, finish → report. A thin composition of the load's parts: the
//! budget ([`Budget`]), the run encoder ([`RunEncoder`]), the uploader ([`Uploader`]), the
//! Bloom sidecar ([`BloomSidecar`]) and the committer ([`Committer`]).

use crate::ColumnProblem;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use object_store::ObjectStore;
use ravel_layout::{Layout, LayoutStore};
use ravel_store::{Store, TablePaths};
use tokio::sync::OwnedSemaphorePermit;
use tokio::sync::mpsc::Sender;
use tokio::task::JoinHandle;
use tracing::Instrument;

use crate::budget::{Budget, units};
use crate::commit::{Committed, Committer};
use crate::encode::{EncodeSettings, EncodedRun, ObjectKind, RunEncoder};
use crate::mode::{LoadMode, Rows};
use crate::object::{EncodedObject, Run};
use crate::sidecar::BloomSidecar;
use crate::upload::{UploadedRun, Uploader};
use crate::{ArrowStage, LoadError, LoadOptions};
use ravel_manifest::{DifferenceKind, MANIFEST_FORMAT, Manifest, ObjectEntry};

mod conform;
mod finish;
mod report;

use conform::conform;
pub(crate) use conform::{check_same, conform_column};
pub use report::{LoadReport, Prepared, StageTimes};

/// Loads batches into one table of one store.
pub struct Loader {
    store: Arc<dyn ObjectStore>,
    table: TablePaths,
    layout_store: LayoutStore,
    layout: Layout,
    opts: LoadOptions,
    schema: Option<SchemaRef>,
    recorded_schema: Option<arrow::datatypes::Schema>,
    /// `recorded_schema` is recorded (else the Delta metadata declares it, or there is none):
    /// the load records the table's schema when not.
    schema_recorded: bool,
    /// Set with the schema, by the first batch.
    encoder: Option<Arc<RunEncoder>>,
    budget: Budget,
    uploader: Uploader,
    committer: Committer,
    /// What this load consumes, recorded in the version that publishes it.
    consumed: ravel_log::Consumed,
    buffer: Vec<(RecordBatch, OwnedSemaphorePermit)>,
    buffered_bytes: u64,
    oldest: Option<Instant>,
    objects: Vec<ObjectEntry>,
    /// The stored objects' Bloom filters (parallel to `objects`), per column.
    sidecar: BloomSidecar,
    runs: u64,
    rows: u64,
    stages: StageTimes,
    /// Stored / estimated object size, learned across runs (see [`RunEncoder::encode`]).
    calibration: Option<f64>,
    /// Objects that were stored already when this load wrote them (a rerun of a load that was
    /// killed or failed finds its objects there).
    reused: usize,
    /// Set by a failed push: such a load can only fail, never publish (see
    /// [`Loader::check_live`]).
    poisoned: bool,
    /// What the loader makes (see [`LoadMode`]).
    mode: LoadMode,
    started: Instant,
    /// The lease that keeps `gc` off this load's objects, taken before the first upload and
    /// released after the commit (see `ravel_store::lease`).
    lease: Option<ravel_store::HeldLease>,
    /// Where the next pushed row stands in its input, for errors that name a row.
    position: InputPosition,
    /// The load's span (table; the version once committed): the parent of its runs' spans.
    span: tracing::Span,
}

/// The input the last batch came from and how many of its rows were pushed before: errors
/// name a row by its 1-based number in its input.
#[derive(Debug, Default)]
struct InputPosition {
    input: String,
    rows: u64,
}

/// Hands each encoded object of a run to the uploader.
pub(crate) type Emit<'a> = dyn FnMut(EncodedObject) -> Result<(), LoadError> + 'a;

/// Encodes a run's objects on a blocking thread, handing each to [`Emit`] (see
/// [`Loader::store_run`]).
pub(crate) type Produce = Box<dyn FnOnce(&mut Emit<'_>) -> Result<EncodedRun, LoadError> + Send>;

/// A buffer taken as a run: its batches and their charge to the budget.
struct Buffered {
    batches: Vec<RecordBatch>,
    permit: Option<OwnedSemaphorePermit>,
}

impl Loader {
    /// A loader of `table`'s objects from rows in any order ([`LoadMode::table`]); see
    /// [`Loader::with_mode`].
    pub async fn new(store: &Store, table: &str, opts: LoadOptions) -> Result<Loader, LoadError> {
        Loader::with_mode(store, table, opts, LoadMode::default()).await
    }

    /// A loader for `table` that makes what `mode` says; reads the table's layout (which the
    /// load never changes). Options a load cannot run with are refused
    /// ([`LoadOptions::validate`]).
    pub async fn with_mode(
        store: &Store,
        table: &str,
        opts: LoadOptions,
        mode: LoadMode,
    ) -> Result<Loader, LoadError> {
        let mut loader = Loader::open(store, table, opts).await?;
        loader.set_mode(mode)?;
        Ok(loader)
    }

    async fn open(store: &Store, table: &str, opts: LoadOptions) -> Result<Loader, LoadError> {
        opts.validate()?;
        let layout_store = LayoutStore::new(store, table)?;
        // Probed once per store (and recorded) before anything is stored: whether creates
        // need claims, so that two loads never both write one version of the log.
        store
            .capabilities()
            .await
            .map_err(ravel_layout::LayoutError::from)?;
        let layout = layout_store.load().await?;
        layout.validate()?;
        let table_schema = layout_store.table_schema().await?;
        let schema_recorded = table_schema.as_ref().is_some_and(|s| s.recorded);
        let recorded_schema = table_schema.map(|s| s.schema);
        let table = layout_store.table().clone();
        let object_store = store.object_store().clone();
        let budget = Budget::new(opts.load_budget);
        let span = tracing::info_span!(
            "load",
            table = %table.name(),
            version = tracing::field::Empty
        );
        Ok(Loader {
            uploader: Uploader::new(
                object_store.clone(),
                table.data_dir(),
                opts.pipeline_depth,
                budget.clone(),
            )
            .with_sidecar_dir(table.blooms_dir()),
            committer: Committer::new(object_store.clone(), table.clone()),
            consumed: ravel_log::Consumed::default(),
            store: object_store,
            table,
            layout_store,
            layout,
            opts,
            schema: None,
            recorded_schema,
            schema_recorded,
            encoder: None,
            budget,
            buffer: Vec::new(),
            buffered_bytes: 0,
            oldest: None,
            objects: Vec::new(),
            sidecar: BloomSidecar::default(),
            runs: 0,
            rows: 0,
            stages: StageTimes::default(),
            calibration: None,
            reused: 0,
            poisoned: false,
            mode: LoadMode::default(),
            started: Instant::now(),
            lease: None,
            position: InputPosition::default(),
            span,
        })
    }

    /// Objects stored so far.
    pub fn objects_stored(&self) -> usize {
        self.objects.len()
    }

    /// Bytes of the objects stored so far.
    pub fn stored_bytes(&self) -> u64 {
        self.objects.iter().map(|o| o.bytes).sum()
    }

    /// The table's schema, if it has one: recorded, or declared by the Delta metadata of a
    /// table another Delta writer created.
    pub fn table_schema(&self) -> Option<&arrow::datatypes::Schema> {
        self.recorded_schema.as_ref()
    }

    /// Checks, before anything is written, the objects other Delta writers added to the
    /// table's newest version: none may be partitioned or have a column the table lacks (then
    /// the load would fail at its commit). The commit checks again.
    pub async fn check_other_writers(&self) -> Result<(), LoadError> {
        let newest = self.committer.log().latest().await?;
        crate::foreign::check(
            &self.store,
            &self.table,
            &newest,
            self.recorded_schema.as_ref(),
        )
        .await
    }

    /// The layout this load applies.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Adds time a source spent reading, for the report.
    pub fn add_read_time(&mut self, d: Duration) {
        self.stages.read_s += d.as_secs_f64();
    }

    /// Checks a batch's schema against the table's, and the first batch's against the layout,
    /// before any object is written. The table's schema is the recorded one, or else the first
    /// batch's. Names, types and order must agree; metadata and nullability do not count (see
    /// [`ravel_manifest::schema_difference`]): [`conform`] then gives the batch the table's
    /// schema.
    fn accept_schema(&mut self, batch: &RecordBatch, input: &str) -> Result<SchemaRef, LoadError> {
        if let Some(s) = &self.schema {
            check_same(s, &batch.schema(), input)?;
            return Ok(s.clone());
        }
        let schema = match &self.recorded_schema {
            Some(recorded) => Arc::new(recorded.clone()),
            None => batch.schema(),
        };
        check_same(&schema, &batch.schema(), input)?;
        self.layout.validate_for(&schema)?;
        self.set_encoder(schema.clone())?;
        self.schema = Some(schema.clone());
        Ok(schema)
    }

    /// The run encoder for rows of `schema`, and an empty sidecar of its filters.
    fn set_encoder(&mut self, schema: SchemaRef) -> Result<(), LoadError> {
        let encoder = RunEncoder::new(
            EncodeSettings {
                layout: self.layout.clone(),
                zstd_level: self.opts.zstd_level,
                object_bytes: self.opts.object_bytes,
                objects: match self.mode.rows() {
                    Rows::Spill => ObjectKind::Spill,
                    _ => ObjectKind::Table,
                },
                cuts: self.mode.cuts().to_vec(),
            },
            schema,
        )?;
        self.sidecar = BloomSidecar::new(encoder.bloom_column_names());
        self.encoder = Some(Arc::new(encoder));
        Ok(())
    }

    /// The 0-based number, in its input, of `batch`'s first row; counts `batch`'s rows.
    fn first_row_of(&mut self, batch: &RecordBatch, input: &str) -> u64 {
        if self.position.input != input {
            self.position = InputPosition {
                input: input.to_string(),
                rows: 0,
            };
        }
        let first = self.position.rows;
        self.position.rows += batch.num_rows() as u64;
        first
    }

    /// Adds a batch. Waits while the load budget is full; flushes a run when the buffer
    /// reaches the flush trigger or its oldest row is older than the age trigger.
    pub async fn push(&mut self, batch: RecordBatch) -> Result<(), LoadError> {
        self.push_from(batch, "pushed batch").await
    }

    /// [`Loader::push`], naming the input in errors. After an error the load is poisoned:
    /// [`Loader::finish`] then fails and publishes nothing.
    pub async fn push_from(&mut self, batch: RecordBatch, input: &str) -> Result<(), LoadError> {
        let result = self.push_inner(batch, input).await;
        self.poison_on(result)
    }

    async fn push_inner(&mut self, batch: RecordBatch, input: &str) -> Result<(), LoadError> {
        self.check_live()?;
        let schema = self.accept_schema(&batch, input)?;
        let first_row = self.first_row_of(&batch, input);
        let batch = conform(&schema, batch, input, first_row)?;
        if batch.num_rows() == 0 {
            return Ok(());
        }
        let cost = LoadOptions::batch_cost(
            batch.get_array_memory_size() as u64,
            batch.num_rows() as u64,
        );
        if cost > self.opts.load_budget {
            return Err(LoadError::BatchOverBudget {
                batch_bytes: cost,
                budget: self.opts.load_budget,
            });
        }
        // A batch that would take the buffer past the trigger starts the next run, so a run
        // never eats into the budget its objects in flight need.
        if !self.buffer.is_empty() && self.buffered_bytes + cost > self.opts.flush_trigger() {
            self.flush().await?;
        }
        // When the batch does not fit, the buffer may be what fills the budget (a trigger set
        // above it): waiting would never end, so the buffer becomes a run first.
        let permit = match self.budget.try_acquire_units(units(cost)) {
            Some(p) => p,
            None => {
                if !self.buffer.is_empty() {
                    self.flush().await?;
                }
                self.budget.acquire_units(units(cost)).await
            }
        };
        self.rows += batch.num_rows() as u64;
        self.buffered_bytes += cost;
        self.oldest.get_or_insert_with(Instant::now);
        self.buffer.push((batch, permit));
        let aged = self
            .oldest
            .is_some_and(|t| t.elapsed() >= self.opts.max_flush_delay);
        if self.buffered_bytes >= self.opts.flush_trigger() || aged {
            self.flush().await?;
        }
        Ok(())
    }

    /// Flushes the buffer as a run if its oldest row is older than the age trigger
    /// (`max_flush_delay`). `push` checks the age too; a caller whose input may pause calls
    /// this from a timer so that rows do not wait for the next batch. Returns whether it
    /// flushed.
    pub async fn tick(&mut self) -> Result<bool, LoadError> {
        self.check_live()?;
        let aged = self
            .oldest
            .is_some_and(|t| t.elapsed() >= self.opts.max_flush_delay);
        if !aged {
            return Ok(false);
        }
        let result = self.flush().await;
        self.poison_on(result).map(|()| true)
    }

    /// Flushes what is buffered as a run now, so that the rows pushed next start another run.
    /// A caller that pushes sequences which must not be sorted together (a compaction's rows
    /// of different runs) ends each one here.
    pub async fn end_run(&mut self) -> Result<(), LoadError> {
        self.check_live()?;
        let result = self.flush().await;
        self.poison_on(result)
    }

    /// Changes what the loader makes (see [`LoadMode`]), before its first run is stored: a
    /// sorted load whose rows fit one run publishes that run as the table's objects, not as
    /// spill.
    pub fn set_mode(&mut self, mode: LoadMode) -> Result<(), LoadError> {
        if self.runs > 0 || !self.objects.is_empty() {
            return Err(LoadError::InternalState {
                task: "choosing what the loader makes",
                problem: "runs are stored already",
            });
        }
        match mode.scratch() {
            Some(operation) => {
                let dir = self.table.scratch_dir(operation);
                self.uploader.set_dirs(dir.clone(), dir);
            }
            None => self
                .uploader
                .set_dirs(self.table.data_dir(), self.table.blooms_dir()),
        }
        self.mode = mode;
        if let Some(schema) = self.schema.clone() {
            self.set_encoder(schema)?;
        }
        Ok(())
    }

    /// What the loader makes.
    pub fn mode(&self) -> &LoadMode {
        &self.mode
    }

    /// The options it loads with.
    pub fn options(&self) -> &LoadOptions {
        &self.opts
    }

    /// Rows pushed (or stored by columns) so far.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// Runs flushed so far; the next run gets this number.
    pub fn runs(&self) -> u64 {
        self.runs
    }

    /// How long until the buffer's oldest row reaches the age trigger (`None`: buffer empty).
    pub fn until_aged(&self) -> Option<Duration> {
        self.oldest
            .map(|t| self.opts.max_flush_delay.saturating_sub(t.elapsed()))
    }

    /// Bytes of the budget in use now.
    pub fn budget_in_use(&self) -> u64 {
        self.budget.in_use()
    }

    /// Sorts the buffer as one run, cuts it into objects and stores them: the run encoder on a
    /// blocking thread hands each object, as soon as it is encoded, to the uploader.
    async fn flush(&mut self) -> Result<(), LoadError> {
        if self.buffer.is_empty() {
            return Ok(());
        }
        self.take_lease().await?;
        let buffered = self.take_buffer();
        // Encoded objects are charged on their own, out of what the run leaves of the budget.
        let run_charge = buffered.permit.as_ref().map_or(0, |p| p.num_permits());
        let object_cap = self.budget.total_units() - run_charge;
        let run_no = self.runs;
        self.runs += 1;
        // One object handed over at a time: at most `pipeline_depth` uploads, one object
        // waiting and one being encoded.
        let (tx, rx) = tokio::sync::mpsc::channel::<EncodedObject>(1);
        let rows: usize = buffered.batches.iter().map(|b| b.num_rows()).sum();
        let span = self.run_span(run_no, rows as u64);
        let worker = span.in_scope(|| self.spawn_encoder(buffered, tx));
        let run = RunInFlight {
            run_no,
            object_cap,
            rx,
            worker,
            span,
        };
        self.upload_and_record(run, "sort/encode task: failed")
            .await
    }

    /// Uploads a run's objects as its encoder hands them over, then records the run; `task`
    /// names the encoder in an error.
    async fn upload_and_record(
        &mut self,
        run: RunInFlight,
        task: &'static str,
    ) -> Result<(), LoadError> {
        let uploaded = self
            .uploader
            .upload_run(run.rx, run.run_no, run.object_cap)
            .instrument(run.span.clone())
            .await;
        let encoded = run.worker.await.map_err(LoadError::internal(task))?;
        run.span
            .in_scope(|| self.record_run(run.run_no, uploaded, encoded))
    }

    /// The span of run `run_no` of `rows` rows, within the load's.
    fn run_span(&self, run_no: u64, rows: u64) -> tracing::Span {
        tracing::info_span!(parent: &self.span, "run", run = run_no, rows)
    }

    /// Marks the load failed: it can then only be abandoned.
    pub(crate) fn poison(&mut self) {
        self.poisoned = true;
    }

    /// Poisons the load when `result` is an error (see [`Loader::poison`]); returns `result`.
    fn poison_on<T>(&mut self, result: Result<T, LoadError>) -> Result<T, LoadError> {
        if result.is_err() {
            self.poison();
        }
        result
    }

    /// The check at every entry point: a poisoned load goes no further.
    fn check_live(&self) -> Result<(), LoadError> {
        if self.poisoned {
            Err(LoadError::Poisoned)
        } else {
            Ok(())
        }
    }

    /// Accepts `schema` for rows the caller reads and encodes itself, as the first batch's
    /// schema is accepted (see [`Loader::push`]), and returns the run encoder of the table's
    /// schema. Only before any row is pushed.
    pub(crate) fn accept_columns(
        &mut self,
        schema: &SchemaRef,
        input: &str,
    ) -> Result<Arc<RunEncoder>, LoadError> {
        if self.rows > 0 || self.runs > 0 {
            return Err(LoadError::InternalState {
                task: "a load by columns",
                problem: "rows were pushed already",
            });
        }
        let empty = RecordBatch::new_empty(schema.clone());
        self.accept_schema(&empty, input)?;
        Ok(self
            .encoder
            .clone()
            .expect("accepting the schema set the encoder"))
    }

    /// Stores a run of `rows` rows whose objects `produce` encodes (on a blocking thread),
    /// handing each to the uploader as the loader's own runs do. `charge` bytes of the budget
    /// are held until `produce` returns; objects in flight are charged out of the rest.
    pub(crate) async fn store_run(
        &mut self,
        rows: u64,
        charge: u64,
        produce: Produce,
    ) -> Result<(), LoadError> {
        let result = self.store_run_inner(rows, charge, produce).await;
        self.poison_on(result)
    }

    async fn store_run_inner(
        &mut self,
        rows: u64,
        charge: u64,
        produce: Produce,
    ) -> Result<(), LoadError> {
        self.take_lease().await?;
        let units = units(charge).min(self.budget.total_units() as u32);
        let permit = self.budget.acquire_units(units).await;
        let object_cap = self.budget.total_units() - units as usize;
        let run_no = self.runs;
        self.runs += 1;
        self.rows += rows;
        let (tx, rx) = tokio::sync::mpsc::channel::<EncodedObject>(1);
        let span = self.run_span(run_no, rows);
        let run_span = span.clone();
        let worker = tokio::task::spawn_blocking(move || {
            let _run = run_span.enter();
            let mut emit = |obj| {
                tx.blocking_send(obj).map_err(|_| LoadError::InternalState {
                    task: "upload pipeline",
                    problem: "closed after a failed upload",
                })
            };
            let encoded = produce(&mut emit);
            drop(permit);
            encoded
        });
        let run = RunInFlight {
            run_no,
            object_cap,
            rx,
            worker,
            span,
        };
        self.upload_and_record(run, "column encoder task: failed")
            .await
    }

    /// Empties the buffer into a run.
    fn take_buffer(&mut self) -> Buffered {
        let (batches, permits): (Vec<_>, Vec<_>) =
            std::mem::take(&mut self.buffer).into_iter().unzip();
        self.buffered_bytes = 0;
        self.oldest = None;
        Buffered {
            batches,
            permit: permits.into_iter().reduce(|mut a, b| {
                a.merge(b);
                a
            }),
        }
    }

    /// Sorts and encodes `buffered` on a blocking thread (rayon inside), sending each object
    /// to `tx`. The run's charge stays until its last object is encoded (its batches are the
    /// rows).
    fn spawn_encoder(
        &self,
        buffered: Buffered,
        tx: Sender<EncodedObject>,
    ) -> JoinHandle<Result<EncodedRun, LoadError>> {
        let encoder = self
            .encoder
            .clone()
            .expect("a buffered batch set the schema");
        let calibration = self.calibration;
        let presorted = self.mode.rows() == Rows::Presorted;
        // The caller's span (the run's) goes with the work to the blocking thread.
        let span = tracing::Span::current();
        tokio::task::spawn_blocking(move || {
            let _run = span.enter();
            let emit = |obj| {
                tx.blocking_send(obj).map_err(|_| LoadError::InternalState {
                    task: "upload pipeline",
                    problem: "closed after a failed upload",
                })
            };
            let encoded = if presorted {
                let run = Run::new(encoder.schema().clone(), buffered.batches);
                encoder.encode(&run, calibration, emit)
            } else {
                encoder.encode_batches(buffered.batches, calibration, emit)
            };
            // The rows are gone once the last object is encoded: return their budget.
            drop(buffered.permit);
            encoded
        })
    }

    /// Records a run's stored objects (in run order) and its times; its error if an upload
    /// or the encoder failed.
    fn record_run(
        &mut self,
        run_no: u64,
        uploaded: UploadedRun,
        encoded: Result<EncodedRun, LoadError>,
    ) -> Result<(), LoadError> {
        self.stages.upload_s += uploaded.upload_s();
        let run_bytes: u64 = uploaded.stored.iter().map(|s| s.entry.bytes).sum();
        for stored in uploaded.stored {
            self.reused += usize::from(stored.reused);
            self.objects.push(stored.entry);
            self.sidecar.push(stored.blooms);
        }
        let run = match (encoded, uploaded.failure) {
            // An upload's failure is the cause; the encoder then only saw the pipeline close.
            (_, Some(e)) | (Err(e), None) => return Err(e),
            (Ok(run), None) => run,
        };
        tracing::info!(
            run = run_no,
            objects = run.objects,
            sort_s = run.sort_s,
            gather_s = run.gather_s,
            encode_s = run.encode_s,
            bytes = run_bytes,
            load_objects = self.objects.len(),
            "run stored"
        );
        self.calibration = run.calibration;
        self.stages.add_run(&run);
        Ok(())
    }
}

/// A run whose encoder is at work: its objects arrive on `rx`, the encoder's result from
/// `worker`.
struct RunInFlight {
    run_no: u64,
    /// Budget units objects in flight may hold.
    object_cap: usize,
    rx: tokio::sync::mpsc::Receiver<EncodedObject>,
    worker: JoinHandle<Result<EncodedRun, LoadError>>,
    span: tracing::Span,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Writing;

    #[tokio::test]
    async fn a_loader_with_unusable_options_is_refused_as_bad_input_before_any_write() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::create(dir.path().to_str().unwrap()).unwrap();
        let opts = LoadOptions {
            object_bytes: 0,
            target_bytes: None,
            pipeline_depth: 2,
            load_budget: 100_000_000,
            max_flush_delay: Duration::from_secs(60),
            zstd_level: 3,
        };
        let err = match Loader::new(&store, "hits", opts).await {
            Ok(_) => panic!("a loader with object_bytes 0"),
            Err(e) => e,
        };
        let LoadError::Options(invalid) = &err else {
            panic!("expected the options' error, got {err:?}");
        };
        assert_eq!(
            (invalid.field, invalid.value.as_str()),
            ("object_bytes", "0")
        );
        assert!(err.is_invalid_input());
        assert!(err.to_string().contains("object_bytes = 0"), "{err}");
        assert!(!dir.path().join("hits").exists(), "nothing written");
    }

    #[test]
    fn a_schema_that_differs_is_named_by_its_input_and_column() {
        use arrow::datatypes::{DataType, Field, Schema};
        let schema = |fields: &[(&str, DataType)]| -> SchemaRef {
            let fields: Vec<Field> = fields
                .iter()
                .map(|(n, t)| Field::new(*n, t.clone(), true))
                .collect();
            Arc::new(Schema::new(fields))
        };
        let table = schema(&[("a", DataType::Int64), ("b", DataType::Utf8)]);
        let message = |batch: &SchemaRef| check_same(&table, batch, "in.parquet").unwrap_err();
        assert!(check_same(&table, &table, "in.parquet").is_ok());
        let cases = [
            (
                schema(&[("a", DataType::Int64)]),
                "input in.parquet: column \"b\" is missing",
            ),
            (
                schema(&[("a", DataType::Int32), ("b", DataType::Utf8)]),
                "input in.parquet: column \"a\" has type Int32, the table's is Int64",
            ),
            (
                schema(&[
                    ("a", DataType::Int64),
                    ("b", DataType::Utf8),
                    ("c", DataType::Int8),
                ]),
                "input in.parquet: column \"c\" is not in the table's schema",
            ),
            (
                schema(&[("b", DataType::Utf8), ("a", DataType::Int64)]),
                "input in.parquet: column \"b\" columns are in another order than the table's",
            ),
        ];
        for (batch, expected) in cases {
            let err = message(&batch);
            assert!(matches!(err, LoadError::Schema { .. }), "{err:?}");
            assert_eq!(err.to_string(), expected);
        }
    }

    #[tokio::test]
    async fn a_poisoned_load_goes_no_further_and_a_mode_names_what_it_writes() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::create(dir.path().to_str().unwrap()).unwrap();
        let opts = crate::options::tests::good();
        let mut loader = Loader::with_mode(&store, "hits", opts, LoadMode::spill())
            .await
            .unwrap();
        assert_eq!(loader.mode().writing(), Writing::Spill);
        loader.set_mode(LoadMode::presorted()).unwrap();
        assert_eq!(loader.mode().writing(), Writing::Merge);
        assert_eq!(loader.mode().rows(), Rows::Presorted);
        loader.poison();
        assert!(matches!(loader.tick().await, Err(LoadError::Poisoned)));
        assert!(matches!(loader.end_run().await, Err(LoadError::Poisoned)));
        assert!(matches!(loader.finish().await, Err(LoadError::Poisoned)));
    }
}
