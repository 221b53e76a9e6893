//! A plan or results edited by hand never commit wrong rows. Each edit below once committed a
//! table holding rows missing or twice, inputs consumed that were never read, or objects of
//! another table; the commit now refuses it as bad input, naming what disagrees, and publishes
//! nothing. And a plan asked for more steps than its input fills is cut to what it fills.

use std::path::PathBuf;

use arrow::array::RecordBatch;
use ravel_compact::job::{
    Commit, CommitMode, Job, Merge, StepKind, StepResult, StepWork, commit, plan_compact, plan_load,
};
use ravel_store::{ErrorChain, Store};
use serde_json::Value;

use crate::job::{files, newest_version, plan_options, run_all, sized_case, three_loads};
use crate::properties::table;

/// A small load planned in three merge steps: three files, table `t` and, beside it, table `u`
/// of the same layout.
pub(crate) struct Planned {
    pub dir: tempfile::TempDir,
    pub store: Store,
    pub layout: ravel_layout::Layout,
    pub input: RecordBatch,
    pub paths: Vec<PathBuf>,
    pub job: Job,
}

pub(crate) async fn planned(salt: u64, steps: usize) -> Planned {
    let (layout, input) = table(&sized_case(900, salt));
    let dir = tempfile::tempdir().unwrap();
    let paths = files(&sized_case(900, salt), &input, dir.path());
    assert_eq!(paths.len(), 3, "{paths:?}");
    let store = Store::create(dir.path().join("s").to_str().unwrap()).unwrap();
    ravel_testkit::set_layout(&store, "t", &layout).await;
    ravel_testkit::set_layout(&store, "u", &layout).await;
    let job = plan_load(&store, "t", &paths, &plan_options(steps))
        .await
        .unwrap();
    Planned {
        dir,
        store,
        layout,
        input,
        paths,
        job,
    }
}

/// The newest version of `table` in `store`.
pub(crate) async fn version_of(store: &Store, table: &str) -> Option<u64> {
    let log = ravel_log::TableLog::new(
        store.object_store().clone(),
        ravel_store::TablePaths::new(table).unwrap(),
    );
    log.latest().await.unwrap().version
}

/// Commits `job` with `results`, which must be refused as bad input naming each of `names`,
/// with nothing published in `t` or `u`; returns the message.
async fn refused(p: &Planned, job: &Job, results: Vec<StepResult>, names: &[&str]) -> String {
    let c = Commit {
        job,
        results,
        mode: CommitMode::Whole,
    };
    let err = commit(&p.store, c)
        .await
        .expect_err("the commit is refused");
    let message = ErrorChain::new(&err).to_string();
    assert!(err.is_invalid_input(), "{message}");
    for name in names {
        assert!(message.contains(name), "{message:?} does not name {name:?}");
    }
    assert_eq!(newest_version(&p.store).await, None, "{message}");
    assert_eq!(version_of(&p.store, "u").await, None, "{message}");
    message
}

/// The plan's merge steps, by index.
fn merges(job: &Job) -> Vec<usize> {
    job.merge_steps().map(|s| s.index).collect()
}

/// Merge step `step`'s range ends.
fn range(job: &mut Job, step: usize) -> (&mut Option<Vec<Value>>, &mut Option<Vec<Value>>) {
    match &mut job.steps[step].work {
        StepWork::Merge { lo, hi, .. } => (lo, hi),
        other => panic!("step {step} is {other:?}"),
    }
}

/// Split step `step`'s files.
fn split_files(job: &mut Job, step: usize) -> &mut Vec<String> {
    match &mut job.steps[step].work {
        StepWork::Split { files, .. } => files,
        other => panic!("step {step} is {other:?}"),
    }
}

/// A key strictly inside `[lo, hi)` among a finer plan's range starts.
fn inner_key(fine: &Job, lo: &Option<Vec<Value>>, hi: &Option<Vec<Value>>) -> Vec<Value> {
    let starts = fine.steps.iter().filter_map(|s| match &s.work {
        StepWork::Merge { lo: Some(k), .. } => Some(k.clone()),
        _ => None,
    });
    let above = |k: &Vec<Value>| lo.as_ref().is_none_or(|lo| compare(k, lo).is_gt());
    let below = |k: &Vec<Value>| hi.as_ref().is_none_or(|hi| compare(k, hi).is_lt());
    let mut inside = starts.filter(|k| above(k) && below(k));
    inside.next().expect("a finer plan cuts inside the range")
}

fn compare(a: &[Value], b: &[Value]) -> std::cmp::Ordering {
    ravel_manifest::compare_keys(a, b)
}

/// The merge results with two objects at least.
fn merge_results(results: &mut [StepResult]) -> Vec<&mut StepResult> {
    let merge = |r: &&mut StepResult| r.kind == StepKind::Merge && r.objects.len() >= 2;
    results.iter_mut().filter(merge).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_narrowed_merge_range_is_refused() {
    let p = planned(1, 3).await;
    let fine = plan_load(&p.store, "t", &p.paths, &plan_options(12))
        .await
        .unwrap();
    let mut job = p.job.clone();
    let m = merges(&job)[1];
    let (lo, hi) = range(&mut job, m);
    *hi = Some(inner_key(&fine, lo, hi));
    let results = run_all(&p.store, &job).await;
    let names = [
        format!("merge step {} starts at", m + 1),
        format!("step {m} before it ends at"),
    ];
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    refused(&p, &job, results, &names).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_widened_merge_range_is_refused() {
    let p = planned(2, 3).await;
    let mut job = p.job.clone();
    let m = merges(&job)[1];
    // The middle range reaches to the end: the last range's rows twice.
    *range(&mut job, m).1 = None;
    let results = run_all(&p.store, &job).await;
    let name = format!("merge step {} starts at", m + 1);
    refused(&p, &job, results, &[&name, "ends at open"]).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_plan_without_one_of_its_merge_steps_is_refused() {
    let p = planned(3, 3).await;
    let mut job = p.job.clone();
    let m = merges(&job)[1];
    job.steps.remove(m);
    for s in &mut job.steps[m..] {
        s.index -= 1;
    }
    let results = run_all(&p.store, &job).await;
    refused(&p, &job, results, &["the key ranges must meet"]).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_file_dropped_from_its_split_share_is_refused() {
    let p = planned(4, 3).await;
    let mut job = p.job.clone();
    let dropped = split_files(&mut job, 0).remove(0);
    let results = run_all(&p.store, &job).await;
    let names = [dropped.as_str(), "no split step reads"];
    refused(&p, &job, results, &names).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_file_listed_in_two_split_shares_is_refused() {
    let p = planned(5, 3).await;
    let mut job = p.job.clone();
    let file = split_files(&mut job, 0)[0].clone();
    split_files(&mut job, 1).push(file.clone());
    let results = run_all(&p.store, &job).await;
    let names = [
        file.as_str(),
        "read by split step 0 and again by split step 1",
    ];
    refused(&p, &job, results, &names).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_file_read_again_under_another_spelling_is_refused() {
    let p = planned(15, 3).await;
    let mut job = p.job.clone();
    let file = split_files(&mut job, 0)[0].clone();
    // The same file through `..`, listed as an input of its own and read by another share.
    let path = std::path::Path::new(&file);
    let dir = path.parent().unwrap();
    let again = dir
        .join("..")
        .join(dir.file_name().unwrap())
        .join(path.file_name().unwrap())
        .display()
        .to_string();
    let size = std::fs::metadata(&file).unwrap().len();
    job.inputs.push(ravel_log::InputFile {
        name: again.clone(),
        size,
        version: "1".into(),
        modified_ms: None,
    });
    split_files(&mut job, 1).push(again.clone());
    let results = run_all(&p.store, &job).await;
    refused(&p, &job, results, &[&again, "twice"]).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_input_no_split_step_reads_is_refused() {
    let p = planned(6, 3).await;
    let mut job = p.job.clone();
    let extra = p.dir.path().join("extra.parquet").display().to_string();
    job.inputs.push(ravel_log::InputFile {
        name: extra.clone(),
        size: 4096,
        version: "1".into(),
        modified_ms: None,
    });
    let results = run_all(&p.store, &job).await;
    refused(&p, &job, results, &[&extra, "no split step reads"]).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_result_missing_an_object_is_refused() {
    let p = planned(7, 3).await;
    let mut results = run_all(&p.store, &p.job).await;
    let mut edited = results.clone();
    let r = merge_results(&mut edited).remove(0);
    let gone = r.objects.remove(0);
    let step = r.step;
    refused(
        &p,
        &p.job,
        edited,
        &[&format!("the result of step {step} says")],
    )
    .await;
    // Its rows taken out too: the split steps' rows are not the merge steps'.
    let r = merge_results(&mut results).remove(0);
    r.objects.remove(0);
    r.rows -= gone.rows;
    let rows = p.input.num_rows() as u64;
    let names = [format!(
        "the split steps wrote {rows} rows, the merge steps {}",
        rows - gone.rows
    )];
    refused(&p, &p.job, results, &[&names[0]]).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_result_with_a_false_row_count_is_refused() {
    let p = planned(8, 3).await;
    let mut results = run_all(&p.store, &p.job).await;
    let mut edited = results.clone();
    // A false count the result's sum agrees with: the object's footer does not.
    let r = merge_results(&mut edited).remove(0);
    r.objects[0].rows += 1;
    r.objects[1].rows -= 1;
    let name = format!("of the result of step {}", r.step);
    refused(&p, &p.job, edited, &[&name, "rows by its footer"]).await;
    // A false count the result's total carries: more rows than the split steps wrote.
    let r = merge_results(&mut results).remove(0);
    r.objects[0].rows += 1000;
    r.rows += 1000;
    refused(&p, &p.job, results, &["the split steps wrote"]).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_result_with_a_false_size_is_refused() {
    let p = planned(9, 3).await;
    let mut results = run_all(&p.store, &p.job).await;
    let r = merge_results(&mut results).remove(0);
    r.objects[0].bytes += 1;
    let key = r.objects[0].key.clone();
    refused(&p, &p.job, results, &[&key, "bytes in the store"]).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_plan_renamed_to_another_table_publishes_nothing_there() {
    let p = planned(10, 3).await;
    let results = run_all(&p.store, &p.job).await;
    let mut job = p.job.clone();
    job.table = "u".into();
    let names = ["written for table \"t\", not for table \"u\""];
    refused(&p, &job, results.clone(), &names).await;
    // The results renamed too: their objects lie under table t.
    let renamed = results.into_iter().map(|r| {
        let mut v = serde_json::to_value(&r).unwrap();
        v["table"] = "u".into();
        serde_json::from_value(v).unwrap()
    });
    refused(&p, &job, renamed.collect(), &["does not lie under u/"]).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn steps_beyond_what_the_input_fills_are_cut_with_a_note() {
    let p = planned(11, 3).await;
    let opts = plan_options(100_000);
    let job = plan_load(&p.store, "t", &p.paths, &opts).await.unwrap();
    let bytes: u64 = job.inputs.iter().map(|i| i.size).sum();
    let bound = bytes.div_ceil(opts.geometry.object_bytes) as usize;
    let merge_steps = job.merge_steps().count();
    assert!(
        merge_steps <= bound,
        "{merge_steps} merge steps for {bytes} bytes"
    );
    let splits = job.steps.len() - merge_steps;
    assert_eq!(splits, p.paths.len(), "one split step per file at most");
    let notes = serde_json::to_value(&job).unwrap()["notes"].to_string();
    assert!(notes.contains("--steps 100000 clamped to"), "{notes}");
    // The plan cut so still loads every row once.
    let results = run_all(&p.store, &job).await;
    crate::job::commit_whole(&p.store, &job, results).await;
    crate::properties::in_order_and_verified(&p.store, &p.layout, &p.input)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_compaction_result_missing_an_object_is_refused() {
    let c = sized_case(900, 12);
    let (layout, input) = table(&c);
    let dir = tempfile::tempdir().unwrap();
    let store = crate::job::new_store(&dir, "s", &layout).await;
    three_loads(&store, &c, &input).await;
    let before = newest_version(&store).await;
    let job = plan_compact(&store, "t", &plan_options(3), Merge::Compact)
        .await
        .unwrap();
    let mut results = run_all(&store, &job).await;
    let r = merge_results(&mut results).remove(0);
    let gone = r.objects.remove(0);
    r.rows -= gone.rows;
    let c = Commit {
        job: &job,
        results,
        mode: CommitMode::Whole,
    };
    let err = commit(&store, c).await.expect_err("the commit is refused");
    let message = ErrorChain::new(&err).to_string();
    assert!(err.is_invalid_input(), "{message}");
    assert!(message.contains("read objects of"), "{message}");
    assert_eq!(newest_version(&store).await, before);
    crate::job::every_row_once(&store, &input).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_job_load_of_copies_under_new_names_publishes_their_rows_again() {
    let p = planned(16, 3).await;
    let results = run_all(&p.store, &p.job).await;
    let first = crate::job::commit_whole(&p.store, &p.job, results).await;
    assert!(!first.already_published);
    // The same files under new names: new inputs, as a single-machine load takes them.
    let copies: Vec<PathBuf> = (p.paths.iter())
        .map(|f| {
            let copy = f.with_extension("copy.parquet");
            std::fs::copy(f, &copy).unwrap();
            copy
        })
        .collect();
    let job = plan_load(&p.store, "t", &copies, &plan_options(3))
        .await
        .unwrap();
    let results = run_all(&p.store, &job).await;
    let second = crate::job::commit_whole(&p.store, &job, results).await;
    assert!(!second.already_published, "{second:?}");
    assert_eq!(second.rows, first.rows);
    assert!(second.version > first.version);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stored_split_result_that_says_its_inputs_hold_fewer_rows_is_refused() {
    use object_store::ObjectStoreExt;
    let p = planned(17, 3).await;
    let run = |s: usize| ravel_compact::job::run_step(&p.store, &p.job, s);
    let mut results = Vec::new();
    let splits = p
        .job
        .steps
        .iter()
        .filter(|s| matches!(s.work, StepWork::Split { .. }));
    for s in splits {
        results.push(run(s.index).await.unwrap());
    }
    // The split result the merge steps and the commit read, edited in the store: one object
    // of its spill left out, and its rows and an input's rows lowered to agree.
    let os = p.store.object_store();
    let listed: Vec<object_store::ObjectMeta> = {
        use futures::TryStreamExt;
        os.list(Some(&"t/_ravel/tmp".into()))
            .try_collect()
            .await
            .unwrap()
    };
    let key = listed
        .iter()
        .map(|m| m.location.clone())
        .find(|k| k.as_ref().ends_with("split-00000.json"))
        .expect("a stored split result");
    let bytes = os.get(&key).await.unwrap().bytes().await.unwrap();
    let mut r: StepResult = serde_json::from_slice(&bytes).unwrap();
    let gone = r.objects.remove(0);
    r.rows -= gone.rows;
    let i = (r.inputs.iter())
        .position(|i| i.rows >= gone.rows)
        .expect("an input as large as one spill object");
    r.inputs[i].rows -= gone.rows;
    os.put(&key, serde_json::to_vec(&r).unwrap().into())
        .await
        .unwrap();
    for s in p.job.merge_steps() {
        results.push(run(s.index).await.unwrap());
    }
    let input = r.inputs[i].name.clone();
    refused(&p, &p.job, results, &[&input, "rows by its footer"]).await;
}
