//! The presorted input of `load-presorted`: the generated rows sorted by the hits clustering
//! key with DataFusion (an external sort: it spills past its memory limit), then read back and
//! checked to be in ravel-load's clustering order, so the step's premise is a fact.

use std::path::Path;

use anyhow::{Context, Result, ensure};
use arrow::row::OwnedRow;
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::prelude::{ParquetReadOptions, SessionConfig, SessionContext};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use ravel_layout::ClusteringOrder;

/// Writes `input`'s rows to `out` in the order of [`ravel_hits::layout`] (stream CounterID,
/// EventTime div 1 day, EventDate, UserID, EventTime), sorting in at most `memory_limit` bytes.
pub fn presort(input: &Path, out: &Path, memory_limit: usize) -> Result<()> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let env = RuntimeEnvBuilder::new()
            .with_memory_limit(memory_limit, 1.0)
            .build_arc()?;
        let mut config = SessionConfig::new().with_target_partitions(cores);
        // Keep the input's types: by default DataFusion reads strings as views and would
        // write them so, and the presorted load would then load other types than `load`.
        config
            .options_mut()
            .execution
            .parquet
            .schema_force_view_types = false;
        let ctx = SessionContext::new_with_config_rt(config, env);
        ctx.register_parquet(
            "hits",
            input.to_str().context("input path is not UTF-8")?,
            ParquetReadOptions::default(),
        )
        .await?;
        let sql = format!(
            "COPY (SELECT * FROM hits ORDER BY \"CounterID\", \"EventTime\" / 86400, \
             \"EventDate\", \"UserID\", \"EventTime\") TO '{}' STORED AS PARQUET \
             OPTIONS (compression 'zstd(1)')",
            out.to_str().context("output path is not UTF-8")?
        );
        ctx.sql(&sql).await?.collect().await?;
        Ok::<_, anyhow::Error>(())
    })
    .with_context(|| format!("sorting {} into {}", input.display(), out.display()))?;
    let rows = check_sorted(out)?;
    let open = |p: &Path| -> Result<_> {
        Ok(ParquetRecordBatchReaderBuilder::try_new(
            std::fs::File::open(p)?,
        )?)
    };
    let (source, sorted) = (open(input)?, open(out)?);
    let types = |b: &ParquetRecordBatchReaderBuilder<std::fs::File>| {
        b.schema()
            .fields()
            .iter()
            .map(|f| (f.name().clone(), f.data_type().clone()))
            .collect::<Vec<_>>()
    };
    ensure!(
        types(&source) == types(&sorted),
        "{}: the sorted copy's column types differ from the input's",
        out.display()
    );
    let expected = source.metadata().file_metadata().num_rows() as u64;
    ensure!(
        rows == expected,
        "{}: {rows} rows, the input has {expected}",
        out.display()
    );
    Ok(())
}

/// Reads `path` and checks each row's key is ≥ the previous one in the hits clustering order;
/// returns the rows.
pub fn check_sorted(path: &Path) -> Result<u64> {
    let reader = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(path)?)?.build()?;
    let layout = ravel_hits::layout();
    let mut order: Option<ClusteringOrder> = None;
    let mut last: Option<OwnedRow> = None;
    let mut rows = 0u64;
    for batch in reader {
        let batch = batch?;
        if order.is_none() {
            order = Some(
                ClusteringOrder::try_new(&layout, batch.schema().as_ref())?
                    .context("the hits layout has a key")?,
            );
        }
        let keys = order.as_ref().expect("set above").key_rows(&batch)?;
        for i in 0..keys.num_rows() {
            let prev = match i {
                0 => last.as_ref().map(|r| r.row()),
                _ => Some(keys.row(i - 1)),
            };
            if let Some(prev) = prev {
                ensure!(
                    prev <= keys.row(i),
                    "{}: row {} is out of clustering order",
                    path.display(),
                    rows + i as u64
                );
            }
        }
        if keys.num_rows() > 0 {
            last = Some(keys.row(keys.num_rows() - 1).owned());
        }
        rows += batch.num_rows() as u64;
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::compute::concat_batches;
    use parquet::arrow::ArrowWriter;
    use ravel_hits::{GenOptions, Generator};

    fn write(path: &Path, batch: &arrow::array::RecordBatch) {
        let mut w =
            ArrowWriter::try_new(std::fs::File::create(path).unwrap(), batch.schema(), None)
                .unwrap();
        // Several small batches, so the check crosses batch boundaries.
        for at in (0..batch.num_rows()).step_by(700) {
            w.write(&batch.slice(at, 700.min(batch.num_rows() - at)))
                .unwrap();
        }
        w.close().unwrap();
    }

    #[test]
    fn presort_writes_every_row_in_clustering_order_and_the_check_catches_disorder() {
        let dir = tempfile::tempdir().unwrap();
        let generator = Generator::new(GenOptions {
            rows: 5_000,
            ..GenOptions::default()
        });
        let schema = generator.schema();
        let batches: Vec<_> = generator.collect();
        let arrival = concat_batches(&schema, &batches).unwrap();
        let input = dir.path().join("in.parquet");
        write(&input, &arrival);
        // Generated rows arrive in time order, not in clustering order.
        let e = check_sorted(&input).unwrap_err();
        assert!(
            format!("{e:#}").contains("out of clustering order"),
            "{e:#}"
        );

        let out = dir.path().join("sorted.parquet");
        presort(&input, &out, 256 << 20).unwrap();
        assert_eq!(check_sorted(&out).unwrap(), 5_000);
    }
}
