//! The text report of a merge: `compact`, `maintain`, and the maintenance after `load`.

use ravel_compact::CompactReport;

pub fn print_report(r: &CompactReport) {
    let read = r.read_version.map_or("-".to_string(), |v| v.to_string());
    let what = if r.policy.is_some() {
        "maintain"
    } else {
        "compact"
    };
    if r.input_objects == 0 {
        println!(
            "table {}: nothing to {what} at version {read}: {} ({} object(s) left as they are, overlap depth {}); nothing written",
            r.table, r.reason, r.untouched_objects, r.depth_before
        );
        print_totals(r);
        return;
    }
    if r.dry_run {
        println!(
            "table {} version {read}: would merge {} object(s) ({} bytes, {} rows) of {} run(s), overlap depth {}; {} object(s) left as they are; dry run, nothing written",
            r.table,
            r.input_objects,
            r.input_bytes,
            r.input_rows,
            r.chains,
            r.depth_before,
            r.untouched_objects
        );
        return;
    }
    let version = r.version.map_or("-".to_string(), |v| v.to_string());
    println!(
        "table {}: version {read} -> {version}: merged {} object(s) ({} bytes, {} rows) of {} run(s) into {} object(s) ({} bytes, {} rows) in {} step(s) of {} pass(es) of at most {} runs; {} object(s) left as they are",
        r.table,
        r.input_objects,
        r.input_bytes,
        r.input_rows,
        r.chains,
        r.output_objects,
        r.output_bytes,
        r.output_rows,
        r.steps,
        r.passes,
        r.fan_in,
        r.untouched_objects
    );
    let s = &r.stages;
    println!("chosen: {}", r.reason);
    print_totals(r);
    println!(
        "overlap depth {} -> {} (bound {}); {} bytes written ({:.2}x the output); peak budget {} bytes; plan {:.2} s, merge and write {:.2} s (sort {:.2}, gather {:.2}, encode {:.2}, upload {:.2}), commit {:.2} s; wall {:.2} s",
        r.depth_before,
        r.depth_after,
        r.depth_bound.map_or("none".to_string(), |d| d.to_string()),
        r.written_bytes,
        r.written_over_output,
        r.peak_budget_bytes,
        s.plan_s,
        s.merge_s,
        s.write.sort_s,
        s.write.gather_s,
        s.write.encode_s,
        s.write.upload_s,
        s.commit_s,
        r.wall_s
    );
}

/// What keeping the table clustered has cost since its last full compaction.
fn print_totals(r: &CompactReport) {
    println!(
        "since the last full compaction: {} bytes loaded, {} bytes written merging: write amplification {:.2} (written over loaded)",
        r.loaded_since_full_bytes, r.written_since_full_bytes, r.write_amplification
    );
}
