//! The loader: push batches, finish → report.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};
use ravel_layout::{ClusteringOrder, Layout, LayoutStore};
use ravel_store::{Store, TablePaths};
use serde::Serialize;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;

use crate::gather::gather_consuming;
use crate::object::{Encoded, Run, cut_run, writer_properties};
use crate::{ArrowStage, LoadError, LoadOptions};
use ravel_manifest::{BloomIndex, MANIFEST_FORMAT, Manifest, ObjectEntry, Section};

/// The budget counts in KiB so that tokio's u32 permit counts cover budgets up to 4 TiB.
const UNIT: u64 = 1024;

fn units(bytes: u64) -> u32 {
    bytes.div_ceil(UNIT).min(u32::MAX as u64) as u32
}

/// Seconds spent per stage.
#[derive(Debug, Clone, Default, Serialize)]
pub struct StageTimes {
    /// Waiting for input (measured by the caller's source; see [`Loader::add_read_time`]).
    pub read_s: f64,
    /// Computing the clustering order of the buffered rows (normalized keys, parallel sort).
    pub sort_s: f64,
    /// Taking every column of the buffered rows in that order (the sorted run's copy).
    pub gather_s: f64,
    /// Includes `blooms_s`.
    pub encode_s: f64,
    /// Copying each object's Bloom filters out of the encoded object into the sidecar (part
    /// of `encode_s`).
    pub blooms_s: f64,
    pub upload_s: f64,
    pub commit_s: f64,
}

/// What a load did.
#[derive(Debug, Clone, Serialize)]
pub struct LoadReport {
    pub table: String,
    pub load_id: String,
    /// The load found an identical load published already (a rerun after the first run's
    /// manifest landed) and published nothing; `load_id` names the published one.
    pub already_published: bool,
    pub layout: Layout,
    pub options: LoadOptions,
    pub flush_trigger_bytes: u64,
    pub rows: u64,
    pub runs: u64,
    pub stored_bytes: u64,
    pub objects: Vec<ObjectEntry>,
    pub stages: StageTimes,
    pub peak_budget_bytes: u64,
    pub wall_s: f64,
}

/// Loads batches into one table of one store.
pub struct Loader {
    store: Arc<dyn ObjectStore>,
    table: TablePaths,
    layout_store: LayoutStore,
    layout: Layout,
    opts: LoadOptions,
    schema: Option<SchemaRef>,
    recorded_schema: Option<arrow::datatypes::Schema>,
    order: Option<ClusteringOrder>,
    budget: Arc<Semaphore>,
    buffer: Vec<(RecordBatch, OwnedSemaphorePermit)>,
    buffered_bytes: u64,
    oldest: Option<Instant>,
    objects: Vec<ObjectEntry>,
    /// Per object (parallel to `objects`), its filter of each Bloom column.
    blooms: Vec<Vec<Vec<u8>>>,
    /// The Bloom-scope columns that get a per-object filter in the sidecar (string and
    /// binary columns only), fixed by the first run.
    bloom_columns: Vec<String>,
    runs: u64,
    rows: u64,
    stages: StageTimes,
    peak_budget_bytes: u64,
    /// Stored / estimated object size, learned across runs (see `cut_run`).
    calibration: Option<f64>,
    /// Objects that were stored already when this load wrote them (a rerun of a load that was
    /// killed or failed finds its objects there).
    reused: usize,
    /// Set by a failed push: such a load can only fail, never publish.
    poisoned: bool,
    started: Instant,
    /// The lease that keeps `gc` off this load's objects, taken before the first upload and
    /// released after the commit (see `ravel_store::lease`).
    lease: Option<ravel_store::HeldLease>,
    /// Where the next pushed row stands in its input, for errors that name a row.
    position: InputPosition,
}

/// The input the last batch came from and how many of its rows were pushed before: errors
/// name a row by its 1-based number in its input.
#[derive(Debug, Default)]
struct InputPosition {
    input: String,
    rows: u64,
}

impl Loader {
    /// A loader for `table`; reads the table's layout (which the load never changes).
    pub async fn new(store: &Store, table: &str, opts: LoadOptions) -> Result<Loader, LoadError> {
        opts.validate()?;
        let layout_store = LayoutStore::new(store, table)?;
        // Probed once per store (and recorded): without conditional create a load still works,
        // since its keys are unique to it; the store's probe warns.
        let capabilities = store
            .capabilities()
            .await
            .map_err(ravel_layout::LayoutError::from)?;
        if !capabilities.conditional_create {
            tracing::warn!(
                store = store.location(),
                "loading without conditional create: objects are content-addressed and the manifest's name is unique to this load"
            );
        }
        let layout = layout_store.load().await?;
        layout.validate()?;
        let recorded_schema = layout_store.schema().await?;
        let budget_units = units(opts.load_budget).max(1) as usize;
        Ok(Loader {
            store: store.object_store().clone(),
            table: layout_store.table().clone(),
            layout_store,
            layout,
            opts,
            schema: None,
            recorded_schema,
            order: None,
            budget: Arc::new(Semaphore::new(budget_units)),
            buffer: Vec::new(),
            buffered_bytes: 0,
            oldest: None,
            objects: Vec::new(),
            blooms: Vec::new(),
            bloom_columns: Vec::new(),
            runs: 0,
            rows: 0,
            stages: StageTimes::default(),
            peak_budget_bytes: 0,
            calibration: None,
            reused: 0,
            poisoned: false,
            started: Instant::now(),
            lease: None,
            position: InputPosition::default(),
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

    /// The table's recorded schema, if it has one.
    pub fn table_schema(&self) -> Option<&arrow::datatypes::Schema> {
        self.recorded_schema.as_ref()
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
        self.order = ClusteringOrder::try_new(&self.layout, &schema)?;
        self.schema = Some(schema.clone());
        Ok(schema)
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
        if result.is_err() {
            self.poisoned = true;
        }
        result
    }

    async fn push_inner(&mut self, batch: RecordBatch, input: &str) -> Result<(), LoadError> {
        if self.poisoned {
            return Err(LoadError::Poisoned);
        }
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
        let permit = match self.budget.clone().try_acquire_many_owned(units(cost)) {
            Ok(p) => p,
            Err(_) => {
                if !self.buffer.is_empty() {
                    self.flush().await?;
                }
                self.budget
                    .clone()
                    .acquire_many_owned(units(cost))
                    .await
                    .expect("the budget is never closed")
            }
        };
        self.peak_budget_bytes = self.peak_budget_bytes.max(self.budget_in_use());
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
        if self.poisoned {
            return Err(LoadError::Poisoned);
        }
        let aged = self
            .oldest
            .is_some_and(|t| t.elapsed() >= self.opts.max_flush_delay);
        if !aged {
            return Ok(false);
        }
        let result = self.flush().await;
        if result.is_err() {
            self.poisoned = true;
        }
        result.map(|()| true)
    }

    /// How long until the buffer's oldest row reaches the age trigger (`None`: buffer empty).
    pub fn until_aged(&self) -> Option<Duration> {
        self.oldest
            .map(|t| self.opts.max_flush_delay.saturating_sub(t.elapsed()))
    }

    /// Bytes of the budget in use now.
    pub fn budget_in_use(&self) -> u64 {
        let total = units(self.opts.load_budget).max(1) as u64;
        (total - self.budget.available_permits() as u64) * UNIT
    }

    /// Sorts the buffer as one run, cuts it into objects and stores them.
    async fn flush(&mut self) -> Result<(), LoadError> {
        if self.buffer.is_empty() {
            return Ok(());
        }
        self.take_lease().await?;
        let schema = self
            .schema
            .clone()
            .expect("a buffered batch set the schema");
        let (batches, permits): (Vec<_>, Vec<_>) =
            std::mem::take(&mut self.buffer).into_iter().unzip();
        // The run's charge stays until its last object is encoded (its batches are the rows);
        // encoded objects are charged on their own, out of what the run leaves of the budget.
        let run_permit = permits.into_iter().reduce(|mut a, b| {
            a.merge(b);
            a
        });
        let total_units = units(self.opts.load_budget).max(1) as usize;
        let object_cap = total_units - run_permit.as_ref().map_or(0, |p| p.num_permits());
        self.buffered_bytes = 0;
        self.oldest = None;
        let run_no = self.runs;
        self.runs += 1;

        let order = self.order.clone();
        let layout = self.layout.clone();
        let zstd_level = self.opts.zstd_level;
        let object_bytes = self.opts.object_bytes;
        let depth = self.opts.pipeline_depth.max(1);
        // One object handed over at a time: at most `depth` uploads, one object waiting and one
        // being encoded.
        let (tx, mut rx) = tokio::sync::mpsc::channel::<Encoded>(1);
        // Sort and encode on a blocking thread (rayon inside); objects stream to the uploads.
        let calibration = self.calibration;
        // The manifest carries each object's range of the layout's columns.
        let range_columns: Vec<usize> = self
            .layout
            .sort_columns()
            .iter()
            .filter_map(|(_, name)| schema.index_of(name).ok())
            .collect();
        // And, in a sidecar, a Bloom filter of each Bloom-scope string column.
        let bloom_columns: Vec<usize> = self
            .layout
            .bloom
            .scope
            .columns(&schema)
            .into_iter()
            .filter_map(|name| schema.index_of(name).ok())
            .filter(|&c| ravel_bloom::supported(schema.field(c).data_type()))
            .collect();
        self.bloom_columns = bloom_columns
            .iter()
            .map(|&c| schema.field(c).name().clone())
            .collect();
        let worker = tokio::task::spawn_blocking(
            move || -> Result<(f64, f64, f64, f64, Option<f64>), LoadError> {
                let t = Instant::now();
                let (batches, sort_s) = match &order {
                    Some(o) => {
                        let sorted = o.merge_order(&batches)?;
                        let sort_s = t.elapsed().as_secs_f64();
                        (gather_consuming(&schema, batches, &sorted)?, sort_s)
                    }
                    None => (batches, t.elapsed().as_secs_f64()),
                };
                let run = Run::new(schema, batches);
                let gather_s = t.elapsed().as_secs_f64() - sort_s;
                // Encoding starts with the dictionary trials that choose the writer settings.
                let t = Instant::now();
                let (props, bytes_per_row) =
                    writer_properties(&layout, &run, zstd_level, object_bytes)?;
                let (calibration, blooms_s) = cut_run(
                    &run,
                    order.as_ref(),
                    &range_columns,
                    &bloom_columns,
                    &props,
                    object_bytes,
                    calibration,
                    bytes_per_row,
                    |obj| {
                        tx.blocking_send(obj).map_err(|_| LoadError::Internal {
                            task: "upload pipeline".into(),
                            message: "closed after a failed upload".into(),
                        })
                    },
                )?;
                // The rows are gone once the last object is encoded: return their budget.
                drop(run);
                drop(run_permit);
                Ok((
                    sort_s,
                    gather_s,
                    t.elapsed().as_secs_f64(),
                    blooms_s,
                    calibration,
                ))
            },
        );

        let mut uploads: JoinSet<Uploaded> = JoinSet::new();
        let mut failure: Option<LoadError> = None;
        let mut stored: Vec<(usize, ObjectEntry, bool)> = Vec::new();
        let mut seq = 0usize;
        let mut run_blooms: Vec<Vec<Vec<u8>>> = Vec::new();
        while let Some(mut obj) = rx.recv().await {
            run_blooms.push(std::mem::take(&mut obj.blooms));
            // Encoded bytes stay charged until their upload completes; waiting here for the
            // budget holds the encoder back (the channel is full) until uploads finish.
            let want = (units(obj.bytes.len() as u64) as usize).min(object_cap) as u32;
            let permit = if want == 0 {
                None
            } else {
                Some(
                    self.budget
                        .clone()
                        .acquire_many_owned(want)
                        .await
                        .expect("the budget is never closed"),
                )
            };
            let position = seq;
            seq += 1;
            self.peak_budget_bytes = self.peak_budget_bytes.max(self.budget_in_use());
            // Uploads that already ended are collected now, so a failure stops the run at once.
            while let Some(done) = uploads.try_join_next() {
                collect(Some(done), &mut stored, &mut failure, &mut self.stages);
            }
            while uploads.len() >= depth && failure.is_none() {
                collect(
                    uploads.join_next().await,
                    &mut stored,
                    &mut failure,
                    &mut self.stages,
                );
            }
            if failure.is_some() {
                break; // stop cutting this run: no more objects to leave behind
            }
            let store = self.store.clone();
            let dir = self.table.data_dir();
            uploads.spawn(async move {
                let t = Instant::now();
                let entry = upload(&store, &dir, obj, run_no).await;
                drop(permit);
                entry.map(|(e, reused)| (position, e, t.elapsed().as_secs_f64(), reused))
            });
        }
        drop(rx);
        while let Some(r) = uploads.join_next().await {
            collect(Some(r), &mut stored, &mut failure, &mut self.stages);
        }
        let worked = worker.await.map_err(|e| LoadError::Internal {
            task: "sort/encode task".into(),
            message: format!("failed: {e}"),
        })?;
        // In run order: the objects of a run follow each other in key order.
        stored.sort_by_key(|(position, _, _)| *position);
        self.reused += stored.iter().filter(|(_, _, reused)| *reused).count();
        for (position, e, _) in stored {
            self.objects.push(e);
            self.blooms.push(std::mem::take(&mut run_blooms[position]));
        }
        match (worked, failure) {
            // An upload's failure is the cause; the worker then only saw the pipeline close.
            (_, Some(e)) | (Err(e), None) => Err(e),
            (Ok((sort_s, gather_s, encode_s, blooms_s, calibration)), None) => {
                tracing::info!(
                    run = run_no,
                    objects = seq,
                    sort_s,
                    gather_s,
                    encode_s,
                    "run stored"
                );
                self.calibration = calibration;
                self.stages.sort_s += sort_s;
                self.stages.gather_s += gather_s;
                self.stages.encode_s += encode_s;
                self.stages.blooms_s += blooms_s;
                Ok(())
            }
        }
    }

    /// Flushes what is buffered, waits for every upload, checks that every object is stored,
    /// writes the manifest and returns the report. On failure nothing is published and the
    /// error lists the objects left behind. The load's lease is released either way.
    pub async fn finish(mut self) -> Result<LoadReport, LoadError> {
        if self.poisoned {
            return Err(self.abandon(LoadError::Poisoned).await);
        }
        let result = self.finish_inner().await;
        self.release_lease().await;
        match result {
            Ok(report) => Ok(report),
            Err(e) if self.objects.is_empty() => Err(e),
            Err(e) => Err(LoadError::Failed {
                left_behind: self.objects.iter().map(|o| o.key.clone()).collect(),
                source: Box::new(e),
            }),
        }
    }

    /// Gives the load up after `error`: nothing is published, and the error lists the objects
    /// already stored (unreferenced; `gc` collects them). The lease is deleted before it
    /// returns, so that `gc` may collect them at once.
    pub async fn abandon(mut self, error: LoadError) -> LoadError {
        self.release_lease().await;
        if self.objects.is_empty() {
            error
        } else {
            LoadError::Failed {
                left_behind: self.objects.iter().map(|o| o.key.clone()).collect(),
                source: Box::new(error),
            }
        }
    }

    /// Takes the table's lease for this load unless it holds it: before the first upload, so
    /// that `gc` leaves every object of the load alone until the commit.
    async fn take_lease(&mut self) -> Result<(), LoadError> {
        if self.lease.is_none() {
            self.lease =
                Some(ravel_store::HeldLease::acquire(self.store.clone(), &self.table).await?);
        }
        Ok(())
    }

    async fn release_lease(&mut self) {
        if let Some(lease) = self.lease.take() {
            lease.release().await;
        }
    }

    async fn finish_inner(&mut self) -> Result<LoadReport, LoadError> {
        if self.rows == 0 {
            return Err(LoadError::EmptyInput);
        }
        self.flush().await?;
        let t = Instant::now();
        let mut manifest = self.manifest().await?;
        // Content-addressed like the objects: a rerun stores the same sidecar again.
        manifest.blooms = self.store_blooms().await?;
        // Never publish an object that is not there (`gc` of an older build, a hand, a bucket
        // rule may have deleted it since its upload).
        self.check_stored(&manifest).await?;
        // A rerun of a load that was published and then killed (or whose manifest write failed
        // after landing, or whose objects were deleted and stored again just now) finds the
        // earlier publication: publishing again would double its rows. An object listed by a
        // manifest of other objects is refused for the same reason.
        match self.find_published(&manifest).await? {
            Published::Nothing => {}
            Published::Same(published) => {
                tracing::info!(load_id = %published, "an identical load is published already; nothing to publish");
                self.stages.commit_s += t.elapsed().as_secs_f64();
                return Ok(self.report(published, true));
            }
            Published::Overlapping { manifest, object } => {
                return Err(LoadError::PublishedElsewhere { manifest, object });
            }
        }
        let path = self.put_manifest(&manifest).await?;
        self.stages.commit_s += t.elapsed().as_secs_f64();
        tracing::info!(manifest = %path, objects = self.objects.len(), reused = self.reused, rows = self.rows, "load committed");
        Ok(self.report(manifest.load_id, false))
    }

    /// The manifest of this load, without its Bloom sidecar; records the table's schema first
    /// if the table has none.
    async fn manifest(&mut self) -> Result<Manifest, LoadError> {
        let committed_at_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let mut h = blake3::Hasher::new();
        for o in &self.objects {
            h.update(o.key.as_bytes());
        }
        h.update(&committed_at_ms.to_le_bytes());
        h.update(&std::process::id().to_le_bytes());
        let load_id = format!("{committed_at_ms:013}-{}", &h.finalize().to_hex()[..16]);
        let schema = match &self.schema {
            Some(s) => s.as_ref().clone(),
            None => self
                .recorded_schema
                .clone()
                .unwrap_or_else(arrow::datatypes::Schema::empty),
        };
        if self.schema.is_some() && self.recorded_schema.is_none() {
            self.layout_store.record_schema(&schema).await?;
        }
        Ok(Manifest {
            format: MANIFEST_FORMAT,
            load_id,
            committed_at_ms,
            layout_generation: self.layout.generation,
            sort_key: self.layout.sort_key_names(),
            schema,
            objects: self.objects.clone(),
            blooms: None,
        })
    }

    /// Asks the store for every object and the sidecar `manifest` lists (a few at a time): each
    /// must be there with its recorded size. The loader no longer holds the bytes of an
    /// uploaded object, so a missing one fails the load; its rerun stores it again.
    async fn check_stored(&self, manifest: &Manifest) -> Result<(), LoadError> {
        use futures::{StreamExt, TryStreamExt};
        let listed = manifest
            .objects
            .iter()
            .map(|o| (o.key.clone(), o.bytes))
            .chain(manifest.blooms.iter().map(|b| (b.key.clone(), b.bytes)));
        futures::stream::iter(listed)
            .map(|(key, bytes)| async move {
                let not_stored = |problem: String| LoadError::NotStored {
                    key: key.clone(),
                    problem,
                };
                match self.store.head(&Path::from(key.as_str())).await {
                    Ok(meta) if meta.size == bytes => Ok(()),
                    Ok(meta) => Err(not_stored(format!(
                        "has {} bytes where this load stored {bytes}",
                        meta.size
                    ))),
                    Err(object_store::Error::NotFound { .. }) => {
                        Err(not_stored("is missing".into()))
                    }
                    Err(source) => Err(LoadError::Store {
                        key: key.clone(),
                        source,
                    }),
                }
            })
            .buffer_unordered(CHECK_CONCURRENCY)
            .try_collect::<()>()
            .await
    }

    /// Writes `manifest` create-if-absent under its load id: the commit. Returns its path.
    async fn put_manifest(&self, manifest: &Manifest) -> Result<Path, LoadError> {
        let path = self
            .table
            .manifests_dir()
            .join(format!("{}.json", manifest.load_id));
        let json = serde_json::to_vec_pretty(manifest).expect("a manifest serializes");
        // A retried request whose first attempt was stored (the response was lost) finds its
        // own manifest: that is success. Anything else under this name is not ours.
        ravel_store::create_or_confirm(self.store.as_ref(), &path, json.into())
            .await
            .map_err(|e| match e {
                ravel_store::CreateError::Write { key, source } => LoadError::Store { key, source },
                ravel_store::CreateError::Unknown { key, write, read } => {
                    LoadError::CommitUnknown { key, write, read }
                }
            })?;
        Ok(path)
    }

    /// Stores the per-object Bloom filters as one sidecar beside the objects (content-addressed
    /// like them, so `gc` collects it when no manifest lists it).
    async fn store_blooms(&mut self) -> Result<Option<BloomIndex>, LoadError> {
        if self.bloom_columns.is_empty() {
            return Ok(None);
        }
        let columns: Vec<(String, Vec<Vec<u8>>)> = self
            .bloom_columns
            .iter()
            .enumerate()
            .map(|(c, name)| {
                let filters = self
                    .blooms
                    .iter_mut()
                    .map(|per_object| std::mem::take(&mut per_object[c]))
                    .collect();
                (name.clone(), filters)
            })
            .collect();
        let (bytes, sections) = ravel_bloom::encode_sidecar(&columns);
        let size = bytes.len() as u64;
        let (path, _) = put_content_addressed(
            &self.store,
            &self.table.data_dir(),
            "blooms",
            bytes::Bytes::from(bytes),
        )
        .await?;
        Ok(Some(BloomIndex {
            key: path.to_string(),
            bytes: size,
            format: ravel_bloom::FORMAT,
            fpp: self.layout.bloom.fpp,
            columns: sections
                .into_iter()
                .map(|(name, offset, len)| (name, Section { offset, len }))
                .collect(),
        }))
    }

    fn report(&self, load_id: String, already_published: bool) -> LoadReport {
        LoadReport {
            table: self.table.name().to_string(),
            load_id,
            already_published,
            layout: self.layout.clone(),
            options: self.opts.clone(),
            flush_trigger_bytes: self.opts.flush_trigger(),
            rows: self.rows,
            runs: self.runs,
            stored_bytes: self.objects.iter().map(|o| o.bytes).sum(),
            objects: self.objects.clone(),
            stages: self.stages.clone(),
            peak_budget_bytes: self.peak_budget_bytes,
            wall_s: self.started.elapsed().as_secs_f64(),
        }
    }

    /// How the table's published manifests stand to `manifest` (see [`published_as`]).
    async fn find_published(&self, manifest: &Manifest) -> Result<Published, LoadError> {
        let published = ravel_manifest::read_manifests(self.store.as_ref(), &self.table)
            .await
            .map_err(|e| LoadError::Internal {
                task: "reading the table's manifests".into(),
                message: e.to_string(),
            })?;
        Ok(published_as(&published, manifest))
    }
}

/// Objects checked for existence at once before the commit.
const CHECK_CONCURRENCY: usize = 16;

/// How a load about to commit stands to the manifests published already.
#[derive(Debug, PartialEq)]
enum Published {
    /// No published manifest lists any of its objects.
    Nothing,
    /// This load id lists the same objects under the same layout generation: the load is
    /// published already.
    Same(String),
    /// This manifest lists `object` among others: publishing would list it twice.
    Overlapping { manifest: String, object: String },
}

/// Compares `ours` with `published` (key, manifest): the same set of object keys under the
/// same layout generation is the same load, whatever the order or which objects were stored
/// again since; any shared object otherwise is an overlap. An object key (a content hash) may
/// be listed by one manifest of a table only, so that no row counts twice. A later version log
/// passes the manifests of the current version here.
fn published_as(published: &[(String, Manifest)], ours: &Manifest) -> Published {
    use std::collections::HashSet;
    let keys: HashSet<&str> = ours.objects.iter().map(|o| o.key.as_str()).collect();
    let mut overlap = None;
    for (path, m) in published {
        let theirs: HashSet<&str> = m.objects.iter().map(|o| o.key.as_str()).collect();
        if m.layout_generation == ours.layout_generation && theirs == keys {
            return Published::Same(m.load_id.clone());
        }
        if overlap.is_none()
            && let Some(object) = m.objects.iter().find(|o| keys.contains(o.key.as_str()))
        {
            overlap = Some(Published::Overlapping {
                manifest: path.clone(),
                object: object.key.clone(),
            });
        }
    }
    overlap.unwrap_or(Published::Nothing)
}

/// An upload's outcome: the object's position in its run, its entry, seconds spent, and
/// whether the object was stored already.
type Uploaded = Result<(usize, ObjectEntry, f64, bool), LoadError>;

fn collect(
    joined: Option<Result<Uploaded, tokio::task::JoinError>>,
    stored: &mut Vec<(usize, ObjectEntry, bool)>,
    failure: &mut Option<LoadError>,
    stages: &mut StageTimes,
) {
    match joined {
        Some(Ok(Ok((position, entry, secs, reused)))) => {
            stages.upload_s += secs;
            stored.push((position, entry, reused));
        }
        Some(Ok(Err(e))) => {
            failure.get_or_insert(e);
        }
        Some(Err(join)) => panic!("an upload task panicked: {join}"),
        None => {}
    }
}

/// Stores `bytes` as `<dir>/<blake3 hash>.<extension>`, create-if-absent: a repeated upload is
/// harmless. Returns the path and whether the object was there already.
async fn put_content_addressed(
    store: &Arc<dyn ObjectStore>,
    dir: &Path,
    extension: &str,
    bytes: bytes::Bytes,
) -> Result<(Path, bool), LoadError> {
    let hash = blake3::hash(&bytes);
    let path = dir.clone().join(format!("{}.{extension}", hash.to_hex()));
    let payload = PutPayload::from(bytes);
    let mut reused = false;
    let stored = match store
        .put_opts(&path, payload.clone(), PutOptions::from(PutMode::Create))
        .await
    {
        // The object is there already (left by a load that failed or was killed, or stored by
        // this put's first attempt): the same bytes under the same name. Writing it again
        // restarts its age, so that `gc`, which deletes only old unreferenced objects, leaves
        // it to the manifest this load is about to write.
        Err(object_store::Error::AlreadyExists { .. }) => {
            tracing::debug!(key = %path, "object exists; rewriting it to restart its age");
            reused = true;
            store
                .put_opts(&path, payload, PutOptions::from(PutMode::Overwrite))
                .await
        }
        other => other,
    };
    match stored {
        Ok(_) => Ok((path, reused)),
        Err(source) => Err(LoadError::Store {
            key: path.to_string(),
            source,
        }),
    }
}

/// Stores an object under its content hash (see [`put_content_addressed`]).
/// Returns the entry and whether the object was there already.
async fn upload(
    store: &Arc<dyn ObjectStore>,
    dir: &Path,
    obj: Encoded,
    run: u64,
) -> Result<(ObjectEntry, bool), LoadError> {
    let bytes = obj.bytes.len() as u64;
    tracing::debug!(bytes, rows = obj.rows, "storing object");
    let (path, reused) = put_content_addressed(store, dir, "parquet", obj.bytes).await?;
    let entry = ObjectEntry {
        key: path.to_string(),
        rows: obj.rows as u64,
        bytes,
        run,
        first_key: obj.first_key,
        last_key: obj.last_key,
        ranges: obj.ranges,
    };
    Ok((entry, reused))
}

fn check_same(table: &SchemaRef, batch: &SchemaRef, input: &str) -> Result<(), LoadError> {
    for f in table.fields() {
        match batch.field_with_name(f.name()) {
            Err(_) => {
                return Err(LoadError::Schema {
                    input: input.into(),
                    column: f.name().clone(),
                    problem: "is missing".into(),
                });
            }
            Ok(g) if !ravel_manifest::types_agree(f.data_type(), g.data_type()) => {
                return Err(LoadError::Schema {
                    input: input.into(),
                    column: f.name().clone(),
                    problem: format!(
                        "has type {}, the table's is {}",
                        g.data_type(),
                        f.data_type()
                    ),
                });
            }
            Ok(_) => {}
        }
    }
    if let Some(extra) = batch
        .fields()
        .iter()
        .find(|g| table.field_with_name(g.name()).is_err())
    {
        return Err(LoadError::Schema {
            input: input.into(),
            column: extra.name().clone(),
            problem: "is not in the table's schema".into(),
        });
    }
    if table
        .fields()
        .iter()
        .map(|f| f.name())
        .ne(batch.fields().iter().map(|f| f.name()))
    {
        return Err(LoadError::Schema {
            input: input.into(),
            column: batch.field(0).name().clone(),
            problem: "columns are in another order than the table's".into(),
        });
    }
    Ok(())
}

/// `batch` with the table's `schema`: a column the table says is NOT NULL must hold no null
/// (the error names the column and the row, 1-based in the input, `first_row` being the
/// batch's first row's 0-based number there); a column whose type differs from the table's
/// only in nested fields' nullability, metadata or list child names takes the table's type.
/// Written objects and the manifest then carry exactly the table's schema.
fn conform(
    schema: &SchemaRef,
    batch: RecordBatch,
    input: &str,
    first_row: u64,
) -> Result<RecordBatch, LoadError> {
    if batch.schema_ref() == schema {
        return Ok(batch);
    }
    let rows = batch.num_rows();
    let mut columns = Vec::with_capacity(schema.fields().len());
    for (field, column) in schema.fields().iter().zip(batch.columns()) {
        let bad = |problem: String| LoadError::Schema {
            input: input.into(),
            column: field.name().clone(),
            problem,
        };
        if !field.is_nullable()
            && let Some(row) = first_null(column.as_ref())
        {
            return Err(bad(format!(
                "is null in row {} of the input, but the table's column is NOT NULL",
                first_row + row as u64 + 1
            )));
        }
        if column.data_type() == field.data_type() {
            columns.push(column.clone());
            continue;
        }
        let data = retype(column.to_data(), field.data_type()).map_err(|e| {
            bad(format!(
                "holds a null where the table's type {} has a NOT NULL field ({e})",
                field.data_type()
            ))
        })?;
        columns.push(arrow::array::make_array(data));
    }
    let options = arrow::array::RecordBatchOptions::new().with_row_count(Some(rows));
    RecordBatch::try_new_with_options(schema.clone(), columns, &options)
        .map_err(LoadError::arrow(ArrowStage::ReadingInput))
}

/// The index of an array's first null, if it holds one.
fn first_null(array: &dyn arrow::array::Array) -> Option<usize> {
    let nulls = array.nulls().filter(|n| n.null_count() > 0)?;
    (0..nulls.len()).find(|&i| nulls.is_null(i))
}

/// `data` with the type `to`, which agrees with its own (see [`ravel_manifest::types_agree`]):
/// nested children take `to`'s child types, recursively. Validation refuses a null in a child
/// that `to` says is NOT NULL.
fn retype(
    data: arrow::array::ArrayData,
    to: &arrow::datatypes::DataType,
) -> Result<arrow::array::ArrayData, arrow::error::ArrowError> {
    if data.data_type() == to {
        return Ok(data);
    }
    let targets = child_types(to);
    let children = if targets.len() == data.child_data().len() {
        data.child_data()
            .iter()
            .zip(&targets)
            .map(|(child, t)| retype(child.clone(), t))
            .collect::<Result<Vec<_>, _>>()?
    } else {
        data.child_data().to_vec()
    };
    data.into_builder()
        .data_type(to.clone())
        .child_data(children)
        .build()
}

/// The types of a nested type's child arrays, in their order (none for a flat type).
fn child_types(t: &arrow::datatypes::DataType) -> Vec<arrow::datatypes::DataType> {
    use arrow::datatypes::DataType::*;
    match t {
        List(f)
        | LargeList(f)
        | ListView(f)
        | LargeListView(f)
        | FixedSizeList(f, _)
        | Map(f, _) => {
            vec![f.data_type().clone()]
        }
        Struct(fs) => fs.iter().map(|f| f.data_type().clone()).collect(),
        RunEndEncoded(r, v) => vec![r.data_type().clone(), v.data_type().clone()],
        Dictionary(_, v) => vec![v.as_ref().clone()],
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
