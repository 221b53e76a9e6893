//! `ravel-load demo`: the main job on the embedded default (a local store, generated data),
//! ending with what to do next: one query with its store traffic and `verify`, each shown with
//! the command that does the same.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use ravel_layout::LayoutStore;
use ravel_store::Store;
use ravel_tier::Tier;

use crate::flags::{ConventionArg, StringsArg};
use crate::gen_cmd::GenArgs;

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
        first_day: 0,
        days: 31,
        world_seed: None,
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
    let store_url = store_dir
        .to_str()
        .context("store path is not UTF-8")?
        .to_string();
    let log = store_dir.join("hits/_delta_log");
    if std::fs::read_dir(&log).is_ok_and(|mut d| d.next().is_some()) {
        println!(
            "\n== load\nthe demo table is already loaded ({}); delete {} to start over",
            log.display(),
            store_dir.display()
        );
    } else {
        println!("\n== load");
        load(&store_url, input)?;
    }
    next_steps(&store_url)
}

/// Loads `input` into the table `hits` of `store` with the default settings, compacted after.
fn load(store: &str, input: PathBuf) -> Result<()> {
    crate::load_cmd::run(crate::load_cmd::LoadArgs {
        table: hits(store),
        input: vec![input],
        format: None,
        geometry: crate::flags::GeometryFlags {
            object_bytes: None,
            pipeline_depth: None,
            load_budget: None,
            zstd_level: 3,
        },
        target_bytes: None,
        max_flush_delay: None,
        max_bad_rows: 0,
        rejects: None,
        overwrite_rejects: false,
        compact: true,
        no_maintain: false,
        reload: false,
        json: false,
    })?;
    Ok(())
}

/// The table `hits` of `store`.
fn hits(store: &str) -> crate::flags::TableArgs {
    crate::flags::TableArgs {
        store: store.to_string(),
        name: "hits".into(),
    }
}

/// The demo's query: the five counters with the most rows.
const TOP_COUNTERS: &str = "SELECT \"CounterID\", COUNT(*) AS c FROM hits \
                            GROUP BY \"CounterID\" ORDER BY c DESC LIMIT 5";

/// Shows what to do with the table: runs one query with its store traffic and `verify`, each
/// under the command that does the same, then lists those commands to copy.
fn next_steps(store: &str) -> Result<()> {
    let s = shell_word(store);
    let query = format!(
        "ravel-load query --store {s} --table hits --stats {}",
        shell_word(TOP_COUNTERS)
    );
    let verify = format!("ravel-load verify --store {s} --table hits");
    println!("\n== query: {query}");
    crate::query_cmd::run(crate::query_cmd::QueryArgs {
        table: hits(store),
        sql: TOP_COUNTERS.into(),
        sql_name: None,
        format: crate::query_cmd::Format::Table,
        stats: true,
        no_manifest_pruning: false,
        version: None,
    })?;
    println!("\n== verify: {verify}");
    crate::verify_cmd::run(crate::verify_cmd::VerifyArgs {
        table: hits(store),
        deep: false,
        sample_points: None,
        json: false,
    })?;
    println!(
        "\n== next\n{query}\n{verify} --deep\nravel-load layout --store {s} --table hits show\n\
         ravel-load gc --store {s} --table hits --dry-run"
    );
    Ok(())
}

/// `word` as one POSIX shell word: as it is when it holds only characters the shell leaves
/// alone, else in single quotes.
fn shell_word(word: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "-_./:=@%+,".contains(c);
    if !word.is_empty() && word.chars().all(plain) {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::shell_word;

    #[test]
    fn shell_words_are_quoted_only_when_needed() {
        assert_eq!(shell_word("ravel-store"), "ravel-store");
        assert_eq!(shell_word("/tmp/a b"), "'/tmp/a b'");
        assert_eq!(shell_word("it's"), "'it'\\''s'");
        assert_eq!(shell_word(""), "''");
    }
}
