//! The statement log: one statement per line, as `bench-queries` reads it, each with an
//! optional leading count and a tab (`120\tSELECT …`) that weighs it.
//!
//! **Counts.** The text before a line's first tab is its count when it begins with a digit, or
//! with a sign and a digit (no statement begins so): it must be a whole number from 1 to
//! [`MAX_WEIGHT`], else the log is bad input naming the line (`0`, `-5`, `1.5` and
//! `99999999999` alike). A line without one weighs 1.

use crate::AdviseError;

/// The largest count a statement may carry: a billion runs, beyond any log's. Within it, sums
/// of weights cannot overflow and weighted bytes stay exact (see [`crate::weighted_bytes`]).
pub const MAX_WEIGHT: u64 = 1_000_000_000;

/// One statement of the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Statement {
    /// 1-based line in the log.
    pub line: usize,
    /// How often it runs: the leading count, else 1.
    pub weight: u64,
    pub sql: String,
}

/// The log's bytes as text: a byte that is not UTF-8 is bad input naming its line and column.
pub fn log_text(bytes: &[u8]) -> Result<&str, AdviseError> {
    std::str::from_utf8(bytes).map_err(|e| {
        let before = &bytes[..e.valid_up_to()];
        let line_start = before
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |i| i + 1);
        // The bytes before it are valid: its column counts their characters.
        let column = std::str::from_utf8(&before[line_start..]).map_or(0, |t| t.chars().count());
        AdviseError::NotUtf8 {
            line: before.iter().filter(|&&b| b == b'\n').count() + 1,
            column: column + 1,
        }
    })
}

/// The statements of a log; blank lines and `--` comments are skipped. An empty log, or a
/// leading count that is not a whole number from 1 to [`MAX_WEIGHT`], is bad input naming the
/// line.
pub fn parse_log(text: &str) -> Result<Vec<Statement>, AdviseError> {
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with("--") {
            continue;
        }
        let (weight, sql) = match leading_count(line) {
            Some(c) => (weight(c.count, i + 1)?, c.sql),
            None => (1, line),
        };
        out.push(Statement {
            line: i + 1,
            weight,
            sql: sql.to_string(),
        });
    }
    if out.is_empty() {
        return Err(AdviseError::EmptyLog);
    }
    Ok(out)
}

/// A line's leading count and the statement after it.
struct Counted<'a> {
    count: &'a str,
    sql: &'a str,
}

/// The count of a trimmed line (see the module docs), `None` for a line without one.
fn leading_count(line: &str) -> Option<Counted<'_>> {
    let (count, sql) = line.split_once('\t')?;
    let count = count.trim();
    let unsigned = count.strip_prefix(['-', '+']).unwrap_or(count);
    unsigned
        .starts_with(|c: char| c.is_ascii_digit())
        .then(|| Counted {
            count,
            sql: sql.trim(),
        })
}

/// The weight `count` gives line `line`: a whole number from 1 to [`MAX_WEIGHT`].
fn weight(count: &str, line: usize) -> Result<u64, AdviseError> {
    count
        .parse::<u64>()
        .ok()
        .filter(|w| (1..=MAX_WEIGHT).contains(w))
        .ok_or_else(|| AdviseError::BadWeight {
            line,
            text: count.to_string(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_weigh_statements_and_comments_are_skipped() {
        let log = "-- a comment\n\n120\tSELECT 1\nSELECT 2\t-- a tab inside\n";
        let s = parse_log(log).unwrap();
        assert_eq!(
            s,
            vec![
                Statement {
                    line: 3,
                    weight: 120,
                    sql: "SELECT 1".into()
                },
                Statement {
                    line: 4,
                    weight: 1,
                    sql: "SELECT 2\t-- a tab inside".into()
                },
            ]
        );
    }

    #[test]
    fn negative_fractional_and_oversized_counts_are_refused_naming_the_line_as_zero_is() {
        for count in [
            "-5",
            "+0",
            "-0",
            "1.5",
            "12x",
            "0",
            "1000000001",
            "18446744073709551615",
        ] {
            let log = format!("SELECT 1\n\n{count}\tSELECT 2\n");
            match parse_log(&log) {
                Err(e @ AdviseError::BadWeight { line: 3, .. }) => {
                    assert!(e.to_string().contains(count), "{e}")
                }
                other => panic!("{count}: {other:?}"),
            }
        }
        let most = parse_log(&format!("{MAX_WEIGHT}\tSELECT 1")).unwrap();
        assert_eq!(most[0].weight, MAX_WEIGHT);
        let signed = parse_log("+7\tSELECT 1\n-\tSELECT 2").unwrap();
        assert_eq!((signed[0].weight, &*signed[0].sql), (7, "SELECT 1"));
        assert_eq!((signed[1].weight, &*signed[1].sql), (1, "-\tSELECT 2"));
    }

    #[test]
    fn a_byte_that_is_not_utf8_names_its_line() {
        let log = b"SELECT 1\nSELECT 2\nSELECT '\xff'\n";
        match log_text(log) {
            Err(e @ AdviseError::NotUtf8 { line: 3, column: 9 }) => {
                assert!(e.to_string().starts_with("line 3, column 9: "), "{e}")
            }
            other => panic!("{other:?}"),
        }
        let after_an_accent = "SELECT 'é".bytes().chain([0xff]).collect::<Vec<u8>>();
        assert!(matches!(
            log_text(&after_an_accent),
            Err(AdviseError::NotUtf8 {
                line: 1,
                column: 10
            })
        ));
        assert_eq!(log_text(b"SELECT 1\n").unwrap(), "SELECT 1\n");
    }

    #[test]
    fn an_empty_log_and_a_zero_count_are_refused() {
        assert!(matches!(parse_log("\n-- x\n"), Err(AdviseError::EmptyLog)));
        assert!(matches!(
            parse_log("SELECT 1\n0\tSELECT 2"),
            Err(AdviseError::BadWeight { line: 2, .. })
        ));
    }
}
