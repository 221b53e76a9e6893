//! The files that land: small Parquet files of a narrow event schema, written beside the test
//! S3 server's bucket and renamed into its landing prefix under date-prefixed keys
//! (`landing/YYYY/MM/DD/HH/<seq>.parquet`, sorting by arrival), so each appears whole and the
//! bench's own writes cost the server no request.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};
use arrow::array::{ArrayRef, Int32Array, Int64Array, RecordBatch};
use arrow::array::{TimestampMicrosecondArray, builder::StringBuilder};
use arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use parquet::arrow::ArrowWriter;

/// The landing prefix's first segment (the key of its listings in the request counts).
pub const LANDING: &str = "landing";
/// Streams the rows spread over.
const STREAMS: i64 = 8;

/// Writes the files: the next one's sequence number, and its first row's id.
pub struct Lander {
    bucket_dir: PathBuf,
    staging: PathBuf,
    file_rows: usize,
    pub landed: u64,
    next_row: i64,
}

fn schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new(
            "ts",
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            false,
        ),
        Field::new("stream", DataType::Int32, false),
        Field::new("id", DataType::Int64, false),
        Field::new("msg", DataType::Utf8, false),
    ]))
}

impl Lander {
    /// Lands into `<bucket_dir>/landing/…`, staging each file in `staging` (outside the bucket,
    /// on the same file system).
    pub fn new(bucket_dir: &Path, staging: &Path, file_rows: usize) -> Result<Lander> {
        std::fs::create_dir_all(staging)
            .with_context(|| format!("creating {}", staging.display()))?;
        Ok(Lander {
            bucket_dir: bucket_dir.to_path_buf(),
            staging: staging.to_path_buf(),
            file_rows,
            landed: 0,
            next_row: 0,
        })
    }

    /// The rows of the next file: ids from `next_row`, stamped now, a few streams.
    fn batch(&mut self) -> Result<RecordBatch> {
        let now = chrono::Utc::now().timestamp_micros();
        let n = self.file_rows as i64;
        let ids: Vec<i64> = (self.next_row..self.next_row + n).collect();
        self.next_row += n;
        let mut msg = StringBuilder::new();
        for id in &ids {
            msg.append_value(format!("event {id} of the life benchmark"));
        }
        let columns: Vec<ArrayRef> = vec![
            Arc::new(
                TimestampMicrosecondArray::from(
                    ids.iter().map(|i| now + i % 1000).collect::<Vec<_>>(),
                )
                .with_timezone("UTC"),
            ),
            Arc::new(Int32Array::from(
                ids.iter().map(|i| (i % STREAMS) as i32).collect::<Vec<_>>(),
            )),
            Arc::new(Int64Array::from(ids)),
            Arc::new(msg.finish()),
        ];
        Ok(RecordBatch::try_new(schema(), columns)?)
    }

    /// Writes the next file into `path`.
    pub fn write(&mut self, path: &Path) -> Result<()> {
        let batch = self.batch()?;
        let file =
            std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
        let mut w = ArrowWriter::try_new(file, batch.schema(), None)?;
        w.write(&batch)?;
        w.close()?;
        Ok(())
    }

    /// Lands the next file under its date-prefixed key.
    pub fn land(&mut self) -> Result<()> {
        let staged = self.staging.join("next.parquet");
        self.write(&staged)?;
        let day_hour = chrono::Utc::now().format("%Y/%m/%d/%H");
        let dir = self.bucket_dir.join(LANDING).join(day_hour.to_string());
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let target = dir.join(format!("{:09}.parquet", self.landed));
        std::fs::rename(&staged, &target)
            .with_context(|| format!("landing {}", target.display()))?;
        self.landed += 1;
        Ok(())
    }

    /// Rows of the landed files.
    pub fn rows(&self) -> u64 {
        self.landed * self.file_rows as u64
    }
}
