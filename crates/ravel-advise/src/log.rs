//! The statement log: one statement per line, as `bench-queries` reads it, each with an
//! optional leading count and a tab (`120\tSELECT …`) that weighs it.

use crate::AdviseError;

/// One statement of the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Statement {
    /// 1-based line in the log.
    pub line: usize,
    /// How often it runs: the leading count, else 1.
    pub weight: u64,
    pub sql: String,
}

/// The statements of a log; blank lines and `--` comments are skipped. An empty log, or a
/// leading count that is not a positive integer, is bad input naming the line.
pub fn parse_log(text: &str) -> Result<Vec<Statement>, AdviseError> {
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with("--") {
            continue;
        }
        let (weight, sql) = match ravel_query::bench::leading_count(line) {
            Some(c) => {
                let weight = c.count.parse::<u64>().ok().filter(|&w| w > 0).ok_or(
                    AdviseError::BadWeight {
                        line: i + 1,
                        text: c.count.to_string(),
                    },
                )?;
                (weight, c.sql)
            }
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
    fn an_empty_log_and_a_zero_count_are_refused() {
        assert!(matches!(parse_log("\n-- x\n"), Err(AdviseError::EmptyLog)));
        assert!(matches!(
            parse_log("SELECT 1\n0\tSELECT 2"),
            Err(AdviseError::BadWeight { line: 2, .. })
        ));
    }
}
