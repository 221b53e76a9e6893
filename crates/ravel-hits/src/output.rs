//! Writing generated hits to files: Parquet (`.parquet`) or hits-style TSV (`.tsv`).
//!
//! Generation and encoding overlap: the generator runs on the calling thread and hands batches
//! over a bounded channel to a writer thread.

use std::fs::File;
use std::io::BufWriter;
use std::path::Path;
use std::sync::mpsc::sync_channel;

use arrow::array::RecordBatch;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;

use ravel_encode::ParallelWriter;

use crate::generate::{GenOptions, Generator};

/// Errors writing generated data.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OutputError {
    #[error("{path}: output must end in .parquet or .tsv")]
    UnknownFormat { path: String },
    #[error("{path}: the output's directory does not exist")]
    NoSuchDirectory { path: String },
    #[error("writing {path}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("encoding Parquet into {path}")]
    Parquet {
        path: String,
        #[source]
        source: parquet::errors::ParquetError,
    },
}

/// The file formats `gen` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Parquet,
    Tsv,
}

impl Format {
    /// The format a path's extension names.
    pub fn from_path(path: &Path) -> Result<Format, OutputError> {
        match path.extension().and_then(|e| e.to_str()) {
            Some("parquet") => Ok(Format::Parquet),
            Some("tsv") => Ok(Format::Tsv),
            _ => Err(OutputError::UnknownFormat {
                path: path.display().to_string(),
            }),
        }
    }
}

/// What was written.
#[derive(Debug, Clone, Copy)]
pub struct Written {
    pub rows: u64,
    pub bytes: u64,
}

/// Rows per row group of generated Parquet.
pub const GEN_ROW_GROUP_ROWS: usize = 1 << 20;

/// Writer properties of generated Parquet: zstd level 1, parquet-rs defaults otherwise.
pub fn gen_writer_properties() -> WriterProperties {
    WriterProperties::builder()
        .set_compression(Compression::ZSTD(
            ZstdLevel::try_new(1).expect("valid level"),
        ))
        .build()
}

/// Generates hits and writes them to `path` (format from its extension). `progress` is called
/// with the rows written so far.
pub fn write_generated(
    opts: GenOptions,
    path: &Path,
    mut progress: impl FnMut(u64),
) -> Result<Written, OutputError> {
    let format = Format::from_path(path)?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty())
        && !dir.is_dir()
    {
        return Err(OutputError::NoSuchDirectory {
            path: path.display().to_string(),
        });
    }
    let shown = path.display().to_string();
    let io = |source| OutputError::Io {
        path: shown.clone(),
        source,
    };
    let pq = |source| OutputError::Parquet {
        path: shown.clone(),
        source,
    };
    let file = File::create(path).map_err(io)?;
    let generator = Generator::new(opts);
    let schema = generator.schema();
    let (tx, rx) = sync_channel::<RecordBatch>(2);
    let (done_tx, done_rx) = std::sync::mpsc::channel::<u64>();
    let writer = std::thread::spawn(move || -> Result<u64, OutputError> {
        let mut rows = 0;
        match format {
            Format::Parquet => {
                let out = BufWriter::with_capacity(1 << 20, file);
                let mut w = ParallelWriter::try_new(
                    out,
                    schema,
                    gen_writer_properties(),
                    GEN_ROW_GROUP_ROWS,
                )
                .map_err(|source| OutputError::Parquet {
                    path: String::new(),
                    source,
                })?;
                for b in rx {
                    rows += b.num_rows() as u64;
                    w.write(&b).map_err(|source| OutputError::Parquet {
                        path: String::new(),
                        source,
                    })?;
                    let _ = done_tx.send(rows);
                }
                w.close().map_err(|source| OutputError::Parquet {
                    path: String::new(),
                    source,
                })?;
            }
            Format::Tsv => {
                let mut out = BufWriter::with_capacity(1 << 20, file);
                let mut parts = Vec::new();
                for b in rx {
                    crate::tsv::format_batch(&mut parts, &b);
                    for p in &parts {
                        std::io::Write::write_all(&mut out, p).map_err(|source| {
                            OutputError::Io {
                                path: String::new(),
                                source,
                            }
                        })?;
                    }
                    rows += b.num_rows() as u64;
                    let _ = done_tx.send(rows);
                }
                std::io::Write::flush(&mut out).map_err(|source| OutputError::Io {
                    path: String::new(),
                    source,
                })?;
            }
        }
        Ok(rows)
    });
    for batch in generator {
        if tx.send(batch).is_err() {
            break; // the writer failed; its error is reported below
        }
        while let Ok(rows) = done_rx.try_recv() {
            progress(rows);
        }
    }
    drop(tx);
    let rows = writer
        .join()
        .expect("writer thread panicked")
        .map_err(|e| match e {
            OutputError::Io { source, .. } => io(source),
            OutputError::Parquet { source, .. } => pq(source),
            other => other,
        })?;
    progress(rows);
    let bytes = std::fs::metadata(path).map_err(io)?.len();
    Ok(Written { rows, bytes })
}
