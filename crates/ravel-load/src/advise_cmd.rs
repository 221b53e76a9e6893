//! `ravel-load advise`: candidate layouts for a table, ranked by the bytes a log of statements
//! would fetch under each, estimated on a sample of the table; `--apply` stores the one
//! recommended as the table's next layout generation.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use ravel_advise::{Advice, AdviseOptions, Applied, Estimate};
use ravel_layout::Layout;
use serde::Serialize;

use crate::BadInput;

#[derive(Args)]
pub struct AdviseArgs {
    #[command(flatten)]
    pub table: crate::flags::TableArgs,
    /// Statements, one per line; a leading count and a tab weigh one (`120<TAB>SELECT …`).
    #[arg(long)]
    pub queries: PathBuf,
    /// Generated candidates to estimate, besides the current layout and arrival order.
    #[arg(long, default_value_t = AdviseOptions::default().candidates)]
    pub candidates: usize,
    /// Rows of the table's sample that every candidate is estimated on.
    #[arg(long, default_value_t = AdviseOptions::default().sample_rows)]
    pub sample_rows: usize,
    /// The name statements use for the table (e.g. `hits` for a table loaded under another
    /// name).
    #[arg(long = "as")]
    pub sql_name: Option<String>,
    /// Store the recommended layout as the table's next generation (`compact` then
    /// re-clusters the table by it).
    #[arg(long)]
    pub apply: bool,
    /// Print the advice as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: AdviseArgs) -> Result<()> {
    let bytes = std::fs::read(&args.queries)
        .map_err(|e| BadInput(format!("--queries {}: {e}", args.queries.display())))?;
    let log = ravel_advise::log_text(&bytes)
        .with_context(|| format!("--queries {}", args.queries.display()))?;
    let opts = AdviseOptions {
        candidates: args.candidates,
        sample_rows: args.sample_rows,
        sql_name: args.sql_name.clone(),
        ..AdviseOptions::default()
    };
    let (url, name) = (&args.table.store, &args.table.name);
    let rt = crate::runtime()?;
    let store = ravel_store::Store::open(url)?;
    let advice = rt
        .block_on(ravel_advise::advise(&store, name, log, &opts))
        .with_context(|| format!("advising on table {name:?} from {}", args.queries.display()))?;
    let applied = match args.apply {
        true => Some(rt.block_on(ravel_advise::apply(
            &store,
            name,
            &advice.best().layout,
            advice.table_bytes,
        ))?),
        false => None,
    };
    if args.json {
        let out = JsonOutput {
            advice: &advice,
            recommended: &advice.best().layout,
            commands: commands(&advice, url, name),
            applied: applied.as_ref(),
        };
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        print_advice(&advice, url, name);
        if let Some(a) = &applied {
            print_applied(a, url, name);
        }
    }
    Ok(())
}

/// What `--json` prints. Written straight to text: a weighted byte count may pass u64, which
/// serde_json's `Value` cannot hold.
#[derive(Serialize)]
struct JsonOutput<'a> {
    advice: &'a Advice,
    recommended: &'a Layout,
    commands: Vec<String>,
    applied: Option<&'a Applied>,
}

fn print_advice(a: &Advice, store: &str, table: &str) {
    println!(
        "table {table}: {} rows in {} objects ({} bytes); sample {} rows; {} statements (weight {}), {} left out; {:.2} s",
        a.table_rows,
        a.table_objects,
        a.table_bytes,
        a.sample_rows,
        a.statements,
        a.weight,
        a.skipped.len(),
        a.seconds
    );
    for s in &a.skipped {
        println!("  left out: line {}: {}", s.line, s.error);
    }
    for g in &a.whole_groups {
        println!(
            "  candidates streamed by {} (~): sized on a sample of its whole groups, {} rows",
            g.column, g.rows
        );
    }
    println!(
        "{:>4} {:>16} {:>8} {:>14} {:>6}  layout (stream / bucket / key / bloom)",
        "rank", "bytes read", "vs now", "stored bytes", "load"
    );
    for (i, e) in a.candidates.iter().enumerate() {
        let mark = if i == a.recommended { "*" } else { " " };
        let sized = if e.whole_groups { "~" } else { " " };
        println!(
            "{:>3}{mark} {:>16} {:>8.3} {:>14} {:>6.2} {sized}{}",
            i + 1,
            e.bytes,
            e.relative,
            e.stored_bytes,
            e.load_cost,
            e.name
        );
    }
    let best = a.best();
    println!(
        "\nper statement, recommended ({}) against current:",
        best.name
    );
    print_statements(best, a.candidates.iter().find(|e| e.name == "current"));
    let set = commands(a, store, table);
    if set.is_empty() {
        println!("\nthe current layout is recommended: nothing to set");
        return;
    }
    println!("\nto set it:");
    for line in set {
        println!("  {line}");
    }
}

fn print_statements(best: &Estimate, current: Option<&Estimate>) {
    println!(
        "{:>5} {:>6} {:>10} {:>14} {:>14}",
        "line", "weight", "objects", "bytes", "now"
    );
    for (i, s) in best.statements.iter().enumerate() {
        let now = current.map_or(String::from("-"), |c| c.statements[i].bytes.to_string());
        println!(
            "{:>5} {:>6} {:>10} {:>14} {:>14}",
            s.line,
            s.weight,
            format!("{}/{}", s.read, s.objects),
            s.bytes,
            now
        );
    }
}

/// The layout commands that set the recommended layout on `table` of `store`, then `compact`
/// when that gives the stored objects a new order; none when it is the current layout.
fn commands(a: &Advice, store: &str, table: &str) -> Vec<String> {
    let current = &a.current().layout;
    let l = &ravel_advise::applied_to(current, &a.best().layout);
    if l.same_settings(current) {
        return Vec::new();
    }
    let on = format!("--store {store} --table {table}");
    let base = format!("ravel-load layout {on}");
    let mut out = Vec::new();
    match &l.stream {
        Some(s) => out.push(format!("{base} stream set --column {s}")),
        None => out.push(format!("{base} stream clear")),
    }
    if let Some(t) = &l.time {
        out.push(format!("{base} time set --column {t}"));
    }
    match &l.clustering_key {
        Some(k) => {
            let cols: Vec<String> = k.columns.iter().map(|c| format!("--column {c}")).collect();
            out.push(format!(
                "{base} clustering-key set {} --bucket-width {}",
                cols.join(" "),
                k.bucket_width
            ));
        }
        None => out.push(format!("{base} clustering-key clear")),
    }
    out.push(format!("{base} bloom-scope set --scope {}", l.bloom.scope));
    if ravel_advise::reorders(current, l) {
        out.push(format!(
            "ravel-load compact {on}   # re-clusters the stored objects"
        ));
    }
    out
}

fn print_applied(a: &Applied, store: &str, table: &str) {
    if !a.changed {
        println!(
            "\nnothing applied: the recommended layout is the table's current one (generation {}); nothing stored",
            a.generation
        );
    } else if a.reorders {
        println!(
            "\napplied: layout generation {}; `ravel-load compact --store {store} --table {table}` re-clusters the table, rewriting {} bytes",
            a.generation, a.rewrite_bytes
        );
    } else {
        println!(
            "\napplied: layout generation {}; the stored objects keep their order (nothing to re-cluster); new loads and merges follow the new layout, Bloom scope included",
            a.generation
        );
    }
}
