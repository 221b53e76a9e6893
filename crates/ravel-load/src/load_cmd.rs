//! `ravel-load load`.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Result;
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use ravel_loader::{InputFormat, LoadOptions, LoadReport};
use ravel_store::Store;
use ravel_tier::Tier;

use crate::BadInput;
use crate::flags::{GeometryFlags, TableArgs, checked};

#[derive(Args, Debug, Clone)]
pub struct LoadArgs {
    #[command(flatten)]
    pub table: TableArgs,
    /// Input files, loaded in order; a quoted glob ('data/*.parquet') is expanded in name order.
    #[arg(long, required = true, num_args = 1..)]
    pub input: Vec<PathBuf>,
    /// Input format; by default from the files' extension (.parquet, .tsv).
    #[arg(long, value_enum)]
    pub format: Option<FormatArg>,
    #[command(flatten)]
    pub geometry: GeometryFlags,
    /// Buffered bytes (batch memory plus 128 bytes a row of sort scratch) that trigger a sorted
    /// run (default: half of what the budget leaves after the objects in flight).
    #[arg(long)]
    pub target_bytes: Option<u64>,
    /// Seconds after which a buffer is flushed however small (tier default).
    #[arg(long)]
    pub max_flush_delay: Option<f64>,
    /// TSV: bad lines to leave out before the load fails (0: the first bad line fails it).
    #[arg(long, default_value_t = 0)]
    pub max_bad_rows: u64,
    /// TSV: file for the left-out lines, as they were (reasons in FILE.reasons); default
    /// `<first input>.rejects` when --max-bad-rows is set. Written only when a line is left
    /// out; an existing file is refused unless --overwrite-rejects.
    #[arg(long)]
    pub rejects: Option<std::path::PathBuf>,
    /// TSV: replace existing rejects files (FILE and FILE.reasons) when lines are left out.
    #[arg(long)]
    pub overwrite_rejects: bool,
    /// Publish the load's rows globally sorted, as `COPY … ORDER BY` does: its sorted runs go
    /// to spill objects (cheap to write, deleted after), are merged once within the same
    /// budget, and only the merge's objects are published. Rows already in the table are not
    /// rewritten (`compact` merges across loads). Needs a clustering key.
    #[arg(long)]
    pub compact: bool,
    /// Skip the table's maintenance step after the load (`ravel-load maintain` runs it later).
    #[arg(long)]
    pub no_maintain: bool,
    /// Load the inputs even when a version loaded them already: their rows then count twice.
    /// Without it, a load of inputs the table consumed publishes nothing and names the version
    /// that did, and a file changed under a name a version loaded (rewritten, touched, copied
    /// over) is refused.
    #[arg(long)]
    pub reload: bool,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum FormatArg {
    Parquet,
    Tsv,
}

fn input_format(args: &LoadArgs, inputs: &[PathBuf]) -> Result<InputFormat> {
    Ok(match args.format {
        Some(FormatArg::Parquet) => InputFormat::Parquet,
        Some(FormatArg::Tsv) => InputFormat::Tsv,
        None => ravel_loader::input_format(inputs)?.expect("at least one input"),
    })
}

pub fn options(args: &LoadArgs, tier: &Tier) -> Result<LoadOptions> {
    let mut o = args.geometry.over(tier);
    o.target_bytes = args.target_bytes;
    if let Some(v) = args.max_flush_delay {
        o.max_flush_delay = Duration::try_from_secs_f64(v)
            .map_err(|_| BadInput(format!("--max-flush-delay {v}: not a duration in seconds")))?;
    }
    checked(o)
}

pub fn run(args: LoadArgs) -> Result<()> {
    let tier = Tier::detect()?;
    let opts = options(&args, &tier)?;
    let inputs = ravel_loader::expand_inputs(&args.input)?;
    let format = input_format(&args, &inputs)?;
    let bad = ravel_loader::BadRows {
        max: args.max_bad_rows,
        rejects: rejects_path(&args),
        overwrite: args.overwrite_rejects,
    };
    let rejects = Rejects::asked(&bad);
    let files = ravel_loader::Files {
        paths: &args.input,
        format,
        tsv: crate::flags::hits_tsv(bad),
        reload: args.reload,
        identities: None,
    };
    // Refused before anything is written, the store's directory included.
    files.check()?;
    eprintln!(
        "geometry: {} tier; objects ~{} bytes, pipeline depth {}, load budget {} bytes, run trigger {} bytes, max flush delay {} s",
        tier.name,
        opts.object_bytes,
        opts.pipeline_depth,
        opts.load_budget,
        opts.flush_trigger(),
        opts.max_flush_delay.as_secs_f64()
    );
    let store = Store::create(&args.table.store)?;
    let mut progress = Progress::start();
    let ingest = ravel_ingest::IngestOptions::new(opts)
        .sorted(args.compact)
        .maintain(!args.no_maintain);
    let done = crate::runtime()?.block_on(ravel_ingest::ingest(
        &store,
        &args.table.name,
        &files,
        &ingest,
        |rows, loader| progress.update(rows, loader),
    ));
    progress.bar.finish_and_clear();
    let wall = progress.started.elapsed().as_secs_f64();
    let report = match done {
        Ok(report) => report,
        Err(ravel_ingest::IngestError::MaintenanceFailed { report, source }) => {
            print_load(&args, &report, wall)?;
            if args.json {
                let mut json = load_json(&report)?;
                let error = ravel_store::ErrorChain::new(&source).to_string();
                json["maintenance"] = serde_json::json!({ "error": error });
                println!("{}", serde_json::to_string_pretty(&json)?);
            }
            return Err(ravel_ingest::IngestError::MaintenanceFailed { report, source }.into());
        }
        Err(e) => {
            let context = format!(
                "loading into table {} in {}",
                args.table.name,
                store.location()
            );
            return Err(anyhow::Error::new(e).context(context));
        }
    };
    print_load(&args, &report, wall)?;
    print_maintenance(&args, &report)?;
    rejects.report_left_out();
    Ok(())
}

/// Prints the maintenance after the load: with `--json`, the load's report with a
/// `maintenance` key (`null` when it did not run).
fn print_maintenance(args: &LoadArgs, report: &ravel_ingest::IngestReport) -> Result<()> {
    if args.json {
        let mut json = load_json(report)?;
        json["maintenance"] = serde_json::to_value(report.maintenance.report())?;
        println!("{}", serde_json::to_string_pretty(&json)?);
    } else if let Some(r) = report.maintenance.report() {
        print!("maintenance: ");
        crate::merge_report::print_report(r);
    }
    Ok(())
}

/// A live bar on a terminal; plain lines every 5 s otherwise (logs, CI).
struct Progress {
    bar: ProgressBar,
    terminal: bool,
    started: Instant,
    last_line: Instant,
}

impl Progress {
    fn start() -> Progress {
        let terminal = std::io::stderr().is_terminal();
        let bar = if terminal {
            let bar = ProgressBar::new_spinner().with_style(
                ProgressStyle::with_template("{spinner} {msg} [{elapsed}]")
                    .expect("valid template"),
            );
            // Keeps ticking while a run is sorted and encoded (no batch is pushed meanwhile).
            bar.enable_steady_tick(std::time::Duration::from_millis(200));
            bar
        } else {
            ProgressBar::hidden()
        };
        Progress {
            bar,
            terminal,
            started: Instant::now(),
            last_line: Instant::now(),
        }
    }

    fn update(&mut self, rows: u64, loader: &ravel_loader::Loader) {
        let secs = self.started.elapsed().as_secs_f64().max(1e-9);
        let msg = format!(
            "{rows} rows read ({:.0} rows/s), {} objects stored ({:.1} MB/s out), budget {:.0} MB in use",
            rows as f64 / secs,
            loader.objects_stored(),
            loader.stored_bytes() as f64 / 1e6 / secs,
            loader.budget_in_use() as f64 / 1e6
        );
        if self.terminal {
            self.bar.set_message(msg);
        } else if self.last_line.elapsed() >= Duration::from_secs(5) {
            eprintln!("{msg}");
            self.last_line = Instant::now();
        }
    }
}

/// The TSV rejects file a load writes its left-out lines to, if it may leave lines out.
struct Rejects {
    path: Option<PathBuf>,
    /// When the file exists already (only with --overwrite-rejects), its modification time
    /// tells afterwards whether this load wrote it.
    before: Option<std::time::SystemTime>,
}

impl Rejects {
    /// The rejects file `bad` names, with its modification time now.
    fn asked(bad: &ravel_loader::BadRows) -> Rejects {
        let path = bad.rejects.clone();
        let before = path.as_deref().and_then(modified);
        Rejects { path, before }
    }

    /// Says how many lines the load left out, when it wrote the file.
    fn report_left_out(&self) {
        let Some(path) = self
            .path
            .as_ref()
            .filter(|p| p.exists() && modified(p) != self.before)
        else {
            return;
        };
        let left = std::fs::read_to_string(path)
            .map(|t| t.lines().count())
            .unwrap_or(0);
        eprintln!(
            "left out {left} bad line(s): {} (reasons in {}.reasons)",
            path.display(),
            path.display()
        );
    }
}

/// The load's own report as JSON (the loader's, or the sorted load's), as `--json` prints it
/// with a `maintenance` key beside.
fn load_json(report: &ravel_ingest::IngestReport) -> Result<serde_json::Value> {
    Ok(match &report.loaded {
        ravel_ingest::Loaded::Runs(r) => serde_json::to_value(r)?,
        ravel_ingest::Loaded::Sorted(r) => serde_json::to_value(r)?,
    })
}

/// Prints what the load did (text, unless `--json`) and the notes that go with it.
fn print_load(args: &LoadArgs, report: &ravel_ingest::IngestReport, wall: f64) -> Result<()> {
    if let Some(a) = &report.took_in {
        eprintln!(
            "took in {} object(s), {} rows, another Delta writer added (partitioned), before the load: version {}",
            a.objects, a.rows, a.version
        );
    }
    let no_delta_view = match &report.loaded {
        ravel_ingest::Loaded::Runs(r) => {
            if !args.json {
                print_summary(r, wall);
            }
            &r.no_delta_view
        }
        ravel_ingest::Loaded::Sorted(r) => {
            if !args.json {
                print_sorted(r);
            }
            &r.no_delta_view
        }
    };
    if let Some(why) = no_delta_view {
        eprintln!("note: {why}");
    }
    Ok(())
}

fn print_sorted(r: &ravel_compact::SortedLoadReport) {
    if r.already_published {
        print_published_already(r.version, &r.load_id);
        return;
    }
    let version = r.version.map_or("none".to_string(), |v| v.to_string());
    if r.by_columns {
        let w = &r.write;
        println!(
            "loaded {} rows into table {} globally sorted, a column at a time: {} objects, {} bytes; version {version}",
            r.rows, r.table, r.objects, r.stored_bytes
        );
        println!(
            "read {:.2} s, sort {:.2}, gather {:.2}, encode {:.2}, upload {:.2} (summed over threads); pages kept in local files {} bytes; peak budget {} bytes; wall {:.2} s",
            w.read_s,
            w.sort_s,
            w.gather_s,
            w.encode_s,
            w.upload_s,
            w.local_spill_bytes,
            r.peak_budget_bytes,
            r.wall_s
        );
        return;
    }
    println!(
        "loaded {} rows into table {} globally sorted: {} run(s) spilled ({} objects, {} bytes) and merged in {} pass(es) into {} objects, {} bytes; version {version}",
        r.rows,
        r.table,
        r.runs,
        r.spill_objects,
        r.spill_bytes,
        r.passes,
        r.objects,
        r.stored_bytes
    );
    println!(
        "write amplification {:.2} ({} bytes written); peak budget {} bytes; spill {:.2} s (sort {:.2}, gather {:.2}, encode {:.2}, upload {:.2}), merge and write {:.2} s (encode {:.2}, upload {:.2}), commit {:.2} s; wall {:.2} s",
        r.write_amplification,
        r.written_bytes,
        r.peak_budget_bytes,
        r.spill.read_s + r.spill.sort_s + r.spill.gather_s + r.spill.encode_s,
        r.spill.sort_s,
        r.spill.gather_s,
        r.spill.encode_s,
        r.spill.upload_s,
        r.merge_s,
        r.write.encode_s,
        r.write.upload_s,
        r.commit_s,
        r.wall_s
    );
}

/// The rejects file the flags name: `--rejects`, or the first input's path with `.rejects`
/// appended, when lines may be left out.
fn rejects_path(args: &LoadArgs) -> Option<PathBuf> {
    if args.max_bad_rows == 0 {
        return args.rejects.clone();
    }
    Some(args.rejects.clone().unwrap_or_else(|| {
        let mut p = args.input[0].clone().into_os_string();
        p.push(".rejects");
        p.into()
    }))
}

/// A file's modification time, if it exists.
fn modified(p: &Path) -> Option<std::time::SystemTime> {
    std::fs::metadata(p).and_then(|m| m.modified()).ok()
}

/// What a rerun of a published load prints.
fn print_published_already(version: Option<u64>, load_id: &str) {
    let version = version.map_or("an earlier version".to_string(), |v| format!("version {v}"));
    let load = match load_id {
        "" => String::new(),
        id => format!(" (load {id})"),
    };
    println!(
        "these inputs were published already by {version}{load}: nothing published (--reload loads them again)"
    );
}

fn print_summary(r: &LoadReport, wall: f64) {
    if r.already_published {
        print_published_already(r.version, &r.load_id);
        return;
    }
    let mut sizes: Vec<u64> = r.objects.iter().map(|o| o.bytes).collect();
    sizes.sort_unstable();
    let pct = |p: f64| {
        sizes
            .get(((sizes.len() as f64 - 1.0) * p).round() as usize)
            .copied()
            .unwrap_or(0)
    };
    println!(
        "loaded {} rows into {} objects ({} bytes) in {} run(s), {:.2} s ({:.0} rows/s); manifest {}",
        r.rows,
        r.objects.len(),
        r.stored_bytes,
        r.runs,
        wall,
        r.rows as f64 / wall.max(1e-9),
        r.load_id
    );
    println!(
        "object bytes: min {} / median {} / max {}; layout generation {}",
        pct(0.0),
        pct(0.5),
        pct(1.0),
        r.layout.generation
    );
    let s = &r.stages;
    println!(
        "stages: read {:.2} s, sort {:.2} s, gather {:.2} s, encode {:.2} s (Bloom sidecar {:.2} s), upload {:.2} s (summed over tasks), commit {:.2} s; peak budget {} bytes",
        s.read_s,
        s.sort_s,
        s.gather_s,
        s.encode_s,
        s.blooms_s,
        s.upload_s,
        s.commit_s,
        r.peak_budget_bytes
    );
}
