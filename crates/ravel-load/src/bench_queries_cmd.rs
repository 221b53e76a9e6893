//! `ravel-load bench-queries`: each statement of a file cold and hot, with its store traffic.
//! Only queries run: a file with a statement that writes, defines or sets is refused before
//! any runs. Exit 1 when any statement failed (the results and the summary still print).

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use ravel_query::{QueryOptions, StatementRun, bench_statements, statements};

use crate::BadInput;

#[derive(Args)]
pub struct BenchQueriesArgs {
    #[command(flatten)]
    pub table: crate::flags::TableArgs,
    /// Statements, one per line (e.g. ClickBench's queries.sql).
    #[arg(long)]
    pub queries: PathBuf,
    /// The name statements use for the table (e.g. `hits` for a table loaded under another
    /// name).
    #[arg(long = "as")]
    pub sql_name: Option<String>,
    /// Do not skip objects by the manifest's ranges (to compare).
    #[arg(long)]
    pub no_manifest_pruning: bool,
    /// Print the results as JSON (an array, one element per statement).
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: BenchQueriesArgs) -> Result<()> {
    let text = std::fs::read_to_string(&args.queries)
        .map_err(|e| BadInput(format!("--queries {}: {e}", args.queries.display())))?;
    let list = statements(&text);
    if list.is_empty() {
        return Err(BadInput(format!(
            "--queries {}: no statements",
            args.queries.display()
        ))
        .into());
    }
    let opts = QueryOptions {
        manifest_pruning: !args.no_manifest_pruning,
        sql_name: args.sql_name.clone(),
        target_partitions: None,
        version: None,
    };
    let json = args.json;
    let mut header = !json;
    let runs = crate::runtime()?
        .block_on(bench_statements(
            &args.table.store,
            &args.table.name,
            &list,
            &opts,
            |r| {
                if std::mem::take(&mut header) {
                    print_header();
                }
                if !json {
                    print_row(r);
                }
            },
        ))
        .with_context(|| {
            format!(
                "benchmarking table {:?} in {}",
                args.table.name, args.table.store
            )
        })?;
    let failed = runs.iter().filter(|r| r.error.is_some()).count();
    if args.json {
        println!("{}", serde_json::to_string_pretty(&runs)?);
    } else {
        let sum = |f: fn(&StatementRun) -> Option<f64>| runs.iter().filter_map(f).sum::<f64>();
        println!(
            "total: cold {:.3} s, hot {:.3} s, {} GETs, {} bytes; {failed} of {} statements failed",
            sum(|r| r.cold_s),
            sum(|r| r.hot_s),
            sum(|r| r.cold_gets.map(|g| g as f64)),
            sum(|r| r.cold_bytes.map(|b| b as f64)),
            runs.len()
        );
    }
    if failed > 0 {
        anyhow::bail!(
            "{failed} of {} statements of {} failed (their errors are in the results)",
            runs.len(),
            args.queries.display()
        );
    }
    Ok(())
}

fn print_header() {
    println!(
        "{:>3} {:>8} {:>9} {:>9} {:>6} {:>12} {:>9}  error",
        "q", "rows", "cold s", "hot s", "GETs", "bytes", "objects"
    );
}

fn print_row(r: &StatementRun) {
    let opt = |v: Option<String>| v.unwrap_or_else(|| "-".into());
    println!(
        "{:>3} {:>8} {:>9} {:>9} {:>6} {:>12} {:>9}  {}",
        r.number,
        opt(r.rows.map(|v| v.to_string())),
        opt(r.cold_s.map(|v| format!("{v:.3}"))),
        opt(r.hot_s.map(|v| format!("{v:.3}"))),
        opt(r.cold_gets.map(|v| v.to_string())),
        opt(r.cold_bytes.map(|v| v.to_string())),
        opt(r
            .objects_touched
            .zip(r.objects_total)
            .map(|(a, b)| format!("{a}/{b}"))),
        r.error.as_deref().unwrap_or("")
    );
}
