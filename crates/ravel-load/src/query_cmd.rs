//! `ravel-load query`: one SQL query against a table, with its store traffic. Only queries
//! run (the table is read-only here); rows are printed as they come.

use std::io::Write;

use anyhow::{Context, Result};
use arrow::array::RecordBatch;
use clap::{Args, ValueEnum};
use ravel_query::{AnswerStream, QueryOptions, QueryTable, Spent};
use ravel_store::Store;

/// Rows the table format prints at most: it lays out all its rows before printing any, so it
/// holds them; csv and json print every row as it comes.
pub const TABLE_FORMAT_ROWS: usize = 10_000;

#[derive(Args)]
pub struct QueryArgs {
    #[command(flatten)]
    pub table: crate::flags::TableArgs,
    /// The SQL query (DataFusion dialect; statements that write, define or set are refused).
    /// The table is named as itself, or as `--as`; quote a name with upper-case letters or
    /// `-` ("CON"), since SQL folds unquoted names to lower case.
    pub sql: String,
    /// The name statements use for the table (e.g. `hits` for a table loaded under another
    /// name).
    #[arg(long = "as")]
    pub sql_name: Option<String>,
    /// Output format. `table` prints at most 10,000 rows; csv and json print every row.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Print the statement's store traffic (to stderr): GETs, bytes, objects touched.
    #[arg(long)]
    pub stats: bool,
    /// Do not skip objects by the manifest's ranges (to compare).
    #[arg(long)]
    pub no_manifest_pruning: bool,
    /// Read this version of the table instead of the newest (objects a compaction replaced
    /// stay readable until `gc` deletes them after its retention).
    #[arg(long)]
    pub version: Option<u64>,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum Format {
    Table,
    Csv,
    Json,
}

pub fn run(args: QueryArgs) -> Result<()> {
    let store = Store::open(&args.table.store)?;
    let opts = QueryOptions {
        manifest_pruning: !args.no_manifest_pruning,
        sql_name: args.sql_name.clone(),
        target_partitions: None,
        version: args.version,
    };
    let rt = crate::runtime()?;
    rt.block_on(async {
        let table = QueryTable::open(&store, &args.table.name, &opts).await?;
        let mut answer = table.sql_stream(&args.sql).await?;
        let mut out = std::io::BufWriter::new(std::io::stdout().lock());
        let printed = print_answer(&mut answer, args.format, &mut out).await?;
        if args.stats {
            print_stats(&table, &answer.spent());
        }
        if printed.cut {
            eprintln!(
                "output cut at {TABLE_FORMAT_ROWS} rows: the table format prints at most \
                 {TABLE_FORMAT_ROWS}; --format csv or --format json prints every row"
            );
        }
        Ok::<_, anyhow::Error>(())
    })
    .with_context(|| {
        format!(
            "querying table {:?} in {}",
            args.table.name, args.table.store
        )
    })
}

/// What was printed of an answer.
struct Printed {
    /// The table format stopped at [`TABLE_FORMAT_ROWS`] with rows left.
    cut: bool,
}

/// Prints `answer` in `format` as its batches come (the table format: up to its cap).
async fn print_answer(
    answer: &mut AnswerStream,
    format: Format,
    out: &mut impl Write,
) -> Result<Printed> {
    match format {
        Format::Table => return print_table(answer, out).await,
        Format::Csv => {
            let mut w = arrow::csv::WriterBuilder::new()
                .with_header(true)
                .build(&mut *out);
            while let Some(b) = answer.next().await {
                w.write(&b?)?;
            }
        }
        Format::Json => {
            let mut w = arrow::json::ArrayWriter::new(&mut *out);
            while let Some(b) = answer.next().await {
                w.write(&b?)?;
            }
            w.finish()?;
            writeln!(out)?;
        }
    }
    out.flush()?;
    Ok(Printed { cut: false })
}

/// Prints up to [`TABLE_FORMAT_ROWS`] rows of `answer` as a table; reads no further.
async fn print_table(answer: &mut AnswerStream, out: &mut impl Write) -> Result<Printed> {
    let mut kept: Vec<RecordBatch> = Vec::new();
    let mut rows = 0;
    let mut cut = false;
    while let Some(b) = answer.next().await {
        let b = b?;
        if rows + b.num_rows() > TABLE_FORMAT_ROWS {
            kept.push(b.slice(0, TABLE_FORMAT_ROWS - rows));
            cut = true;
            break;
        }
        rows += b.num_rows();
        kept.push(b);
    }
    if kept.is_empty() {
        kept.push(RecordBatch::new_empty(answer.schema()));
    }
    writeln!(
        out,
        "{}",
        arrow::util::pretty::pretty_format_batches(&kept)?
    )?;
    out.flush()?;
    Ok(Printed { cut })
}

/// The statement's store traffic, to stderr.
fn print_stats(table: &QueryTable, spent: &Spent) {
    let o = table.opened();
    let t = &spent.traffic;
    eprintln!(
        "version {}: {} manifest(s), log and manifests read with {} GET(s), {} bytes",
        o.version, o.manifests, o.traffic.gets, o.traffic.bytes
    );
    eprintln!(
        "statement: {} row(s) in {:.3} s; {} GET(s), {} bytes fetched; objects touched {} of {} ({} kept by the manifest)",
        spent.rows, spent.wall_s, t.gets, t.bytes, t.objects, o.objects, spent.scan.kept
    );
}
