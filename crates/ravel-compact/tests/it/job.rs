//! Plan, steps and commit against the single-machine commands on arbitrary tables: a job's
//! load publishes exactly the rows and order of a sorted load (`load --compact`) of the same
//! files, and a job's compaction those of `compact`. Then the protocol's promises: a step run
//! twice gives the same commit, a step that failed leaves nothing live, a plan whose base
//! was compacted meanwhile fails as a conflict, and a plan or results edited at random (ranges,
//! inputs, objects, counts, sizes, the table) commit every row once or nothing.

use std::path::PathBuf;

use arrow::array::{AsArray, RecordBatch};
use arrow::datatypes::Int64Type;
use parquet::arrow::ArrowWriter;
use proptest::prelude::*;
use ravel_compact::job::{
    Commit, CommitMode, Job, Merge, PlanOptions, StepGeometry, StepResult, StepWork, commit,
    plan_compact, plan_load, run_step,
};
use ravel_compact::{CompactError, CompactOptions, SortedLoad, compact};
use ravel_loader::{Files, InputFormat};
use ravel_manifest::compare_keys;
use ravel_store::Store;
use ravel_testkit::arbitrary::{Case, case, cases, split};
use serde_json::Value;

use crate::properties::{in_order_and_verified, load, load_options, rows_in_key_order, table};

pub(crate) fn plan_options(steps: usize) -> PlanOptions {
    PlanOptions {
        steps,
        geometry: StepGeometry::from_load(&load_options()),
    }
}

pub(crate) fn compact_options() -> CompactOptions {
    CompactOptions {
        load: load_options(),
        fan_in: None,
        max_input_bytes: None,
        dry_run: false,
        max_steps: None,
    }
}

/// Runs every step of `job` in order and returns their results.
pub(crate) async fn run_all(store: &Store, job: &Job) -> Vec<StepResult> {
    let mut out = Vec::new();
    for s in &job.steps {
        out.push(run_step(store, job, s.index).await.unwrap());
    }
    out
}

pub(crate) async fn commit_whole(
    store: &Store,
    job: &Job,
    results: Vec<StepResult>,
) -> ravel_compact::job::CommitReport {
    let c = Commit {
        job,
        results,
        mode: CommitMode::Whole,
    };
    commit(store, c).await.unwrap()
}

/// The `seq` column of the table's rows, objects in key order.
async fn seq_in_order(store: &Store) -> Vec<i64> {
    let rows = rows_in_key_order(store).await;
    let seq = rows
        .column_by_name("seq")
        .unwrap()
        .as_primitive::<Int64Type>();
    seq.values().to_vec()
}

/// The case's rows as up to four Parquet files in `dir`, in input order.
pub(crate) fn files(c: &Case, input: &RecordBatch, dir: &std::path::Path) -> Vec<PathBuf> {
    let pieces: Vec<RecordBatch> = split(c, input)
        .into_iter()
        .filter(|b| b.num_rows() > 0)
        .collect();
    let per = pieces.len().div_ceil(4).max(1);
    let mut out = Vec::new();
    for (i, group) in pieces.chunks(per).enumerate() {
        let path = dir.join(format!("part-{i}.parquet"));
        let f = std::fs::File::create(&path).unwrap();
        let mut w = ArrowWriter::try_new(f, input.schema(), None).unwrap();
        for b in group {
            w.write(b).unwrap();
        }
        w.close().unwrap();
        out.push(path);
    }
    out
}

pub(crate) async fn new_store(
    dir: &tempfile::TempDir,
    name: &str,
    layout: &ravel_layout::Layout,
) -> Store {
    let store = Store::create(dir.path().join(name).to_str().unwrap()).unwrap();
    ravel_testkit::set_layout(&store, "t", layout).await;
    store
}

pub(crate) async fn newest_version(store: &Store) -> Option<u64> {
    let log = ravel_log::TableLog::new(
        store.object_store().clone(),
        ravel_store::TablePaths::new("t").unwrap(),
    );
    log.latest().await.unwrap().version
}

/// `paths` loaded into table `t` of `store` by one sorted load (`load --compact`).
async fn sorted_load(store: &Store, paths: &[PathBuf]) {
    let mut sorted = SortedLoad::new(store, "t", &compact_options())
        .await
        .unwrap();
    sorted
        .feed(&Files::new(paths, InputFormat::Parquet), |_, _| {})
        .await
        .unwrap();
    sorted.finish().await.unwrap();
}

/// A job's load against a sorted load of the same files.
async fn load_matches(c: Case, steps: usize) -> Result<(), TestCaseError> {
    let (layout, input) = table(&c);
    if input.num_rows() == 0 || layout.clustering_key.is_none() {
        return Ok(());
    }
    let dir = tempfile::tempdir().unwrap();
    let paths = files(&c, &input, dir.path());
    let single = new_store(&dir, "single", &layout).await;
    sorted_load(&single, &paths).await;

    let spread = new_store(&dir, "spread", &layout).await;
    let job = plan_load(&spread, "t", &paths, &plan_options(steps))
        .await
        .unwrap();
    let results = run_all(&spread, &job).await;
    let report = commit_whole(&spread, &job, results).await;
    prop_assert_eq!(report.version, Some(0));
    prop_assert_eq!(report.rows as usize, input.num_rows());
    prop_assert_eq!(seq_in_order(&spread).await, seq_in_order(&single).await);
    in_order_and_verified(&spread, &layout, &input).await?;
    // The same job again: its inputs are consumed, nothing is published twice.
    let again = plan_load(&spread, "t", &paths, &plan_options(steps))
        .await
        .unwrap();
    prop_assert!(again.steps.is_empty());
    let rerun = commit_whole(&spread, &again, Vec::new()).await;
    prop_assert!(rerun.already_published);
    prop_assert_eq!(newest_version(&spread).await, Some(0));
    Ok(())
}

/// Loads the case into `store` in three loads of several runs each.
pub(crate) async fn three_loads(store: &Store, c: &Case, input: &RecordBatch) {
    let pieces = split(c, input);
    let third = pieces.len().div_ceil(3);
    for load_pieces in pieces.chunks(third.max(1)) {
        if load_pieces.iter().any(|b| b.num_rows() > 0) {
            load(store, load_pieces).await;
        }
    }
}

/// A job's compaction against `compact` of the same table.
async fn compact_matches(c: Case, steps: usize) -> Result<(), TestCaseError> {
    let (layout, input) = table(&c);
    if input.num_rows() == 0 || layout.clustering_key.is_none() {
        return Ok(());
    }
    let dir = tempfile::tempdir().unwrap();
    let single = new_store(&dir, "single", &layout).await;
    let spread = new_store(&dir, "spread", &layout).await;
    three_loads(&single, &c, &input).await;
    three_loads(&spread, &c, &input).await;
    compact(&single, "t", &compact_options()).await.unwrap();
    let before = newest_version(&spread).await;
    let job = plan_compact(&spread, "t", &plan_options(steps), Merge::Compact)
        .await
        .unwrap();
    let results = run_all(&spread, &job).await;
    let report = commit_whole(&spread, &job, results).await;
    let added = match job.steps.is_empty() {
        true => before,
        false => before.map(|v| v + 1),
    };
    prop_assert_eq!(newest_version(&spread).await, added, "{:?}", report);
    prop_assert_eq!(seq_in_order(&spread).await, seq_in_order(&single).await);
    in_order_and_verified(&spread, &layout, &input).await?;
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(16), ..ProptestConfig::default() })]

    #[test]
    fn a_jobs_load_publishes_what_a_sorted_load_publishes(c in case(500), steps in 1usize..6) {
        let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
        rt.block_on(load_matches(c, steps))?;
    }

    #[test]
    fn a_jobs_compaction_publishes_what_compact_publishes(c in case(500), steps in 1usize..6) {
        let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
        rt.block_on(compact_matches(c, steps))?;
    }
}

/// A case with many rows, a clustering key and every run spanning the key space.
fn fixed_case() -> Case {
    sized_case(3000, 0)
}

/// A case of `rows` rows in three pieces (three files, or three loads), with a clustering key
/// and every piece spanning the key space; `salt` varies its values.
pub(crate) fn sized_case(rows: usize, salt: u64) -> Case {
    let cells = |column: u64| {
        (0..rows)
            .map(|i| {
                (
                    false,
                    (i as u64).wrapping_mul(2654435761) ^ column ^ (salt << 8),
                )
            })
            .collect()
    };
    Case {
        types: vec![3, 7],
        time_type: 1,
        stream: None,
        keys: vec![0, 1],
        bucket: 3_600,
        cells: vec![cells(1), cells(2), cells(3)],
        bloom: 2,
        pieces: vec![rows / 3],
        clustered: true,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_step_run_twice_gives_the_same_commit() {
    let c = fixed_case();
    let (layout, input) = table(&c);
    let dir = tempfile::tempdir().unwrap();
    let paths = files(&c, &input, dir.path());
    let store = new_store(&dir, "s", &layout).await;
    let job = plan_load(&store, "t", &paths, &plan_options(3))
        .await
        .unwrap();
    let first = run_all(&store, &job).await;
    // Every step again (an engine's retry of each): the same objects under the same names.
    let second = run_all(&store, &job).await;
    for (a, b) in first.iter().zip(&second) {
        assert_ne!(a.attempt, b.attempt);
        let keys = |r: &StepResult| r.objects.iter().map(|o| o.key.clone()).collect::<Vec<_>>();
        if a.kind == ravel_compact::job::StepKind::Merge {
            assert_eq!(keys(a), keys(b), "step {}", a.step);
        }
        assert_eq!(a.rows, b.rows);
    }
    // Committed from the second attempts' results, with the first ones given too.
    let mut results = second;
    results.extend(first);
    let report = commit_whole(&store, &job, results).await;
    assert_eq!(report.rows as usize, input.num_rows());
    in_order_and_verified(&store, &layout, &input)
        .await
        .unwrap();
    // The commit run again publishes nothing twice.
    let again = commit_whole(&store, &job, run_all(&store, &job).await).await;
    assert!(again.already_published, "{again:?}");
    assert_eq!(newest_version(&store).await, Some(0));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_step_that_failed_leaves_nothing_live() {
    let c = fixed_case();
    let (layout, input) = table(&c);
    let dir = tempfile::tempdir().unwrap();
    let paths = files(&c, &input, dir.path());
    let store = new_store(&dir, "s", &layout).await;
    let job = plan_load(&store, "t", &paths, &plan_options(2))
        .await
        .unwrap();
    let merge = job.merge_steps().next().unwrap().index;
    // A merge step before the split steps fails, naming the split step it waits for.
    let err = run_step(&store, &job, merge).await.unwrap_err();
    assert!(
        matches!(
            &err,
            CompactError::Job(ravel_compact::job::JobError::SplitNotDone { step: 0, .. })
        ),
        "{err}"
    );
    let mut results = Vec::new();
    for s in job.steps.iter().filter(|s| s.index != merge) {
        results.push(run_step(&store, &job, s.index).await.unwrap());
    }
    // Committed without that step's result: refused, nothing published.
    let c = Commit {
        job: &job,
        results: results.clone(),
        mode: CommitMode::Whole,
    };
    let err = commit(&store, c).await.unwrap_err();
    assert!(
        err.to_string()
            .contains(&format!("no result for step {merge}")),
        "{err}"
    );
    assert_eq!(newest_version(&store).await, None);
    // A load cannot commit step by step.
    let c = Commit {
        job: &job,
        results: results.clone(),
        mode: CommitMode::PerStep,
    };
    assert!(commit(&store, c).await.unwrap_err().is_invalid_input());
    // Once it has run, the job commits every row once.
    results.push(run_step(&store, &job, merge).await.unwrap());
    let report = commit_whole(&store, &job, results).await;
    assert_eq!(report.rows as usize, input.num_rows());
    in_order_and_verified(&store, &layout, &input)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_plan_whose_base_was_compacted_meanwhile_fails_as_a_conflict() {
    let c = fixed_case();
    let (layout, input) = table(&c);
    let dir = tempfile::tempdir().unwrap();
    let store = new_store(&dir, "s", &layout).await;
    three_loads(&store, &c, &input).await;
    let job = plan_compact(&store, "t", &plan_options(3), Merge::Compact)
        .await
        .unwrap();
    assert!(job.merge_steps().count() >= 2, "{job:?}");
    let results = run_all(&store, &job).await;
    compact(&store, "t", &compact_options()).await.unwrap();
    let version = newest_version(&store).await;
    let c = Commit {
        job: &job,
        results: results.clone(),
        mode: CommitMode::Whole,
    };
    let err = commit(&store, c).await.unwrap_err();
    assert!(err.is_conflict(), "{err}");
    assert!(
        err.to_string().contains("no longer in the table")
            || format!("{err:?}").contains("TableChanged"),
        "{err}"
    );
    assert_eq!(newest_version(&store).await, version);
    in_order_and_verified(&store, &layout, &input)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_merge_commits_step_by_step_what_has_finished() {
    let c = fixed_case();
    let (layout, input) = table(&c);
    let dir = tempfile::tempdir().unwrap();
    let store = new_store(&dir, "s", &layout).await;
    three_loads(&store, &c, &input).await;
    let job = plan_compact(&store, "t", &plan_options(4), Merge::Compact)
        .await
        .unwrap();
    let mut results = run_all(&store, &job).await;
    let last = results.pop().unwrap();
    let c = Commit {
        job: &job,
        results: results.clone(),
        mode: CommitMode::PerStep,
    };
    let report = commit(&store, c).await.unwrap();
    assert!(
        report.groups.iter().any(|g| g.missing == vec![last.step]),
        "{report:?}"
    );
    // Every row is still there once, whatever was committed.
    let rows = rows_in_key_order(&store).await;
    assert_eq!(rows.num_rows(), input.num_rows());
    results.push(last);
    let c = Commit {
        job: &job,
        results,
        mode: CommitMode::PerStep,
    };
    let report = commit(&store, c).await.unwrap();
    assert_eq!(report.failed_groups(), 0, "{report:?}");
    in_order_and_verified(&store, &layout, &input)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_merge_step_over_more_runs_than_one_pass_holds_merges_in_passes() {
    let c = fixed_case();
    let (layout, input) = table(&c);
    let dir = tempfile::tempdir().unwrap();
    let paths = files(&c, &input, dir.path());
    assert!(paths.len() >= 3, "{paths:?}");
    let single = new_store(&dir, "single", &layout).await;
    sorted_load(&single, &paths).await;
    // A budget whose merge holds two runs at once, against a run from each file.
    let mut opts = plan_options(4);
    opts.geometry.budget_bytes = 8_000_000;
    let store = new_store(&dir, "s", &layout).await;
    let job = plan_load(&store, "t", &paths, &opts).await.unwrap();
    let results = run_all(&store, &job).await;
    let passes: Vec<usize> = results
        .iter()
        .filter(|r| r.kind == ravel_compact::job::StepKind::Merge && r.rows > 0)
        .map(|r| r.cost.passes)
        .collect();
    assert!(
        !passes.is_empty() && passes.iter().all(|&p| p >= 2),
        "{passes:?}"
    );
    let report = commit_whole(&store, &job, results).await;
    assert_eq!(report.rows as usize, input.num_rows());
    assert_eq!(seq_in_order(&store).await, seq_in_order(&single).await);
    in_order_and_verified(&store, &layout, &input)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn no_spill_object_reaches_across_a_ranges_start() {
    let c = fixed_case();
    let (layout, input) = table(&c);
    let dir = tempfile::tempdir().unwrap();
    let paths = files(&c, &input, dir.path());
    let store = new_store(&dir, "s", &layout).await;
    let job = plan_load(&store, "t", &paths, &plan_options(5))
        .await
        .unwrap();
    let starts: Vec<Vec<serde_json::Value>> = job
        .steps
        .iter()
        .filter_map(|s| match &s.work {
            ravel_compact::job::StepWork::Merge { lo, .. } => lo.clone(),
            _ => None,
        })
        .collect();
    assert_eq!(starts.len(), 4, "five ranges");
    let mut spill = 0;
    for s in &job.steps {
        let r = run_step(&store, &job, s.index).await.unwrap();
        if r.kind != ravel_compact::job::StepKind::Split {
            continue;
        }
        for o in &r.objects {
            spill += 1;
            let (first, last) = (o.first_key.as_ref().unwrap(), o.last_key.as_ref().unwrap());
            for lo in &starts {
                let across = ravel_manifest::compare_keys(first, lo).is_lt()
                    && ravel_manifest::compare_keys(last, lo).is_ge();
                assert!(!across, "{} holds {first:?}..{last:?} across {lo:?}", o.key);
            }
        }
    }
    assert!(spill > 0);
}

/// An edit of a plan (before its steps run) or of its results (before the commit). Indices are
/// taken modulo what there is.
#[derive(Debug, Clone)]
enum Edit {
    /// A merge step's range ends inside itself.
    NarrowRange { step: usize },
    /// A merge step's range reaches over its neighbour's.
    WidenRange { step: usize },
    /// A merge step is taken out (the steps after it renumbered).
    DropRange { step: usize },
    /// A load's file is taken out of its split share (a merge's object out of its set).
    DropInput { input: usize },
    /// A load's file is read by a second split step too (a merge's object listed twice).
    DuplicateInput { input: usize },
    /// An input no step reads (a merge's object that is not in the store).
    AddInput,
    DropObject {
        result: usize,
        object: usize,
        rows_too: bool,
    },
    ObjectRows {
        result: usize,
        object: usize,
        delta: u64,
        result_too: bool,
    },
    ObjectBytes {
        result: usize,
        object: usize,
        delta: u64,
    },
    /// The plan's table, once the steps ran.
    RenameTable,
}

fn edit() -> impl Strategy<Value = Edit> {
    let i = || 0usize..64;
    prop_oneof![
        i().prop_map(|step| Edit::NarrowRange { step }),
        i().prop_map(|step| Edit::WidenRange { step }),
        i().prop_map(|step| Edit::DropRange { step }),
        i().prop_map(|input| Edit::DropInput { input }),
        i().prop_map(|input| Edit::DuplicateInput { input }),
        Just(Edit::AddInput),
        (i(), i(), any::<bool>()).prop_map(|(result, object, rows_too)| Edit::DropObject {
            result,
            object,
            rows_too
        }),
        (i(), i(), 1u64..1000, any::<bool>()).prop_map(|(result, object, delta, result_too)| {
            Edit::ObjectRows {
                result,
                object,
                delta,
                result_too,
            }
        }),
        (i(), i(), 1u64..1000).prop_map(|(result, object, delta)| Edit::ObjectBytes {
            result,
            object,
            delta
        }),
        Just(Edit::RenameTable),
    ]
}

/// The range ends of merge step `step`.
fn ends(job: &mut Job, step: usize) -> (&mut Option<Vec<Value>>, &mut Option<Vec<Value>>) {
    match &mut job.steps[step].work {
        StepWork::Merge { lo, hi, .. } => (lo, hi),
        other => panic!("step {step} is {other:?}"),
    }
}

/// Applies a range edit to merge step `step % merge steps`; `fine` is a plan of the same input
/// cut finer (its range starts are keys inside the plan's ranges).
fn edit_range(job: &mut Job, edit: &Edit, fine: &Job) {
    let merges: Vec<usize> = job.merge_steps().map(|s| s.index).collect();
    let (Edit::NarrowRange { step } | Edit::WidenRange { step } | Edit::DropRange { step }) = edit
    else {
        return;
    };
    let Some(&m) = merges.get(step % merges.len().max(1)) else {
        return;
    };
    let next = merges.iter().find(|&&n| n > m).copied();
    match edit {
        Edit::NarrowRange { .. } => {
            let (lo, hi) = ends(job, m);
            let (lo, hi) = (lo.clone(), hi.clone());
            if let Some(k) = fine.range_starts_within(&lo, &hi) {
                *ends(job, m).1 = Some(k);
            }
        }
        Edit::WidenRange { .. } => match next {
            Some(n) => *ends(job, m).1 = ends(job, n).1.clone(),
            None => *ends(job, m).0 = None,
        },
        _ => {
            job.steps.remove(m);
            job.steps[m..].iter_mut().for_each(|s| s.index -= 1);
        }
    }
}

/// A range start of `job` strictly inside `[lo, hi)`.
trait Starts {
    fn range_starts_within(
        &self,
        lo: &Option<Vec<Value>>,
        hi: &Option<Vec<Value>>,
    ) -> Option<Vec<Value>>;
}

impl Starts for Job {
    fn range_starts_within(
        &self,
        lo: &Option<Vec<Value>>,
        hi: &Option<Vec<Value>>,
    ) -> Option<Vec<Value>> {
        let gt = |k: &Vec<Value>| lo.as_ref().is_none_or(|lo| compare_keys(k, lo).is_gt());
        let lt = |k: &Vec<Value>| hi.as_ref().is_none_or(|hi| compare_keys(k, hi).is_lt());
        self.merge_steps().find_map(|s| match &s.work {
            StepWork::Merge { lo: Some(k), .. } if gt(k) && lt(k) => Some(k.clone()),
            _ => None,
        })
    }
}

/// Split step `step`'s files.
fn split_files(job: &mut Job, step: usize) -> &mut Vec<String> {
    match &mut job.steps[step].work {
        StepWork::Split { files, .. } => files,
        other => panic!("step {step} is {other:?}"),
    }
}

/// Applies an input edit to a load's plan.
fn edit_load_inputs(job: &mut Job, edit: &Edit, dir: &std::path::Path) {
    let shares: Vec<usize> = job
        .steps
        .iter()
        .filter(|s| matches!(s.work, StepWork::Split { .. }))
        .map(|s| s.index)
        .collect();
    let pick = |input: usize| shares[input % shares.len()];
    match edit {
        Edit::DropInput { input } => {
            split_files(job, pick(*input)).pop();
        }
        Edit::DuplicateInput { input } => {
            let file = split_files(job, pick(*input)).first().cloned();
            split_files(job, pick(*input + 1)).extend(file);
        }
        Edit::AddInput => job.inputs.push(ravel_log::InputFile {
            name: dir.join("extra.parquet").display().to_string(),
            size: 4096,
            version: "1".into(),
            modified_ms: None,
        }),
        _ => {}
    }
}

/// Applies an input edit to a merge's plan: its sets' objects.
fn edit_merge_inputs(job: &mut Job, edit: &Edit) {
    let Some(chain) = job
        .sets
        .iter_mut()
        .flatten()
        .find(|c| !c.objects.is_empty())
    else {
        return;
    };
    let n = chain.objects.len();
    match edit {
        Edit::DropInput { input } => {
            chain.objects.remove(input % n);
        }
        Edit::DuplicateInput { input } => {
            let o = chain.objects[input % n].clone();
            chain.objects.push(o);
        }
        Edit::AddInput => {
            let mut o = chain.objects[n - 1].clone();
            o.key = format!("t/data/{}.parquet", "0".repeat(64));
            chain.objects.push(o);
        }
        _ => {}
    }
}

/// Applies a result edit to one of the merge results that hold objects.
fn edit_results(results: &mut [StepResult], edit: &Edit) {
    let mut merges: Vec<&mut StepResult> = results
        .iter_mut()
        .filter(|r| r.kind == ravel_compact::job::StepKind::Merge && !r.objects.is_empty())
        .collect();
    let pick = |result: &usize, n: usize| result % n.max(1);
    let n = merges.len();
    match edit {
        Edit::DropObject {
            result,
            object,
            rows_too,
        } if n > 0 => {
            let r = &mut merges[pick(result, n)];
            let gone = r.objects.remove(object % r.objects.len());
            if *rows_too {
                r.rows -= gone.rows;
            }
        }
        Edit::ObjectRows {
            result,
            object,
            delta,
            result_too,
        } if n > 0 => false_rows(
            merges.swap_remove(pick(result, n)),
            *object,
            *delta,
            *result_too,
        ),
        Edit::ObjectBytes {
            result,
            object,
            delta,
        } if n > 0 => {
            let r = &mut merges[pick(result, n)];
            let i = object % r.objects.len();
            r.objects[i].bytes += delta;
        }
        _ => {}
    }
}

/// A false row count of one object: the result's total carries it, or another object of the
/// result makes up for it.
fn false_rows(r: &mut StepResult, object: usize, delta: u64, result_too: bool) {
    let n = r.objects.len();
    let i = object % n;
    r.objects[i].rows += delta;
    let other = (i + 1) % n;
    if !result_too && other != i && r.objects[other].rows >= delta {
        r.objects[other].rows -= delta;
    } else {
        r.rows += delta;
    }
}

/// Runs every step; `None` when one fails (the edit broke the plan for the workers).
async fn run_all_or_fail(store: &Store, job: &Job) -> Option<Vec<StepResult>> {
    let mut out = Vec::new();
    for s in &job.steps {
        out.push(run_step(store, job, s.index).await.ok()?);
    }
    Some(out)
}

/// A load planned, edited, run, its results edited and committed: refused as bad input with
/// nothing published, or every input row published once.
async fn edited_load(salt: u64, steps: usize, edit: Edit) -> Result<(), TestCaseError> {
    let p = crate::job_checks::planned(salt, steps).await;
    let fine = plan_load(&p.store, "t", &p.paths, &plan_options(steps * 4))
        .await
        .unwrap();
    let mut job = p.job.clone();
    edit_range(&mut job, &edit, &fine);
    edit_load_inputs(&mut job, &edit, p.dir.path());
    let Some(results) = run_all_or_fail(&p.store, &job).await else {
        prop_assert_eq!(newest_version(&p.store).await, None);
        return Ok(());
    };
    match commit_edited(&p.store, &mut job, results, &edit).await {
        Ok(_) => in_order_and_verified(&p.store, &p.layout, &p.input).await?,
        Err(e) => {
            prop_assert!(e.is_invalid_input(), "{}", ravel_store::ErrorChain::new(&e));
            prop_assert_eq!(newest_version(&p.store).await, None);
        }
    }
    let u = crate::job_checks::version_of(&p.store, "u").await;
    prop_assert_eq!(u, None, "nothing published in the other table");
    Ok(())
}

/// `results` edited as `edit` says, committed whole with `job` (renamed to the other table
/// when `edit` renames it).
async fn commit_edited(
    store: &Store,
    job: &mut Job,
    mut results: Vec<StepResult>,
    edit: &Edit,
) -> Result<ravel_compact::job::CommitReport, ravel_compact::CompactError> {
    edit_results(&mut results, edit);
    if matches!(edit, Edit::RenameTable) {
        job.table = "u".into();
    }
    let c = Commit {
        job,
        results,
        mode: CommitMode::Whole,
    };
    commit(store, c).await
}

/// A compaction planned, edited, run, its results edited and committed: refused with nothing
/// published (as bad input, or as a conflict for an input that is not in the table), or the
/// table's rows all there once.
async fn edited_compaction(salt: u64, steps: usize, edit: Edit) -> Result<(), TestCaseError> {
    let c = sized_case(600, salt);
    let (layout, input) = table(&c);
    let dir = tempfile::tempdir().unwrap();
    let store = new_store(&dir, "s", &layout).await;
    ravel_testkit::set_layout(&store, "u", &layout).await;
    three_loads(&store, &c, &input).await;
    let before = newest_version(&store).await;
    let (coarse, finer) = (plan_options(steps), plan_options(steps * 4));
    let mut job = plan_compact(&store, "t", &coarse, Merge::Compact)
        .await
        .unwrap();
    let fine = plan_compact(&store, "t", &finer, Merge::Compact)
        .await
        .unwrap();
    edit_range(&mut job, &edit, &fine);
    edit_merge_inputs(&mut job, &edit);
    let results = run_all_or_fail(&store, &job).await;
    if let Some(results) = results
        && let Err(e) = commit_edited(&store, &mut job, results, &edit).await
    {
        let chain = ravel_store::ErrorChain::new(&e).to_string();
        prop_assert!(e.is_invalid_input() || e.is_conflict(), "{}", chain);
        prop_assert_eq!(newest_version(&store).await, before, "{}", chain);
    }
    let u = crate::job_checks::version_of(&store, "u").await;
    prop_assert_eq!(u, None, "nothing published in the other table");
    every_row_once(&store, &input).await
}

/// The table holds every input row once (in whatever order its objects overlap) and verifies.
pub(crate) async fn every_row_once(
    store: &Store,
    input: &RecordBatch,
) -> Result<(), TestCaseError> {
    let mut seq = seq_in_order(store).await;
    seq.sort_unstable();
    prop_assert!(
        seq.iter().copied().eq(0..input.num_rows() as i64),
        "every row once"
    );
    let verified = ravel_verify::verify(store, "t", &ravel_verify::VerifyOptions::deep())
        .await
        .unwrap();
    prop_assert!(verified.holds(), "{:#?}", verified.violations);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(12), ..ProptestConfig::default() })]

    #[test]
    fn an_edited_load_commits_every_row_once_or_nothing(
        salt in 0u64..1000, steps in 2usize..5, edit in edit()
    ) {
        let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
        rt.block_on(edited_load(salt, steps, edit))?;
    }

    #[test]
    fn an_edited_compaction_commits_every_row_once_or_nothing(
        salt in 0u64..1000, steps in 2usize..5, edit in edit()
    ) {
        let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
        rt.block_on(edited_compaction(salt, steps, edit))?;
    }
}
