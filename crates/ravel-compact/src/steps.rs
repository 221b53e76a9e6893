//! The steps of a run: each merged and committed in turn, the next planned from the newest
//! version, and what they did summed apart from the plan.

use std::collections::{BTreeMap, HashSet};

use ravel_layout::Layout;
use ravel_manifest::ObjectEntry;

use crate::plan::Plan;
use crate::publish::Publisher;
use crate::selection::{Chosen, Selection, Selector, only, plan_of};
use crate::writer::{WriteMetrics, Writer};
use crate::{CompactError, CompactReport};

/// The steps of a compaction, each merged and committed in turn; after each, the next is
/// planned from the newest version.
pub(crate) struct Steps<'a> {
    pub(crate) publisher: &'a Publisher,
    pub(crate) layout: &'a Layout,
    pub(crate) selector: Selector,
    /// Objects the run may touch: those of the version read, and what it writes (loads
    /// committed meanwhile stay untouched).
    pub(crate) allowed: HashSet<String>,
    /// Steps to commit at most (see [`crate::CompactOptions::max_steps`]).
    pub(crate) max_steps: Option<usize>,
}

/// What the steps of a run did, kept apart from the plan: the report takes it in one place
/// ([`Ran::fill`]).
#[derive(Debug, Default)]
pub(crate) struct Metrics {
    pub(crate) steps: usize,
    /// The last version a step committed.
    pub(crate) version: Option<u64>,
    /// Why the last step was chosen.
    pub(crate) reason: Option<String>,
    /// The most one step held: its loaders' peak and its merge's share.
    pub(crate) peak_budget_bytes: u64,
    pub(crate) write: WriteMetrics,
}

impl Metrics {
    fn add(&mut self, version: u64, step: &WriteMetrics, merge_bytes: u64) {
        self.steps += 1;
        self.version = Some(version);
        self.peak_budget_bytes = self
            .peak_budget_bytes
            .max(step.peak_loader_bytes + merge_bytes);
        self.write.add(step);
    }
}

/// What the steps of a run have done so far.
#[derive(Default)]
pub(crate) struct Progress {
    pub(crate) metrics: Metrics,
    /// Objects the steps wrote, by key: a step may write an object another step wrote (the
    /// same rows written back again are the same content, the same name).
    ours: BTreeMap<String, ObjectEntry>,
    /// Objects of the version read that steps replaced.
    replaced: BTreeMap<String, ObjectEntry>,
    /// The last step's inputs.
    previous: Option<Vec<String>>,
    /// A load committed meanwhile: no step leaves the table one sequence.
    others: bool,
}

/// A run's steps done: what they did, and the plan of the version they left.
pub(crate) struct Ran {
    pub(crate) done: Progress,
    pub(crate) last: Plan,
}

impl Steps<'_> {
    pub(crate) async fn run(
        mut self,
        template: Writer<'_>,
        first: Plan,
    ) -> Result<Ran, CompactError> {
        // The version read's objects: a step's input among them is one the compaction replaced.
        let originals = self.allowed.clone();
        let (mut plan, mut done) = (first, Progress::default());
        let most = self.max_steps.unwrap_or(usize::MAX);
        while let Selection::Merge(chosen) = self.selector.next(&plan, template.geometry.fan_in) {
            if done.metrics.steps >= most {
                break;
            }
            done.metrics.reason = Some(chosen.reason.clone());
            self.step(&template, chosen, &originals, &mut done).await?;
            plan = self.replan(&mut done).await?;
        }
        Ok(Ran { done, last: plan })
    }

    /// Merges and commits one step.
    #[tracing::instrument(
        skip_all,
        fields(
            step = done.metrics.steps,
            chains = chosen.step.chains.len(),
            input_objects = chosen.step.input_objects().count(),
            input_bytes = chosen.step.input_bytes(),
            version = tracing::field::Empty
        )
    )]
    async fn step(
        &mut self,
        template: &Writer<'_>,
        chosen: Chosen,
        originals: &HashSet<String>,
        done: &mut Progress,
    ) -> Result<(), CompactError> {
        let step = chosen.step;
        let inputs: Vec<String> = step.input_objects().map(|o| o.entry.key.clone()).collect();
        if done.previous.as_ref() == Some(&inputs) {
            return Err(CompactError::NoProgress);
        }
        let mut w = template.fresh();
        let full = chosen.full && !done.others;
        let result = w.run(&step, self.publisher, full).await;
        let merge_bytes = w.geometry.merge_bytes(step.chains.len());
        let committed = w.finish(result).await?;
        tracing::Span::current().record("version", committed.version);
        tracing::info!(
            version = committed.version,
            objects = committed.objects.len(),
            bytes = committed.objects.iter().map(|o| o.bytes).sum::<u64>(),
            reason = %chosen.reason,
            "step committed"
        );
        done.metrics
            .add(committed.version, &committed.metrics, merge_bytes);
        done.replaced.extend(
            step.input_objects()
                .filter(|o| originals.contains(&o.entry.key))
                .map(|o| (o.entry.key.clone(), o.entry.clone())),
        );
        self.allowed
            .extend(committed.objects.iter().map(|o| o.key.clone()));
        done.ours
            .extend(committed.objects.into_iter().map(|o| (o.key.clone(), o)));
        done.previous = Some(inputs);
        Ok(())
    }

    /// The plan of the newest version, over the objects this run may touch.
    async fn replan(&self, done: &mut Progress) -> Result<Plan, CompactError> {
        let log = self.publisher.log();
        let live = log.manifests(&log.latest().await?).await?;
        done.others |= live
            .iter()
            .flat_map(|m| m.objects())
            .any(|(_, o)| !self.allowed.contains(&o.key));
        Ok(plan_of(only(live, &self.allowed), self.layout))
    }
}

impl Ran {
    /// The report's share of what the steps did: the versions and passes, the inputs (objects
    /// of the version read that were replaced), the outputs (objects written that the table
    /// still holds), the bytes written and the stages' times.
    pub(crate) fn fill(&self, report: &mut CompactReport) {
        let m = &self.done.metrics;
        report.steps = m.steps;
        report.version = m.version;
        if let Some(reason) = &m.reason {
            report.reason = reason.clone();
        }
        report.passes = m.write.passes;
        report.intermediate_objects = m.write.intermediate_objects;
        report.peak_budget_bytes = m.peak_budget_bytes;
        report.stages.add(&m.write.stages);
        let left: HashSet<&str> = plan_keys(&self.last);
        let (mut input, mut output) = (Totals::default(), Totals::default());
        input.add(self.done.replaced.values());
        output.add(
            self.done
                .ours
                .values()
                .filter(|o| left.contains(o.key.as_str())),
        );
        (report.input_objects, report.input_bytes, report.input_rows) =
            (input.objects, input.bytes, input.rows);
        (
            report.output_objects,
            report.output_bytes,
            report.output_rows,
        ) = (output.objects, output.bytes, output.rows);
        report.written_bytes = m.write.written_bytes;
        report.written_over_output = ravel_log::ratio(report.written_bytes, report.output_bytes);
    }
}

/// The totals of the log before the run, with what the run wrote (see [`CompactReport`]).
pub(crate) fn add_totals(report: &mut CompactReport, before: ravel_log::Totals) {
    report.loaded_since_full_bytes = before.loaded_since_full_bytes;
    report.written_since_full_bytes = before.written_since_full_bytes + report.written_bytes;
    report.write_amplification = ravel_log::ratio(
        report.written_since_full_bytes,
        report.loaded_since_full_bytes,
    );
    report.loaded_bytes_total = before.loaded_bytes;
    report.written_bytes_total = before.written_bytes + report.written_bytes;
}

/// Every object a plan names.
fn plan_keys(plan: &Plan) -> HashSet<&str> {
    plan.untouched
        .iter()
        .map(|o| o.key.as_str())
        .chain(plan.input_objects().map(|o| o.entry.key.as_str()))
        .collect()
}

/// Objects, bytes and rows, summed.
#[derive(Debug, Default)]
struct Totals {
    objects: usize,
    bytes: u64,
    rows: u64,
}

impl Totals {
    fn add<'a>(&mut self, objects: impl Iterator<Item = &'a ravel_manifest::ObjectEntry>) {
        for o in objects {
            self.objects += 1;
            self.bytes += o.bytes;
            self.rows += o.rows;
        }
    }
}
