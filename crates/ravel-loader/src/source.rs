//! Sources: Parquet files streamed in batches (never read whole).

use std::path::{Path, PathBuf};
use std::time::Instant;

use arrow::array::RecordBatch;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use ravel_store::Store;

use crate::{LoadError, LoadOptions, LoadReport, Loader};

/// Rows per batch read from Parquet.
pub const READ_BATCH_ROWS: usize = 65_536;

fn input_err(path: &Path, message: impl std::fmt::Display) -> LoadError {
    LoadError::Input {
        input: path.display().to_string(),
        message: message.to_string(),
    }
}

/// Streams the batches of Parquet files to `sink` on a reader thread, in file order.
fn read_parquet(
    paths: Vec<PathBuf>,
    tx: tokio::sync::mpsc::Sender<Result<(RecordBatch, String), LoadError>>,
) {
    for path in paths {
        let shown = path.display().to_string();
        let reader = std::fs::File::open(&path)
            .map_err(|e| input_err(&path, format!("cannot open: {e}")))
            .and_then(|f| {
                ParquetRecordBatchReaderBuilder::try_new(f)
                    .map_err(|e| input_err(&path, format!("not a readable Parquet file: {e}")))
            })
            .and_then(|b| {
                b.with_batch_size(READ_BATCH_ROWS)
                    .build()
                    .map_err(|e| input_err(&path, e))
            });
        let reader = match reader {
            Ok(r) => r,
            Err(e) => {
                let _ = tx.blocking_send(Err(e));
                return;
            }
        };
        for batch in reader {
            let item = batch
                .map(|b| (b, shown.clone()))
                .map_err(|e| input_err(&path, format!("reading: {e}")));
            let stop = item.is_err();
            if tx.blocking_send(item).is_err() || stop {
                return;
            }
        }
    }
}

/// Loads Parquet files into a table: reads them in order on a reader thread, pushes every
/// batch, finishes. `progress` sees the rows pushed so far.
pub async fn load_parquet_files(
    store: &Store,
    table: &str,
    opts: LoadOptions,
    paths: &[PathBuf],
    mut progress: impl FnMut(u64, &Loader),
) -> Result<LoadReport, LoadError> {
    let mut loader = Loader::new(store, table, opts).await?;
    let (tx, mut rx) = tokio::sync::mpsc::channel(2);
    let paths = paths.to_vec();
    let reader = tokio::task::spawn_blocking(move || read_parquet(paths, tx));
    let mut rows = 0u64;
    let result: Result<(), LoadError> = async {
        loop {
            let t = Instant::now();
            let Some(item) = rx.recv().await else { break };
            loader.add_read_time(t.elapsed());
            let (batch, input) = item?;
            rows += batch.num_rows() as u64;
            loader.push_from(batch, &input).await?;
            progress(rows, &loader);
        }
        Ok(())
    }
    .await;
    drop(rx);
    let _ = reader.await;
    match result {
        Ok(()) => loader.finish().await,
        Err(e) => Err(e),
    }
}
