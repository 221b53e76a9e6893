//! `ravel-bench`: the benchmark harness of ravel-load, in the db_bench tradition: a fixed
//! sequence of steps on one generated dataset, one JSON result per run, comparison of results
//! (`compare`) and of two builds interleaved (`ab`). Figures are measured on `ravel-load`
//! processes (wall time and the kernel's peak RSS of each), so any two builds compare.

mod ab;
mod chart;
mod compare;
mod exec;
mod ingest;
mod life;
mod machine;
mod presort;
mod result;
mod serve;
mod steps;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

// The same memcmp/bcmp as ravel-load (feature `memcmp`), so that in-process timings match the
// product.
#[cfg(all(feature = "memcmp", target_arch = "x86_64", target_os = "linux"))]
use ravel_memcmp as _;

use anyhow::{Context, Result, bail};
use arrow::array::RecordBatch;
use arrow::compute::{concat_batches, take_record_batch};
use clap::{Args, Parser, Subcommand};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;
use ravel_hits::{Convention, GenOptions, Generator};
use ravel_layout::ClusteringOrder;

use result::{BenchResult, Build, FORMAT, Flags, Step};
use steps::{Peers, StepName, Workload};

const DEFAULT_QUERIES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../../shared/clickbench/queries.sql"
);
const DEFAULT_PEERS_PY: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../../shared/bench/peers.py"
);

#[derive(Parser)]
#[command(name = "ravel-bench", about)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run gen, then the steps (load, load-presorted, load-unclustered, verify, queries-cold,
    /// queries-hot) and the peers on one generated dataset; write one JSON result.
    Run(RunArgs),
    /// Compare results: one row per step and figure, one column per result, the change from
    /// the first in percent, flagged outside the noise band.
    Compare(CompareArgs),
    /// Run two builds interleaved (A B A B …) on the same data; per-step ratios B/A with
    /// min/median/max.
    Ab(AbArgs),
    /// Run the steps and peers once per input size (`run` at each), keeping the generated
    /// inputs for later commands, and draw the scaling chart of every result in the directory.
    Scale(ScaleArgs),
    /// Draw the scaling chart (rows/s and peak RSS against rows) of results at several sizes.
    Chart(ChartArgs),
    /// Grow a table by many small loads, each followed by its maintenance policy, against the
    /// same rows compacted to depth 1 after every load: seconds, write amplification, depth
    /// and the point statements' cold traffic; writes `ingest.json` and `ingest.svg`.
    Ingest(ingest::IngestArgs),
    /// Files of a fixed size arrive at a fixed rate into a running `ravel-load serve`, killed
    /// at evenly spread moments: each file's landing-to-visible latency, write amplification,
    /// depth against its bound, peak RSS and CPU, every row once, the idle CPU; writes
    /// `serve.json` and `serve.svg`.
    Serve(serve::ServeArgs),
    /// A table's years in minutes: small files land at a high rate into `ravel-load serve`
    /// on the test S3 server, retention windows of seconds; every 1,000 versions the log's
    /// objects and checkpoint, a fresh service's start and requests, the listing per poll,
    /// `query`, delta-rs and polars opening the table, the service's RSS and idle CPU; writes
    /// `life.json` and `life.svg`.
    Life(life::LifeArgs),
    /// Write the rows of a Parquet file sorted by the hits clustering key (the input of
    /// `load-presorted`; `run` and `ab` call it as a child process so that their own memory
    /// stays small: a child's peak RSS counts its parent's at the fork).
    #[command(hide = true)]
    Presort {
        #[arg(long)]
        input: PathBuf,
        #[arg(long)]
        out: PathBuf,
        #[arg(long)]
        memory: usize,
    },
    /// Stored size of generated hits sorted by the hits clustering key vs in arrival order
    /// (zstd level 3, row groups of 240k rows, same writer settings for both).
    ClusterGain {
        #[arg(long, default_value_t = 1_000_000)]
        rows: u64,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Rows per row group.
        #[arg(long, default_value_t = 240_000)]
        row_group: usize,
        /// zstd level.
        #[arg(long, default_value_t = 3)]
        zstd: i32,
    },
}

#[derive(Args, Clone)]
struct DataArgs {
    /// Generator seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Steps after gen, comma-separated (default: all, always run in their fixed order).
    #[arg(long, value_enum, value_delimiter = ',')]
    steps: Vec<StepName>,
    /// Statements of the query steps.
    #[arg(long, default_value = DEFAULT_QUERIES)]
    queries: PathBuf,
    /// An extra argument for every `ravel-load load` (repeat), e.g. `--load-arg=--zstd-level=1`.
    #[arg(long = "load-arg", allow_hyphen_values = true)]
    load_args: Vec<String>,
    /// Working directory (default: a new directory in the system's temp dir, removed at the
    /// end). A kept directory's generated input is reused by a later command with the same
    /// rows and seed.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Keep the working directory.
    #[arg(long)]
    keep: bool,
    /// Bytes DataFusion may hold while sorting the presorted input (it spills beyond).
    #[arg(long, default_value_t = 4 << 30)]
    presort_memory: usize,
}

#[derive(Args)]
struct RunArgs {
    /// Rows to generate (hits, raw convention).
    #[arg(long, default_value_t = 2_000_000)]
    rows: u64,
    #[command(flatten)]
    data: DataArgs,
    #[command(flatten)]
    opts: RunOpts,
    /// Where to write the JSON result.
    #[arg(long)]
    out: PathBuf,
}

#[derive(Args)]
struct ScaleArgs {
    /// Input sizes in rows, comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "2000000,10000000,20000000,100000000"
    )]
    sizes: Vec<u64>,
    #[command(flatten)]
    data: DataArgs,
    #[command(flatten)]
    opts: RunOpts,
    /// Directory of the results (`scale-<rows>.json`), the chart (`scale.svg`) and, under
    /// `rows-<rows>/`, the generated inputs (kept; the tables are removed after each size).
    #[arg(long)]
    out_dir: PathBuf,
}

#[derive(Args)]
struct ChartArgs {
    /// Results of `run` or `scale`, one per input size.
    #[arg(required = true)]
    results: Vec<PathBuf>,
    /// The SVG to write.
    #[arg(long)]
    out: PathBuf,
}

/// How `run` and `scale` run the steps: the build, the repeats and the peers.
#[derive(Args)]
struct RunOpts {
    /// The ravel-load binary (default: the one beside this ravel-bench).
    #[arg(long)]
    bin: Option<PathBuf>,
    /// Times to run the steps (and peers); repeats let `compare` estimate the noise band.
    #[arg(long, default_value_t = 1)]
    repeat: usize,
    #[command(flatten)]
    peers: Peers,
}

#[derive(Args)]
struct CompareArgs {
    /// Result files; the first is the base of the percent changes.
    #[arg(required = true)]
    results: Vec<PathBuf>,
    /// Noise band in percent, instead of the one estimated from repeated runs.
    #[arg(long)]
    noise: Option<f64>,
}

#[derive(Args)]
struct AbArgs {
    /// Rows to generate (hits, raw convention).
    #[arg(long, default_value_t = 2_000_000)]
    rows: u64,
    #[command(flatten)]
    data: DataArgs,
    /// Build A (the base).
    #[arg(long)]
    a: PathBuf,
    /// Build B.
    #[arg(long)]
    b: PathBuf,
    /// Rounds (each runs A's steps, then B's).
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Where to write both results and the ratios as JSON.
    #[arg(long)]
    out: Option<PathBuf>,
}

fn main() -> Result<()> {
    match Cli::parse().command {
        Cmd::Run(a) => run(a),
        Cmd::Compare(a) => {
            let results = a
                .results
                .iter()
                .map(|p| Ok((p.display().to_string(), BenchResult::read(p)?)))
                .collect::<Result<Vec<_>>>()?;
            print!("{}", compare::table(&results, a.noise));
            Ok(())
        }
        Cmd::Ab(a) => ab(a),
        Cmd::Scale(a) => scale(a),
        Cmd::Chart(a) => {
            let results = a
                .results
                .iter()
                .map(|p| BenchResult::read(p))
                .collect::<Result<Vec<_>>>()?;
            draw_chart(&results, &a.out)
        }
        Cmd::Ingest(a) => ingest::run(a),
        Cmd::Serve(a) => serve::run(a),
        Cmd::Life(a) => life::run(a),
        Cmd::Presort { input, out, memory } => presort::presort(&input, &out, memory),
        Cmd::ClusterGain {
            rows,
            seed,
            row_group,
            zstd,
        } => cluster_gain(rows, seed, row_group, zstd),
    }
}

/// The ravel-load binary: `bin`, or the one beside this ravel-bench.
fn ravel_load_bin(bin: Option<&Path>) -> Result<PathBuf> {
    Ok(match bin {
        Some(b) => b.to_path_buf(),
        None => std::env::current_exe()?.with_file_name("ravel-load"),
    })
}

fn build_of(bin: &Path) -> Result<Build> {
    let out = Command::new(bin)
        .arg("--version")
        .output()
        .with_context(|| format!("running {} --version", bin.display()))?;
    if !out.status.success() {
        bail!("{} --version failed", bin.display());
    }
    let version = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let commit = version
        .rsplit_once('(')
        .and_then(|(_, r)| r.strip_suffix(')'))
        .unwrap_or("unknown")
        .to_string();
    Ok(Build {
        bin: bin.display().to_string(),
        version,
        commit,
    })
}

/// The working directory, removed on drop unless kept.
struct WorkDir {
    path: PathBuf,
    remove: bool,
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        if self.remove {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

fn work_dir(data: &DataArgs) -> Result<WorkDir> {
    new_work_dir(data.dir.as_deref(), data.keep)
}

/// The working directory `dir` (kept), or a new one in the system's temp dir, removed at the
/// end unless `keep`.
fn new_work_dir(dir: Option<&Path>, keep: bool) -> Result<WorkDir> {
    let (path, remove) = match dir {
        Some(d) => (d.to_path_buf(), false),
        None => (
            std::env::temp_dir().join(format!("ravel-bench-{}", std::process::id())),
            !keep,
        ),
    };
    std::fs::create_dir_all(&path).with_context(|| format!("creating {}", path.display()))?;
    Ok(WorkDir { path, remove })
}

fn step_line(s: &Step) -> String {
    if let Some(e) = &s.error {
        return format!("{:<18} FAILED: {}", s.name, e.lines().next().unwrap_or(""));
    }
    let f = |k: &str| s.figures.get(k).copied();
    let mut line = format!("{:<18} {:>8.2} s", s.name, f("wall_s").unwrap_or(0.0));
    if let Some(v) = f("rows_per_s") {
        line += &format!(" {:>10.0} rows/s", v);
    }
    if let Some(v) = f("peak_rss_mb") {
        line += &format!(" {:>7.0} MB RSS", v);
    }
    if let Some(v) = f("stored_bytes") {
        line += &format!(" {:>12.0} B", v);
    }
    if let Some(v) = f("gets") {
        line += &format!(" {:>6.0} GETs", v);
    }
    if let Some(v) = f("wall_vs_ravel") {
        line += &format!("  wall/ravel {v:.2}");
    }
    line
}

/// What generated `hits.parquet` in a working directory, written beside it once it is
/// complete: a later command with the same rows and seed reuses the file.
#[derive(serde::Serialize, serde::Deserialize, PartialEq)]
struct Generated {
    rows: u64,
    seed: u64,
}

/// The generated input in `dir`: reused when its marker says it has `rows` rows of `seed`
/// (no `gen` step then), generated with `gen_bin` otherwise.
fn generated_input(gen_bin: &Path, rows: u64, seed: u64, dir: &Path) -> Result<Option<Step>> {
    let input = dir.join("hits.parquet");
    let marker = dir.join("hits.gen.json");
    let want = Generated { rows, seed };
    let have: Option<Generated> = std::fs::read(&marker)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok());
    if have.as_ref() == Some(&want) && input.is_file() {
        eprintln!(
            "gen: reusing {} ({rows} rows, seed {seed})",
            input.display()
        );
        return Ok(None);
    }
    let _ = std::fs::remove_file(&marker);
    let gen_step = steps::generate(gen_bin, rows, seed, &input)?;
    eprintln!("{}", step_line(&gen_step));
    std::fs::write(&marker, serde_json::to_vec(&want)?)
        .with_context(|| format!("writing {}", marker.display()))?;
    Ok(Some(gen_step))
}

/// The workload of a run or an A/B, with what preparing it took.
struct Prepared {
    workload: Workload,
    /// Generating the input (`None` when it was reused).
    gen_step: Option<Step>,
    /// Figures of the preparation (RSS floor, presort time).
    prep: std::collections::BTreeMap<String, f64>,
}

/// Generates the data with `gen_bin` (or reuses it) and writes the presorted copy.
fn prepare(
    data: &DataArgs,
    rows: u64,
    dir: &Path,
    gen_bin: &Path,
    peers: Peers,
) -> Result<Prepared> {
    let input = dir.join("hits.parquet");
    let presorted = dir.join("hits-presorted.parquet");
    let gen_step = generated_input(gen_bin, rows, data.seed, dir)?;
    let mut steps: Vec<StepName> = if data.steps.is_empty() {
        StepName::DEFAULT.to_vec()
    } else {
        data.steps.clone()
    };
    steps.sort();
    steps.dedup();
    let mut prep = std::collections::BTreeMap::new();
    prep.insert("rss_floor_mb".into(), exec::floor()? as f64 / 1e6);
    if steps.contains(&StepName::LoadPresorted) {
        let t = Instant::now();
        exec::run(
            Command::new(std::env::current_exe()?)
                .arg("presort")
                .arg("--input")
                .arg(&input)
                .arg("--out")
                .arg(&presorted)
                .arg("--memory")
                .arg(data.presort_memory.to_string()),
        )?;
        prep.insert("presort_s".into(), t.elapsed().as_secs_f64());
        eprintln!(
            "presorted input: {:.2} s (DataFusion sort, order checked)",
            prep["presort_s"]
        );
    }
    if steps
        .iter()
        .any(|s| matches!(s, StepName::QueriesCold | StepName::QueriesHot))
        && !data.queries.is_file()
    {
        bail!(
            "--queries {}: no such file (the query steps need it)",
            data.queries.display()
        );
    }
    Ok(Prepared {
        workload: Workload {
            dir: dir.to_path_buf(),
            input,
            presorted,
            rows,
            steps,
            queries: data.queries.canonicalize().unwrap_or(data.queries.clone()),
            load_args: data.load_args.clone(),
            peers,
            drop_tables: false,
        },
        gen_step,
        prep,
    })
}

fn flags(w: &Workload, seed: u64) -> Flags {
    Flags {
        rows: w.rows,
        seed,
        steps: w.steps.iter().map(|s| s.name().to_string()).collect(),
        peers: w.peers.names.clone(),
        load_args: w.load_args.clone(),
        queries: w.queries.display().to_string(),
    }
}

fn run(args: RunArgs) -> Result<()> {
    let result = run_steps(&args.data, args.rows, &args.opts, false)?;
    result.write(&args.out)?;
    print!("{}", result::summary(&result));
    eprintln!("wrote {}", args.out.display());
    check_steps(&[("", &result.runs)])
}

/// Generates `rows` rows (or reuses them) and runs the steps and peers `opts.repeat` times.
fn run_steps(data: &DataArgs, rows: u64, opts: &RunOpts, drop_tables: bool) -> Result<BenchResult> {
    let bin = ravel_load_bin(opts.bin.as_deref())?;
    let build = build_of(&bin)?;
    let machine = machine::facts();
    let started = chrono::Utc::now().to_rfc3339();
    eprintln!(
        "{} · {} cores · {} kB · {}",
        build.version, machine.cores, machine.mem_total_kb, machine.cpu_model
    );
    let dir = work_dir(data)?;
    let Prepared {
        workload: mut w,
        gen_step,
        prep,
    } = prepare(data, rows, &dir.path, &bin, opts.peers.clone())?;
    w.drop_tables = drop_tables;
    let mut runs = Vec::new();
    for i in 0..opts.repeat.max(1) {
        eprintln!("run {}/{}", i + 1, opts.repeat.max(1));
        let mut r = steps::run(&w, &bin, &mut |s| eprintln!("{}", step_line(s)));
        if i == 0
            && let Some(g) = &gen_step
        {
            r.steps.insert(0, g.clone());
        }
        runs.push(r);
    }
    Ok(BenchResult {
        format: FORMAT.into(),
        started,
        build,
        machine,
        flags: flags(&w, data.seed),
        prep,
        runs,
    })
}

/// `run` at each size into `out_dir`, then the chart of every result there.
fn scale(args: ScaleArgs) -> Result<()> {
    std::fs::create_dir_all(&args.out_dir)
        .with_context(|| format!("creating {}", args.out_dir.display()))?;
    let mut failures = Vec::new();
    for &rows in &args.sizes {
        let dir = args.out_dir.join(format!("rows-{rows}"));
        let data = DataArgs {
            dir: Some(dir.clone()),
            ..args.data.clone()
        };
        // The tables of a size are removed once measured; the inputs are kept.
        let result = run_steps(&data, rows, &args.opts, true)?;
        let out = args.out_dir.join(format!("scale-{rows}.json"));
        result.write(&out)?;
        eprintln!("wrote {}", out.display());
        if let Err(e) = check_steps(&[("", &result.runs)]) {
            failures.push(format!("{rows} rows: {e:#}"));
        }
    }
    let results = scale_results(&args.out_dir)?;
    draw_chart(&results, &args.out_dir.join("scale.svg"))?;
    if !failures.is_empty() {
        bail!("{}", failures.join("; "));
    }
    Ok(())
}

/// Every `scale-<rows>.json` in `dir`.
fn scale_results(dir: &Path) -> Result<Vec<BenchResult>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir)?.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with("scale-") && name.ends_with(".json") {
            out.push(BenchResult::read(&entry.path())?);
        }
    }
    Ok(out)
}

/// Writes the scaling chart of `results` to `out` and prints its figures as a table.
fn draw_chart(results: &[BenchResult], out: &Path) -> Result<()> {
    let series = chart::series(results);
    let title = match results.first() {
        Some(r) => format!("{} · {} cores", r.build.version, r.machine.cores),
        None => bail!("no results to chart"),
    };
    std::fs::write(out, chart::svg(&series, &title)?)
        .with_context(|| format!("writing {}", out.display()))?;
    print!("{}", chart::table(&series));
    eprintln!("wrote {}", out.display());
    Ok(())
}

/// An error naming every step (peers aside) that failed in `runs`, labelled by build.
fn check_steps(runs: &[(&str, &[result::Run])]) -> Result<()> {
    let failed: Vec<String> = runs
        .iter()
        .flat_map(|(label, runs)| {
            runs.iter()
                .flat_map(|r| &r.steps)
                .filter(|s| s.error.is_some() && !s.name.starts_with("peer-"))
                .map(move |s| format!("{label}{}", s.name))
        })
        .collect();
    if !failed.is_empty() {
        bail!("steps failed: {} (errors in the result)", failed.join(", "));
    }
    Ok(())
}

fn ab(args: AbArgs) -> Result<()> {
    let (build_a, build_b) = (build_of(&args.a)?, build_of(&args.b)?);
    eprintln!(
        "A: {}
B: {}",
        build_a.version, build_b.version
    );
    let machine = machine::facts();
    let started = chrono::Utc::now().to_rfc3339();
    let dir = work_dir(&args.data)?;
    // A generates the data both builds load.
    let Prepared {
        workload: w,
        gen_step,
        prep,
    } = prepare(&args.data, args.rows, &dir.path, &args.a, Peers::default())?;
    let (mut runs_a, mut runs_b) = (Vec::new(), Vec::new());
    for i in 0..args.runs.max(1) {
        eprintln!("round {}/{}: A", i + 1, args.runs.max(1));
        runs_a.push(steps::run(&w, &args.a, &mut |s| {
            eprintln!("A {}", step_line(s))
        }));
        eprintln!("round {}/{}: B", i + 1, args.runs.max(1));
        runs_b.push(steps::run(&w, &args.b, &mut |s| {
            eprintln!("B {}", step_line(s))
        }));
    }
    let ratios = ab::ratios(&runs_a, &runs_b);
    print!("{}", ab::table(&ratios, runs_a.len()));
    let failures = check_steps(&[("A ", &runs_a), ("B ", &runs_b)]);
    if let Some(out) = &args.out {
        let result = |build: Build, mut runs: Vec<result::Run>| {
            if let (Some(r), Some(g)) = (runs.first_mut(), &gen_step) {
                r.steps.insert(0, g.clone());
            }
            BenchResult {
                format: FORMAT.into(),
                started: started.clone(),
                build,
                machine: machine.clone(),
                flags: flags(&w, args.data.seed),
                prep: prep.clone(),
                runs,
            }
        };
        let doc = serde_json::json!({
            "format": "ravel-bench-ab/1",
            "a": result(build_a, runs_a),
            "b": result(build_b, runs_b),
            "ratios": ratios,
        });
        std::fs::write(out, serde_json::to_string_pretty(&doc)? + "\n")
            .with_context(|| format!("writing {}", out.display()))?;
        eprintln!("wrote {}", out.display());
    }
    failures
}

fn encoded_size(batch: &RecordBatch, props: WriterProperties) -> Result<usize> {
    let mut out = Vec::new();
    let mut w = ArrowWriter::try_new(&mut out, batch.schema(), Some(props))?;
    w.write(batch)?;
    w.close()?;
    Ok(out.len())
}

fn cluster_gain(rows: u64, seed: u64, row_group: usize, zstd: i32) -> Result<()> {
    let t = Instant::now();
    let generator = Generator::new(GenOptions {
        rows,
        seed,
        convention: Convention::default(),
        ..GenOptions::default()
    });
    let schema = generator.schema();
    let batches: Vec<RecordBatch> = generator.collect();
    let arrival = concat_batches(&schema, &batches)?;
    drop(batches);
    println!(
        "generated {rows} rows in {:.2} s",
        t.elapsed().as_secs_f64()
    );

    let props = || {
        WriterProperties::builder()
            .set_compression(Compression::ZSTD(
                ZstdLevel::try_new(zstd).expect("zstd level"),
            ))
            .set_max_row_group_row_count(Some(row_group))
            .build()
    };
    let layout = ravel_hits::layout();
    let t = Instant::now();
    let order = ClusteringOrder::try_new(&layout, &schema)?.context("hits layout has a key")?;
    let perm = order.permutation(&arrival)?;
    let sort_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let sorted = take_record_batch(&arrival, &perm)?;
    let take_s = t.elapsed().as_secs_f64();

    let (a, s) = rayon::join(
        || encoded_size(&arrival, props()),
        || encoded_size(&sorted, props()),
    );
    let (a, s) = (a?, s?);
    println!("permutation: {sort_s:.3} s, take: {take_s:.3} s");
    println!("arrival order: {a} bytes");
    println!("clustered:     {s} bytes");
    println!("ratio clustered/arrival: {:.3}", s as f64 / a as f64);
    Ok(())
}
