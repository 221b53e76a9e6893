//! hits-style TSV: tab-separated, no header, columns in schema order, ClickHouse's text
//! conventions: times as `YYYY-MM-DD hh:mm:ss` (UTC here), dates as `YYYY-MM-DD`, strings with
//! `\\`, `\t`, `\n`, `\r` and `\0` escaped by a backslash.

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{
    DataType, Date32Type, Int16Type, Int32Type, Int64Type, TimestampSecondType, UInt16Type,
};

use crate::schema::{COLUMNS, Kind};

/// Days since 1970-01-01 → (year, month, day), proleptic Gregorian (H. Hinnant's algorithm).
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + (m <= 2) as i64;
    (y, m, d)
}

fn two(out: &mut Vec<u8>, v: u32) {
    out.push(b'0' + (v / 10) as u8);
    out.push(b'0' + (v % 10) as u8);
}

/// Appends `YYYY-MM-DD`.
pub fn push_date(out: &mut Vec<u8>, days: i64) {
    let (y, m, d) = civil_from_days(days);
    if (0..10_000).contains(&y) {
        let y = y as u32;
        two(out, y / 100);
        two(out, y % 100);
    } else {
        out.extend_from_slice(itoa::Buffer::new().format(y).as_bytes());
    }
    out.push(b'-');
    two(out, m);
    out.push(b'-');
    two(out, d);
}

/// Appends `YYYY-MM-DD hh:mm:ss` for unix seconds (UTC).
pub fn push_datetime(out: &mut Vec<u8>, secs: i64) {
    push_date(out, secs.div_euclid(86_400));
    let s = secs.rem_euclid(86_400) as u32;
    out.push(b' ');
    two(out, s / 3600);
    out.push(b':');
    two(out, s / 60 % 60);
    out.push(b':');
    two(out, s % 60);
}

/// Appends a string with ClickHouse TSV escaping.
pub fn push_escaped(out: &mut Vec<u8>, bytes: &[u8]) {
    for &b in bytes {
        match b {
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\t' => out.extend_from_slice(b"\\t"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            0 => out.extend_from_slice(b"\\0"),
            _ => out.push(b),
        }
    }
}

/// A hits column, downcast once per batch.
enum Col<'a> {
    I16(&'a [i16]),
    I32(&'a [i32]),
    I64(&'a [i64]),
    Seconds(&'a [i64]),
    DaysU16(&'a [u16]),
    Days32(&'a [i32]),
    Bin(&'a arrow::array::BinaryArray),
    Str(&'a arrow::array::StringArray),
}

fn typed_columns(batch: &RecordBatch) -> Vec<(Col<'_>, Option<&arrow::buffer::NullBuffer>)> {
    let cols = batch.columns();
    assert_eq!(cols.len(), COLUMNS.len(), "a hits batch has 105 columns");
    cols.iter()
        .zip(COLUMNS.iter())
        .map(|(col, (_, kind))| {
            let c = match (kind, col.data_type()) {
                (Kind::SmallInt, _) => Col::I16(col.as_primitive::<Int16Type>().values()),
                (Kind::Int, _) => Col::I32(col.as_primitive::<Int32Type>().values()),
                (Kind::BigInt, _) => Col::I64(col.as_primitive::<Int64Type>().values()),
                (Kind::DateTime, DataType::Int64) => {
                    Col::Seconds(col.as_primitive::<Int64Type>().values())
                }
                (Kind::DateTime, _) => {
                    Col::Seconds(col.as_primitive::<TimestampSecondType>().values())
                }
                (Kind::Date, DataType::UInt16) => {
                    Col::DaysU16(col.as_primitive::<UInt16Type>().values())
                }
                (Kind::Date, _) => Col::Days32(col.as_primitive::<Date32Type>().values()),
                (Kind::Text, DataType::Binary) => Col::Bin(col.as_binary::<i32>()),
                (Kind::Text, _) => Col::Str(col.as_string::<i32>()),
            };
            (c, col.nulls())
        })
        .collect()
}

fn write_rows(
    out: &mut Vec<u8>,
    cols: &[(Col<'_>, Option<&arrow::buffer::NullBuffer>)],
    rows: std::ops::Range<usize>,
) {
    let mut ints = itoa::Buffer::new();
    for row in rows {
        for (i, (col, nulls)) in cols.iter().enumerate() {
            if i > 0 {
                out.push(b'\t');
            }
            if nulls.is_some_and(|n| n.is_null(row)) {
                out.extend_from_slice(b"\\N");
                continue;
            }
            match col {
                Col::I16(v) => out.extend_from_slice(ints.format(v[row]).as_bytes()),
                Col::I32(v) => out.extend_from_slice(ints.format(v[row]).as_bytes()),
                Col::I64(v) => out.extend_from_slice(ints.format(v[row]).as_bytes()),
                Col::Seconds(v) => push_datetime(out, v[row]),
                Col::DaysU16(v) => push_date(out, v[row] as i64),
                Col::Days32(v) => push_date(out, v[row] as i64),
                Col::Bin(a) => push_escaped(out, a.value(row)),
                Col::Str(a) => push_escaped(out, a.value(row).as_bytes()),
            }
        }
        out.push(b'\n');
    }
}

/// Rows formatted per parallel task.
const CHUNK_ROWS: usize = 4096;

/// Formats a hits batch (either convention) as TSV lines into `parts`, one buffer per chunk of
/// rows, in parallel. The buffers are reused across calls; concatenated in order they are the
/// batch's text.
pub fn format_batch(parts: &mut Vec<Vec<u8>>, batch: &RecordBatch) {
    use rayon::prelude::*;
    let cols = typed_columns(batch);
    let n = batch.num_rows();
    let chunks = n.div_ceil(CHUNK_ROWS);
    parts.resize_with(chunks.max(parts.len()), Vec::new);
    parts[..chunks]
        .par_iter_mut()
        .enumerate()
        .for_each(|(c, buf)| {
            buf.clear();
            write_rows(buf, &cols, c * CHUNK_ROWS..((c + 1) * CHUNK_ROWS).min(n));
        });
    parts.truncate(chunks);
}

/// Appends a hits batch (either convention) as TSV lines.
pub fn write_batch(out: &mut Vec<u8>, batch: &RecordBatch) {
    let mut parts = Vec::new();
    format_batch(&mut parts, batch);
    for p in parts {
        out.extend_from_slice(&p);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_and_times_are_written() {
        let mut out = Vec::new();
        push_datetime(&mut out, 1_372_636_800 + 13 * 3600 + 5 * 60 + 9);
        assert_eq!(out, b"2013-07-01 13:05:09");
        out.clear();
        push_datetime(&mut out, -1);
        assert_eq!(out, b"1969-12-31 23:59:59");
        out.clear();
        push_date(&mut out, 15_917);
        assert_eq!(out, b"2013-07-31");
    }

    #[test]
    fn civil_dates_agree_with_chrono() {
        let epoch = chrono::NaiveDate::from_ymd_opt(1970, 1, 1).unwrap();
        for days in (-800_000i64..800_000).step_by(997) {
            let d = epoch + chrono::Duration::days(days);
            let (y, m, dd) = civil_from_days(days);
            use chrono::Datelike;
            assert_eq!((y, m, dd), (d.year() as i64, d.month(), d.day()), "{days}");
        }
    }

    #[test]
    fn escaping() {
        let mut out = Vec::new();
        push_escaped(&mut out, b"a\tb\nc\\d\re\0");
        assert_eq!(out, b"a\\tb\\nc\\\\d\\re\\0");
    }
}
