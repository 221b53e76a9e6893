//! Per-object Bloom filters of a load, kept in one sidecar object beside its manifest.
//!
//! Parquet's own Bloom filters sit inside each object: a reader pays a footer read and a
//! filter read per object before it knows the object holds nothing. These filters answer the
//! same question from the sidecar alone: for a statement `"URL" = '…'`, one ranged GET of the
//! URL section of each load's sidecar tells which objects may hold the value, and the others
//! are never opened.
//!
//! A filter holds the distinct non-null values of one string or binary column of one object,
//! hashed as bytes (a Utf8 value and the Binary value of its UTF-8 bytes are the same item),
//! built with the `bloomfilter` crate under a fixed seed so that any reader can probe it. Each
//! value enters as its XXH3-64 digest written little-endian, so that the hash fed to the filter
//! is the same on every platform (`Hash for [u8]` would write a native-width length). A column
//! whose values are all null has a filter with nothing set: no equality can match it. An empty
//! filter (zero bytes) means "no filter": every value may be there.
//!
//! Sidecar layout: the magic `RAVELBF1`, then one section per column; a section is, for each
//! object in manifest order, a little-endian `u32` length and that many filter bytes. The
//! manifest records each section's offset and length, so a reader fetches only the columns
//! its statement compares.

use std::collections::HashSet;

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::datatypes::DataType;
use bloomfilter::Bloom;

/// A value as the filters see it: the XXH3-64 digest of its bytes, hashed as 8 little-endian
/// bytes (platform-independent, unlike `Hash for [u8]` or `u64`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Digest(u64);

impl Digest {
    fn of(bytes: &[u8]) -> Digest {
        Digest(twox_hash::XxHash3_64::oneshot(bytes))
    }
}

impl std::hash::Hash for Digest {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write(&self.0.to_le_bytes());
    }
}

/// The hash seed of every filter (32 bytes): readers and writers must agree on it.
const SEED: [u8; 32] = *b"ravel-load object bloom filter 1";

/// First bytes of a sidecar.
pub const MAGIC: &[u8; 8] = b"RAVELBF1";

/// Why a sidecar or filter could not be read.
#[derive(Debug, thiserror::Error)]
pub enum BloomError {
    #[error("Bloom sidecar section is cut short: {0}")]
    Truncated(String),
    #[error("Bloom filter is not valid: {0}")]
    Invalid(&'static str),
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

/// Calls `f` with the bytes of every non-null value of `a` (a string or binary array).
fn for_each_value<'a>(a: &'a dyn Array, mut f: impl FnMut(&'a [u8])) {
    macro_rules! each {
        ($arr:expr) => {
            for v in $arr.iter().flatten() {
                f(v.as_ref());
            }
        };
    }
    match a.data_type() {
        DataType::Utf8 => each!(a.as_string::<i32>()),
        DataType::LargeUtf8 => each!(a.as_string::<i64>()),
        DataType::Utf8View => each!(a.as_string_view()),
        DataType::Binary => each!(a.as_binary::<i32>()),
        DataType::LargeBinary => each!(a.as_binary::<i64>()),
        DataType::BinaryView => each!(a.as_binary_view()),
        DataType::FixedSizeBinary(_) => each!(a.as_fixed_size_binary()),
        _ => {}
    }
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

/// The filter of one column of one object (`pieces` are its values in order), sized for the
/// object's distinct values at false-positive rate `fpp`. `None` when the type has no filter.
pub fn build(pieces: &[ArrayRef], fpp: f64) -> Option<Vec<u8>> {
    let first = pieces.first()?;
    if !supported(first.data_type()) {
        return None;
    }
    let mut distinct: HashSet<&[u8], ahash::RandomState> = HashSet::default();
    for p in pieces {
        for_each_value(p.as_ref(), |v| {
            distinct.insert(v);
        });
    }
    // All null: a filter with nothing set, which holds no value.
    let mut bloom = Bloom::<Digest>::new_for_fp_rate_with_seed(distinct.len().max(1), fpp, &SEED)
        .expect("a positive item count and an fpp in (0, 1)");
    for v in distinct {
        bloom.set(&Digest::of(v));
    }
    Some(bloom.into_bytes())
}

/// A filter read back, ready to probe.
#[derive(Debug)]
pub struct Filter(Option<Bloom<Digest>>);

impl Filter {
    pub fn from_bytes(bytes: &[u8]) -> Result<Filter, BloomError> {
        if bytes.is_empty() {
            return Ok(Filter(None));
        }
        Bloom::from_slice(bytes)
            .map(|b| Filter(Some(b)))
            .map_err(BloomError::Invalid)
    }

    /// Whether the object may hold `value` (false: it certainly does not). An empty filter
    /// (no filter) may hold anything.
    pub fn may_contain(&self, value: &[u8]) -> bool {
        self.0.as_ref().is_none_or(|b| b.check(&Digest::of(value)))
    }
}

/// Sections of a sidecar, one per column: `(column, offset, length)`.
pub type Sections = Vec<(String, u64, u64)>;

/// Writes a sidecar: `columns` are `(name, one filter per object)`, every column with the same
/// objects in the same order.
pub fn encode_sidecar(columns: &[(String, Vec<Vec<u8>>)]) -> (Vec<u8>, Sections) {
    let mut out = MAGIC.to_vec();
    let mut sections = Vec::with_capacity(columns.len());
    for (name, filters) in columns {
        let offset = out.len() as u64;
        for f in filters {
            out.extend_from_slice(&(f.len() as u32).to_le_bytes());
            out.extend_from_slice(f);
        }
        sections.push((name.clone(), offset, out.len() as u64 - offset));
    }
    (out, sections)
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
    use arrow::array::{BinaryArray, Int32Array, StringArray, StringViewArray};
    use std::sync::Arc;

    #[test]
    fn no_false_negatives_and_strings_equal_their_bytes() {
        let urls: Vec<String> = (0..5_000).map(|i| format!("http://x/{i}")).collect();
        let utf8: ArrayRef = Arc::new(StringArray::from_iter_values(&urls));
        let bin: ArrayRef = Arc::new(BinaryArray::from_iter_values(
            urls.iter().map(|s| s.as_bytes()),
        ));
        let f =
            Filter::from_bytes(&build(&[utf8.slice(0, 10), utf8.slice(10, 4_990)], 0.01).unwrap())
                .unwrap();
        let g = Filter::from_bytes(&build(&[bin], 0.01).unwrap()).unwrap();
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
    }

    #[test]
    fn the_hash_is_fixed() {
        // Filters written by one build (or platform) are read by another: the digest of a
        // value and the bits it sets must not change.
        assert_eq!(Digest::of(b"http://x/1").0, 0x2162_4a00_47fa_459f);
        let a: ArrayRef = Arc::new(StringArray::from(vec!["http://x/1"]));
        let f = build(&[a], 0.01).unwrap();
        assert_eq!(blake3::hash(&f).to_hex()[..16], *"d37a2bf2de956948");
    }

    #[test]
    fn all_null_matches_nothing_and_other_types_have_none() {
        let nulls: ArrayRef = Arc::new(StringViewArray::from(vec![None::<&str>, None]));
        let f = build(&[nulls], 0.01).unwrap();
        assert!(!f.is_empty());
        assert!(!Filter::from_bytes(&f).unwrap().may_contain(b""));
        assert!(!Filter::from_bytes(&f).unwrap().may_contain(b"x"));
        // No filter: anything may be there.
        assert!(Filter::from_bytes(&[]).unwrap().may_contain(b"x"));
        let ints: ArrayRef = Arc::new(Int32Array::from(vec![1, 2]));
        assert!(build(&[ints], 0.01).is_none());
    }

    #[test]
    fn sidecar_sections_round_trip() {
        let a: ArrayRef = Arc::new(StringArray::from(vec!["a", "b"]));
        let b: ArrayRef = Arc::new(StringArray::from(vec!["c"]));
        let fa = build(&[a], 0.01).unwrap();
        let fb = build(&[b], 0.01).unwrap();
        let nothing: ArrayRef = Arc::new(StringArray::from(vec![None::<&str>]));
        let (bytes, sections) = encode_sidecar(&[
            ("URL".into(), vec![fa, fb.clone()]),
            ("Title".into(), vec![build(&[nothing], 0.01).unwrap(), fb]),
        ]);
        assert_eq!(&bytes[..8], MAGIC);
        let (_, off, len) = &sections[0];
        let s = decode_section(&bytes[*off as usize..(*off + *len) as usize], 2).unwrap();
        assert!(s[0].may_contain(b"a") && s[0].may_contain(b"b"));
        assert!(s[1].may_contain(b"c"));
        let (_, off, len) = &sections[1];
        let t = decode_section(&bytes[*off as usize..(*off + *len) as usize], 2).unwrap();
        assert!(!t[0].may_contain(b"c"));
        assert!(t[1].may_contain(b"c"));
        // A wrong object count or a cut section is an error, not a silent miss.
        let sec = &bytes[*off as usize..(*off + *len) as usize];
        assert!(decode_section(sec, 3).is_err());
        assert!(decode_section(&sec[..sec.len() - 1], 2).is_err());
    }
}
