//! The end of a load: its objects checked, its manifest written and committed (or handed
//! over prepared), its lease given up, and its report.

use super::*;

impl Loader {
    /// Flushes what is buffered, waits for every upload, checks that every object is stored,
    /// writes the manifest and returns the report. On failure nothing is published and the
    /// error lists the objects left behind. The load's lease is released either way.
    pub async fn finish(mut self) -> Result<LoadReport, LoadError> {
        if let Err(e) = self.check_live() {
            return Err(self.abandon(e).await);
        }
        let span = self.span.clone();
        let result = self.finish_inner().instrument(span).await;
        self.release_lease().await;
        match result {
            Ok(report) => Ok(report),
            Err(e) if self.objects.is_empty() => Err(e),
            Err(e) => Err(LoadError::Failed {
                writing: self.mode.writing(),
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
                writing: self.mode.writing(),
                left_behind: self.objects.iter().map(|o| o.key.clone()).collect(),
                source: Box::new(error),
            }
        }
    }

    /// Takes the table's lease for this load unless it holds it: before the first upload, so
    /// that `gc` leaves every object of the load alone until the commit.
    pub(super) async fn take_lease(&mut self) -> Result<(), LoadError> {
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

    /// Flushes what is buffered, waits for every upload, stores the Bloom sidecar and returns
    /// the manifest without committing it: a caller that publishes the objects otherwise (a
    /// compaction, which replaces others with them) does so with [`Committer::replace`]. The load keeps its lease, so
    /// that `gc` leaves its objects alone, until [`Prepared::release`].
    pub async fn prepare(mut self) -> Result<Prepared, LoadError> {
        if let Err(e) = self.check_live() {
            return Err(self.abandon(e).await);
        }
        let span = self.span.clone();
        match self.prepare_inner().instrument(span).await {
            Ok(manifest) => Ok(Prepared {
                report: self.report(manifest.load_id.clone(), false),
                consumed: self.consumed.clone(),
                object_salt: self.uploader.salt().map(str::to_string),
                manifest,
                lease: self.lease.take(),
            }),
            Err(e) => Err(self.abandon(e).await),
        }
    }

    async fn prepare_inner(&mut self) -> Result<Manifest, LoadError> {
        if self.rows == 0 {
            return Err(LoadError::EmptyInput);
        }
        self.flush().await?;
        let t = Instant::now();
        let mut manifest = self.manifest().await?;
        // Content-addressed like the objects: a rerun stores the same sidecar again.
        manifest.blooms = self
            .sidecar
            .store(&self.uploader, self.layout.bloom.fpp)
            .await?;
        self.stages.commit_s += t.elapsed().as_secs_f64();
        Ok(manifest)
    }

    async fn finish_inner(&mut self) -> Result<LoadReport, LoadError> {
        let manifest = self.prepare_inner().await?;
        let t = Instant::now();
        let committed = self
            .committer
            .commit(
                &manifest,
                0,
                crate::table_configuration(&self.layout, &manifest.schema),
                self.consumed.clone(),
            )
            .await?;
        self.stages.commit_s += t.elapsed().as_secs_f64();
        match committed {
            Committed::AlreadyLive(p) => {
                tracing::info!(load_id = %p.load_id, version = p.version, "an identical load is published already; nothing to publish");
                Ok(self.published_already(p))
            }
            Committed::Version(version) => {
                self.span.record("version", version);
                tracing::info!(
                    version,
                    objects = self.objects.len(),
                    reused = self.reused,
                    rows = self.rows,
                    "load committed"
                );
                Ok(LoadReport {
                    version: Some(version),
                    ..self.report(manifest.load_id, false)
                })
            }
        }
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
        if self.schema.is_some() && !self.schema_recorded {
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

    /// Records what this load consumes: the version that publishes its rows records it, and
    /// no later load of the same inputs publishes them again. Reads the newest version first:
    /// `Some` when it consumed every input already (the caller publishes nothing: see
    /// [`Loader::published_already`]), an error when it consumed only some
    /// ([`ravel_log::LogError::PartlyConsumed`]), the name of one and not the file now
    /// there ([`ravel_log::LogError::NameConsumed`]), or one the inputs window may have
    /// forgotten ([`ravel_log::LogError::BeyondInputsWindow`]). Before the first row is pushed: the
    /// objects are named by the load's identity and their bytes
    /// ([`ravel_log::Consumed::object_salt`]).
    pub async fn consume(
        &mut self,
        consumed: ravel_log::Consumed,
    ) -> Result<Option<ravel_log::Published>, LoadError> {
        let log = self.committer.log();
        let newest = log.latest().await?;
        self.consumed = consumed;
        let salt = self
            .consumed
            .object_salt(self.layout.generation, newest.version);
        self.uploader.set_salt(salt);
        match newest.inputs_stand(&self.consumed) {
            ravel_log::InputsStand::New => {
                newest.check_new(&self.consumed, ravel_log::now_ms())?;
                Ok(None)
            }
            ravel_log::InputsStand::Published { version } => {
                Ok(Some(log.publication(version).await))
            }
            ravel_log::InputsStand::Partly {
                input,
                version,
                new,
            } => Err(ravel_log::LogError::PartlyConsumed {
                input,
                version,
                new,
            }
            .into()),
        }
    }

    /// Names this load's objects from now on by `salt` and their bytes, as the load whose
    /// rows they publish names its own ([`Prepared::object_salt`]): a merge that publishes a
    /// load's rows.
    pub fn set_object_salt(&mut self, salt: Option<String>) {
        self.uploader.set_salt(salt);
    }

    /// The report of a load whose rows `p` published already: nothing was published now.
    pub fn published_already(&self, p: ravel_log::Published) -> LoadReport {
        LoadReport {
            version: Some(p.version),
            ..self.report(p.load_id, true)
        }
    }

    fn report(&self, load_id: String, already_published: bool) -> LoadReport {
        LoadReport {
            table: self.table.name().to_string(),
            load_id,
            already_published,
            version: None,
            layout: self.layout.clone(),
            options: self.opts.clone(),
            flush_trigger_bytes: self.opts.flush_trigger(),
            rows: self.rows,
            runs: self.runs,
            stored_bytes: self.objects.iter().map(|o| o.bytes).sum(),
            objects: self.objects.clone(),
            stages: self.stages.clone(),
            peak_budget_bytes: self.budget.peak(),
            wall_s: self.started.elapsed().as_secs_f64(),
            no_delta_view: self
                .schema
                .as_ref()
                .and_then(|s| ravel_log::no_delta_view(&ravel_log::delta_schema(s))),
        }
    }
}
