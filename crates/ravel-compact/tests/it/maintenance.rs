//! The maintenance policy on arbitrary tables: each case is loaded in several loads, each
//! followed by the policy (tiered with a size ratio and depth bound drawn per case, or full, or
//! none). In some cases the first load is cut into runs so small that it alone overlaps itself
//! deeper than the bound. After every load:
//!
//! - the overlap depth is within the policy's bound (1 for full), and the table verifies
//!   deeply; the policy none merges nothing;
//! - every row is there once.
//!
//! At the end a full compaction leaves one sequence in which rows with equal sort keys keep
//! their order (earlier loads first, then input order): the policy's merges kept each row's
//! place among equal keys.

use arrow::array::{AsArray, RecordBatch};
use arrow::datatypes::Int64Type;
use object_store::ObjectStoreExt;
use proptest::prelude::*;
use ravel_compact::{CompactError, CompactOptions, compact, depth_bound, maintain};
use ravel_layout::{Maintenance, MaintenanceMode};
use ravel_store::Store;
use ravel_testkit::arbitrary::{Case, case, cases, split};
use ravel_verify::{VerifyOptions, verify};

use crate::properties::{in_order_and_verified, load, load_options, load_with, table};

fn options() -> CompactOptions {
    CompactOptions {
        load: load_options(),
        fan_in: None,
        max_input_bytes: None,
        dry_run: false,
        max_steps: None,
    }
}

/// Every `seq` of the newest version, sorted.
async fn every_seq(store: &Store) -> Vec<i64> {
    let mut seen = Vec::new();
    for m in ravel_testkit::published(store, "t").await {
        for o in &m.objects {
            let bytes = store
                .object_store()
                .get(&object_store::path::Path::from(o.key.as_str()))
                .await
                .unwrap()
                .bytes()
                .await
                .unwrap();
            let reader =
                parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(bytes)
                    .unwrap()
                    .build()
                    .unwrap();
            for b in reader {
                let b: RecordBatch = b.unwrap();
                let seq = b.column_by_name("seq").unwrap().as_primitive::<Int64Type>();
                seen.extend(seq.values().iter().copied());
            }
        }
    }
    seen.sort_unstable();
    seen
}

/// Runs of a few rows: one load of a case overlaps itself many times over.
fn small_runs() -> ravel_loader::LoadOptions {
    ravel_loader::LoadOptions {
        target_bytes: Some(3_000),
        ..load_options()
    }
}

/// How maintenance runs after each load: the whole policy at once, or a step at a time (as
/// the service takes turns), until it asks for none.
async fn maintain_after(store: &Store, step_at_a_time: bool) -> ravel_compact::CompactReport {
    if !step_at_a_time {
        return maintain(store, "t", &options()).await.unwrap();
    }
    let one = CompactOptions {
        max_steps: Some(1),
        ..options()
    };
    let mut first = maintain(store, "t", &one).await.unwrap();
    loop {
        let next = maintain(store, "t", &one).await.unwrap();
        assert!(next.steps <= 1, "one step at most: {next:?}");
        if next.steps == 0 {
            first.depth_after = next.depth_after;
            return first;
        }
        first.input_rows += next.input_rows;
        first.output_rows += next.output_rows;
    }
}

async fn check(
    c: Case,
    loads: usize,
    policy: Maintenance,
    deep_first_load: bool,
    step_at_a_time: bool,
) -> Result<(), TestCaseError> {
    let (mut layout, input) = table(&c);
    if input.num_rows() == 0 || layout.clustering_key.is_none() {
        return Ok(());
    }
    layout.maintenance = policy;
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path().to_str().unwrap()).unwrap();
    ravel_testkit::set_layout(&store, "t", &layout).await;
    let pieces = split(&c, &input);
    let per_load = pieces.len().div_ceil(loads).max(1);
    let mut loaded = 0;
    for load_pieces in pieces.chunks(per_load) {
        if load_pieces.iter().all(|b| b.num_rows() == 0) {
            continue;
        }
        match deep_first_load && loaded == 0 {
            true => load_with(&store, load_pieces, small_runs()).await,
            false => load(&store, load_pieces).await,
        }
        loaded += load_pieces.iter().map(|b| b.num_rows()).sum::<usize>();
        let report = maintain_after(&store, step_at_a_time).await;
        match depth_bound(&policy) {
            Some(bound) => prop_assert!(
                report.depth_after <= bound,
                "depth {} over the bound {bound}: {:?}",
                report.depth_after,
                report
            ),
            None => prop_assert_eq!(report.version, None, "the policy none merged"),
        }
        prop_assert_eq!(report.output_rows, report.input_rows);
        let again = maintain(&store, "t", &options()).await.unwrap();
        prop_assert_eq!(
            again.version,
            None,
            "a second run has nothing to do: {:?}",
            again
        );
        let verified = verify(&store, "t", &deep()).await.unwrap();
        prop_assert!(verified.holds(), "{:#?}", verified.violations);
        prop_assert!(every_seq(&store).await.into_iter().eq(0..loaded as i64));
    }
    match compact(&store, "t", &options()).await {
        Ok(_) => in_order_and_verified(&store, &layout, &input).await,
        Err(CompactError::NotClustered(_)) => Ok(()),
        Err(e) => panic!("{e}"),
    }
}

fn deep() -> VerifyOptions {
    VerifyOptions::deep()
}

fn policy() -> impl Strategy<Value = Maintenance> {
    let tiered = (2u32..=4, 0u32..=2).prop_map(|(size_ratio, extra)| Maintenance {
        policy: MaintenanceMode::Tiered,
        size_ratio,
        max_depth: size_ratio + extra,
    });
    let mode = |policy| Maintenance {
        policy,
        ..Maintenance::default()
    };
    prop_oneof![
        4 => tiered,
        1 => Just(mode(MaintenanceMode::Full)),
        1 => Just(mode(MaintenanceMode::None)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(16), ..ProptestConfig::default() })]

    #[test]
    fn maintenance_after_every_load_keeps_rows_ties_and_the_depth_bound(
        c in case(600),
        loads in 3usize..=9,
        policy in policy(),
        deep_first_load in any::<bool>(),
        step_at_a_time in any::<bool>(),
    ) {
        let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
        rt.block_on(check(c, loads, policy, deep_first_load, step_at_a_time))?;
    }
}
