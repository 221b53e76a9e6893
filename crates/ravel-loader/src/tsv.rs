//! TSV as hits.tsv is published: tab-separated, no header, columns in the table's schema order,
//! ClickHouse text escaping (`\t`, `\n`, `\\`, `\r`, `\0`, `\b`, `\f`, `\'`, `\N` for null).
//!
//! Blocks of lines are parsed in parallel (rayon); every error names the file, the line, the
//! column's number and name, and what was wrong.

use crate::{BadColumn, BadLine, ColumnProblem, InputProblem};
use std::sync::Arc;

use arrow::array::{
    ArrayRef, BinaryBuilder, Date32Builder, Int8Builder, Int16Builder, Int32Builder, Int64Builder,
    RecordBatch, StringBuilder, TimestampSecondBuilder, UInt8Builder, UInt16Builder, UInt32Builder,
    UInt64Builder,
};
use arrow::datatypes::{DataType, Date32Type, SchemaRef, TimeUnit};
use rayon::prelude::*;

use crate::LoadError;

/// The column types a TSV can be read into.
pub fn supported(dt: &DataType) -> bool {
    matches!(
        dt,
        DataType::Int8
            | DataType::Int16
            | DataType::Int32
            | DataType::Int64
            | DataType::UInt8
            | DataType::UInt16
            | DataType::UInt32
            | DataType::UInt64
            | DataType::Utf8
            | DataType::Binary
            | DataType::Date32
            | DataType::Timestamp(TimeUnit::Second, _)
    )
}

/// A parse failure inside a block, before the file and line are known.
struct CellError {
    line_in_block: usize,
    column: usize,
    message: String,
}

fn digits(b: &[u8]) -> Option<u32> {
    if b.is_empty() || !b.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(b).ok()?.parse().ok()
}

/// `YYYY-MM-DD` → days since 1970-01-01 (proleptic Gregorian); `None` for a day the
/// calendar does not have (`2013-02-30`).
fn parse_date(b: &[u8]) -> Option<i64> {
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    let (y, m, d) = (digits(&b[..4])?, digits(&b[5..7])?, digits(&b[8..10])?);
    let date = chrono::NaiveDate::from_ymd_opt(y as i32, m, d)?;
    Some(Date32Type::from_naive_date(date) as i64)
}

/// `YYYY-MM-DD hh:mm:ss` → unix seconds (UTC).
fn parse_datetime(b: &[u8]) -> Option<i64> {
    if b.len() != 19 || b[10] != b' ' || b[13] != b':' || b[16] != b':' {
        return None;
    }
    let days = parse_date(&b[..10])?;
    let (h, mi, s) = (
        digits(&b[11..13])?,
        digits(&b[14..16])?,
        digits(&b[17..19])?,
    );
    if h > 23 || mi > 59 || s > 60 {
        return None;
    }
    Some(days * 86_400 + (h * 3600 + mi * 60 + s) as i64)
}

fn parse_int(b: &[u8]) -> Result<i128, String> {
    let s = std::str::from_utf8(b).map_err(|_| "is not text".to_string())?;
    s.parse::<i128>()
        .map_err(|_| format!("{s:?} is not an integer"))
}

/// Unescapes a ClickHouse TSV string into `out`.
fn unescape(b: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c != b'\\' {
            out.push(c);
            i += 1;
            continue;
        }
        let Some(&e) = b.get(i + 1) else {
            return Err("ends with a lone backslash".into());
        };
        out.push(match e {
            b't' => b'\t',
            b'n' => b'\n',
            b'r' => b'\r',
            b'0' => 0,
            b'b' => 8,
            b'f' => 12,
            b'\\' => b'\\',
            b'\'' => b'\'',
            b'"' => b'"',
            other => return Err(format!("has an invalid escape \\{}", other as char)),
        });
        i += 2;
    }
    Ok(())
}

enum Col {
    I8(Int8Builder),
    I16(Int16Builder),
    I32(Int32Builder),
    I64(Int64Builder),
    U8(UInt8Builder),
    U16(UInt16Builder),
    U32(UInt32Builder),
    U64(UInt64Builder),
    Str(StringBuilder),
    Bin(BinaryBuilder),
    Date(Date32Builder),
    Ts(TimestampSecondBuilder, Option<Arc<str>>),
}

impl Col {
    fn new(dt: &DataType, cap: usize) -> Col {
        match dt {
            DataType::Int8 => Col::I8(Int8Builder::with_capacity(cap)),
            DataType::Int16 => Col::I16(Int16Builder::with_capacity(cap)),
            DataType::Int32 => Col::I32(Int32Builder::with_capacity(cap)),
            DataType::Int64 => Col::I64(Int64Builder::with_capacity(cap)),
            DataType::UInt8 => Col::U8(UInt8Builder::with_capacity(cap)),
            DataType::UInt16 => Col::U16(UInt16Builder::with_capacity(cap)),
            DataType::UInt32 => Col::U32(UInt32Builder::with_capacity(cap)),
            DataType::UInt64 => Col::U64(UInt64Builder::with_capacity(cap)),
            DataType::Utf8 => Col::Str(StringBuilder::with_capacity(cap, cap * 16)),
            DataType::Binary => Col::Bin(BinaryBuilder::with_capacity(cap, cap * 16)),
            DataType::Date32 => Col::Date(Date32Builder::with_capacity(cap)),
            DataType::Timestamp(TimeUnit::Second, tz) => {
                Col::Ts(TimestampSecondBuilder::with_capacity(cap), tz.clone())
            }
            other => unreachable!("checked by supported(): {other}"),
        }
    }

    /// Appends one field. Integer columns also take `YYYY-MM-DD hh:mm:ss` (as unix seconds)
    /// and `YYYY-MM-DD` (as days), which is how hits.tsv writes the raw convention's times and
    /// dates.
    fn push(&mut self, field: &[u8], scratch: &mut Vec<u8>) -> Result<(), String> {
        if field == b"\\N" {
            match self {
                Col::I8(b) => b.append_null(),
                Col::I16(b) => b.append_null(),
                Col::I32(b) => b.append_null(),
                Col::I64(b) => b.append_null(),
                Col::U8(b) => b.append_null(),
                Col::U16(b) => b.append_null(),
                Col::U32(b) => b.append_null(),
                Col::U64(b) => b.append_null(),
                Col::Str(b) => b.append_null(),
                Col::Bin(b) => b.append_null(),
                Col::Date(b) => b.append_null(),
                Col::Ts(b, _) => b.append_null(),
            }
            return Ok(());
        }
        let int = |field: &[u8]| -> Result<i128, String> {
            match parse_int(field) {
                Ok(v) => Ok(v),
                Err(e) => parse_datetime(field)
                    .or_else(|| parse_date(field))
                    .map(|v| v as i128)
                    .ok_or(e),
            }
        };
        macro_rules! int_col {
            ($b:expr, $t:ty, $name:literal) => {{
                let v = int(field)?;
                let v = <$t>::try_from(v)
                    .map_err(|_| format!("value {v} is out of range for {}", $name))?;
                $b.append_value(v)
            }};
        }
        match self {
            Col::I8(b) => int_col!(b, i8, "Int8"),
            Col::I16(b) => int_col!(b, i16, "Int16"),
            Col::I32(b) => int_col!(b, i32, "Int32"),
            Col::I64(b) => int_col!(b, i64, "Int64"),
            Col::U8(b) => int_col!(b, u8, "UInt8"),
            Col::U16(b) => int_col!(b, u16, "UInt16"),
            Col::U32(b) => int_col!(b, u32, "UInt32"),
            Col::U64(b) => int_col!(b, u64, "UInt64"),
            Col::Date(b) => {
                let v = match parse_date(field) {
                    Some(d) => d as i128,
                    None => parse_int(field).map_err(|_| {
                        format!(
                            "{:?} is not a date (YYYY-MM-DD)",
                            String::from_utf8_lossy(field)
                        )
                    })?,
                };
                b.append_value(i32::try_from(v).map_err(|_| format!("date {v} is out of range"))?)
            }
            Col::Ts(b, _) => {
                let v = match parse_datetime(field) {
                    Some(s) => s as i128,
                    None => parse_int(field).map_err(|_| {
                        format!(
                            "{:?} is not a time (YYYY-MM-DD hh:mm:ss)",
                            String::from_utf8_lossy(field)
                        )
                    })?,
                };
                b.append_value(i64::try_from(v).map_err(|_| format!("time {v} is out of range"))?)
            }
            Col::Str(b) => {
                scratch.clear();
                unescape(field, scratch)?;
                let s =
                    std::str::from_utf8(scratch).map_err(|_| "is not valid UTF-8".to_string())?;
                b.append_value(s)
            }
            Col::Bin(b) => {
                scratch.clear();
                unescape(field, scratch)?;
                b.append_value(&scratch)
            }
        }
        Ok(())
    }

    fn finish(self) -> ArrayRef {
        match self {
            Col::I8(mut b) => Arc::new(b.finish()),
            Col::I16(mut b) => Arc::new(b.finish()),
            Col::I32(mut b) => Arc::new(b.finish()),
            Col::I64(mut b) => Arc::new(b.finish()),
            Col::U8(mut b) => Arc::new(b.finish()),
            Col::U16(mut b) => Arc::new(b.finish()),
            Col::U32(mut b) => Arc::new(b.finish()),
            Col::U64(mut b) => Arc::new(b.finish()),
            Col::Str(mut b) => Arc::new(b.finish()),
            Col::Bin(mut b) => Arc::new(b.finish()),
            Col::Date(mut b) => Arc::new(b.finish()),
            Col::Ts(mut b, tz) => Arc::new(b.finish().with_timezone_opt(tz)),
        }
    }
}

/// The lines of a block of whole lines.
fn block_lines(block: &[u8]) -> Vec<&[u8]> {
    let body = block.strip_suffix(b"\n").unwrap_or(block);
    body.split(|&b| b == b'\n')
        .map(|l| l.strip_suffix(b"\r").unwrap_or(l))
        .collect()
}

/// Parses a block's lines into a batch; the first bad line is the error.
fn parse_block(schema: &SchemaRef, lines: &[&[u8]]) -> Result<RecordBatch, CellError> {
    let n = schema.fields().len();
    let mut cols: Vec<Col> = schema
        .fields()
        .iter()
        .map(|f| Col::new(f.data_type(), lines.len()))
        .collect();
    let mut scratch = Vec::new();
    // An empty line is one empty field: a value only of a one-column table, and even there
    // only of a column that reads "" (a string), so it is reported as empty, not as a cell.
    let empty = |li: usize| CellError {
        line_in_block: li,
        column: usize::MAX,
        message: format!("is empty (the table has {n} column(s))"),
    };
    for (li, line) in lines.iter().enumerate() {
        if line.is_empty() && n != 1 {
            return Err(empty(li));
        }
        let mut fields = 0;
        for (ci, field) in line.split(|&b| b == b'\t').enumerate() {
            if ci >= n {
                fields = ci + 1;
                continue;
            }
            if field == b"\\N" && !schema.field(ci).is_nullable() {
                return Err(CellError {
                    line_in_block: li,
                    column: ci,
                    message: "is \\N (null), but the column is not nullable".into(),
                });
            }
            cols[ci].push(field, &mut scratch).map_err(|message| {
                if line.is_empty() {
                    empty(li)
                } else {
                    CellError {
                        line_in_block: li,
                        column: ci,
                        message,
                    }
                }
            })?;
            fields = ci + 1;
        }
        if fields != n {
            return Err(CellError {
                line_in_block: li,
                column: usize::MAX,
                message: format!("has {fields} fields, the table has {n} columns"),
            });
        }
    }
    let arrays: Vec<ArrayRef> = cols.into_iter().map(Col::finish).collect();
    Ok(RecordBatch::try_new(schema.clone(), arrays).expect("builders follow the schema"))
}

/// Parses a block's lines, leaving bad lines out: returns the batch and each bad line's index
/// in the block with its error. (Builders cannot take a half-pushed line back, so the block is
/// parsed again without each bad line; bad lines are meant to be rare.)
fn parse_block_skipping(schema: &SchemaRef, block: &[u8]) -> ParsedBlock {
    let lines = block_lines(block);
    let mut keep: Vec<usize> = (0..lines.len()).collect();
    let mut bad = Vec::new();
    loop {
        let kept: Vec<&[u8]> = keep.iter().map(|&i| lines[i]).collect();
        match parse_block(schema, &kept) {
            Ok(batch) => return ParsedBlock { batch, bad },
            Err(e) => {
                let original = keep.remove(e.line_in_block);
                bad.push(CellError {
                    line_in_block: original,
                    ..e
                });
            }
        }
    }
}

/// A block parsed: its good lines, and its bad lines' errors (lines counted in the block).
struct ParsedBlock {
    batch: RecordBatch,
    bad: Vec<CellError>,
}

/// A block of whole lines of a chunk, and where it starts in the chunk.
struct Block<'a> {
    start: usize,
    bytes: &'a [u8],
}

/// Splits `data` into blocks of about `block_bytes` ending at line ends.
fn blocks(data: &[u8], block_bytes: usize) -> Vec<Block<'_>> {
    let mut out = Vec::new();
    let mut start = 0;
    while start < data.len() {
        let mut end = (start + block_bytes).min(data.len());
        if end < data.len() {
            end = match data[end..].iter().position(|&b| b == b'\n') {
                Some(p) => end + p + 1,
                None => data.len(),
            };
        }
        out.push(Block {
            start,
            bytes: &data[start..end],
        });
        start = end;
    }
    out
}

/// A TSV line left out of a load (`--max-bad-rows`).
#[derive(Debug, Clone)]
pub struct Reject {
    /// 1-based line number in its file.
    pub line: u64,
    /// Why, naming the line and column as an error would.
    pub problem: BadLine,
    /// The line as it was in the file, without its line end.
    pub text: Vec<u8>,
}

/// Parses a chunk of a TSV file (whole lines) into batches, in parallel. `first_line` is the
/// 1-based number of the chunk's first line in the file. The first bad line is the error.
pub fn parse_chunk(
    schema: &SchemaRef,
    input: &str,
    data: &[u8],
    first_line: u64,
    block_bytes: usize,
) -> Result<Vec<RecordBatch>, LoadError> {
    let parsed = parse_chunk_with(schema, input, data, first_line, block_bytes, false)?;
    debug_assert!(parsed.rejects.is_empty());
    Ok(parsed.batches)
}

/// A chunk parsed: its batches in line order, and the bad lines left out.
#[derive(Debug, Default)]
pub struct ParsedChunk {
    pub batches: Vec<RecordBatch>,
    /// In line order.
    pub rejects: Vec<Reject>,
}

/// [`parse_chunk`]; with `skip_bad`, bad lines are left out and returned as rejects instead of
/// failing the chunk.
pub fn parse_chunk_with(
    schema: &SchemaRef,
    input: &str,
    data: &[u8],
    first_line: u64,
    block_bytes: usize,
    skip_bad: bool,
) -> Result<ParsedChunk, LoadError> {
    check_columns(schema, input)?;
    let parts = blocks(data, block_bytes);
    let parsed: Vec<ParsedBlock> = parts
        .par_iter()
        .map(|block| parse_one(schema, block.bytes, skip_bad))
        .collect();
    let mut out = ParsedChunk {
        batches: Vec::with_capacity(parsed.len()),
        rejects: Vec::new(),
    };
    for (block, ParsedBlock { batch, bad }) in parts.iter().zip(parsed) {
        let block_first =
            first_line + data[..block.start].iter().filter(|&&b| b == b'\n').count() as u64;
        if !skip_bad && let Some(e) = bad.first() {
            return Err(LoadError::Input {
                input: input.into(),
                problem: InputProblem::BadLine(describe(
                    schema,
                    block_first + e.line_in_block as u64,
                    e,
                )),
            });
        }
        if !bad.is_empty() {
            let lines = block_lines(block.bytes);
            for e in bad {
                let line = block_first + e.line_in_block as u64;
                out.rejects.push(Reject {
                    line,
                    problem: describe(schema, line, &e),
                    text: lines[e.line_in_block].to_vec(),
                });
            }
        }
        out.batches.push(batch);
    }
    out.rejects.sort_by_key(|r| r.line);
    Ok(out)
}

/// The schema's first column of a type TSV input does not read, as an error.
fn check_columns(schema: &SchemaRef, input: &str) -> Result<(), LoadError> {
    match schema.fields().iter().find(|f| !supported(f.data_type())) {
        Some(f) => Err(LoadError::Schema {
            input: input.into(),
            column: f.name().clone(),
            problem: ColumnProblem::NotInTsv {
                data_type: f.data_type().clone(),
            },
        }),
        None => Ok(()),
    }
}

/// Parses one block; without `skip_bad`, its first bad line is its one error (and no rows).
fn parse_one(schema: &SchemaRef, block: &[u8], skip_bad: bool) -> ParsedBlock {
    if skip_bad {
        return parse_block_skipping(schema, block);
    }
    match parse_block(schema, &block_lines(block)) {
        Ok(batch) => ParsedBlock {
            batch,
            bad: Vec::new(),
        },
        Err(e) => ParsedBlock {
            batch: RecordBatch::new_empty(schema.clone()),
            bad: vec![e],
        },
    }
}

/// A bad line's message, naming its line and, where one is at fault, its column.
fn describe(schema: &SchemaRef, line: u64, e: &CellError) -> BadLine {
    BadLine {
        line,
        column: (e.column != usize::MAX).then(|| BadColumn {
            number: e.column + 1,
            name: schema.field(e.column).name().clone(),
        }),
        reason: e.message.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::AsArray;
    use arrow::datatypes::{Field, Int16Type, Int64Type, Schema, UInt16Type};

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("t", DataType::Int64, true),
            Field::new("d", DataType::UInt16, true),
            Field::new("s", DataType::Binary, true),
            Field::new("x", DataType::Int16, true),
        ]))
    }

    #[test]
    fn parses_times_dates_escapes_and_nulls() {
        let data = b"2013-07-01 00:00:33\t2013-07-01\ta\\tb\\nc\\\\\t-5\n1\t15887\t\\N\t\\N\n";
        let batches = parse_chunk(&schema(), "x.tsv", data, 1, 1 << 20).unwrap();
        let b = &batches[0];
        assert_eq!(b.num_rows(), 2);
        assert_eq!(
            b.column(0).as_primitive::<Int64Type>().value(0),
            1_372_636_833
        );
        assert_eq!(b.column(1).as_primitive::<UInt16Type>().value(0), 15887);
        assert_eq!(b.column(1).as_primitive::<UInt16Type>().value(1), 15887);
        assert_eq!(b.column(2).as_binary::<i32>().value(0), b"a\tb\nc\\");
        assert!(b.column(2).is_null(1));
        assert_eq!(b.column(3).as_primitive::<Int16Type>().value(0), -5);
        assert!(b.column(3).is_null(1));
    }

    #[test]
    fn dates_are_calendar_days() {
        assert_eq!(parse_date(b"2013-07-01"), Some(15_887));
        assert_eq!(parse_date(b"1970-01-01"), Some(0));
        assert_eq!(parse_date(b"1969-12-31"), Some(-1));
        assert_eq!(parse_date(b"2012-02-29"), Some(15_399));
        assert_eq!(parse_date(b"0000-03-01"), Some(-719_468));
        for no_such_day in [
            &b"2013-02-29"[..],
            b"2013-04-31",
            b"2013-13-01",
            b"2013-00-10",
        ] {
            assert_eq!(parse_date(no_such_day), None);
        }
        assert_eq!(parse_datetime(b"2013-07-01 00:00:33"), Some(1_372_636_833));
    }

    #[test]
    fn errors_name_line_and_column() {
        let cases: [(&[u8], &str); 5] = [
            (
                b"1\t1\ta\t1\n1\t1\ta\n",
                "line 2: has 3 fields, the table has 4 columns",
            ),
            (
                b"1\t1\ta\t1\n1\t1\ta\tx\n",
                "line 2, column 4 (x): \"x\" is not an integer",
            ),
            (
                b"1\t1\ta\t40000\n",
                "line 1, column 4 (x): value 40000 is out of range for Int16",
            ),
            (
                b"1\t1\ta\\q\t1\n",
                "line 1, column 3 (s): has an invalid escape \\q",
            ),
            (
                b"1\t70000\ta\t1\n",
                "column 2 (d): value 70000 is out of range for UInt16",
            ),
        ];
        for (data, want) in cases {
            let err = parse_chunk(&schema(), "x.tsv", data, 1, 1 << 20).unwrap_err();
            let msg = err.to_string();
            assert!(
                msg.contains("x.tsv") && msg.contains(want),
                "{msg} should contain {want}"
            );
        }
        // An empty line, in the middle or at the end, is named as empty.
        for data in [&b"1\t1\ta\t1\n\n1\t1\ta\t1\n"[..], b"1\t1\ta\t1\n\r\n"] {
            let err = parse_chunk(&schema(), "e.tsv", data, 1, 1 << 20).unwrap_err();
            assert!(
                err.to_string()
                    .contains("line 2: is empty (the table has 4 column(s))"),
                "{err}"
            );
        }
        let one = Arc::new(Schema::new(vec![Field::new("n", DataType::Int32, true)]));
        let err = parse_chunk(&one, "o.tsv", b"1\n\n", 1, 1 << 20).unwrap_err();
        assert!(err.to_string().contains("line 2: is empty"), "{err}");
        // A null where the schema allows none.
        let strict = Arc::new(Schema::new(vec![Field::new("n", DataType::Int32, false)]));
        let err = parse_chunk(&strict, "z.tsv", b"1\n\\N\n", 1, 1 << 20).unwrap_err();
        assert!(
            err.to_string()
                .contains("line 2, column 1 (n): is \\N (null), but the column is not nullable"),
            "{err}"
        );
        // Line numbers count across blocks and chunks.
        let mut data = Vec::new();
        for _ in 0..1000 {
            data.extend_from_slice(b"1\t1\tabc\t1\n");
        }
        data.extend_from_slice(b"1\t1\tabc\n");
        let err = parse_chunk(&schema(), "y.tsv", &data, 101, 64).unwrap_err();
        assert!(err.to_string().contains("line 1101:"), "{err}");
    }

    #[test]
    fn bad_lines_can_be_left_out_and_returned() {
        let data = b"1\t1\ta\t1\nx\t1\ta\t1\n2\t2\tb\t2\n3\t3\tc\n4\t4\td\t4\n";
        for block_bytes in [1 << 20, 8] {
            let ParsedChunk { batches, rejects } =
                parse_chunk_with(&schema(), "r.tsv", data, 10, block_bytes, true).unwrap();
            let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
            assert_eq!(rows, 3);
            let got: Vec<(u64, &[u8])> = rejects.iter().map(|r| (r.line, &r.text[..])).collect();
            assert_eq!(got, vec![(11, &b"x\t1\ta\t1"[..]), (13, &b"3\t3\tc"[..])]);
            let column = rejects[0].problem.column.as_ref().expect("a column");
            assert_eq!((column.number, column.name.as_str()), (1, "t"));
            assert_eq!(rejects[0].problem.line, 11);
            assert!(
                rejects[1].problem.column.is_none(),
                "{}",
                rejects[1].problem
            );
            let text = rejects[1].problem.to_string();
            assert!(text.starts_with("line 13: has 3 fields"), "{text}");
        }
    }
}
