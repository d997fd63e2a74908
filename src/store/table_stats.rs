//! Planner statistics of growing tables on PostgreSQL ([`analyze_grown`]).
//!
//! PostgreSQL keeps the plan of a prepared statement once it has chosen a generic one, until
//! the tables it reads change statistics. A database the scheduler has just created has none:
//! statements prepared in its first seconds were planned for empty tables (sequential scans)
//! and keep those plans while the tables grow, until autovacuum first analyzes them — up to a
//! minute or more later. Measured (2026-12-03, `wfbench --shape many` on a new database): the
//! run-row outcome update read the whole log table at every write (1–5 ms each as it grew to
//! 10,000 rows; a fifth of the database's CPU), the node-row and result reads likewise.
//!
//! So the engine analyzes its hot tables itself while they grow: a table is analyzed when it
//! has [`GROWTH`] times the rows it had at its last analysis (and at least [`MIN_ROWS`]) —
//! at 1,000, 4,000, 16,000… rows, seven times up to ten million; updates and a table that
//! stays the size it is ask for none (autovacuum keeps those). An analysis refreshes the
//! statistics and makes every session plan its statements again.

use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, Statement};

use crate::error::Result;

/// The tables whose plans matter on the hot paths (fires, results, workflow passes).
pub(crate) const HOT_TABLES: [&str; 5] = [
    "xxl_job_log",
    "xxl_job_info",
    "xjob_workflow_run",
    "xjob_workflow_node_run",
    "xjob_workflow_node_log",
];

/// A table of fewer rows is not analyzed (by this rule).
pub(crate) const MIN_ROWS: i64 = 1_000;

/// How many times its rows at the last analysis a table has when it is analyzed again.
pub(crate) const GROWTH: i64 = 4;

/// Whether a table of `tuples` rows when last analyzed (`-1`: never) that has `live` rows
/// now needs analyzing.
pub(crate) fn grown(tuples: i64, live: i64) -> bool {
    live >= MIN_ROWS.max(tuples.saturating_mul(GROWTH))
}

/// Analyzes the [`HOT_TABLES`] that have [`grown`] (PostgreSQL; elsewhere nothing: SQLite
/// plans every statement from its indexes, InnoDB recalculates its own statistics after 10 %
/// of a table changed and plans each execution); answers the tables analyzed. Tables the
/// connection's role does not own (nor a role it is in) are left to autovacuum: PostgreSQL
/// would skip their analysis with a warning, every look.
pub(crate) async fn analyze_grown(db: &DatabaseConnection) -> Result<Vec<&'static str>> {
    if db.get_database_backend() != DbBackend::Postgres {
        return Ok(Vec::new());
    }
    let names = HOT_TABLES
        .iter()
        .map(|t| format!("'{t}'"))
        .collect::<Vec<_>>()
        .join(", ");
    // the five tables' rows in `pg_class` and their live rows' counter alone, not the view
    // `pg_stat_user_tables` (its plan takes 1.1 ms, made again on each pooled connection, where
    // this one takes 0.07 ms; BENCHMARKS.md, 2026-12-04)
    let sql = format!(
        "SELECT c.relname, c.reltuples::bigint AS tuples, \
         pg_stat_get_live_tuples(c.oid) AS live FROM pg_class c \
         WHERE c.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = current_schema()) \
         AND c.relkind IN ('r', 'p') AND c.relname IN ({names}) \
         AND pg_has_role(c.relowner, 'USAGE')"
    );
    let rows = db
        .query_all_raw(Statement::from_string(DbBackend::Postgres, sql))
        .await?;
    let mut analyzed = Vec::new();
    for r in rows {
        let name: String = r.try_get("", "relname")?;
        let (tuples, live): (i64, i64) = (r.try_get("", "tuples")?, r.try_get("", "live")?);
        // the name as the constant list spells it: nothing read is put into a statement
        let Some(table) = HOT_TABLES.iter().find(|t| **t == name) else {
            continue;
        };
        if grown(tuples, live) {
            db.execute_unprepared(&format!("ANALYZE {table}")).await?;
            tracing::debug!(table, tuples, live, "growing table analyzed");
            analyzed.push(*table);
        }
    }
    Ok(analyzed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_tables_that_outgrew_their_statistics_are_analyzed() {
        // never analyzed (or analyzed empty): once it has a thousand rows
        assert!(!grown(-1, 999));
        assert!(grown(-1, 1_000));
        assert!(grown(0, 1_000));
        // analyzed at 4,000 rows: again at 16,000
        assert!(!grown(4_000, 15_999));
        assert!(grown(4_000, 16_000));
        // a table that keeps its size (however often its rows change) is autovacuum's
        assert!(!grown(10_000, 10_000));
    }

    /// On PostgreSQL a table that grew past its statistics is analyzed, and then not again:
    /// the planner's row count follows (it was -1, never analyzed).
    #[tokio::test]
    async fn a_grown_table_is_analyzed_once() {
        for db in crate::store::tests::every_backend().await {
            if db.get_database_backend() != DbBackend::Postgres {
                assert!(analyze_grown(&db).await.unwrap().is_empty());
                continue;
            }
            // the changes reach the statistics when the inserting session next reports them
            db.execute_unprepared(
                "BEGIN; INSERT INTO xxl_job_log (job_group, job_id, trigger_time, trigger_code, \
                 handle_code, executor_fail_retry_count, alarm_status, fire_time, fire_state) \
                 SELECT 1, g, now(), 200, 200, 0, 1, g, 0 FROM generate_series(1, 3000) g; \
                 SELECT pg_stat_force_next_flush(); COMMIT",
            )
            .await
            .unwrap();
            let tuples = async || -> i64 {
                let r = db
                    .query_one_raw(Statement::from_string(
                        DbBackend::Postgres,
                        "SELECT reltuples::bigint AS t FROM pg_class WHERE oid = 'xxl_job_log'::regclass",
                    ))
                    .await
                    .unwrap()
                    .unwrap();
                r.try_get("", "t").unwrap()
            };
            assert_eq!(tuples().await, -1);
            let first = analyze_grown(&db).await.unwrap();
            assert!(first.contains(&"xxl_job_log"), "{first:?}");
            assert_eq!(tuples().await, 3000);
            let second = analyze_grown(&db).await.unwrap();
            assert!(!second.contains(&"xxl_job_log"), "{second:?}");
            db.close().await.unwrap();
        }
    }
}
