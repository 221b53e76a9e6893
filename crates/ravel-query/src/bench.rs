//! A benchmark run: each statement of a file cold and then hot, with its store traffic.

use std::time::Instant;

use ravel_store::Store;
use serde::Serialize;

use crate::{Answer, QueryError, QueryOptions, QueryTable};

/// One statement of a benchmark run: cold (fresh context and store handle) and hot (the same
/// statement again in that context).
#[derive(Debug, Clone, Serialize)]
pub struct StatementRun {
    /// 1-based position in the statements file.
    pub number: usize,
    pub sql: String,
    pub rows: Option<usize>,
    pub cold_s: Option<f64>,
    pub hot_s: Option<f64>,
    /// Store traffic of the cold run, opening the table (its manifests) included.
    pub cold_gets: Option<u64>,
    pub cold_bytes: Option<u64>,
    pub objects_touched: Option<usize>,
    pub objects_total: Option<usize>,
    /// Objects kept by the manifest's ranges.
    pub objects_kept: Option<usize>,
    /// Store traffic of the hot run (what the context's caches did not save).
    pub hot_gets: Option<u64>,
    pub hot_bytes: Option<u64>,
    pub error: Option<String>,
}

impl StatementRun {
    /// A run of statement `number` that has not happened yet.
    fn new(number: usize, sql: &str) -> StatementRun {
        StatementRun {
            number,
            sql: sql.to_string(),
            rows: None,
            cold_s: None,
            hot_s: None,
            cold_gets: None,
            cold_bytes: None,
            objects_touched: None,
            objects_total: None,
            objects_kept: None,
            hot_gets: None,
            hot_bytes: None,
            error: None,
        }
    }

    /// Records the cold run: `q` as opened, `a` its answer, `cold_s` both together.
    fn cold(&mut self, q: &QueryTable, a: &Answer, cold_s: f64) {
        self.cold_s = Some(cold_s);
        self.rows = Some(a.rows);
        self.cold_gets = Some(q.opened().traffic.gets + a.traffic.gets);
        self.cold_bytes = Some(q.opened().traffic.bytes + a.traffic.bytes);
        self.objects_touched = Some(a.traffic.objects);
        self.objects_total = Some(q.opened().objects);
        self.objects_kept = Some(a.scan.kept);
    }
}

/// Statements of a file: one per line, each with an optional leading count and tab; blank
/// lines and `--` comments are skipped.
pub fn statements(text: &str) -> Vec<(usize, String)> {
    text.lines()
        .enumerate()
        .map(|(i, l)| (i + 1, without_weight(l.trim())))
        .filter(|(_, l)| !l.is_empty() && !l.starts_with("--"))
        .map(|(i, l)| (i, l.to_string()))
        .collect()
}

/// A statement line without its leading count and tab (`120\tSELECT …`, as a log of how often
/// statements run gives it): each statement runs once here.
fn without_weight(line: &str) -> &str {
    leading_count(line).map_or(line, |c| c.sql)
}

/// A statement line's leading count and the statement after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counted<'a> {
    /// The count as written (digits only; its value is the caller's to check).
    pub count: &'a str,
    pub sql: &'a str,
}

/// The leading count of a trimmed statement line (`120\tSELECT …`), when the text before its
/// first tab is digits; `None` for a line without one.
pub fn leading_count(line: &str) -> Option<Counted<'_>> {
    let (count, sql) = line.split_once('\t')?;
    let count = count.trim();
    (!count.is_empty() && count.chars().all(|c| c.is_ascii_digit())).then(|| Counted {
        count,
        sql: sql.trim(),
    })
}

/// Refuses the run when any statement is not a query (the first such, by its line), before
/// any statement runs. Statements that fail to plan for other reasons are left to their runs,
/// which report them.
pub async fn refuse_writes(
    store: &Store,
    table: &str,
    statements: &[(usize, String)],
    opts: &QueryOptions,
) -> Result<(), QueryError> {
    let q = QueryTable::open(store, table, opts).await?;
    for (line, sql) in statements {
        if let Err(e @ QueryError::ReadOnly { .. }) = q.check(sql).await {
            return Err(QueryError::AtLine {
                line: *line,
                error: Box::new(e),
            });
        }
    }
    Ok(())
}

/// Runs each statement cold and then hot against `table` in the store at `url`; a statement
/// that fails is reported with its error and the run goes on. A file with a statement that is
/// not a query is refused before any runs ([`refuse_writes`]).
pub async fn bench_statements(
    url: &str,
    table: &str,
    statements: &[(usize, String)],
    opts: &QueryOptions,
    mut progress: impl FnMut(&StatementRun),
) -> Result<Vec<StatementRun>, QueryError> {
    refuse_writes(&Store::open(url)?, table, statements, opts).await?;
    let mut out = Vec::new();
    for (number, sql) in statements {
        let mut run = StatementRun::new(*number, sql);
        // Cold: a new store handle (no connection, no cache) and a new context.
        let store = Store::open(url)?;
        let t = Instant::now();
        let result = async {
            let q = QueryTable::open(&store, table, opts).await?;
            let a = q.sql(sql).await?;
            Ok::<_, QueryError>((q, a))
        }
        .await;
        match result {
            Ok((q, a)) => {
                run.cold(&q, &a, t.elapsed().as_secs_f64());
                match q.sql(sql).await {
                    Ok(hot) => {
                        run.hot_s = Some(hot.wall_s);
                        run.hot_gets = Some(hot.traffic.gets);
                        run.hot_bytes = Some(hot.traffic.bytes);
                    }
                    Err(e) => run.error = Some(format!("hot run: {e}")),
                }
            }
            Err(e @ (QueryError::NoSuchTable(_) | QueryError::Store(_))) => return Err(e),
            Err(e) => run.error = Some(e.to_string()),
        }
        progress(&run);
        out.push(run);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn statements_keep_their_lines_and_drop_weights() {
        let text = "-- log\n120\tSELECT 1\n\nSELECT 2\t-- tab\n";
        assert_eq!(
            super::statements(text),
            vec![
                (2, "SELECT 1".to_string()),
                (4, "SELECT 2\t-- tab".to_string())
            ]
        );
    }
}
