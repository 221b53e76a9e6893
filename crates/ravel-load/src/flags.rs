//! Flags that more than one command takes, and the one place their values are checked.

use anyhow::Result;
use clap::{Args, ValueEnum};
use ravel_compact::CompactOptions;
use ravel_hits::{Convention, Strings};
use ravel_loader::LoadOptions;
use ravel_tier::Tier;

use crate::BadInput;

/// Which table a command works on.
#[derive(Args, Debug, Clone)]
pub struct TableArgs {
    /// The store: a local directory or s3://bucket/prefix (S3 settings from AWS_* variables).
    #[arg(long, env = "RAVEL_STORE", default_value = "./ravel-store")]
    pub store: String,
    /// The table.
    #[arg(long = "table")]
    pub name: String,
}

/// How objects are written: the geometry of `load`, `compact` and `maintain`.
#[derive(Args, Debug, Clone)]
pub struct GeometryFlags {
    /// Target stored size of one object, bytes (tier default).
    #[arg(long)]
    pub object_bytes: Option<u64>,
    /// Objects encoded or uploading at once (tier default).
    #[arg(long)]
    pub pipeline_depth: Option<usize>,
    /// Bytes a load or a merge may hold at once; a merge gives half to its slices and half to
    /// writing (tier default).
    #[arg(long)]
    pub load_budget: Option<u64>,
    /// zstd level of the objects.
    #[arg(long, default_value_t = 3)]
    pub zstd_level: i32,
}

impl GeometryFlags {
    /// The tier's options with these flags over them, not yet checked.
    pub fn over(&self, tier: &Tier) -> LoadOptions {
        let mut o = LoadOptions::from_tier(tier);
        if let Some(v) = self.object_bytes {
            o.object_bytes = v;
        }
        if let Some(v) = self.pipeline_depth {
            o.pipeline_depth = v;
        }
        if let Some(v) = self.load_budget {
            o.load_budget = v;
        }
        o.zstd_level = self.zstd_level;
        o
    }
}

/// The options if the loader can run with them ([`LoadOptions::validate`]); otherwise bad input
/// naming the flag that sets the field.
pub fn checked(o: LoadOptions) -> Result<LoadOptions> {
    match o.validate() {
        Ok(()) => Ok(o),
        Err(e) => Err(BadInput(format!(
            "--{} {}: {}",
            e.field.replace('_', "-"),
            e.value,
            e.reason
        ))
        .into()),
    }
}

/// How merges write: the flags `compact` and `maintain` share.
#[derive(Args, Debug, Clone)]
pub struct MergeFlags {
    #[command(flatten)]
    pub geometry: GeometryFlags,
    /// Runs merged at once, at most (default: as many as half the budget holds); more merge in
    /// passes.
    #[arg(long)]
    pub fan_in: Option<usize>,
}

impl MergeFlags {
    /// The options these flags give over the tier's defaults; unusable values are bad input.
    pub fn options(&self, tier: &Tier) -> Result<CompactOptions> {
        let args = self;
        let load = checked(args.geometry.over(tier))?;
        let opts = CompactOptions {
            load,
            fan_in: args.fan_in,
            max_input_bytes: None,
            dry_run: false,
            max_steps: None,
        };
        opts.validate()?;
        Ok(opts)
    }
}

/// How `load` and `serve` read TSV: a TSV has no header, so into a table without a recorded
/// schema it loads as hits.tsv (the raw convention, Binary strings).
pub fn hits_tsv(bad_rows: ravel_loader::BadRows) -> ravel_loader::TsvOptions {
    ravel_loader::TsvOptions {
        schema: Some(ravel_hits::schema(Convention::Raw(Strings::Binary))),
        bad_rows,
    }
}

/// The hits table's physical convention, as `gen` and `layout schema set --hits` name it.
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

/// The physical convention the two flags name.
pub fn convention(convention: ConventionArg, strings: StringsArg) -> Convention {
    match (convention, strings) {
        (ConventionArg::Typed, _) => Convention::Typed,
        (ConventionArg::Raw, StringsArg::Binary) => Convention::Raw(Strings::Binary),
        (ConventionArg::Raw, StringsArg::Utf8) => Convention::Raw(Strings::Utf8),
    }
}
