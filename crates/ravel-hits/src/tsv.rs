//! hits-style TSV: tab-separated, no header, columns in schema order, ClickHouse's text
//! conventions: times as `YYYY-MM-DD hh:mm:ss` (UTC here), dates as `YYYY-MM-DD`, strings with
//! `\\`, `\t`, `\n`, `\r` and `\0` escaped by a backslash.

use std::io::Write;

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

/// (year, month, day) → days since 1970-01-01.
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = if m > 2 { m - 3 } else { m + 9 } as i64;
    let doy = (153 * mp + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
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

/// Appends a hits batch (either convention) as TSV lines.
pub fn write_batch(out: &mut Vec<u8>, batch: &RecordBatch) {
    let mut ints = itoa::Buffer::new();
    let cols = batch.columns();
    assert_eq!(cols.len(), COLUMNS.len(), "a hits batch has 105 columns");
    for row in 0..batch.num_rows() {
        for (i, (col, (_, kind))) in cols.iter().zip(COLUMNS.iter()).enumerate() {
            if i > 0 {
                out.push(b'\t');
            }
            if col.is_null(row) {
                out.extend_from_slice(b"\\N");
                continue;
            }
            match (kind, col.data_type()) {
                (Kind::SmallInt, _) => {
                    out.extend_from_slice(ints.format(col.as_primitive::<Int16Type>().value(row)).as_bytes())
                }
                (Kind::Int, _) => {
                    out.extend_from_slice(ints.format(col.as_primitive::<Int32Type>().value(row)).as_bytes())
                }
                (Kind::BigInt, _) => {
                    out.extend_from_slice(ints.format(col.as_primitive::<Int64Type>().value(row)).as_bytes())
                }
                (Kind::DateTime, DataType::Int64) => {
                    push_datetime(out, col.as_primitive::<Int64Type>().value(row))
                }
                (Kind::DateTime, _) => {
                    push_datetime(out, col.as_primitive::<TimestampSecondType>().value(row))
                }
                (Kind::Date, DataType::UInt16) => {
                    push_date(out, col.as_primitive::<UInt16Type>().value(row) as i64)
                }
                (Kind::Date, _) => push_date(out, col.as_primitive::<Date32Type>().value(row) as i64),
                (Kind::Text, DataType::Binary) => push_escaped(out, col.as_binary::<i32>().value(row)),
                (Kind::Text, _) => push_escaped(out, col.as_string::<i32>().value(row).as_bytes()),
            }
        }
        out.push(b'\n');
    }
}

/// Writes batches as TSV to a writer.
pub fn write_all<W: Write>(w: &mut W, batches: impl IntoIterator<Item = RecordBatch>) -> std::io::Result<u64> {
    let mut buf = Vec::with_capacity(1 << 20);
    let mut rows = 0;
    for b in batches {
        buf.clear();
        write_batch(&mut buf, &b);
        w.write_all(&buf)?;
        rows += b.num_rows() as u64;
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_round_trip() {
        for days in [-719_468, -1, 0, 1, 15_887, 15_917, 2_932_896] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
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
    fn escaping() {
        let mut out = Vec::new();
        push_escaped(&mut out, b"a\tb\nc\\d\re\0");
        assert_eq!(out, b"a\\tb\\nc\\\\d\\re\\0");
    }
}
