//! `ravel-load gen`.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use ravel_hits::{Convention, GenOptions, Strings};

#[derive(Args, Debug, Clone)]
pub struct GenArgs {
    /// Rows to generate.
    #[arg(long, default_value_t = 1_000_000)]
    pub rows: u64,
    /// Seed: the same seed gives the same rows.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Output file: `.parquet` or `.tsv`.
    #[arg(long)]
    pub out: PathBuf,
    /// Physical convention: raw (Int64 seconds, UInt16 days, as the public hits.parquet) or
    /// typed (Timestamp, Date32, Utf8).
    #[arg(long, value_enum, default_value_t = ConventionArg::Raw)]
    pub convention: ConventionArg,
    /// String type under the raw convention.
    #[arg(long, value_enum, default_value_t = StringsArg::Binary)]
    pub strings: StringsArg,
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConventionArg {
    Raw,
    Typed,
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum StringsArg {
    Binary,
    Utf8,
}

impl GenArgs {
    pub fn convention(&self) -> Convention {
        convention(self.convention, self.strings)
    }
}

/// The physical convention the two flags name.
pub fn convention(convention: ConventionArg, strings: StringsArg) -> Convention {
    match (convention, strings) {
        (ConventionArg::Typed, _) => Convention::Typed,
        (ConventionArg::Raw, StringsArg::Binary) => Convention::Raw(Strings::Binary),
        (ConventionArg::Raw, StringsArg::Utf8) => Convention::Raw(Strings::Utf8),
    }
}

pub fn run(args: GenArgs) -> Result<()> {
    let started = Instant::now();
    let bar = ProgressBar::new(args.rows).with_style(
        ProgressStyle::with_template(
            "{spinner} gen {human_pos}/{human_len} rows [{elapsed}] {per_sec}",
        )
        .expect("valid template"),
    );
    let opts = GenOptions {
        rows: args.rows,
        seed: args.seed,
        convention: args.convention(),
        ..GenOptions::default()
    };
    let written = ravel_hits::write_generated(opts, &args.out, |rows| bar.set_position(rows))
        .with_context(|| format!("generating {} rows into {}", args.rows, args.out.display()))?;
    bar.finish_and_clear();
    let secs = started.elapsed().as_secs_f64();
    println!(
        "wrote {} rows, {} bytes to {} in {:.2} s ({:.0} rows/s)",
        written.rows,
        written.bytes,
        args.out.display(),
        secs,
        written.rows as f64 / secs.max(1e-9)
    );
    Ok(())
}
