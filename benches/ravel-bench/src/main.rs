//! `ravel-bench`: measurements of ravel-load that are too slow or too machine-dependent for
//! tests. Figures are printed; ratios against a baseline in the same run are what to compare.

use std::time::Instant;

// The same memcmp/bcmp as ravel-load, so that measurements match the product.
use ravel_memcmp as _;

use anyhow::{Context, Result};
use arrow::array::RecordBatch;
use arrow::compute::{concat_batches, take_record_batch};
use clap::{Parser, Subcommand};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;
use ravel_hits::{Convention, GenOptions, Generator};
use ravel_layout::{ClusteringOrder, Layout};

#[derive(Parser)]
#[command(name = "ravel-bench", about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
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

fn main() -> Result<()> {
    match Cli::parse().command {
        Command::ClusterGain {
            rows,
            seed,
            row_group,
            zstd,
        } => cluster_gain(rows, seed, row_group, zstd),
    }
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
    let layout = Layout::hits();
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
