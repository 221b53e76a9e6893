//! Per-object Bloom filters of a load, kept in one sidecar object beside its manifest.
//!
//! Parquet's own Bloom filters sit inside each object: a reader pays a footer read and a
//! filter read per object before it knows the object holds nothing. The sidecar answers the
//! same question from one object: for a statement `"URL" = '…'`, one ranged GET of the URL
//! section of each load's sidecar tells which objects may hold the value, and the others are
//! never opened.
//!
//! The filters are the objects' own: each object has one row group, so the split-block Bloom
//! filter parquet-rs wrote for a column chunk is the filter of that column of that object. It
//! was sized for the layout's fpp and folded, when the column closed, as far as parquet-rs's
//! fill-based estimate keeps the rate within that fpp (the estimate, not a guarantee: the
//! manifest's `fpp` is what the filters were sized for). The
//! loader copies it, Thrift header and bitset as they stand in the file ([`from_object`]),
//! instead of hashing every value a second time. A value is probed as parquet probes it: XXH64
//! of its bytes (a Utf8 value and the Binary value of its UTF-8 bytes are the same item). A
//! column whose values are all null has a filter with nothing set: no equality can match it.
//! An empty filter (zero bytes) means "no filter": every value may be there.
//!
//! Sidecar layout: the magic `RAVELBF2`, then one section per column; a section is, for each
//! object in manifest order, a little-endian `u32` length and that many filter bytes. The
//! manifest records each section's offset and length (and the sidecar [`FORMAT`]), so a reader
//! fetches only the columns its statement compares.

use arrow::array::{Array, AsArray};
use arrow::datatypes::DataType;
use parquet::bloom_filter::Sbbf;
use parquet::file::metadata::ParquetMetaData;

/// First bytes of a sidecar.
pub const MAGIC: &[u8; 8] = b"RAVELBF2";

/// The sidecar format this crate writes and reads (recorded in the manifest). Format 1 held
/// filters of the `bloomfilter` crate, built by hashing every value again; its sidecars are
/// not read (readers then prune by ranges alone).
pub const FORMAT: u32 = 2;

/// Why a sidecar or filter could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BloomError {
    #[error("Bloom sidecar section is cut short: {0}")]
    Truncated(String),
    #[error("Bloom filter is not valid: {0}")]
    Invalid(String),
}

/// Whether a column of this type gets a filter: string and binary types (the layout's `text`
/// Bloom scope is exactly these).
pub fn supported(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Utf8
            | DataType::LargeUtf8
            | DataType::Utf8View
            | DataType::Binary
            | DataType::LargeBinary
            | DataType::BinaryView
            | DataType::FixedSizeBinary(_)
    )
}

/// The bytes of value `i` of `a` (a string or binary array); `None` for null or another type.
pub fn value_bytes(a: &dyn Array, i: usize) -> Option<&[u8]> {
    if a.is_null(i) {
        return None;
    }
    Some(match a.data_type() {
        DataType::Utf8 => a.as_string::<i32>().value(i).as_bytes(),
        DataType::LargeUtf8 => a.as_string::<i64>().value(i).as_bytes(),
        DataType::Utf8View => a.as_string_view().value(i).as_bytes(),
        DataType::Binary => a.as_binary::<i32>().value(i),
        DataType::LargeBinary => a.as_binary::<i64>().value(i),
        DataType::BinaryView => a.as_binary_view().value(i),
        DataType::FixedSizeBinary(_) => a.as_fixed_size_binary().value(i),
        _ => return None,
    })
}

/// The filter parquet-rs wrote for leaf column `leaf` of row group 0 of `file` (an encoded
/// object and its metadata), as its Thrift header and bitset: the sidecar's entry for that
/// column of that object. Empty (no filter: every value may be there) when the chunk has none.
pub fn from_object(file: &[u8], meta: &ParquetMetaData, leaf: usize) -> Vec<u8> {
    // With more row groups, row group 0's filter would not hold the others' values.
    let [rg] = meta.row_groups() else {
        return Vec::new();
    };
    let chunk = rg.column(leaf);
    let (Some(offset), Some(len)) = (chunk.bloom_filter_offset(), chunk.bloom_filter_length())
    else {
        return Vec::new();
    };
    usize::try_from(offset)
        .ok()
        .and_then(|o| file.get(o..o + len.max(0) as usize))
        .map_or_else(Vec::new, <[u8]>::to_vec)
}

/// A filter holding `values`, sized for their count at false-positive rate `fpp`, in the
/// sidecar's form: the filter parquet-rs writes for a column chunk of these values, before it
/// folds it. For tools and tests; the loader copies the objects' own filters instead.
pub fn of_values<'a>(values: impl IntoIterator<Item = &'a [u8]>, fpp: f64) -> Vec<u8> {
    let values: Vec<&[u8]> = values.into_iter().collect();
    let mut f = Sbbf::new_with_ndv_fpp(values.len().max(1) as u64, fpp.clamp(1e-9, 0.5))
        .expect("an fpp in (0, 1)");
    for v in values {
        f.insert(v);
    }
    let mut out = Vec::new();
    f.write(&mut out).expect("writing to a Vec");
    out
}

/// A filter read back, ready to probe.
#[derive(Debug)]
pub struct Filter(Option<Sbbf>);

impl Filter {
    pub fn from_bytes(bytes: &[u8]) -> Result<Filter, BloomError> {
        if bytes.is_empty() {
            return Ok(Filter(None));
        }
        let f = Sbbf::from_bytes(bytes).map_err(|e| BloomError::Invalid(e.to_string()))?;
        // A bitset of no blocks (or of a length parquet-rs never writes) would make a probe
        // index out of range: refuse it here rather than panic there.
        if f.num_blocks() == 0 || !f.num_blocks().is_power_of_two() {
            return Err(BloomError::Invalid(format!(
                "{} blocks, not a power of two",
                f.num_blocks()
            )));
        }
        Ok(Filter(Some(f)))
    }

    /// Whether the object may hold `value` (false: it certainly does not). An empty filter
    /// (no filter) may hold anything.
    pub fn may_contain(&self, value: &[u8]) -> bool {
        self.0.as_ref().is_none_or(|b| b.check(value))
    }
}

/// One column's filters in a sidecar: one per object, every column with the same objects in
/// the same order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ColumnFilters {
    /// The column.
    pub column: String,
    /// Each object's filter in the form [`from_object`] gives (empty: no filter).
    pub filters: Vec<Vec<u8>>,
}

/// Where one column's filters sit in an encoded sidecar.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SidecarSection {
    /// The column.
    pub column: String,
    /// Byte offset of the section in the sidecar.
    pub offset: u64,
    /// Byte length of the section.
    pub len: u64,
}

/// A sidecar's bytes and the section of each column, in the order the columns were given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodedSidecar {
    /// The sidecar, starting with its magic.
    pub bytes: Vec<u8>,
    /// One section per column.
    pub sections: Vec<SidecarSection>,
}

/// Writes a sidecar of `columns`.
pub fn encode_sidecar(columns: &[ColumnFilters]) -> EncodedSidecar {
    let mut bytes = MAGIC.to_vec();
    let mut sections = Vec::with_capacity(columns.len());
    for ColumnFilters { column, filters } in columns {
        let offset = bytes.len() as u64;
        for f in filters {
            bytes.extend_from_slice(&(f.len() as u32).to_le_bytes());
            bytes.extend_from_slice(f);
        }
        sections.push(SidecarSection {
            column: column.clone(),
            offset,
            len: bytes.len() as u64 - offset,
        });
    }
    EncodedSidecar { bytes, sections }
}

/// Reads one section of a sidecar: the filters of `objects` objects.
pub fn decode_section(section: &[u8], objects: usize) -> Result<Vec<Filter>, BloomError> {
    let mut out = Vec::with_capacity(objects);
    let mut at = 0usize;
    for i in 0..objects {
        let len = section
            .get(at..at + 4)
            .ok_or_else(|| BloomError::Truncated(format!("no length for object {i}")))?;
        let len = u32::from_le_bytes(len.try_into().expect("4 bytes")) as usize;
        at += 4;
        let bytes = section
            .get(at..at + len)
            .ok_or_else(|| BloomError::Truncated(format!("object {i} needs {len} bytes")))?;
        out.push(Filter::from_bytes(bytes)?);
        at += len;
    }
    if at != section.len() {
        return Err(BloomError::Truncated(format!(
            "{} bytes after {objects} filters",
            section.len() - at
        )));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{ArrayRef, BinaryArray, Int32Array, RecordBatch, StringArray};
    use arrow::datatypes::{Field, Schema};
    use parquet::arrow::ArrowWriter;
    use parquet::file::properties::WriterProperties;
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use std::sync::Arc;

    /// One object: `columns` written as one row group with Bloom filters on every column,
    /// and the filter of each column as the sidecar would hold it.
    fn object(columns: Vec<(&str, ArrayRef)>) -> (bytes::Bytes, Vec<Vec<u8>>) {
        let schema = Arc::new(Schema::new(
            columns
                .iter()
                .map(|(n, a)| Field::new(*n, a.data_type().clone(), true))
                .collect::<Vec<_>>(),
        ));
        let batch =
            RecordBatch::try_new(schema.clone(), columns.into_iter().map(|c| c.1).collect())
                .unwrap();
        let props = WriterProperties::builder()
            .set_bloom_filter_enabled(true)
            .set_bloom_filter_fpp(0.01)
            .build();
        let mut w = ArrowWriter::try_new(Vec::new(), schema, Some(props)).unwrap();
        w.write(&batch).unwrap();
        let file = bytes::Bytes::from(w.into_inner().unwrap());
        let meta = SerializedFileReader::new(file.clone())
            .unwrap()
            .metadata()
            .clone();
        let filters = (0..batch.num_columns())
            .map(|c| from_object(&file, &meta, c))
            .collect();
        (file, filters)
    }

    #[test]
    fn the_objects_filters_have_no_false_negatives_and_strings_equal_their_bytes() {
        let urls: Vec<String> = (0..5_000).map(|i| format!("http://x/{i}")).collect();
        let utf8: ArrayRef = Arc::new(StringArray::from_iter_values(&urls));
        let bin: ArrayRef = Arc::new(BinaryArray::from_iter_values(
            urls.iter().map(|s| s.as_bytes()),
        ));
        let (file, filters) = object(vec![("s", utf8), ("b", bin)]);
        let f = Filter::from_bytes(&filters[0]).unwrap();
        let g = Filter::from_bytes(&filters[1]).unwrap();
        for u in &urls {
            assert!(f.may_contain(u.as_bytes()));
            assert!(g.may_contain(u.as_bytes()));
        }
        let misses = (0..10_000)
            .filter(|i| f.may_contain(format!("http://y/{i}").as_bytes()))
            .count();
        assert!(
            misses < 300,
            "{misses} false positives of 10,000 at fpp 0.01"
        );
        // The copy is the filter a Parquet reader finds in the object.
        let meta = SerializedFileReader::new(file.clone())
            .unwrap()
            .metadata()
            .clone();
        let inside = Sbbf::read_from_column_chunk(meta.row_group(0).column(0), &file)
            .unwrap()
            .expect("the chunk has a filter");
        for i in 0..2_000 {
            let v = format!("http://z/{i}");
            assert_eq!(inside.check(v.as_str()), f.may_contain(v.as_bytes()));
        }
    }

    #[test]
    fn all_null_matches_nothing_and_no_filter_matches_everything() {
        let nulls: ArrayRef = Arc::new(StringArray::from(vec![None::<&str>, None]));
        let (_, filters) = object(vec![("n", nulls)]);
        assert!(!filters[0].is_empty());
        let f = Filter::from_bytes(&filters[0]).unwrap();
        assert!(!f.may_contain(b""));
        assert!(!f.may_contain(b"x"));
        // No filter: anything may be there.
        assert!(Filter::from_bytes(&[]).unwrap().may_contain(b"x"));
        assert!(Filter::from_bytes(b"not a filter").is_err());
        // A header that promises no blocks is refused, not probed.
        let mut empty = Vec::new();
        Sbbf::new(&[]).write(&mut empty).unwrap();
        assert!(Filter::from_bytes(&empty).is_err());
        let made = Filter::from_bytes(&of_values([&b"a"[..], b"bc"], 0.01)).unwrap();
        assert!(made.may_contain(b"a") && made.may_contain(b"bc"));
        // A chunk without a filter gives none.
        let ints: ArrayRef = Arc::new(Int32Array::from(vec![1, 2]));
        let schema = Arc::new(Schema::new(vec![Field::new("i", DataType::Int32, false)]));
        let mut w = ArrowWriter::try_new(Vec::new(), schema.clone(), None).unwrap();
        w.write(&RecordBatch::try_new(schema, vec![ints]).unwrap())
            .unwrap();
        let file = bytes::Bytes::from(w.into_inner().unwrap());
        let meta = SerializedFileReader::new(file.clone())
            .unwrap()
            .metadata()
            .clone();
        assert!(from_object(&file, &meta, 0).is_empty());
    }

    #[test]
    fn sidecar_sections_round_trip() {
        let (_, ab) = object(vec![(
            "s",
            Arc::new(StringArray::from(vec!["a", "b"])) as ArrayRef,
        )]);
        let (_, c) = object(vec![(
            "s",
            Arc::new(StringArray::from(vec!["c"])) as ArrayRef,
        )]);
        let (_, nothing) = object(vec![(
            "s",
            Arc::new(StringArray::from(vec![None::<&str>])) as ArrayRef,
        )]);
        let (fa, fb, fnull) = (ab[0].clone(), c[0].clone(), nothing[0].clone());
        let column = |name: &str, filters| ColumnFilters {
            column: name.into(),
            filters,
        };
        let EncodedSidecar { bytes, sections } = encode_sidecar(&[
            column("URL", vec![fa, fb.clone()]),
            column("Title", vec![fnull, fb]),
        ]);
        assert_eq!(&bytes[..8], MAGIC);
        let at = |s: &SidecarSection| &bytes[s.offset as usize..(s.offset + s.len) as usize];
        assert_eq!(sections[0].column, "URL");
        let s = decode_section(at(&sections[0]), 2).unwrap();
        assert!(s[0].may_contain(b"a") && s[0].may_contain(b"b"));
        assert!(s[1].may_contain(b"c"));
        assert_eq!(sections[1].column, "Title");
        let t = decode_section(at(&sections[1]), 2).unwrap();
        assert!(!t[0].may_contain(b"c"));
        assert!(t[1].may_contain(b"c"));
        // A wrong object count or a cut section is an error, not a silent miss.
        let sec = at(&sections[1]);
        assert!(decode_section(sec, 3).is_err());
        assert!(decode_section(&sec[..sec.len() - 1], 2).is_err());
    }
}
