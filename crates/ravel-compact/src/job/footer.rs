//! An object's size and footer as the store holds them: what a commit checks the objects a
//! plan and its results list against.

use bytes::Bytes;
use object_store::path::Path;
use object_store::{GetOptions, GetRange, ObjectStore, ObjectStoreExt};
use parquet::errors::ParquetError;
use parquet::file::metadata::{FooterTail, ParquetMetaData, ParquetMetaDataReader};
use serde_json::Value;

/// What the store and an object's footer say of it.
pub(crate) struct Footer {
    pub size: u64,
    pub rows: u64,
    pub first_key: Option<Vec<Value>>,
    pub last_key: Option<Vec<Value>>,
}

/// Why an object's footer was not read: the store's error, or bytes that are not Parquet.
#[derive(Debug)]
pub(crate) enum FooterError {
    Store(object_store::Error),
    Parquet(ParquetError),
}

impl From<object_store::Error> for FooterError {
    fn from(e: object_store::Error) -> Self {
        FooterError::Store(e)
    }
}

impl From<ParquetError> for FooterError {
    fn from(e: ParquetError) -> Self {
        FooterError::Parquet(e)
    }
}

/// Bytes read from an object's end at first: its footer, most often whole, and its size.
const FOOTER_READ: u64 = 64 << 10;

/// An object's size and footer: one read of its end, and a second when the footer is longer.
pub(crate) async fn footer(os: &dyn ObjectStore, key: &str) -> Result<Footer, FooterError> {
    let path = Path::from(key);
    let opts = GetOptions {
        range: Some(GetRange::Suffix(FOOTER_READ)),
        ..GetOptions::default()
    };
    let got = os.get_opts(&path, opts).await?;
    let size = got.meta.size;
    let end = got.bytes().await?;
    let meta = metadata(os, &path, size, end).await?;
    let kv = |name: &str| {
        let entries = meta.file_metadata().key_value_metadata()?;
        let e = entries.iter().find(|e| e.key == name)?;
        serde_json::from_str::<Vec<Value>>(e.value.as_deref()?).ok()
    };
    Ok(Footer {
        size,
        rows: meta.file_metadata().num_rows().max(0) as u64,
        first_key: kv("ravel.first_key"),
        last_key: kv("ravel.last_key"),
    })
}

/// The footer's metadata, from `end` (the object's last bytes) or read again when longer.
async fn metadata(
    os: &dyn ObjectStore,
    path: &Path,
    size: u64,
    end: Bytes,
) -> Result<ParquetMetaData, FooterError> {
    let n = end.len();
    let tail: &[u8; 8] = n
        .checked_sub(8)
        .and_then(|at| end[at..].try_into().ok())
        .ok_or_else(|| ParquetError::General(format!("{size} bytes is too short")))?;
    let len = FooterTail::try_new(tail)?.metadata_length() as u64;
    if len + 8 > size {
        let e = format!("a footer of {len} bytes in {size}");
        return Err(ParquetError::General(e).into());
    }
    let footer = match (n as u64).checked_sub(len + 8) {
        Some(at) => end.slice(at as usize..n - 8),
        None => os.get_range(path, size - 8 - len..size - 8).await?,
    };
    Ok(ParquetMetaDataReader::decode_metadata(&footer)?)
}
