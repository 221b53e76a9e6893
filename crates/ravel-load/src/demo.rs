//! `ravel-load demo`: the main job on the embedded default (a local store, generated data).

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use ravel_layout::LayoutStore;
use ravel_store::Store;
use ravel_tier::Tier;

use crate::gen_cmd::{ConventionArg, GenArgs, StringsArg};

#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Where the generated input goes (DIR/hits.parquet).
    #[arg(long, default_value = "ravel-demo")]
    pub dir: PathBuf,
    /// The local store the table `hits` is loaded into.
    #[arg(long, default_value = "ravel-store")]
    pub store: PathBuf,
    /// Rows to generate.
    #[arg(long, default_value_t = 1_000_000)]
    pub rows: u64,
    /// Seed of the generator.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

pub fn run(args: DemoArgs) -> Result<()> {
    let tier = Tier::detect()?;
    println!("== geometry\n{tier}\n");
    std::fs::create_dir_all(&args.dir)
        .with_context(|| format!("creating {}", args.dir.display()))?;
    let input = args.dir.join("hits.parquet");
    println!("== generate");
    crate::gen_cmd::run(GenArgs {
        rows: args.rows,
        seed: args.seed,
        out: input.clone(),
        convention: ConventionArg::Raw,
        strings: StringsArg::Binary,
    })?;
    let store_dir = args.store.clone();
    let store = Store::create(store_dir.to_str().context("store path is not UTF-8")?)?;
    let service = LayoutStore::new(&store, "hits")?;
    let schema = crate::layout_cmd::parquet_schema(&input)?;
    crate::runtime()?.block_on(async {
        let recorded = service.record_schema(&schema).await?;
        println!(
            "\n== table hits in {}\nschema: {} ({} columns)",
            store.location(),
            if recorded { "recorded" } else { "unchanged" },
            schema.fields().len()
        );
        let target = ravel_hits::layout();
        let u = service
            .update(|l| {
                l.stream = target.stream.clone();
                l.time = target.time.clone();
                l.clustering_key = target.clustering_key.clone();
                l.bloom = target.bloom.clone();
                Ok(())
            })
            .await?;
        println!(
            "layout: {} (generation {})",
            if u.changed { "set" } else { "unchanged" },
            u.layout.generation
        );
        println!("{}", serde_json::to_string_pretty(&u.layout)?);
        println!(
            "Bloom filters on: {}",
            u.layout.bloom.scope.columns(&schema).join(", ")
        );
        anyhow::Ok(())
    })?;
    let manifests = store_dir.join("hits/manifests");
    if std::fs::read_dir(&manifests).is_ok_and(|mut d| d.next().is_some()) {
        println!(
            "\n== load\nthe demo table is already loaded ({}); delete {} to start over",
            manifests.display(),
            store_dir.display()
        );
        return Ok(());
    }
    println!("\n== load");
    crate::load_cmd::run(crate::load_cmd::LoadArgs {
        store: store_dir
            .to_str()
            .context("store path is not UTF-8")?
            .to_string(),
        table: "hits".into(),
        input: vec![input],
        format: None,
        object_bytes: None,
        target_bytes: None,
        pipeline_depth: None,
        load_budget: None,
        max_flush_delay: None,
        zstd_level: 3,
        max_bad_rows: 0,
        rejects: None,
        overwrite_rejects: false,
        json: false,
    })?;
    Ok(())
}
