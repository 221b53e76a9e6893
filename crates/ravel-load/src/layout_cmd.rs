//! `ravel-load layout`: the layout service on the command line.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use ravel_layout::{BloomScope, BucketWidth, ClusteringKey, Layout, LayoutStore, Updated};
use ravel_store::Store;

use crate::BadInput;
use crate::flags::{ConventionArg, StringsArg};

#[derive(Args, Debug)]
pub struct LayoutArgs {
    #[command(flatten)]
    pub table: crate::flags::TableArgs,
    #[command(subcommand)]
    pub command: LayoutCommand,
}

#[derive(Subcommand, Debug)]
pub enum LayoutCommand {
    /// Print the whole layout document as JSON.
    Show,
    /// The clustering key: columns sorted after the stream and the time bucket.
    #[command(subcommand)]
    ClusteringKey(ClusteringKeyCommand),
    /// The stream column, sorted first.
    #[command(subcommand)]
    Stream(StreamCommand),
    /// The time column, bucketed after the stream and sorted last.
    #[command(subcommand)]
    Time(TimeCommand),
    /// Which columns get Bloom filters.
    #[command(subcommand)]
    BloomScope(BloomScopeCommand),
    /// The table's recorded schema, which layout changes are checked against.
    #[command(subcommand)]
    Schema(SchemaCommand),
    /// The maintenance policy every load ends with (and `ravel-load maintain` runs).
    #[command(subcommand)]
    Maintenance(MaintenanceCommand),
    /// Whether other Delta writers are fenced off the table (a writer feature they refuse).
    #[command(subcommand)]
    Fence(FenceCommand),
    /// How long removed objects, consumed inputs' identities and covered log entries are kept
    /// (Delta's retention properties, in the table's metadata).
    #[command(subcommand)]
    Retention(RetentionCommand),
}

#[derive(Subcommand, Debug)]
pub enum RetentionCommand {
    /// Set the windows (e.g. 7d, 30d, 12h); windows not named keep their stored values. The
    /// table's Delta metadata records them from the version this commits on.
    Set {
        /// Removed objects stay readable this long; `gc` deletes them after
        /// (delta.deletedFileRetentionDuration, default 7d).
        #[arg(long)]
        files: Option<String>,
        /// Consumed inputs' identities are kept this long (delta.setTransactionRetentionDuration,
        /// default 30d).
        #[arg(long)]
        inputs: Option<String>,
        /// Log entries a checkpoint covers are kept this long (delta.logRetentionDuration,
        /// default 30d).
        #[arg(long)]
        log: Option<String>,
    },
    /// Print the windows and the Delta properties that carry them.
    Show,
}

#[derive(Subcommand, Debug)]
pub enum FenceCommand {
    /// Fence other Delta writers off: from the version this commits on, writers that do not
    /// know the table's `ravelSoleWriter` feature refuse to write (readers read on).
    Set,
    /// Let other Delta writers append to and optimize the table again.
    Clear,
    /// Print whether the table is fenced.
    Show,
}

#[derive(Subcommand, Debug)]
pub enum MaintenanceCommand {
    /// Set the policy; settings not named keep their stored values.
    Set {
        /// tiered (runs merged by size under a depth bound), full (compact after every
        /// load) or none.
        #[arg(long)]
        policy: Option<String>,
        /// Runs of one tier that merge, and the size factor a tier spans (2-64).
        #[arg(long)]
        size_ratio: Option<u32>,
        /// Runs that may overlap at any key after maintenance (size ratio to 64).
        #[arg(long)]
        max_depth: Option<u32>,
    },
    /// Print the policy and its settings.
    Show,
}

#[derive(Subcommand, Debug)]
pub enum ClusteringKeyCommand {
    /// Set the key columns (1-4) and the bucket width.
    Set {
        /// A key column; repeat for more, in sort order.
        #[arg(long = "column", required = true)]
        columns: Vec<String>,
        /// Width of a time bucket: 1d, 6h, 30m, 15s, 1w, 1h30m.
        #[arg(long, default_value = "1d", allow_hyphen_values = true)]
        bucket_width: String,
    },
    /// Print the key.
    Show,
    /// Remove the key: the table keeps arrival order.
    Clear,
}

#[derive(Subcommand, Debug)]
pub enum StreamCommand {
    /// Set the stream column.
    Set {
        /// A column of the recorded schema.
        #[arg(long)]
        column: String,
    },
    /// Print the stream column.
    Show,
    /// No stream: rows sort by bucket, key, time.
    Clear,
}

#[derive(Subcommand, Debug)]
pub enum TimeCommand {
    /// Set the time column.
    Set {
        /// A timestamp, date or integer-seconds column of the recorded schema.
        #[arg(long)]
        column: String,
    },
    /// Print the time column.
    Show,
}

#[derive(Subcommand, Debug)]
pub enum BloomScopeCommand {
    /// Set which columns get Bloom filters, and their false-positive rate.
    Set {
        /// none, text (every string/binary column), all, or a comma-separated column list.
        #[arg(long)]
        scope: String,
        /// False-positive rate of each filter (0 < fpp < 1); unchanged when omitted.
        #[arg(long)]
        fpp: Option<f64>,
    },
    /// Print the scope and the false-positive rate.
    Show,
}

#[derive(Subcommand, Debug)]
pub enum SchemaCommand {
    /// Record the schema of a Parquet file, or the hits schema.
    Set {
        /// A Parquet file whose schema the table takes.
        #[arg(long, conflicts_with = "hits", required_unless_present = "hits")]
        from: Option<PathBuf>,
        /// The ClickBench hits schema.
        #[arg(long)]
        hits: bool,
        /// The hits schema's physical convention (as `gen --convention`).
        #[arg(long, value_enum, default_value_t = ConventionArg::Raw, requires = "hits")]
        convention: ConventionArg,
        /// The hits schema's string type under the raw convention (as `gen --strings`).
        #[arg(long, value_enum, default_value_t = StringsArg::Binary, requires = "hits")]
        strings: StringsArg,
    },
    /// Print the recorded schema.
    Show,
}

/// The first layout this command line stores for a table starts from the hits table's stream
/// and time columns (those of `ravel_hits::layout()`) when the table can be hits: its recorded
/// schema has both columns, or no schema is recorded yet (as TSV input without a recorded
/// schema is read as hits). So `clustering-key set` alone sets up a hits table as it always
/// did, while the library's defaults name no column. `None`: start from those defaults.
async fn hits_start(service: &LayoutStore) -> Result<Option<Layout>, ravel_layout::LayoutError> {
    let hits = ravel_hits::layout();
    let fits = match service.schema().await? {
        None => true,
        Some(schema) => [&hits.stream, &hits.time]
            .into_iter()
            .flatten()
            .all(|c| schema.field_with_name(c).is_ok()),
    };
    Ok(fits.then(|| Layout {
        stream: hits.stream,
        time: hits.time,
        ..Layout::default()
    }))
}

/// [`LayoutStore::update`], where a layout never stored (generation 0) reads as if it had the
/// stream and time of `start` (see [`hits_start`]): a change to what it then already is writes
/// nothing, as before the defaults named no column.
async fn update(
    service: &LayoutStore,
    start: &Option<Layout>,
    change: impl FnOnce(&mut Layout) -> Result<(), ravel_layout::LayoutError>,
) -> Result<Updated, ravel_layout::LayoutError> {
    let base = service.load().await?;
    let mut from = base.clone();
    if base.generation == 0
        && let Some(s) = start
    {
        from.stream = s.stream.clone();
        from.time = s.time.clone();
    }
    let mut next = from.clone();
    change(&mut next)?;
    if next.same_settings(&from) {
        return Ok(Updated {
            layout: base,
            changed: false,
        });
    }
    service.update_from(&base, next).await
}

pub fn run(args: LayoutArgs) -> Result<()> {
    let writes = !matches!(
        &args.command,
        LayoutCommand::Show
            | LayoutCommand::ClusteringKey(ClusteringKeyCommand::Show)
            | LayoutCommand::Stream(StreamCommand::Show)
            | LayoutCommand::Time(TimeCommand::Show)
            | LayoutCommand::BloomScope(BloomScopeCommand::Show)
            | LayoutCommand::Schema(SchemaCommand::Show)
            | LayoutCommand::Maintenance(MaintenanceCommand::Show)
            | LayoutCommand::Fence(FenceCommand::Show)
            | LayoutCommand::Retention(RetentionCommand::Show)
    );
    let store = if writes {
        Store::create(&args.table.store)?
    } else {
        Store::open(&args.table.store)?
    };
    let service = LayoutStore::new(&store, &args.table.name)?;
    let table = args.table.name.clone();
    crate::runtime()?.block_on(async move {
        let ctx = || format!("table {table} in {}", store.location());
        let start = if writes {
            hits_start(&service).await.with_context(ctx)?
        } else {
            None
        };
        match args.command {
            LayoutCommand::Show => print_json(&service.load().await.with_context(ctx)?),
            LayoutCommand::ClusteringKey(c) => match c {
                ClusteringKeyCommand::Set {
                    columns,
                    bucket_width,
                } => {
                    let bucket_width: BucketWidth = bucket_width.parse()?;
                    let u = update(&service, &start, |l| {
                            l.clustering_key = Some(ClusteringKey {
                                columns,
                                bucket_width,
                            });
                            Ok(())
                        })
                        .await
                        .with_context(ctx)?;
                    report("clustering key", &u)
                }
                ClusteringKeyCommand::Show => {
                    let l = service.load().await.with_context(ctx)?;
                    match &l.clustering_key {
                        Some(k) => println!(
                            "columns: {}\nbucket width: {}\nsort order: {}",
                            k.columns.join(", "),
                            k.bucket_width,
                            l.sort_key_names().join(", ")
                        ),
                        None => println!("no clustering key: rows keep arrival order"),
                    }
                    Ok(())
                }
                ClusteringKeyCommand::Clear => {
                    let u = update(&service, &start, |l| {
                            l.clustering_key = None;
                            Ok(())
                        })
                        .await
                        .with_context(ctx)?;
                    report("clustering key", &u)
                }
            },
            LayoutCommand::Stream(c) => match c {
                StreamCommand::Set { column } => {
                    let u = update(&service, &start, |l| {
                            l.stream = Some(column);
                            Ok(())
                        })
                        .await
                        .with_context(ctx)?;
                    report("stream", &u)
                }
                StreamCommand::Show => {
                    let l = service.load().await.with_context(ctx)?;
                    println!("{}", l.stream.as_deref().unwrap_or("(none)"));
                    Ok(())
                }
                StreamCommand::Clear => {
                    let u = update(&service, &start, |l| {
                            l.stream = None;
                            Ok(())
                        })
                        .await
                        .with_context(ctx)?;
                    report("stream", &u)
                }
            },
            LayoutCommand::Time(c) => match c {
                TimeCommand::Set { column } => {
                    let u = update(&service, &start, |l| {
                            l.time = Some(column);
                            Ok(())
                        })
                        .await
                        .with_context(ctx)?;
                    report("time column", &u)
                }
                TimeCommand::Show => {
                    let l = service.load().await.with_context(ctx)?;
                    println!("{}", l.time.as_deref().unwrap_or("(none)"));
                    Ok(())
                }
            },
            LayoutCommand::BloomScope(c) => match c {
                BloomScopeCommand::Set { scope, fpp } => {
                    let scope: BloomScope = scope.parse()?;
                    let u = update(&service, &start, |l| {
                            l.bloom.scope = scope;
                            if let Some(fpp) = fpp {
                                l.bloom.fpp = fpp;
                            }
                            Ok(())
                        })
                        .await
                        .with_context(ctx)?;
                    report("Bloom scope", &u)
                }
                BloomScopeCommand::Show => {
                    let l = service.load().await.with_context(ctx)?;
                    println!("scope: {}\nfpp: {}", l.bloom.scope, l.bloom.fpp);
                    if let Some(schema) = service.schema().await.with_context(ctx)? {
                        println!("columns: {}", l.bloom.scope.columns(&schema).join(", "));
                    }
                    Ok(())
                }
            },
            LayoutCommand::Maintenance(c) => maintenance(&service, &start, c).await.with_context(ctx),
            LayoutCommand::Fence(c) => fence(&store, &table, &service, &start, c)
                .await
                .with_context(ctx),
            LayoutCommand::Retention(c) => retention(&store, &table, &service, &start, c)
                .await
                .with_context(ctx),
            LayoutCommand::Schema(c) => match c {
                SchemaCommand::Set {
                    from,
                    hits,
                    convention,
                    strings,
                } => {
                    let schema = match (from, hits) {
                        (Some(path), _) => parquet_schema(&path)?,
                        (None, _) => {
                            ravel_hits::schema(crate::flags::convention(convention, strings))
                                .as_ref()
                                .clone()
                        }
                    };
                    let written = service.record_schema(&schema).await.with_context(ctx)?;
                    println!(
                        "schema of table {}: {} ({} columns)",
                        args.table.name,
                        if written { "recorded" } else { "unchanged" },
                        schema.fields().len()
                    );
                    Ok(())
                }
                SchemaCommand::Show => {
                    match service.schema().await.with_context(ctx)? {
                        Some(s) => {
                            for f in s.fields() {
                                println!("{}\t{}", f.name(), f.data_type());
                            }
                        }
                        None => println!(
                            "no recorded schema: layout names are checked at the start of the first load"
                        ),
                    }
                    Ok(())
                }
            },
        }
    })
}

async fn maintenance(
    service: &LayoutStore,
    start: &Option<Layout>,
    command: MaintenanceCommand,
) -> Result<()> {
    match command {
        MaintenanceCommand::Set {
            policy,
            size_ratio,
            max_depth,
        } => {
            let policy = policy.map(|p| p.parse()).transpose()?;
            let u = update(service, start, |l| {
                let m = &mut l.maintenance;
                m.policy = policy.unwrap_or(m.policy);
                m.size_ratio = size_ratio.unwrap_or(m.size_ratio);
                m.max_depth = max_depth.unwrap_or(m.max_depth);
                m.validate()
            })
            .await?;
            report("maintenance policy", &u)
        }
        MaintenanceCommand::Show => {
            let m = service.load().await?.maintenance;
            println!(
                "policy: {}\nsize ratio: {}\nmax depth: {}\ndepth bound: {}",
                m.policy,
                m.size_ratio,
                m.max_depth,
                ravel_compact::depth_bound(&m).map_or("none".to_string(), |d| d.to_string())
            );
            Ok(())
        }
    }
}

async fn fence(
    store: &Store,
    table: &str,
    service: &LayoutStore,
    start: &Option<Layout>,
    command: FenceCommand,
) -> Result<()> {
    let on = match command {
        FenceCommand::Set => true,
        FenceCommand::Clear => false,
        FenceCommand::Show => {
            let fenced = service.load().await?.fence;
            println!(
                "{}",
                if fenced {
                    "fenced: other Delta writers refuse to write to the table"
                } else {
                    "open: other Delta writers may write; ravel-load takes their objects back in"
                }
            );
            return Ok(());
        }
    };
    let u = update(service, start, |l| {
        l.fence = on;
        Ok(())
    })
    .await?;
    report(if on { "fence" } else { "no fence" }, &u)?;
    match ravel_loader::commit_settings(store, table).await? {
        Some(v) => println!("recorded in the table's protocol: version {v}"),
        None => println!("the table's protocol has it already, or its first load records it"),
    }
    Ok(())
}

async fn retention(
    store: &Store,
    table: &str,
    service: &LayoutStore,
    start: &Option<Layout>,
    command: RetentionCommand,
) -> Result<()> {
    let RetentionCommand::Set { files, inputs, log } = command else {
        print!("{}", service.load().await?.retention);
        return Ok(());
    };
    let seconds = |flag: &str, value: Option<String>| -> Result<Option<u64>> {
        let parse = |v: &String| ravel_layout::parse_seconds(v);
        let parsed = value.as_ref().map(parse).transpose();
        parsed
            .map_err(|e| BadInput(format!("--{flag} {:?}: {e}", value.unwrap_or_default())).into())
    };
    let (files, inputs, log) = (
        seconds("files", files)?,
        seconds("inputs", inputs)?,
        seconds("log", log)?,
    );
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    let u = update(service, start, |l| {
        let r = &mut l.retention;
        r.files_s = files.unwrap_or(r.files_s);
        r.set_inputs(inputs.unwrap_or(r.inputs_s), now_ms);
        r.log_s = log.unwrap_or(r.log_s);
        r.validate()
    })
    .await?;
    report("retention", &u)?;
    match ravel_loader::commit_settings(store, table).await? {
        Some(v) => println!("recorded in the table's metadata: version {v}"),
        None => println!("the table's metadata has it already, or its first load records it"),
    }
    Ok(())
}

/// The schema of a Parquet file, as Arrow reads it.
pub fn parquet_schema(path: &std::path::Path) -> Result<arrow::datatypes::Schema> {
    let file = std::fs::File::open(path)
        .map_err(|e| BadInput(format!("cannot open {}: {e}", path.display())))?;
    let builder = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)
        .map_err(|e| {
            BadInput(format!(
                "{} is not a readable Parquet file: {e}",
                path.display()
            ))
        })?;
    Ok(builder.schema().as_ref().clone())
}

fn report(what: &str, u: &Updated) -> Result<()> {
    if u.changed {
        println!("{what} set: layout generation {}", u.layout.generation);
    } else {
        println!(
            "{what} unchanged (equal to the stored one): layout generation {}",
            u.layout.generation
        );
    }
    Ok(())
}

fn print_json(l: &Layout) -> Result<()> {
    println!("{}", serde_json::to_string_pretty(l)?);
    Ok(())
}
