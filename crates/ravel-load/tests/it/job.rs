//! `plan`, `run-step` and `commit` through the binary: a plan asked for more steps than its
//! input fills is cut to what it fills, with a note; a commit of a plan edited by hand is
//! refused with exit 2, naming what disagrees, and publishes nothing; the plan as planned
//! commits.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::common::{fails, ok, p, versions};
use crate::compact::{generated, hits_store};

fn write_json(path: &Path, value: &Value) {
    std::fs::write(path, serde_json::to_vec_pretty(value).unwrap()).unwrap();
}

/// Runs every step of the plan at `plan`; returns the results' paths.
fn run_steps(plan: &Path, steps: usize) -> Vec<PathBuf> {
    let dir = plan.parent().unwrap();
    (0..steps)
        .map(|i| {
            let out = dir.join(format!("result-{i}.json"));
            ok(&format!(
                "run-step --plan {} --step {i} --out {}",
                p(plan),
                p(&out)
            ));
            out
        })
        .collect()
}

fn commit_line(plan: &Path, results: &[PathBuf]) -> String {
    let results: Vec<&str> = results.iter().map(|r| p(r)).collect();
    format!("commit --plan {} {}", p(plan), results.join(" "))
}

#[test]
fn a_plan_cut_to_its_input_commits_and_the_same_plan_edited_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let store = hits_store(dir.path());
    let inputs = [
        generated(dir.path(), "a.parquet", 1000, 1),
        generated(dir.path(), "b.parquet", 1000, 2),
    ];
    let plan = dir.path().join("plan.json");
    let out = ok(&format!(
        "plan load --store {} --table hits --steps 100000 --object-bytes 100000 --out {} --input {} {}",
        p(&store),
        p(&plan),
        p(&inputs[0]),
        p(&inputs[1])
    ));
    assert!(out.contains("note: --steps 100000 clamped to"), "{out}");
    let job: Value = serde_json::from_slice(&std::fs::read(&plan).unwrap()).unwrap();
    let steps = job["steps"].as_array().unwrap();
    let bytes: u64 = inputs.iter().map(|i| i.metadata().unwrap().len()).sum();
    let merges = steps.iter().filter(|s| s["kind"] == "merge").count() as u64;
    assert!(
        merges <= bytes.div_ceil(100_000),
        "{merges} merge steps for {bytes} bytes"
    );
    let results = run_steps(&plan, steps.len());

    // An input the job lists and no split step reads: it would be recorded as consumed.
    let mut edited = job.clone();
    let extra = dir.path().join("extra.parquet");
    let entry = json!({"name": p(&extra), "size": 1, "version": "1"});
    edited["inputs"].as_array_mut().unwrap().push(entry);
    let edited_plan = dir.path().join("edited.json");
    write_json(&edited_plan, &edited);
    let err = fails(2, &commit_line(&edited_plan, &results));
    assert!(err.contains("no split step reads"), "{err}");
    assert!(err.contains(p(&extra)), "{err}");
    let log = store.join("hits").join("_delta_log");
    assert_eq!(versions(&log), 0, "nothing published");

    ok(&commit_line(&plan, &results));
    assert_eq!(versions(&log), 1);
}
