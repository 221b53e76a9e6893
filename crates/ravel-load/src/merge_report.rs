//! The text report of a merge: `compact`, `maintain`, and the maintenance after `load`.

use ravel_compact::CompactReport;

pub fn print_report(r: &CompactReport) {
    if let Some(a) = &r.adopted {
        print_adoption(r, a);
    }
    // The merge plans on the version the adoption committed (or would).
    let read = r.adopted.as_ref().map(|a| a.version).or(r.read_version);
    let read = read.map_or("-".to_string(), |v| v.to_string());
    if r.input_objects == 0 {
        print_nothing_to_merge(r, &read);
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
    print_merged(r, &read);
}

/// A run that merged nothing (after taking in other writers' objects, if it did).
fn print_nothing_to_merge(r: &CompactReport, read: &str) {
    let what = match r.policy {
        Some(_) => "maintain",
        None => "compact",
    };
    let then = match r.adopted {
        Some(_) => "then ",
        None => "",
    };
    let written = match (&r.adopted, r.dry_run) {
        (Some(_), false) => "",
        _ => "; nothing written",
    };
    println!(
        "table {}: {then}nothing to {what} at version {read}: {} ({} object(s) left as they are, overlap depth {}){written}",
        r.table, r.reason, r.untouched_objects, r.depth_before
    );
    print_totals(r);
}

/// A run that merged: what it read and wrote, at what cost.
fn print_merged(r: &CompactReport, read: &str) {
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

/// What taking in other Delta writers' objects did (or, in a dry run, would do): the version,
/// the objects taken in and those written in their place.
fn print_adoption(r: &CompactReport, a: &ravel_compact::Adopted) {
    let read = r.read_version.map_or("-".to_string(), |v| v.to_string());
    let taken = format!(
        "{} object(s) other Delta writers added ({} rows), rewritten as {} object(s) under the layout",
        a.objects, a.rows, a.output_objects
    );
    match r.dry_run {
        true => println!(
            "table {}: version {read}: would take in {taken} ({} bytes) as version {}; dry run, nothing written",
            r.table, a.written_bytes, a.version
        ),
        false => println!(
            "table {}: version {read} -> {}: took in {taken}; {} bytes written",
            r.table, a.version, a.written_bytes
        ),
    }
}

/// What keeping the table clustered has cost since its last full compaction.
fn print_totals(r: &CompactReport) {
    println!(
        "since the last full compaction: {} bytes loaded, {} bytes written merging: write amplification {:.2} (written over loaded)",
        r.loaded_since_full_bytes, r.written_since_full_bytes, r.write_amplification
    );
}
