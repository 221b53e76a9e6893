//! `ravel-load`: the command line of ravel-load. Thin: it parses, calls the libraries and
//! explains their errors. Exit codes: 0 success, 1 failure, 2 bad input or usage (see `exit`).

mod advise_cmd;
mod bench_queries_cmd;
mod compact_cmd;
mod demo;
mod exit;
mod flags;
mod gc_cmd;
mod gen_cmd;
mod job_cmd;
mod layout_cmd;
mod load_cmd;
mod logging;
mod maintain_cmd;
mod merge_report;
mod query_cmd;
mod serve_cmd;
mod verify_cmd;

use std::process::ExitCode;

// This binary's memcmp/bcmp (feature `memcmp`, default on x86_64 Linux): see the crate's docs
// for the measurement behind it.
#[cfg(all(feature = "memcmp", target_arch = "x86_64", target_os = "linux"))]
use ravel_memcmp as _;

use anyhow::Result;
use clap::{Parser, Subcommand};

/// The version and the git commit of the build (benchmark results record both).
const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (", env!("RAVEL_COMMIT"), ")");

/// Turns a wide event table into clustered columnar objects in object storage.
#[derive(Parser)]
#[command(name = "ravel-load", version = VERSION, about, long_about = None)]
struct Cli {
    /// More log output (repeat for more); RUST_LOG overrides.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
    /// How log lines are written: text, or JSON lines with their spans.
    #[arg(long, value_enum, default_value_t = logging::LogFormat::Text, global = true)]
    log_format: logging::LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Generate hits-like data (Parquet or TSV by the output's extension).
    Gen(gen_cmd::GenArgs),
    /// Show or change a table's layout settings (clustering key, stream, time, Bloom scope).
    Layout(layout_cmd::LayoutArgs),
    /// Load Parquet or TSV files into a table, clustered by its layout.
    Load(load_cmd::LoadArgs),
    /// Check a stored table: objects, one row group each, key ranges, Bloom filters, orphans
    /// (`--deep`: clustering order of the rows); report sizes and overlap depth.
    Verify(verify_cmd::VerifyArgs),
    /// Run one SQL statement (DataFusion) against a table; `--stats` prints its store traffic.
    Query(query_cmd::QueryArgs),
    /// Run each statement of a file against a table cold and then hot, with rows, times, and
    /// the cold run's store traffic.
    BenchQueries(bench_queries_cmd::BenchQueriesArgs),
    /// Report the objects of a table that its newest version does not hold (left by failed or
    /// killed loads and compactions, or replaced by a compaction) and delete those older than a
    /// retention; an object of the newest version is never deleted. Delete the log files the
    /// table's log window expired (those of the versions before a checkpoint older than it).
    Gc(gc_cmd::GcArgs),
    /// Merge a table's overlapping objects into one sequence in clustering order, within the
    /// load budget, and commit the swap as a new version (readers of older versions keep theirs)
    Compact(compact_cmd::CompactArgs),
    /// Run the table's maintenance policy: merge runs of one tier, or the runs past the depth
    /// bound, each step committed as a version; says when there is nothing to do (`load` runs it
    /// after every load unless --no-maintain).
    Maintain(maintain_cmd::MaintainArgs),
    /// Rank candidate layouts for a table by the bytes a log of statements would read under
    /// each, estimated on a sample of the table (`--apply` stores the recommended one).
    Advise(advise_cmd::AdviseArgs),
    /// Keep tables loaded and clustered: load each landing file once, maintain the tables
    /// under one budget, serve metrics and status over HTTP (SIGTERM or SIGINT stops it).
    Serve(serve_cmd::ServeArgs),
    /// Plan a load, compaction or maintenance merge as a job of steps for any engine to run
    /// (`run-step` each, then `commit`).
    Plan(job_cmd::PlanArgs),
    /// Run one step of a job: writes objects and a result, never the table's log.
    RunStep(job_cmd::RunStepArgs),
    /// Publish a job's steps as one version (or, for a merge, one per group with --per-step).
    Commit(job_cmd::CommitArgs),
    /// Print the load geometry this machine's memory selects.
    Tier {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Run the main job on the embedded default: generate hits into a local directory, record
    /// the table's schema and set the hits layout.
    Demo(demo::DemoArgs),
}

/// glibc's malloc gives threads that contend for the heap arenas of their own, up to eight per
/// core, and returns little of them: a load or a compaction, whose buffers pass between the
/// runtime's, rayon's and blocking threads, then holds far more than its budget (`load
/// --compact` of 10M hits rows under a 2 GB budget: 2.56 GB peak RSS with the default arenas,
/// 1.45 GB with two, and faster). Set before any thread starts.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn limit_malloc_arenas() {
    // SAFETY: mallopt only sets an allocator parameter; no other thread runs yet.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn limit_malloc_arenas() {}

fn main() -> ExitCode {
    limit_malloc_arenas();
    let cli = Cli::parse();
    logging::init(cli.verbose, cli.log_format);
    match run(cli.command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {}", explain(&err));
            ExitCode::from(exit::exit_code(&err))
        }
    }
}

fn run(command: Command) -> Result<()> {
    match command {
        Command::Gen(args) => gen_cmd::run(args),
        Command::Layout(args) => layout_cmd::run(args),
        Command::Load(args) => load_cmd::run(args),
        Command::Verify(args) => verify_cmd::run(args),
        Command::Gc(args) => gc_cmd::run(args),
        Command::Compact(args) => compact_cmd::run(args).map(|_| ()),
        Command::Maintain(args) => maintain_cmd::run(args),
        Command::Query(args) => query_cmd::run(args),
        Command::BenchQueries(args) => bench_queries_cmd::run(args),
        Command::Advise(args) => advise_cmd::run(args),
        Command::Serve(args) => serve_cmd::run(args),
        Command::Plan(args) => job_cmd::plan(args),
        Command::RunStep(args) => job_cmd::run_step(args),
        Command::Commit(args) => job_cmd::commit(args),
        Command::Tier { json } => {
            let tier = ravel_tier::Tier::detect()?;
            if json {
                println!("{}", serde_json::to_string_pretty(&tier)?);
            } else {
                println!("{tier}");
            }
            Ok(())
        }
        Command::Demo(args) => demo::run(args),
    }
}

/// The error and its causes, each message once (see [`ravel_store::ErrorChain`]).
fn explain(err: &anyhow::Error) -> String {
    ravel_store::ErrorChain::new(err.as_ref()).to_string()
}

/// An error about the user's input that no library type carries.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct BadInput(pub String);

/// A small runtime for the store calls of one command.
pub(crate) fn runtime() -> Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?)
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// `docs/commands.md` has a section for every command and names each of its flags there.
    #[test]
    fn the_commands_page_names_every_command_and_flag() {
        let page = include_str!("../../../docs/commands.md");
        let mut missing = Vec::new();
        check(&super::Cli::command(), &mut Vec::new(), page, &mut missing);
        assert!(missing.is_empty(), "docs/commands.md lacks {missing:?}");
    }

    fn check(cmd: &clap::Command, path: &mut Vec<String>, page: &str, missing: &mut Vec<String>) {
        if !path.is_empty() {
            let heading = format!("`ravel-load {}`", path.join(" "));
            match section(page, &heading) {
                None => missing.push(heading),
                Some(text) => {
                    let shown = cmd.get_arguments().filter(|arg| !arg.is_hide_set());
                    let names = shown.map(|arg| match arg.get_long() {
                        Some(long) => format!("`--{long}"),
                        None => arg.get_id().as_str().to_uppercase(),
                    });
                    missing.extend(
                        names
                            .filter(|name| name != "`--store" && !text.contains(name.as_str()))
                            .map(|name| format!("{heading} {name}`")),
                    );
                }
            }
        }
        for sub in cmd.get_subcommands() {
            path.push(sub.get_name().to_string());
            check(sub, path, page, missing);
            path.pop();
        }
    }

    /// The text under the heading that names `command`, up to the next heading.
    fn section<'a>(page: &'a str, command: &str) -> Option<&'a str> {
        page.split("\n#").find_map(|part| {
            let (heading, body) = part.split_once('\n').unwrap_or((part, ""));
            heading.trim_end().ends_with(command).then_some(body)
        })
    }
}
