//! `ravel-load verify`: checks a stored table against its promises and reports its figures.

use anyhow::{Context, Result, bail};
use clap::Args;
use ravel_store::Store;
use ravel_verify::{ClusteringInfo, VerifyOptions, VerifyReport, verify};

#[derive(Args)]
pub struct VerifyArgs {
    #[command(flatten)]
    pub table: crate::flags::TableArgs,
    /// Also read every object's rows: clustering order and true key ranges.
    #[arg(long)]
    pub deep: bool,
    /// Accepted for compatibility and ignored: the clustering figures are exact, not sampled.
    #[arg(long, hide = true)]
    pub sample_points: Option<usize>,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Exit 0 when the table holds its promises, 1 when it does not (each violation printed with its
/// object), 2 for bad usage (no such store or table).
pub fn run(args: VerifyArgs) -> Result<()> {
    let store = Store::open(&args.table.store)?;
    let mut opts = VerifyOptions::default();
    opts.deep = args.deep;
    let report = crate::runtime()?
        .block_on(verify(&store, &args.table.name, &opts))
        .with_context(|| {
            format!(
                "verifying table {:?} in {}",
                args.table.name, args.table.store
            )
        })?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_report(&report);
    }
    if !report.holds() {
        bail!(
            "table {:?} does not hold its promises: {} violation(s)",
            report.table,
            report.violations.len()
        );
    }
    Ok(())
}

fn print_report(r: &VerifyReport) {
    let version = r
        .version
        .map_or_else(|| "no version".to_string(), |v| format!("version {v}"));
    println!(
        "table {} {version} ({} log entries): {} manifest(s), {} object(s), {} rows, {} bytes{}",
        r.table,
        r.versions,
        r.manifests,
        r.objects,
        r.rows,
        r.bytes,
        if r.deep { " (deep: rows read)" } else { "" }
    );
    if let Some(s) = &r.sizes {
        println!(
            "object bytes: min {} / p10 {} / median {} / p90 {} / max {}",
            s.min, s.p10, s.median, s.p90, s.max
        );
    }
    match &r.overlap {
        Some(c) => print_clustering(c),
        None => println!("clustering: no key ranges (arrival-order table)"),
    }
    if !r.orphans.is_empty() {
        println!(
            "{} orphan(s) under data/ and _ravel/blooms/ that no version lists (left by failed loads or compactions):",
            r.orphans.len()
        );
        for o in &r.orphans {
            println!("  {o}");
        }
    }
    if !r.unnamed_manifests.is_empty() {
        println!(
            "{} manifest(s) under _ravel/manifests/ that no version names (left by loads or compactions killed before their commit, or by a lost log entry):",
            r.unnamed_manifests.len()
        );
        for m in &r.unnamed_manifests {
            println!("  {m}");
        }
    }
    if r.removed > 0 {
        println!(
            "{} object(s) removed by compaction, {} still stored (gc deletes them after its retention)",
            r.removed, r.removed_stored
        );
    }
    for n in &r.notes {
        println!("note: {n}");
    }
    if r.holds() {
        println!("ok: every promise holds");
    } else {
        for v in &r.violations {
            println!("VIOLATION {}: {}", v.object, v.problem);
        }
    }
}

/// The clustering figures on two lines: the summary, then the objects by depth.
fn print_clustering(c: &ClusteringInfo) {
    println!(
        "clustering: {} objects, depth max {}, average depth {:.2}, average overlaps {:.2} (touching ends counted once)",
        c.total_objects, c.max_depth, c.average_depth, c.average_overlaps
    );
    let histogram: Vec<String> = c
        .depth_histogram
        .iter()
        .map(|(depth, objects)| format!("{depth}: {objects}"))
        .collect();
    println!("objects by depth: {}", histogram.join(", "));
}
