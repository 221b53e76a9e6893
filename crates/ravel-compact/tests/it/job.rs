//! Plan, steps and commit against the single-machine commands on arbitrary tables: a job's
//! load publishes exactly the rows and order of a sorted load (`load --compact`) of the same
//! files, and a job's compaction those of `compact`. Then the protocol's promises: a step run
//! twice gives the same commit, a step that failed leaves nothing live, and a plan whose base
//! was compacted meanwhile fails as a conflict.

use std::path::PathBuf;

use arrow::array::{AsArray, RecordBatch};
use arrow::datatypes::Int64Type;
use parquet::arrow::ArrowWriter;
use proptest::prelude::*;
use ravel_compact::job::{
    Commit, CommitMode, Job, Merge, PlanOptions, StepGeometry, StepResult, commit, plan_compact,
    plan_load, run_step,
};
use ravel_compact::{CompactError, CompactOptions, SortedLoad, compact};
use ravel_loader::{Files, InputFormat};
use ravel_store::Store;
use ravel_testkit::arbitrary::{Case, case, cases, split};

use crate::properties::{in_order_and_verified, load, load_options, rows_in_key_order, table};

fn plan_options(steps: usize) -> PlanOptions {
    PlanOptions {
        steps,
        geometry: StepGeometry::from_load(&load_options()),
    }
}

fn compact_options() -> CompactOptions {
    CompactOptions {
        load: load_options(),
        fan_in: None,
        max_input_bytes: None,
        dry_run: false,
        max_steps: None,
    }
}

/// Runs every step of `job` in order and returns their results.
async fn run_all(store: &Store, job: &Job) -> Vec<StepResult> {
    let mut out = Vec::new();
    for s in &job.steps {
        out.push(run_step(store, job, s.index).await.unwrap());
    }
    out
}

async fn commit_whole(
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
fn files(c: &Case, input: &RecordBatch, dir: &std::path::Path) -> Vec<PathBuf> {
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

async fn new_store(dir: &tempfile::TempDir, name: &str, layout: &ravel_layout::Layout) -> Store {
    let store = Store::create(dir.path().join(name).to_str().unwrap()).unwrap();
    ravel_testkit::set_layout(&store, "t", layout).await;
    store
}

async fn newest_version(store: &Store) -> Option<u64> {
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
async fn three_loads(store: &Store, c: &Case, input: &RecordBatch) {
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
    let rows = 3000;
    let cells = |salt: u64| {
        (0..rows)
            .map(|i| (false, (i as u64).wrapping_mul(2654435761) ^ salt))
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
        pieces: vec![1000],
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
