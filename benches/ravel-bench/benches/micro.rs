//! Criterion micro-benchmarks of the load's hot parts, on generated hits (raw convention, as
//! the public hits.parquet): the clustering permutation of a 1M-row run, gathering its 105
//! columns by that permutation, and encoding one object (its Parquet Bloom filters included;
//! the sidecar copies them). They call the functions a load runs (`ravel_loader::kernels`,
//! `ravel_layout`). Run with `cargo bench -p ravel-load -p ravel-bench --bench micro` (both
//! packages: alone, ravel-bench unifies other features and cargo rebuilds DataFusion).

use std::time::Duration;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use ravel_hits::{GenOptions, Generator};
use ravel_layout::ClusteringOrder;
use ravel_loader::READ_BATCH_ROWS;
use ravel_loader::kernels::{encode_objects, gather};
// The same memcmp/bcmp as ravel-load (feature `memcmp`).
#[cfg(all(feature = "memcmp", target_arch = "x86_64", target_os = "linux"))]
use ravel_memcmp as _;

const RUN_ROWS: u64 = 1_000_000;
/// About one ~24 MB object of sorted hits (the default geometry below 30 GB of memory).
const OBJECT_ROWS: usize = 400_000;
const OBJECT_BYTES: u64 = 24_000_000;

struct Data {
    schema: SchemaRef,
    batches: Vec<RecordBatch>,
    order: ClusteringOrder,
}

fn data() -> Data {
    let generator = Generator::new(GenOptions {
        rows: RUN_ROWS,
        batch_rows: READ_BATCH_ROWS,
        ..GenOptions::default()
    });
    let schema = generator.schema();
    let batches: Vec<RecordBatch> = generator.collect();
    let order = ClusteringOrder::try_new(&ravel_hits::layout(), &schema)
        .expect("hits order")
        .expect("hits layout has a key");
    Data {
        schema,
        batches,
        order,
    }
}

fn benches(c: &mut Criterion) {
    let d = data();
    let layout = ravel_hits::layout();
    let mut g = c.benchmark_group("load");
    g.sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(10));

    g.throughput(Throughput::Elements(RUN_ROWS));
    g.bench_function("clustering permutation, 1M rows", |b| {
        b.iter(|| d.order.merge_order(&d.batches).expect("order"))
    });

    let order = d.order.merge_order(&d.batches).expect("order");
    g.bench_function("gather 105 columns by the permutation, 1M rows", |b| {
        b.iter_batched(
            || d.batches.clone(),
            |batches| gather(&d.schema, batches, &order).expect("gather"),
            BatchSize::PerIteration,
        )
    });

    let sorted = gather(&d.schema, d.batches.clone(), &order).expect("gather");
    let sorted = arrow::compute::concat_batches(&d.schema, &sorted).expect("one batch");
    let object = sorted.slice(0, OBJECT_ROWS);
    let sizes = encode_objects(&layout, object.clone(), 3, OBJECT_BYTES).expect("encode");
    eprintln!(
        "one object: {OBJECT_ROWS} sorted rows encode to {} object(s) of {:?} bytes",
        sizes.len(),
        sizes
    );
    g.throughput(Throughput::Elements(OBJECT_ROWS as u64));
    g.bench_function("encode one object (zstd 3, 400k sorted rows)", |b| {
        b.iter(|| encode_objects(&layout, object.clone(), 3, OBJECT_BYTES).expect("encode"))
    });

    g.finish();
}

criterion_group!(micro, benches);
criterion_main!(micro);
