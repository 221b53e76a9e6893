//! `ravel-load gen`.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use ravel_hits::{Convention, GenOptions, JULY_2013_START};

use crate::BadInput;
use crate::flags::{ConventionArg, StringsArg, convention};

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
    /// First day of the event times, in days after 2013-07-01 (31: 2013-08-01); weekdays and
    /// the daily cycle follow the absolute day.
    #[arg(long, default_value_t = 0)]
    pub first_day: u32,
    /// Days the event times span, from the first day (at least 1).
    #[arg(long, default_value_t = 31)]
    pub days: u32,
    /// Seed of the world the rows happen in (counters, their pages, search phrases; default:
    /// the seed). Days generated with one world seed and different seeds are new rows on the
    /// same sites, as a table that grows by daily loads receives them.
    #[arg(long)]
    pub world_seed: Option<u64>,
}

impl GenArgs {
    pub fn convention(&self) -> Convention {
        convention(self.convention, self.strings)
    }
}

/// Refuses days that hold no rows, and days past what the raw convention's EventDate (UInt16
/// days since 1970) can hold.
fn check_days(args: &GenArgs) -> Result<(), BadInput> {
    if args.days == 0 {
        return Err(BadInput("--days 0: the rows need at least one day".into()));
    }
    let first = JULY_2013_START / 86_400 + i64::from(args.first_day);
    let last = first + i64::from(args.days) - 1;
    if matches!(args.convention(), Convention::Raw(_)) && last > i64::from(u16::MAX) {
        return Err(BadInput(format!(
            "--first-day {} --days {}: the raw convention's EventDate (UInt16 days since 1970) \
             ends at day {}; the last day would be {last} (--convention typed has no such bound)",
            args.first_day,
            args.days,
            u16::MAX
        )));
    }
    Ok(())
}

pub fn run(args: GenArgs) -> Result<()> {
    check_days(&args)?;
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
        first_day: args.first_day,
        days: args.days,
        world_seed: args.world_seed,
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
