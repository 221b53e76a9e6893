//! `ravel-load query`: one SQL statement against a table, with its store traffic.

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use ravel_query::{Answer, QueryOptions, QueryTable};
use ravel_store::Store;

#[derive(Args)]
pub struct QueryArgs {
    /// Store URL: a local directory, file://…, or s3://bucket/prefix.
    #[arg(long, env = "RAVEL_STORE", default_value = "./ravel-store")]
    pub store: String,
    /// Table name.
    #[arg(long)]
    pub table: String,
    /// The SQL statement (DataFusion dialect). The table is named as itself, or as `--as`.
    pub sql: String,
    /// The name statements use for the table (e.g. `hits` for a table loaded under another
    /// name).
    #[arg(long = "as")]
    pub sql_name: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Print the statement's store traffic (to stderr): GETs, bytes, objects touched.
    #[arg(long)]
    pub stats: bool,
    /// Do not skip objects by the manifest's ranges (to compare).
    #[arg(long)]
    pub no_manifest_pruning: bool,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum Format {
    Table,
    Csv,
    Json,
}

pub fn run(args: QueryArgs) -> Result<()> {
    let store = Store::open(&args.store)?;
    let opts = QueryOptions {
        manifest_pruning: !args.no_manifest_pruning,
        sql_name: args.sql_name.clone(),
        target_partitions: None,
    };
    let rt = crate::runtime()?;
    let (table, answer) = rt
        .block_on(async {
            let table = QueryTable::open(&store, &args.table, &opts).await?;
            let answer = table.sql(&args.sql).await?;
            Ok::<_, ravel_query::QueryError>((table, answer))
        })
        .with_context(|| format!("querying table {:?} in {}", args.table, args.store))?;
    print_answer(&answer, args.format)?;
    if args.stats {
        let o = table.opened();
        let t = &answer.traffic;
        eprintln!(
            "manifests: {} read with {} GET(s), {} bytes",
            o.manifests, o.traffic.gets, o.traffic.bytes
        );
        eprintln!(
            "statement: {} row(s) in {:.3} s; {} GET(s), {} bytes fetched; objects touched {} of {} ({} kept by the manifest)",
            answer.rows, answer.wall_s, t.gets, t.bytes, t.objects, o.objects, answer.scan.kept
        );
    }
    Ok(())
}

fn print_answer(answer: &Answer, format: Format) -> Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match format {
        Format::Table => {
            let shown = datafusion_pretty(&answer.batches)?;
            writeln!(out, "{shown}")?;
        }
        Format::Csv => {
            let mut w = arrow::csv::WriterBuilder::new()
                .with_header(true)
                .build(&mut out);
            for b in &answer.batches {
                w.write(b)?;
            }
        }
        Format::Json => {
            let mut w = arrow::json::ArrayWriter::new(&mut out);
            let refs: Vec<_> = answer.batches.iter().collect();
            w.write_batches(&refs)?;
            w.finish()?;
            writeln!(out)?;
        }
    }
    Ok(())
}

fn datafusion_pretty(batches: &[arrow::array::RecordBatch]) -> Result<String> {
    Ok(arrow::util::pretty::pretty_format_batches(batches)?.to_string())
}
