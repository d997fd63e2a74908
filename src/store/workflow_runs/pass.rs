//! A workflow transaction on a database server in a fixed handful of round trips, whatever
//! its size ([`Pass`]).
//!
//! The rules ([`super::Runs`]) read and write through [`Tx`] one row at a time; on a server
//! each of those would be a round trip. A [`Pass`] keeps the rows of the runs it holds (their
//! row lock taken) and answers the rules from them:
//! - [`Tx::prepare`] locks a result pass's runs, closes their rows' links and reads their node
//!   rows, each in one statement for the whole pass;
//! - writes to held runs and their node rows change the kept rows and are written at the end
//!   ([`Pass::flush`]): on PostgreSQL one statement for every kind (new node rows and runs
//!   inserted, changed ones updated, pending run rows and their links inserted, each kind a
//!   JSON parameter); on MySQL/MariaDB one multi-row insert per kind of new row, then one
//!   `UPDATE … CASE` per kind of changed row;
//! - new rows take ids reserved ahead ([`Ids`]: PostgreSQL's sequences, MySQL/MariaDB's
//!   auto-increment counters where a multi-row insert's ids are consecutive), so a new node
//!   run or run row costs no round trip of its own; on MySQL/MariaDB a pending run row
//!   (`xxl_job_log`, whose placeholder rows cost the most) takes its id from the multi-row
//!   insert that writes it instead, the rules answered a stand-in until then
//!   ([`Pass::settle`]); where ids are not reserved (MySQL with `innodb_autoinc_lock_mode = 2`)
//!   a new row is inserted when it is made (its id answered by the insert);
//! - on MySQL/MariaDB every statement that locks rows by id names the primary key
//!   (`FORCE INDEX (PRIMARY)`): through a secondary index InnoDB locks that index's gaps too,
//!   where other transactions insert, and a scanning update locks every row it reads;
//! - everything else (a run it does not hold, a read that could see a kept write) goes to the
//!   port after the kept writes are written, so every statement sees what the rules wrote
//!   before it, in order;
//! - a *sealed* pass ([`Pass::sealed`], a start answered from what an earlier start read) goes
//!   to the port for nothing: a rule that would gets an error (the start then takes a
//!   transaction), and its rows are written in one round trip on the pool that checks, as it
//!   writes, that the workflow and jobs it was answered from did not change ([`Guard`]): on
//!   PostgreSQL one statement, on MySQL/MariaDB one script of statements in a transaction
//!   ([`sealed_script`]).
//!
//! On the run-row writer's SQLite file nothing is kept: every call goes to the port, where a
//! statement costs no round trip.

use std::collections::{BTreeSet, HashMap, HashSet};

use entity::xjob_workflow as wf;
use entity::xjob_workflow_node_run as nodes;
use entity::xjob_workflow_run as runs;
use parking_lot::Mutex;
use sea_orm::DbBackend;
use serde_json::{Map, Value as Json};
use std::sync::LazyLock;

use super::status;
use super::tx::{
    Job, LINKS, NODE_COLUMNS, NodeUpdate, PENDING_COLUMNS, PENDING_ROW, PendingRow, RUN_COLUMNS,
    Tx, node_values, pending_args, run_values,
};
use crate::error::Result;
use crate::model::{AlarmStatus, TriggerType, fire_state};
use crate::store::pg_columns::{self, Col, Columns, Elem, col, nullable};
use crate::store::port::{IN_CHUNK, Port, Value, in_list};

/// How many ids one reservation takes from a sequence at least, and at most (a pass of many
/// results asks for about as many as it may start); on MySQL/MariaDB at most [`MAX_UNDONE`].
const RESERVE: i64 = 256;
const MAX_RESERVE: i64 = 8192;
const MAX_UNDONE: i64 = 1024;

/// Ids reserved ahead for the node runs and run rows passes make, shared by a node's passes:
/// a new row takes the next one instead of answering its id from its own insert, so it costs
/// no round trip of its own. On PostgreSQL they come from the tables' sequences; on
/// MySQL/MariaDB from the tables' auto-increment counters, by a multi-row insert undone at
/// once ([`Port::insert_undone`]) — only where such an insert's ids are consecutive
/// (`innodb_autoinc_lock_mode` 0 or 1: MariaDB's default is 1, MySQL 8's is 2, where rows are
/// inserted one at a time as before). Reserved ids a process does not use are gaps, as a
/// rolled-back insert leaves.
#[derive(Default)]
pub(crate) struct Ids {
    runs: Mutex<Vec<i64>>,
    nodes: Mutex<Vec<i64>>,
    logs: Mutex<Vec<i64>>,
    /// Each kind's reserving statement, the sequence's name in it (looked up once).
    reserve: Mutex<[Option<std::sync::Arc<str>>; 3]>,
    /// MySQL/MariaDB: the auto-increment step when a multi-row insert's ids are consecutive,
    /// `Some(None)` when they may not be (looked up once).
    step: Mutex<Option<Option<i64>>>,
    /// MySQL/MariaDB: each kind's last reservations (from, to): a new one overlapping one of
    /// them means the server does not keep the values.
    taken: Mutex<[Vec<(i64, i64)>; 3]>,
}

#[derive(Clone, Copy)]
enum Kind {
    Run,
    Node,
    Log,
}

impl Kind {
    /// The insert of `n` placeholder rows of the kind's table (its columns without a default),
    /// which only takes ids, and its arguments: node rows are unique on (run, key, attempt), so
    /// theirs are this reservation's own key (bound) and attempts 0, 1, … (Rows ignored as
    /// duplicates of one row would take their ids too, but cost the server more than inserted
    /// ones: measured 29–38 ms against 7–14 ms for 1,024 rows.)
    fn placeholders(self, n: i64) -> (String, Vec<Value>) {
        let (into, row) = match self {
            Kind::Run => (
                "xjob_workflow_run (workflow_id, version, job_group, status, trigger_type, \
                 context, start_time)",
                "(0, 0, 0, '', '', '', 0)",
            ),
            Kind::Node => (
                "xjob_workflow_node_run (run_id, node_key, attempt, state, start_time)",
                "(0, ?, ?, '', 0)",
            ),
            Kind::Log => (
                "xxl_job_log (job_group, job_id, trigger_code, handle_code)",
                "(0, 0, 0, 0)",
            ),
        };
        let mut args = Vec::new();
        if let Kind::Node = self {
            let key = format!("~ids {:016x}", rand::random::<u64>());
            for i in 0..n {
                args.push(key.clone().into());
                args.push(i.into());
            }
        }
        let rows = vec![row; n as usize].join(", ");
        (format!("INSERT INTO {into} VALUES {rows}"), args)
    }
}

impl Ids {
    fn list(&self, kind: Kind) -> &Mutex<Vec<i64>> {
        match kind {
            Kind::Run => &self.runs,
            Kind::Node => &self.nodes,
            Kind::Log => &self.logs,
        }
    }

    /// The next id of `kind`, reserving more in `port` when none is left (about `want`);
    /// `None` where ids are not reserved (MySQL whose multi-row inserts' ids may not be
    /// consecutive).
    async fn next(&self, port: &Port<'_>, kind: Kind, want: i64) -> Result<Option<i64>> {
        if let Some(id) = self.list(kind).lock().pop() {
            return Ok(Some(id));
        }
        let want = want.clamp(RESERVE, MAX_RESERVE);
        let mut got: Vec<i64> = if port.backend() == DbBackend::Postgres {
            let sql = self.reserving(port, kind).await?;
            port.rows(&sql, &[want.into()]).await?
        } else {
            let Some(step) = self.step(port).await? else {
                return Ok(None);
            };
            let n = (want.min(MAX_UNDONE) as u64).next_power_of_two() as i64;
            let (sql, args) = kind.placeholders(n);
            let first = port.insert_undone(&sql, &args).await?;
            // a server that handed out again what an earlier reservation took (or inserted
            // nothing) does not keep the values: rows are inserted one at a time from now on
            let end = first + n * step;
            let mut taken = self.taken.lock();
            let again = taken[kind as usize]
                .iter()
                .any(|&(from, to)| first < to && from < end);
            if first <= 0 || again {
                tracing::warn!(
                    first,
                    "reserved ids were handed out again: workflow rows are inserted one at a time"
                );
                *self.step.lock() = Some(None);
                return Ok(None);
            }
            let recent = &mut taken[kind as usize];
            if recent.len() >= 16 {
                recent.remove(0);
            }
            recent.push((first, end));
            drop(taken);
            (0..n).map(|i| first + i * step).collect()
        };
        let mut list = self.list(kind).lock();
        // (another pass may have reserved meanwhile: both lists are kept, the smallest first)
        got.append(&mut list);
        got.sort_unstable_by(|a, b| b.cmp(a));
        let id = got.pop().ok_or(sea_orm::DbErr::RecordNotInserted)?;
        *list = got;
        Ok(Some(id))
    }

    /// Forgets every reserved id (after a write that failed: a database that restarted may
    /// hand out again what was reserved before).
    fn forget(&self) {
        for kind in [Kind::Run, Kind::Node, Kind::Log] {
            self.list(kind).lock().clear();
        }
    }

    /// MySQL/MariaDB: the auto-increment step if a multi-row insert takes consecutive ids
    /// (`innodb_autoinc_lock_mode` ≤ 1), else `None`.
    async fn step(&self, port: &Port<'_>) -> Result<Option<i64>> {
        if let Some(step) = *self.step.lock() {
            return Ok(step);
        }
        let sql = "SELECT CAST(@@innodb_autoinc_lock_mode AS SIGNED), \
                   CAST(@@auto_increment_increment AS SIGNED)";
        let (mode, step): (i64, i64) = port.row(sql, &[]).await?.unwrap_or((2, 1));
        let step = (mode <= 1 && step >= 1).then_some(step);
        if step.is_none() {
            tracing::info!(
                innodb_autoinc_lock_mode = mode,
                "a multi-row insert's ids may not be consecutive: workflow rows are inserted \
                 one at a time"
            );
        }
        *self.step.lock() = Some(step);
        Ok(step)
    }

    /// The statement reserving ids of `kind` on PostgreSQL: the sequence named by a constant,
    /// which PostgreSQL resolves once per statement (named by an expression, it is resolved
    /// again for every id: measured 3 µs an id against 0.3).
    async fn reserving(&self, port: &Port<'_>, kind: Kind) -> Result<std::sync::Arc<str>> {
        if let Some(sql) = &self.reserve.lock()[kind as usize] {
            return Ok(sql.clone());
        }
        let table = match kind {
            Kind::Run => "xjob_workflow_run",
            Kind::Node => "xjob_workflow_node_run",
            Kind::Log => "xxl_job_log",
        };
        let seq: Option<String> = port
            .rows(
                &format!("SELECT pg_get_serial_sequence('{table}', 'id')"),
                &[],
            )
            .await?
            .pop();
        let seq = seq.ok_or(sea_orm::DbErr::RecordNotFound(format!(
            "{table}'s sequence"
        )))?;
        let sql: std::sync::Arc<str> = format!(
            "SELECT nextval('{}') FROM generate_series(1, ?)",
            seq.replace('\'', "''")
        )
        .into();
        self.reserve.lock()[kind as usize] = Some(sql.clone());
        Ok(sql)
    }
}

/// A run this pass holds (its row lock taken in this transaction), as the rules last wrote it.
struct Held {
    run: runs::Model,
    /// Its node rows, once read (or `Some` empty for a run this pass inserted).
    nodes: Option<Vec<nodes::Model>>,
}

/// A kept pending run row and its link.
struct Pending {
    id: i64,
    group: i32,
    job_id: i32,
    now: i64,
    param: Option<String>,
    sharding: Option<String>,
    node_run_id: i64,
    run_id: i64,
    shard: i32,
}

#[derive(Default)]
struct State {
    held: HashMap<i64, Held>,
    /// The run of each kept node row.
    node_run: HashMap<i64, i64>,
    /// Run-row ids whose links [`Tx::prepare`] closed, and those of them that were open.
    closed: HashSet<i64>,
    open: HashSet<i64>,
    /// Kept writes not yet written: runs and node rows (new or changed) by id, pending rows.
    dirty_runs: BTreeSet<i64>,
    dirty_nodes: BTreeSet<i64>,
    pending: Vec<Pending>,
    /// Those of the dirty runs and node rows this pass made (not in the database yet).
    made_runs: HashSet<i64>,
    made_nodes: HashSet<i64>,
    /// MySQL/MariaDB: the last stand-in id given to a pending run row (-1, -2, …) and each
    /// one's id once its row was inserted ([`Pass::settle`]).
    stand_in: i64,
    log_ids: HashMap<i64, i64>,
    /// Workflows this pass found with no queued run.
    none_queued: HashSet<i32>,
    /// Workflows read in this pass (no kept write is to a workflow).
    workflows: HashMap<i32, Option<wf::Model>>,
}

impl State {
    fn is_clean(&self) -> bool {
        self.dirty_runs.is_empty() && self.dirty_nodes.is_empty() && self.pending.is_empty()
    }

    /// Held run `id`'s node rows, if read.
    fn nodes_of(&mut self, run_id: i64) -> Option<&mut Vec<nodes::Model>> {
        self.held.get_mut(&run_id)?.nodes.as_mut()
    }

    /// Kept node row `id`.
    fn node(&mut self, id: i64) -> Option<&mut nodes::Model> {
        let run = *self.node_run.get(&id)?;
        self.nodes_of(run)?.iter_mut().find(|n| n.id == id)
    }

    fn keep_nodes(&mut self, run_id: i64, rows: Vec<nodes::Model>) {
        for n in &rows {
            self.node_run.insert(n.id, run_id);
        }
        if let Some(h) = self.held.get_mut(&run_id) {
            h.nodes = Some(rows);
        }
    }
}

/// A workflow transaction that keeps the rows of the runs it holds (see the module docs).
pub(crate) struct Pass<'a, 'p> {
    port: &'a Port<'p>,
    /// Whether rows are kept at all (not on the writer's file).
    keeps: bool,
    /// A start answered from what the node knows ([`Pass::sealed`]): nothing is read, and
    /// nothing written but the kept rows at the end.
    sealed: bool,
    /// Where new rows' ids come from, when they are reserved ahead (on a database server).
    ids: Option<&'a Ids>,
    st: Mutex<State>,
}

impl<'a, 'p> Pass<'a, 'p> {
    /// A pass in `port`'s transaction, taking reserved ids from `ids` on a database server.
    pub(crate) fn new(port: &'a Port<'p>, ids: &'a Ids) -> Self {
        let keeps = matches!(port, Port::Pool(_));
        Pass {
            port,
            keeps,
            sealed: false,
            ids: (keeps && port.backend() != DbBackend::Sqlite).then_some(ids),
            st: Mutex::default(),
        }
    }

    /// A pass that reads nothing (a database server, statements on the pool in `port`):
    /// `workflows` answer the rules' workflow reads, and a rule that would read or write
    /// through the port gets an error instead; its kept rows are written by
    /// [`Pass::flush_guarded`], one round trip that commits alone. What a start of a
    /// `PARALLEL` workflow needs when the node knows its workflow, DAG and jobs.
    pub(crate) fn sealed(
        port: &'a Port<'p>,
        ids: &'a Ids,
        workflows: impl IntoIterator<Item = wf::Model>,
    ) -> Self {
        let mut pass = Pass::new(port, ids);
        pass.sealed = pass.ids.is_some() && port.pool().is_some();
        pass.st.get_mut().workflows = workflows.into_iter().map(|w| (w.id, Some(w))).collect();
        pass
    }

    /// The port, unless the pass is sealed.
    fn direct(&self) -> Result<&'a Port<'p>> {
        if self.sealed {
            return Err(crate::Error::Conflict {
                reason: "a sealed workflow pass does not read".into(),
            });
        }
        Ok(self.port)
    }

    /// The port, every kept write written first.
    pub(crate) async fn port(&self) -> Result<&'a Port<'p>> {
        let port = self.direct()?;
        self.flush().await?;
        Ok(port)
    }

    fn backend(&self) -> DbBackend {
        self.port.backend()
    }

    /// About how many new rows of a kind this pass may make: a few per result it applies.
    fn want(&self) -> i64 {
        4 * self.st.lock().closed.len() as i64
    }

    /// Writes what the rules wrote to held rows and did not write yet.
    pub(crate) async fn flush(&self) -> Result<()> {
        self.write_kept(None).await.map(|_| ())
    }

    /// Writes the kept rows of a sealed pass in one round trip, only if the database still
    /// holds what the pass was answered from ([`Guard`]); answers whether it did (nothing is
    /// written when it does not).
    pub(crate) async fn flush_guarded(&self, guard: &Guard) -> Result<bool> {
        Ok(self.write_kept(Some(guard)).await? > 0)
    }

    /// Gives the run rows `ch` dispatches their ids where the rules were answered a stand-in
    /// (MySQL/MariaDB, [`Tx::insert_pending`]); after the last [`Pass::flush`].
    pub(crate) fn settle(&self, ch: &mut super::Changes) {
        let st = self.st.lock();
        for d in &mut ch.dispatch {
            if let Some(id) = st.log_ids.get(&d.log_id) {
                d.log_id = *id;
            }
        }
    }

    /// Writes the kept rows (under `guard`, a sealed pass's); answers how many rows it wrote
    /// (0 when the guard failed; 1 when there was nothing to write).
    async fn write_kept(&self, guard: Option<&Guard>) -> Result<u64> {
        let (node_rows, run_rows, pending, made_nodes, made_runs) = {
            let mut st = self.st.lock();
            if st.is_clean() {
                return Ok(1);
            }
            let dirty_nodes = std::mem::take(&mut st.dirty_nodes);
            let dirty_runs = std::mem::take(&mut st.dirty_runs);
            let pending = std::mem::take(&mut st.pending);
            let made_nodes = std::mem::take(&mut st.made_nodes);
            let made_runs = std::mem::take(&mut st.made_runs);
            let node_rows: Vec<nodes::Model> = dirty_nodes
                .iter()
                .filter_map(|id| st.node(*id).cloned())
                .collect();
            let run_rows: Vec<runs::Model> = dirty_runs
                .iter()
                .filter_map(|id| st.held.get(id).map(|h| h.run.clone()))
                .collect();
            (node_rows, run_rows, pending, made_nodes, made_runs)
        };
        // rows this pass made are inserted, the others updated (neither is an upsert)
        let (new_runs, run_rows): (Vec<_>, Vec<_>) = run_rows
            .into_iter()
            .partition(|r| made_runs.contains(&r.id));
        let (new_nodes, node_rows): (Vec<_>, Vec<_>) = node_rows
            .into_iter()
            .partition(|n| made_nodes.contains(&n.id));
        if self.backend() == DbBackend::Postgres {
            let guard = guard.map_or_else(|| json_rows(std::iter::empty()), Guard::json);
            let start = node_rows.is_empty() && run_rows.is_empty();
            if start && new_nodes.len() + new_runs.len() + pending.len() <= JSON_ROWS {
                let args = [
                    guard,
                    json_rows(new_nodes.iter().map(model_json)),
                    json_rows(new_runs.iter().map(model_json)),
                    json_rows(pending.iter().map(pending_json)),
                    Value::from(fire_state::new_claim()),
                ];
                let written: Option<i64> = self.port.row(&PG_FLUSH_NEW_JSON, &args).await?;
                return Ok(written.unwrap_or(0).max(0) as u64);
            }
            let mut args = vec![guard];
            args.extend(columns(&NODE_COLS, &new_nodes, node_values)?);
            if !start {
                args.extend(changed(&PG_NODE_SET, &node_rows, node_values)?);
            }
            args.extend(columns(&RUN_COLS, &new_runs, run_values)?);
            if !start {
                args.extend(changed(&PG_RUN_SET, &run_rows, run_values)?);
            }
            args.extend(columns(&PENDING_COLS, &pending, pending_values)?);
            args.push(Value::from(fire_state::new_claim()));
            // a start makes rows only: its own statement (see `PG_FLUSH_NEW`)
            let sql: &str = if start { &PG_FLUSH_NEW } else { &PG_FLUSH };
            let written: Option<i64> = self.port.row(sql, &args).await?;
            return Ok(written.unwrap_or(0).max(0) as u64);
        }
        if let Some(guard) = guard {
            // a sealed pass on MySQL/MariaDB: a start makes rows only (were it to change one,
            // nothing is written and the start takes the transaction)
            if !(node_rows.is_empty() && run_rows.is_empty()) {
                return Ok(0);
            }
            return self
                .write_sealed(guard, &new_nodes, &new_runs, &pending)
                .await;
        }
        let written = self
            .write_rows([new_nodes, node_rows], [new_runs, run_rows], &pending)
            .await;
        if written.is_err()
            && let Some(ids) = self.ids
        {
            ids.forget();
        }
        written.map(|()| 1)
    }

    /// MySQL/MariaDB and SQLite: the rows this pass made inserted, one multi-row statement per
    /// kind (with their reserved ids), then one `UPDATE … CASE id …` per kind for the rows that
    /// existed. Not an upsert: on InnoDB that takes next-key locks on the rows it finds, which
    /// deadlock with other transactions' inserts.
    async fn write_rows(
        &self,
        [new_nodes, node_rows]: [Vec<nodes::Model>; 2],
        [new_runs, run_rows]: [Vec<runs::Model>; 2],
        pending: &[Pending],
    ) -> Result<()> {
        let into = format!("xjob_workflow_run ({RUN_COLUMNS})");
        self.insert_rows(&into, &marks(14), &new_runs, |r| run_values(r).into())
            .await?;
        let into = format!("xjob_workflow_node_run ({NODE_COLUMNS})");
        self.insert_rows(&into, &marks(15), &new_nodes, |n| node_values(n).into())
            .await?;
        // pending run rows on their own ids (a stand-in's row takes the next of the insert's
        // consecutive ids), then their links
        let claim = fire_state::new_claim();
        let step = match self.ids {
            Some(ids) if !pending.is_empty() => ids.step(self.port).await?,
            _ => Some(1),
        };
        // (stand-ins are given only where a reservation's step is known)
        let step = step.ok_or(sea_orm::DbErr::RecordNotInserted)?;
        let sql = format!("INSERT INTO xxl_job_log ({PENDING_COLUMNS}) VALUES ");
        let mut links = Vec::with_capacity(pending.len());
        for chunk in pending.chunks(CASE_ROWS) {
            let mut args: Vec<Value> = Vec::with_capacity(6 * chunk.len());
            for p in chunk {
                let (param, sharding) = (p.param.as_deref(), p.sharding.as_deref());
                args.extend(pending_args(
                    p.group, p.job_id, p.now, param, sharding, claim,
                ));
            }
            let rows = vec![PENDING_ROW.as_str(); chunk.len()].join(", ");
            let first = self.port.insert(&format!("{sql}{rows}"), &args).await?;
            let mut st = self.st.lock();
            for (i, p) in chunk.iter().enumerate() {
                let id = first + i as i64 * step;
                st.log_ids.insert(p.id, id);
                links.push((id, p));
            }
        }
        self.insert_rows(LINKS, &marks(5), &links, |(id, p)| {
            let (node, run, shard) = (p.node_run_id, p.run_id, p.shard);
            vec![
                (*id).into(),
                node.into(),
                run.into(),
                shard.into(),
                0.into(),
            ]
        })
        .await?;
        // by the primary key on MySQL: with a long `IN` list the optimizer may scan the table,
        // and a scanning update locks every row it reads (deadlocks with the other lanes)
        let by_key = match self.backend() {
            DbBackend::MySql => " FORCE INDEX (PRIMARY)",
            _ => "",
        };
        for chunk in node_rows.chunks(CASE_ROWS) {
            let rows: Vec<(i64, Vec<Value>)> = chunk
                .iter()
                .map(|n| (n.id, set_values(&node_values(n), &NODE_SET_AT)))
                .collect();
            let table = format!("xjob_workflow_node_run{by_key}");
            let (sql, args) = update_by_case(&table, NODE_SET, &rows);
            self.port.execute(&sql, &args).await?;
        }
        for chunk in run_rows.chunks(CASE_ROWS) {
            let rows: Vec<(i64, Vec<Value>)> = chunk
                .iter()
                .map(|r| (r.id, set_values(&run_values(r), &RUN_SET_AT)))
                .collect();
            let table = format!("xjob_workflow_run{by_key}");
            let (sql, args) = update_by_case(&table, RUN_SET, &rows);
            self.port.execute(&sql, &args).await?;
        }
        Ok(())
    }

    /// MySQL/MariaDB: a sealed pass's new rows written by one script in one round trip
    /// ([`sealed_script`]), on a pooled connection of its own and outside the caller's future
    /// (a script that fails midway is rolled back on its connection before the connection
    /// goes back to the pool, even when the caller gave up waiting); answers how many rows it
    /// wrote, 0 when the guard did not hold or a deadlock ended it (nothing written either
    /// way: the start takes the transaction). The pending run rows' ids are
    /// the ones their insert gave them, consecutive ([`Ids::step`]), told to
    /// [`Pass::settle`].
    async fn write_sealed(
        &self,
        guard: &Guard,
        new_nodes: &[nodes::Model],
        new_runs: &[runs::Model],
        pending: &[Pending],
    ) -> Result<u64> {
        let (Some(db), Some(ids)) = (self.port.pool(), self.ids) else {
            return Ok(0);
        };
        let Some(step) = ids.step(self.port).await? else {
            return Ok(0);
        };
        let claim = fire_state::new_claim();
        let script = sealed_script(guard, new_nodes, new_runs, pending, claim, step);
        // (a batch of starts with large params is left to the transaction: a script is sent
        // as one packet, and text is twice its size as hex)
        let Some(script) = script.filter(|s| s.len() <= MAX_SCRIPT) else {
            return Ok(0);
        };
        let pool = db.get_mysql_connection_pool().clone();
        let ran = tokio::spawn(run_script(pool, script))
            .await
            .map_err(|_| crate::Error::Stopped("a workflow start's write"))?;
        let (held, first) = match ran {
            Ok(v) => v,
            Err(e) => {
                ids.forget();
                let e = sea_orm::RuntimeErr::SqlxError(std::sync::Arc::new(e));
                let e: crate::Error = sea_orm::DbErr::Exec(e).into();
                // a deadlock ended (and rolled back) the whole transaction: nothing was
                // written, and the start takes the transaction, which runs again after one
                return match crate::store::lost_race(&e) {
                    true => Ok(0),
                    false => Err(e),
                };
            }
        };
        if held == 0 {
            return Ok(0);
        }
        let mut st = self.st.lock();
        for (i, p) in pending.iter().enumerate() {
            st.log_ids.insert(p.id, first + i as i64 * step);
        }
        Ok((new_nodes.len() + new_runs.len() + 2 * pending.len()).max(1) as u64)
    }

    /// Inserts `items` `into` a table (`table (columns)`), [`CASE_ROWS`] rows a statement,
    /// each a `row` (`(?, …)`) bound to its `values`.
    async fn insert_rows<T>(
        &self,
        into: &str,
        row: &str,
        items: &[T],
        values: impl Fn(&T) -> Vec<Value>,
    ) -> Result<()> {
        for chunk in items.chunks(CASE_ROWS) {
            let args: Vec<Value> = chunk.iter().flat_map(&values).collect();
            let rows = vec![row; chunk.len()].join(", ");
            let sql = format!("INSERT INTO {into} VALUES {rows}");
            self.port.execute(&sql, &args).await?;
        }
        Ok(())
    }

    /// Holds `run` (its lock taken by this transaction), its node rows not read yet.
    fn hold(&self, run: &runs::Model, nodes: Option<Vec<nodes::Model>>) {
        if !self.keeps {
            return;
        }
        let mut st = self.st.lock();
        st.held.insert(
            run.id,
            Held {
                run: run.clone(),
                nodes: None,
            },
        );
        if let Some(rows) = nodes {
            st.keep_nodes(run.id, rows);
        }
    }

    /// Whether held run `run_id`'s node rows are kept, reading them if it is held.
    async fn nodes_kept(&self, run_id: i64) -> Result<bool> {
        match self.st.lock().held.get(&run_id) {
            None => return Ok(false),
            Some(h) if h.nodes.is_some() => return Ok(true),
            Some(_) => {}
        }
        let sql = node_rows_sql();
        let rows: Vec<nodes::Model> = self.direct()?.rows(sql, &[run_id.into()]).await?;
        self.st.lock().keep_nodes(run_id, rows);
        Ok(true)
    }
}

fn node_rows_sql() -> &'static str {
    static SQL: LazyLock<String> = LazyLock::new(|| {
        format!("SELECT {NODE_COLUMNS} FROM xjob_workflow_node_run WHERE run_id = ?")
    });
    &SQL
}

impl Tx for Pass<'_, '_> {
    async fn prepare(&self, run_ids: &[i64], log_ids: &[i64]) -> Result<()> {
        if !self.keeps {
            return Ok(());
        }
        let port = self.direct()?;
        // the runs' locks, in id order (as one at a time would take them)
        let mut ids: Vec<i64> = run_ids.to_vec();
        ids.sort_unstable();
        ids.dedup();
        let mut locked: Vec<runs::Model> = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(IN_CHUNK) {
            locked.extend(lock_runs(port, chunk).await?);
        }
        // every row's link closed under those locks; which were open
        let open = port.close_links(log_ids).await?;
        // the held runs' node rows
        let held: Vec<i64> = locked.iter().map(|r| r.id).collect();
        let mut rows: HashMap<i64, Vec<nodes::Model>> =
            held.iter().map(|id| (*id, Vec::new())).collect();
        for chunk in held.chunks(IN_CHUNK) {
            let (marks, args) = in_list(chunk);
            let sql = format!(
                "SELECT {NODE_COLUMNS} FROM xjob_workflow_node_run WHERE run_id IN ({marks})"
            );
            for n in port.rows::<nodes::Model>(&sql, &args).await? {
                if let Some(list) = rows.get_mut(&n.run_id) {
                    list.push(n);
                }
            }
        }
        let mut st = self.st.lock();
        for r in locked {
            let id = r.id;
            st.held.insert(
                id,
                Held {
                    run: r,
                    nodes: None,
                },
            );
            st.keep_nodes(id, rows.remove(&id).unwrap_or_default());
        }
        st.closed.extend(log_ids.iter().copied());
        st.open.extend(open);
        Ok(())
    }

    async fn workflow(&self, id: i32) -> Result<Option<wf::Model>> {
        if let Some(w) = self.st.lock().workflows.get(&id) {
            return Ok(w.clone());
        }
        let w = self.direct()?.workflow(id).await?;
        if self.keeps {
            self.st.lock().workflows.insert(id, w.clone());
        }
        Ok(w)
    }

    async fn definition(&self, workflow_id: i32, version: i32) -> Result<Option<String>> {
        self.direct()?.definition(workflow_id, version).await
    }

    async fn job(&self, id: i32) -> Result<Option<Job>> {
        self.direct()?.job(id).await
    }

    async fn group_addresses(&self, group: i32) -> Result<Option<Option<String>>> {
        self.direct()?.group_addresses(group).await
    }

    async fn lock_workflow(&self, id: i32) -> Result<()> {
        self.port().await?.lock_workflow(id).await
    }

    async fn count_top_runs(&self, workflow_id: i32, st: &'static str) -> Result<u64> {
        self.port().await?.count_top_runs(workflow_id, st).await
    }

    async fn oldest_queued(&self, workflow_id: i32) -> Result<Option<runs::Model>> {
        // no kept write makes or changes a queued run (those go to the port at once), so this
        // read needs none written; a workflow found with none queued is not asked again
        if self.st.lock().none_queued.contains(&workflow_id) {
            return Ok(None);
        }
        let run = self.direct()?.oldest_queued(workflow_id).await?;
        if run.is_none() && self.keeps {
            self.st.lock().none_queued.insert(workflow_id);
        }
        Ok(run)
    }

    async fn promote_run(&self, id: i64, now: i64) -> Result<bool> {
        self.port().await?.promote_run(id, now).await
    }

    async fn insert_run(&self, r: &runs::Model) -> Result<i64> {
        if r.status == status::QUEUED {
            self.st.lock().none_queued.remove(&r.workflow_id);
        }
        if let Some(ids) = self.ids
            && let Some(id) = ids.next(self.port, Kind::Run, self.want()).await?
        {
            self.hold(&runs::Model { id, ..r.clone() }, Some(Vec::new()));
            let mut st = self.st.lock();
            st.dirty_runs.insert(id);
            st.made_runs.insert(id);
            return Ok(id);
        }
        let id = self.port().await?.insert_run(r).await?;
        // a run just inserted is this transaction's, and has no node rows yet
        self.hold(&runs::Model { id, ..r.clone() }, Some(Vec::new()));
        Ok(id)
    }

    async fn run_context(&self, id: i64) -> Result<Option<(String, Option<i64>)>> {
        if let Some(h) = self.st.lock().held.get(&id) {
            return Ok(Some((h.run.context.clone(), h.run.parent_node_run)));
        }
        self.port().await?.run_context(id).await
    }

    async fn lock_run(&self, id: i64) -> Result<Option<runs::Model>> {
        if let Some(h) = self.st.lock().held.get(&id) {
            return Ok((h.run.status == status::RUNNING).then(|| h.run.clone()));
        }
        let run = self.port().await?.lock_run(id).await?;
        if let Some(r) = &run {
            self.hold(r, None);
        }
        Ok(run)
    }

    async fn end_run(
        &self,
        id: i64,
        st: &'static str,
        now: i64,
        message: Option<String>,
    ) -> Result<()> {
        {
            let mut s = self.st.lock();
            if let Some(h) = s.held.get_mut(&id) {
                if h.run.status == status::RUNNING {
                    h.run.status = st.into();
                    h.run.end_time = Some(now);
                    h.run.message = message;
                    s.dirty_runs.insert(id);
                }
                return Ok(());
            }
        }
        self.port().await?.end_run(id, st, now, message).await
    }

    async fn set_context(&self, id: i64, context: &str) -> Result<()> {
        {
            let mut s = self.st.lock();
            if let Some(h) = s.held.get_mut(&id) {
                h.run.context = context.into();
                s.dirty_runs.insert(id);
                return Ok(());
            }
        }
        self.port().await?.set_context(id, context).await
    }

    async fn node_rows(&self, run_id: i64) -> Result<Vec<nodes::Model>> {
        if self.nodes_kept(run_id).await? {
            let mut st = self.st.lock();
            return Ok(st.nodes_of(run_id).cloned().unwrap_or_default());
        }
        self.port().await?.node_rows(run_id).await
    }

    async fn node(&self, id: i64) -> Result<Option<nodes::Model>> {
        if let Some(n) = self.st.lock().node(id) {
            return Ok(Some(n.clone()));
        }
        self.port().await?.node(id).await
    }

    async fn insert_node(&self, n: &nodes::Model) -> Result<i64> {
        if let Some(ids) = self.ids
            && self.nodes_kept(n.run_id).await?
            && let Some(id) = ids.next(self.port, Kind::Node, self.want()).await?
        {
            let mut st = self.st.lock();
            st.node_run.insert(id, n.run_id);
            st.dirty_nodes.insert(id);
            st.made_nodes.insert(id);
            if let Some(rows) = st.nodes_of(n.run_id) {
                rows.push(nodes::Model { id, ..n.clone() });
            }
            return Ok(id);
        }
        let id = self.port().await?.insert_node(n).await?;
        let mut st = self.st.lock();
        if let Some(rows) = st.nodes_of(n.run_id) {
            rows.push(nodes::Model { id, ..n.clone() });
            st.node_run.insert(id, n.run_id);
        }
        Ok(id)
    }

    async fn update_node(&self, id: i64, u: &NodeUpdate) -> Result<()> {
        {
            let mut st = self.st.lock();
            if let Some(n) = st.node(id) {
                n.shards_done = u.shards_done;
                n.shards_failed = u.shards_failed;
                n.message = u.message.clone();
                if let Some((state, end)) = u.end {
                    n.state = state.into();
                    n.end_time = Some(end);
                }
                st.dirty_nodes.insert(id);
                return Ok(());
            }
        }
        self.port().await?.update_node(id, u).await
    }

    async fn set_child(&self, id: i64, child: i64, end: Option<(&'static str, i64)>) -> Result<()> {
        {
            let mut st = self.st.lock();
            if let Some(n) = st.node(id) {
                n.child_run = Some(child);
                if let Some((state, t)) = end {
                    n.state = state.into();
                    n.end_time = Some(t);
                }
                st.dirty_nodes.insert(id);
                return Ok(());
            }
        }
        self.port().await?.set_child(id, child, end).await
    }

    async fn end_node_if_running(&self, id: i64, state: &'static str, now: i64) -> Result<bool> {
        {
            let mut st = self.st.lock();
            if let Some(n) = st.node(id) {
                if n.state != status::RUNNING {
                    return Ok(false);
                }
                n.state = state.into();
                n.end_time = Some(now);
                st.dirty_nodes.insert(id);
                return Ok(true);
            }
        }
        self.port().await?.end_node_if_running(id, state, now).await
    }

    async fn insert_pending(&self, row: &PendingRow<'_>) -> Result<i64> {
        let kept = self.st.lock().held.contains_key(&row.run_id);
        let id = match self.ids {
            Some(ids) if kept && self.backend() == DbBackend::Postgres => {
                ids.next(self.port, Kind::Log, self.want()).await?
            }
            // MySQL/MariaDB: the row's id is answered by the multi-row insert that writes it
            // (consecutive ids where reservations are, `Ids::step`); a stand-in until then,
            // which the pass's changes get replaced (`Pass::settle`)
            Some(ids) if kept && ids.step(self.port).await?.is_some() => {
                let mut st = self.st.lock();
                st.stand_in -= 1;
                Some(st.stand_in)
            }
            _ => None,
        };
        if let Some(id) = id {
            self.st.lock().pending.push(Pending {
                id,
                group: row.job.job_group,
                job_id: row.job.id,
                now: row.now,
                param: row.param.map(str::to_string),
                sharding: row.sharding.map(str::to_string),
                node_run_id: row.node_run_id,
                run_id: row.run_id,
                shard: row.shard,
            });
            return Ok(id);
        }
        self.port().await?.insert_pending(row).await
    }

    async fn close_links(&self, log_ids: &[i64]) -> Result<HashSet<i64>> {
        let (mut open, rest) = {
            let st = self.st.lock();
            let open: HashSet<i64> = log_ids
                .iter()
                .filter(|id| st.open.contains(id))
                .copied()
                .collect();
            let rest: Vec<i64> = log_ids
                .iter()
                .filter(|id| !st.closed.contains(id))
                .copied()
                .collect();
            (open, rest)
        };
        if !rest.is_empty() {
            open.extend(self.port().await?.close_links(&rest).await?);
        }
        Ok(open)
    }
}

/// Takes the row locks of the running runs among `ids` (sorted) in id order, bumping each
/// one's `seq`; answers them.
async fn lock_runs(port: &Port<'_>, ids: &[i64]) -> Result<Vec<runs::Model>> {
    let (marks, args) = in_list(ids);
    let running = status::RUNNING;
    match port.backend() {
        DbBackend::Postgres => {
            let cols: Vec<String> = RUN_COLUMNS
                .split(',')
                .map(|c| format!("w.{}", c.trim()))
                .collect();
            let sql = format!(
                "WITH l AS (SELECT id FROM xjob_workflow_run WHERE id IN ({marks}) \
                 AND status = '{running}' ORDER BY id FOR UPDATE) \
                 UPDATE xjob_workflow_run AS w SET seq = w.seq + 1 FROM l WHERE w.id = l.id \
                 RETURNING {}",
                cols.join(", ")
            );
            port.rows(&sql, &args).await
        }
        DbBackend::MySql => {
            // by the primary key: through `(status, id)` InnoDB would lock that index's gaps
            // too, where other transactions insert their new runs (measured: deadlocks with
            // starts, and seconds of lock waits in `wfbench`)
            let sql = format!(
                "SELECT {RUN_COLUMNS} FROM xjob_workflow_run FORCE INDEX (PRIMARY) \
                 WHERE id IN ({marks}) AND status = '{running}' ORDER BY id FOR UPDATE"
            );
            let mut rows: Vec<runs::Model> = port.rows(&sql, &args).await?;
            if rows.is_empty() {
                return Ok(rows);
            }
            let locked: Vec<i64> = rows.iter().map(|r| r.id).collect();
            let (marks, args) = in_list(&locked);
            let sql = format!(
                "UPDATE xjob_workflow_run FORCE INDEX (PRIMARY) SET seq = seq + 1 \
                 WHERE id IN ({marks})"
            );
            port.execute(&sql, &args).await?;
            for r in &mut rows {
                r.seq += 1;
            }
            Ok(rows)
        }
        _ => {
            // a write transaction on SQLite holds the database's write lock already
            let sql = format!(
                "UPDATE xjob_workflow_run SET seq = seq + 1 WHERE id IN ({marks}) \
                 AND status = '{running}' RETURNING {RUN_COLUMNS}"
            );
            port.rows(&sql, &args).await
        }
    }
}

/// `(?, ?, …)` of `n` values.
fn marks(n: usize) -> String {
    format!("({})", vec!["?"; n].join(", "))
}

/// Node-row columns a changed row is written over (every one the rules change).
const NODE_SET: &[&str] = &[
    "state",
    "decision",
    "shards_done",
    "shards_failed",
    "child_run",
    "end_time",
    "message",
    "cleared",
];

/// Run columns a changed run is written over.
const RUN_SET: &[&str] = &["status", "end_time", "message", "context"];

/// Rows one `UPDATE … CASE` writes at most.
const CASE_ROWS: usize = 200;

/// `UPDATE table SET c = CASE id WHEN ? THEN ? … END, … WHERE id IN (…)` of `rows` (id, the
/// values of `columns`), with its arguments.
fn update_by_case(
    table: &str,
    columns: &[&str],
    rows: &[(i64, Vec<Value>)],
) -> (String, Vec<Value>) {
    let mut args: Vec<Value> = Vec::with_capacity(rows.len() * (2 * columns.len() + 1));
    let whens = vec!["WHEN ? THEN ?"; rows.len()].join(" ");
    let mut set = Vec::with_capacity(columns.len());
    for (i, c) in columns.iter().enumerate() {
        set.push(format!("{c} = CASE id {whens} END"));
        for (id, values) in rows {
            args.push((*id).into());
            args.push(values[i].clone());
        }
    }
    args.extend(rows.iter().map(|(id, _)| Value::from(*id)));
    let marks = vec!["?"; rows.len()].join(", ");
    let sql = format!(
        "UPDATE {table} SET {} WHERE id IN ({marks})",
        set.join(", ")
    );
    (sql, args)
}

/// Where each column of `set` is among `columns` (`usize::MAX` where it is not one).
fn positions(columns: &str, set: &[&str]) -> Vec<usize> {
    let names: Vec<&str> = columns.split(',').map(str::trim).collect();
    set.iter()
        .map(|c| names.iter().position(|n| n == c).unwrap_or(usize::MAX))
        .collect()
}

/// Where [`NODE_SET`]'s and [`RUN_SET`]'s columns are in a row's values (found once).
static NODE_SET_AT: LazyLock<Vec<usize>> = LazyLock::new(|| positions(NODE_COLUMNS, NODE_SET));
static RUN_SET_AT: LazyLock<Vec<usize>> = LazyLock::new(|| positions(RUN_COLUMNS, RUN_SET));

/// Of a row's `values` (one per column, in order), those at `at` (a set's [`positions`]).
fn set_values(values: &[Value], at: &[usize]) -> Vec<Value> {
    at.iter()
        .map(|&i| values.get(i).cloned().unwrap_or(Value::Bool(None)))
        .collect()
}

/// What a sealed pass was answered from, checked by the statement that writes its rows: each
/// workflow still at its version and group with `PARALLEL` concurrency, each job still at its
/// `update_time` (its definition's version, as the scan reads it).
#[derive(Debug, Default)]
pub(crate) struct Guard {
    /// (id, version, job group).
    pub(crate) workflows: Vec<(i32, i32, i32)>,
    /// (id, update time).
    pub(crate) jobs: Vec<(i32, Option<chrono::NaiveDateTime>)>,
}

impl Guard {
    fn json(&self) -> Value {
        let w = self.workflows.iter().map(|(id, v, g)| {
            let mut m = Map::new();
            m.insert("w".into(), (*id).into());
            m.insert("v".into(), (*v).into());
            m.insert("g".into(), (*g).into());
            Json::Object(m)
        });
        let j = self.jobs.iter().map(|(id, t)| {
            let mut m = Map::new();
            m.insert("j".into(), (*id).into());
            let t = t.map(|t| t.format("%Y-%m-%d %H:%M:%S%.6f").to_string());
            m.insert("t".into(), t.into());
            Json::Object(m)
        });
        json_rows(w.chain(j))
    }
}

fn json_rows(rows: impl Iterator<Item = Json>) -> Value {
    Json::Array(rows.collect()).to_string().into()
}

/// The longest [`sealed_script`] sent (bytes), well under the servers' default
/// `max_allowed_packet` (16 MiB on MariaDB, 64 MiB on MySQL 8).
const MAX_SCRIPT: usize = 4 << 20;

/// The session variables of a [`sealed_script`]: whether its guard held, and the first id its
/// pending run rows took.
const SEALED_OK: &str = "@xjob_sealed_ok";
const SEALED_LOG: &str = "@xjob_sealed_log";

/// MySQL/MariaDB: a sealed pass's new rows (runs, node rows, pending run rows claimed with
/// `claim` and their links) as one script sent in one round trip: a transaction that reads
/// whether `guard` holds into a session variable, inserts every row only if it does (each row
/// a `SELECT … FROM DUAL WHERE` it), keeps the first id the pending rows' insert took (the
/// others follow `step` apart: a multi-row insert's ids are consecutive where [`Ids::step`]
/// is known) for their links, commits, and answers (held, first id) as its one row. The
/// values are inlined ([`mysql_literal`]); `None` for a value of a kind it does not inline.
fn sealed_script(
    guard: &Guard,
    new_nodes: &[nodes::Model],
    new_runs: &[runs::Model],
    pending: &[Pending],
    claim: i64,
    step: i64,
) -> Option<String> {
    // one `SELECT … FROM DUAL WHERE ok` per row, given as a `(?, …)` template and its values
    fn rows(template: &str, all: impl Iterator<Item = Vec<Value>>) -> Option<String> {
        let inner = template.strip_prefix('(')?.strip_suffix(')')?;
        let selects = all
            .map(|v| {
                Some(format!(
                    "SELECT {} FROM DUAL WHERE {SEALED_OK}",
                    inline(inner, &v)?
                ))
            })
            .collect::<Option<Vec<_>>>()?;
        Some(selects.join(" UNION ALL "))
    }
    let mut checks = vec!["TRUE".to_string()];
    for (id, v, g) in &guard.workflows {
        checks.push(format!(
            "EXISTS (SELECT 1 FROM xjob_workflow WHERE id = {id} AND version = {v} \
             AND job_group = {g} AND concurrency = 'PARALLEL')"
        ));
    }
    for (id, t) in &guard.jobs {
        let t = mysql_literal(&Value::from(*t))?;
        checks.push(format!(
            "EXISTS (SELECT 1 FROM xxl_job_info WHERE id = {id} AND update_time <=> {t})"
        ));
    }
    let mut script = format!(
        "START TRANSACTION; SET {SEALED_OK} = {}; ",
        checks.join(" AND ")
    );
    if !new_runs.is_empty() {
        let all = new_runs.iter().map(|r| run_values(r).to_vec());
        let rows = rows(&marks(14), all)?;
        script += &format!("INSERT INTO xjob_workflow_run ({RUN_COLUMNS}) {rows}; ");
    }
    if !new_nodes.is_empty() {
        let all = new_nodes.iter().map(|n| node_values(n).to_vec());
        let rows = rows(&marks(15), all)?;
        script += &format!("INSERT INTO xjob_workflow_node_run ({NODE_COLUMNS}) {rows}; ");
    }
    if !pending.is_empty() {
        let all = pending.iter().map(|p| {
            let (param, sharding) = (p.param.as_deref(), p.sharding.as_deref());
            pending_args(p.group, p.job_id, p.now, param, sharding, claim).to_vec()
        });
        let rows = rows(&PENDING_ROW, all)?;
        script += &format!(
            "INSERT INTO xxl_job_log ({PENDING_COLUMNS}) {rows}; \
             SET {SEALED_LOG} = LAST_INSERT_ID(); "
        );
        let links: Vec<String> = pending
            .iter()
            .enumerate()
            .map(|(i, p)| {
                format!(
                    "SELECT {SEALED_LOG} + {}, {}, {}, {}, 0 FROM DUAL WHERE {SEALED_OK}",
                    i as i64 * step,
                    p.node_run_id,
                    p.run_id,
                    p.shard
                )
            })
            .collect();
        script += &format!("INSERT INTO {LINKS} {}; ", links.join(" UNION ALL "));
    }
    script += &format!(
        "COMMIT; SELECT CAST({SEALED_OK} AS SIGNED), \
         CAST(COALESCE({SEALED_LOG}, 0) AS SIGNED)"
    );
    Some(script)
}

/// Runs a [`sealed_script`] on a connection of `pool`; answers its last row's two values. A
/// script that fails midway left its transaction open on that connection: it is rolled back
/// there before the connection goes back to the pool (closed instead, if even that fails).
async fn run_script(
    pool: sea_orm::sqlx::MySqlPool,
    script: String,
) -> std::result::Result<(i64, i64), sea_orm::sqlx::Error> {
    use sea_orm::sqlx::{self, Row as _};
    let mut conn = pool.acquire().await?;
    let out = sqlx::raw_sql(sqlx::AssertSqlSafe(script))
        .fetch_all(&mut *conn)
        .await;
    if out.is_err() && sqlx::raw_sql("ROLLBACK").execute(&mut *conn).await.is_err() {
        conn.close_on_drop();
    }
    let rows = out?;
    let row = rows.last().ok_or(sqlx::Error::RowNotFound)?;
    Ok((row.try_get(0)?, row.try_get(1)?))
}

/// `template` with each `?` replaced by the next of `values` as a literal ([`mysql_literal`];
/// the statements' texts never put `?` in a literal); `None` when the counts differ or a value
/// is not inlined.
fn inline(template: &str, values: &[Value]) -> Option<String> {
    let mut out = String::with_capacity(template.len() + 16 * values.len());
    let mut next = values.iter();
    for c in template.chars() {
        match c {
            '?' => out.push_str(&mysql_literal(next.next()?)?),
            c => out.push(c),
        }
    }
    next.next().is_none().then_some(out)
}

/// `v` as a MySQL/MariaDB literal: text as a hex literal of the utf8mb4 character set (so no
/// byte of it is read as SQL, whatever the server's `sql_mode`), numbers in decimal, a time
/// quoted (digits and separators only), no value as `NULL`; `None` for a kind a pass does not
/// write.
fn mysql_literal(v: &Value) -> Option<String> {
    use std::fmt::Write as _;
    let text = match v {
        Value::Bool(b) => b.map(|b| u8::from(b).to_string()),
        Value::TinyInt(x) => x.map(|x| x.to_string()),
        Value::SmallInt(x) => x.map(|x| x.to_string()),
        Value::Int(x) => x.map(|x| x.to_string()),
        Value::BigInt(x) => x.map(|x| x.to_string()),
        Value::String(s) => s.as_ref().map(|s| {
            let mut hex = String::with_capacity(11 + 2 * s.len());
            hex.push_str("_utf8mb4 X'");
            for b in s.bytes() {
                let _ = write!(hex, "{b:02X}");
            }
            hex.push('\'');
            hex
        }),
        Value::ChronoDateTime(t) => t.map(|t| format!("'{}'", t.format("%Y-%m-%d %H:%M:%S%.6f"))),
        _ => return None,
    };
    Some(text.unwrap_or_else(|| "NULL".into()))
}

/// A node row's columns as a pass's PostgreSQL statement binds them ([`NODE_COLUMNS`]).
const NODE_COLS: [Col; 15] = [
    col("id", Elem::BigInt),
    col("run_id", Elem::BigInt),
    col("node_key", Elem::Text),
    col("attempt", Elem::Int),
    col("max_attempts", Elem::Int),
    col("state", Elem::Text),
    nullable("decision", Elem::SmallInt),
    col("shards_total", Elem::Int),
    col("shards_done", Elem::Int),
    col("shards_failed", Elem::Int),
    nullable("child_run", Elem::BigInt),
    col("start_time", Elem::BigInt),
    nullable("end_time", Elem::BigInt),
    nullable("message", Elem::Text),
    col("cleared", Elem::SmallInt),
];

/// A run's columns as a pass's PostgreSQL statement binds them ([`RUN_COLUMNS`]).
const RUN_COLS: [Col; 14] = [
    col("id", Elem::BigInt),
    col("workflow_id", Elem::Int),
    col("version", Elem::Int),
    col("job_group", Elem::Int),
    col("status", Elem::Text),
    col("trigger_type", Elem::Text),
    nullable("params", Elem::Text),
    col("context", Elem::Text),
    nullable("parent_node_run", Elem::BigInt),
    col("depth", Elem::SmallInt),
    col("seq", Elem::BigInt),
    col("start_time", Elem::BigInt),
    nullable("end_time", Elem::BigInt),
    nullable("message", Elem::Text),
];

/// A pending run row with its link: (id, group, job, trigger time, parameter, sharding, node
/// row, run, shard).
const PENDING_COLS: [Col; 9] = [
    col("id", Elem::BigInt),
    col("g", Elem::Int),
    col("j", Elem::Int),
    col("tt", Elem::Time),
    nullable("p", Elem::Text),
    nullable("s", Elem::Text),
    col("n", Elem::BigInt),
    col("r", Elem::BigInt),
    col("k", Elem::Int),
];

/// A changed row's columns: its id, then those of a set, and where each is in the row's values.
struct SetCols {
    cols: Vec<Col>,
    at: Vec<usize>,
}

impl SetCols {
    /// The id (column 0) and the set's columns at `set_at` ([`NODE_SET_AT`], [`RUN_SET_AT`]:
    /// a row's values follow its columns' order, as `all` does).
    fn of(all: &[Col], set_at: &[usize]) -> SetCols {
        let at: Vec<usize> = std::iter::once(0).chain(set_at.iter().copied()).collect();
        SetCols {
            cols: at.iter().map(|&i| all[i]).collect(),
            at,
        }
    }
}

static PG_NODE_SET: LazyLock<SetCols> = LazyLock::new(|| SetCols::of(&NODE_COLS, &NODE_SET_AT));
static PG_RUN_SET: LazyLock<SetCols> = LazyLock::new(|| SetCols::of(&RUN_COLS, &RUN_SET_AT));

/// `rows` as the arrays of `cols`, each row's values given by `values` in the columns' order.
fn columns<T, I: IntoIterator<Item = Value>>(
    cols: &[Col],
    rows: &[T],
    values: impl Fn(&T) -> I,
) -> Result<Vec<Value>> {
    let mut c = Columns::new(cols);
    for r in rows {
        c.row();
        for v in values(r) {
            c.push(v)?;
        }
    }
    Ok(c.args())
}

/// Changed `rows` as the arrays of a set's columns (taken from each row's values, no copy),
/// then their count (the update's `LIMIT`).
fn changed<T, const N: usize>(
    set: &SetCols,
    rows: &[T],
    values: impl Fn(&T) -> [Value; N],
) -> Result<Vec<Value>> {
    let mut args = columns(&set.cols, rows, |r| {
        let mut all = values(r).map(Some);
        set.at
            .iter()
            .filter_map(|&i| all.get_mut(i)?.take())
            .collect::<Vec<_>>()
    })?;
    args.push(Value::from(rows.len() as i64));
    Ok(args)
}

/// A model as a JSON row: its fields are named as their columns.
fn model_json(m: &impl serde::Serialize) -> Json {
    serde_json::to_value(m).unwrap_or(Json::Null)
}

/// A pending row as a JSON row keyed by [`PENDING_COLS`]' names, of [`pending_values`].
fn pending_json(p: &Pending) -> Json {
    let json = |v: Value| match v {
        Value::BigInt(x) => x.into(),
        Value::Int(x) => x.into(),
        Value::String(x) => x.into(),
        Value::ChronoDateTime(x) => x
            .map(|t| t.format("%Y-%m-%d %H:%M:%S%.3f").to_string())
            .into(),
        _ => Json::Null,
    };
    let names = PENDING_COLS.iter().map(|c| c.name.to_string());
    Json::Object(
        names
            .zip(pending_values(p).into_iter().map(json))
            .collect::<Map<_, _>>(),
    )
}

/// A pending row's values of [`PENDING_COLS`].
fn pending_values(p: &Pending) -> Vec<Value> {
    vec![
        p.id.into(),
        p.group.into(),
        p.job_id.into(),
        crate::clock::ms_to_naive(p.now).into(),
        p.param.clone().into(),
        p.sharding.clone().into(),
        p.node_run_id.into(),
        p.run_id.into(),
        p.shard.into(),
    ]
}

/// One PostgreSQL statement writing every kind a pass keeps, each kind's rows one array per
/// column ([`pg_columns`]): node rows and runs the pass made (inserted) and those it changed
/// (updated: the id and the set's columns, then the rows' count as a `LIMIT` that makes the
/// planner look them up by id), pending run rows with their links — all of them only if the
/// [`Guard`] in its first parameter (JSON rows) holds (an empty one always does).
///
/// Not an upsert: `INSERT … ON CONFLICT DO UPDATE` inserts speculatively (a confirmation record
/// in the WAL for every new row) and locks every row it finds before updating it (a lock record
/// for every changed row); measured on 2,000 runs × 5 nodes, 12,000 confirmations and about
/// 20,000 lock records of 350,000.
static PG_FLUSH: LazyLock<String> = LazyLock::new(|| flush_sql(true, false));

/// [`PG_FLUSH`] without the updates, for a pass that only made rows (a start): no `LIMIT`
/// parameter, so the server's plan cache settles on one generic plan. With the updates' limits
/// among its parameters, a start (limits 0) was planned again in a fifth of its calls, each
/// planning as long as its execution (0.36 ms; about 7 % of the server's CPU with one caller).
static PG_FLUSH_NEW: LazyLock<String> = LazyLock::new(|| flush_sql(false, false));

/// [`PG_FLUSH_NEW`] with its rows as JSON, for a start of at most [`JSON_ROWS`] rows (one
/// caller's start is 7). Measured with one caller on 2,000 runs × 5 nodes: the start's
/// statement took 0.144 ms with its 44 arrays against 0.132 as JSON, and xjob spent 47–50 µs per
/// node run against 44–46; a pass's statement (about 100 rows) took 12 % less as arrays.
static PG_FLUSH_NEW_JSON: LazyLock<String> = LazyLock::new(|| flush_sql(false, true));

/// The most rows a start writes as JSON rather than as arrays.
const JSON_ROWS: usize = 16;

/// The text of [`PG_FLUSH`] (`updates`) or of [`PG_FLUSH_NEW`] (its rows as JSON: `json`, only
/// without updates).
fn flush_sql(updates: bool, json: bool) -> String {
    const OK: &str = "(SELECT ok FROM gd)";
    debug_assert!(!(updates && json));
    let rows = |cols: &[Col]| match json {
        true => pg_columns::json_select(cols, "u", "?"),
        false => pg_columns::select(cols, "u", |_| "?".to_string()),
    };
    let insert = |table: &str, columns: &str, cols: &[Col]| {
        format!(
            "INSERT INTO {table} ({columns}) SELECT {columns} FROM ({}) AS v WHERE {OK} \
             RETURNING 1",
            rows(cols)
        )
    };
    let update = |table: &str, set: &SetCols| {
        let assigned: Vec<String> = set.cols[1..]
            .iter()
            .map(|c| format!("{} = v.{}", c.name, c.name))
            .collect();
        format!(
            "UPDATE {table} AS t SET {} FROM ({} LIMIT ?) AS v WHERE t.id = v.id AND {OK} \
             RETURNING 1",
            assigned.join(", "),
            rows(&set.cols)
        )
    };
    let (node, run) = ("xjob_workflow_node_run", "xjob_workflow_run");
    let (nodes, runs) = if updates {
        (
            format!(
                "n AS ({}), nu AS ({}), ",
                insert(node, NODE_COLUMNS, &NODE_COLS),
                update(node, &PG_NODE_SET)
            ),
            format!(
                "r AS ({}), ru AS ({}), ",
                insert(run, RUN_COLUMNS, &RUN_COLS),
                update(run, &PG_RUN_SET)
            ),
        )
    } else {
        (
            format!("n AS ({}), ", insert(node, NODE_COLUMNS, &NODE_COLS)),
            format!("r AS ({}), ", insert(run, RUN_COLUMNS, &RUN_COLS)),
        )
    };
    let counted = if updates {
        "(SELECT count(*) FROM n) + (SELECT count(*) FROM nu) + (SELECT count(*) FROM r) \
         + (SELECT count(*) FROM ru)"
    } else {
        "(SELECT count(*) FROM n) + (SELECT count(*) FROM r)"
    };
    format!(
        "WITH gd AS (SELECT NOT EXISTS (SELECT 1 FROM json_to_recordset(?::json) AS c(w int, \
         v int, g int, j int, t timestamp) WHERE NOT CASE WHEN c.w IS NOT NULL THEN EXISTS \
         (SELECT 1 FROM xjob_workflow w WHERE w.id = c.w AND w.version = c.v \
         AND w.job_group = c.g AND w.concurrency = 'PARALLEL') ELSE EXISTS (SELECT 1 \
         FROM xxl_job_info j WHERE j.id = c.j AND j.update_time IS NOT DISTINCT FROM c.t) \
         END) AS ok), {nodes}{runs}\
         p AS (SELECT * FROM ({}) AS v WHERE {OK}), \
         l AS (INSERT INTO xxl_job_log (id, job_group, job_id, trigger_time, trigger_code, \
         handle_code, executor_param, executor_sharding_param, executor_fail_retry_count, \
         alarm_status, fire_time, fire_state, trigger_type, chain_depth) \
         SELECT id, g, j, tt, 0, 0, p, s, 0, {}, NULL, ?, '{}', 0 FROM p RETURNING 1), \
         k AS (INSERT INTO xjob_workflow_node_log (log_id, node_run_id, run_id, shard, done) \
         SELECT id, n, r, k, 0 FROM p RETURNING 1) \
         SELECT {counted} + (SELECT count(*) FROM l) + (SELECT count(*) FROM k)",
        rows(&PENDING_COLS),
        AlarmStatus::Unchecked.code(),
        TriggerType::Workflow.as_str()
    )
}

#[cfg(test)]
mod tests {
    use sea_orm::TransactionTrait;

    use super::*;

    /// Every column a pass's `UPDATE … CASE` sets is one of its table's columns (its value is
    /// taken from the row's by name).
    #[test]
    fn set_columns_are_columns() {
        for (columns, set, at) in [
            (NODE_COLUMNS, NODE_SET, &*NODE_SET_AT),
            (RUN_COLUMNS, RUN_SET, &*RUN_SET_AT),
        ] {
            let names: Vec<&str> = columns.split(',').map(str::trim).collect();
            for (c, &i) in set.iter().zip(at) {
                assert!(names.contains(c), "{c} in {columns}");
                assert_eq!(names.get(i), Some(c), "{c} at {i} in {columns}");
            }
        }
    }

    /// The arrays a PostgreSQL pass binds are the columns a row's values list, in their order.
    #[test]
    fn bound_columns_are_the_row_columns() {
        for (columns, cols) in [(NODE_COLUMNS, &NODE_COLS[..]), (RUN_COLUMNS, &RUN_COLS[..])] {
            let names: Vec<&str> = columns.split(',').map(str::trim).collect();
            let bound: Vec<&str> = cols.iter().map(|c| c.name).collect();
            assert_eq!(names, bound);
        }
    }

    /// A start's write (only new rows) has no `LIMIT` among its parameters, so the server's
    /// plan cache keeps one generic plan for it; each statement takes as many parameters as
    /// `write_kept` gives it.
    #[test]
    fn a_start_is_written_without_limit_parameters() {
        use pg_columns::params;
        let (start, pass) = (flush_sql(false, false), flush_sql(true, false));
        assert!(!start.contains("LIMIT"), "{start}");
        let small = flush_sql(false, true);
        assert!(
            !small.contains("LIMIT") && !small.contains("unnest"),
            "{small}"
        );
        assert_eq!(small.matches('?').count(), 5, "{small}");
        // the guard, the new node rows, runs and pending rows, the claim
        let new = 1 + params(&NODE_COLS) + params(&RUN_COLS) + params(&PENDING_COLS) + 1;
        assert_eq!(start.matches('?').count(), new, "{start}");
        assert_eq!(pass.matches("LIMIT ?").count(), 2, "{pass}");
        // and the changed node rows and runs, each with its count
        let changed = params(&PG_NODE_SET.cols) + 1 + params(&PG_RUN_SET.cols) + 1;
        assert_eq!(pass.matches('?').count(), new + changed, "{pass}");
        // a changed row is written over its set's columns, found by id
        assert_eq!(PG_NODE_SET.cols.len(), NODE_SET.len() + 1);
        assert_eq!(PG_RUN_SET.cols.len(), RUN_SET.len() + 1);
    }

    /// MySQL/MariaDB: a sealed script that fails midway (here its second insert repeats the
    /// first's id) answers the error and leaves nothing: its first insert is rolled back and no
    /// transaction stays open on the pool's connections; the next script on the same pool
    /// commits and answers its row.
    #[tokio::test]
    async fn a_sealed_script_that_fails_midway_leaves_nothing_open() {
        for db in crate::store::tests::every_backend().await {
            if db.get_database_backend() != DbBackend::MySql {
                continue;
            }
            let pool = db.get_mysql_connection_pool().clone();
            let run = |id: i64| {
                format!(
                    "INSERT INTO xjob_workflow_run (id, workflow_id, version, job_group, status, \
                     trigger_type, context, start_time) VALUES ({id}, 0, 0, 0, 'RUNNING', 'API', \
                     '{{}}', 0)"
                )
            };
            let script = |inserts: String| {
                format!(
                    "START TRANSACTION; SET {SEALED_OK} = TRUE; {inserts}; COMMIT; \
                     SELECT CAST({SEALED_OK} AS SIGNED), CAST(5 AS SIGNED)"
                )
            };
            let failed = run_script(pool.clone(), script(format!("{}; {}", run(77), run(77))))
                .await
                .unwrap_err();
            assert!(
                matches!(failed, sea_orm::sqlx::Error::Database(_)),
                "{failed}"
            );
            let port = Port::db(&db);
            let count = async |sql: &str| -> i64 { port.row(sql, &[]).await.unwrap().unwrap() };
            // every pooled connection in turn: none holds a transaction
            for _ in 0..4 {
                let open = count("SELECT COUNT(*) FROM information_schema.innodb_trx").await;
                assert_eq!(open, 0, "a transaction left open");
            }
            assert_eq!(
                count("SELECT COUNT(*) FROM xjob_workflow_run WHERE id = 77").await,
                0
            );
            let ok = run_script(pool, script(run(78))).await.unwrap();
            assert_eq!(ok, (1, 5));
            assert_eq!(
                count("SELECT COUNT(*) FROM xjob_workflow_run WHERE id = 78").await,
                1
            );
            db.close().await.unwrap();
        }
    }

    /// On a database server ids are reserved ahead (PostgreSQL: the sequences; MySQL/MariaDB:
    /// the auto-increment counters, by an insert undone at once): consecutive, taken once,
    /// and never handed out again, neither by a later reservation nor to a row inserted
    /// without an id; a reserved id inserts.
    #[tokio::test]
    async fn reserved_ids_are_never_handed_out_again() {
        for db in crate::store::tests::every_backend().await {
            let b = db.get_database_backend();
            if b == DbBackend::Sqlite {
                continue;
            }
            for kind in [Kind::Run, Kind::Node, Kind::Log] {
                let ids = Ids::default();
                let txn = db.begin().await.unwrap();
                let port = Port::tx(&txn);
                let mut taken = Vec::new();
                for _ in 0..3 {
                    let id = ids.next(&port, kind, 0).await.unwrap();
                    taken.push(id.unwrap_or_else(|| panic!("{b:?} reserves ids")));
                }
                assert_eq!(taken, [taken[0], taken[0] + 1, taken[0] + 2], "{b:?}");
                let other = Ids::default();
                let theirs = other.next(&port, kind, 0).await.unwrap().unwrap();
                assert!(
                    theirs >= taken[0] + RESERVE,
                    "{b:?}: {theirs} after {taken:?}"
                );
                txn.commit().await.unwrap();
                // one placeholder row, committed: an id of its own
                let (one, args) = kind.placeholders(1);
                let auto = Port::db(&db).insert(&one, &args).await.unwrap();
                assert!(auto >= theirs + RESERVE, "{b:?}: {auto} after {theirs}");
                let reserved = ids.next(&Port::db(&db), kind, 0).await.unwrap().unwrap();
                assert_eq!(reserved, taken[0] + 3, "{b:?}");
                if let Kind::Log = kind {
                    let explicit = "INSERT INTO xxl_job_log (id, job_group, job_id, \
                                    trigger_code, handle_code) VALUES (?, 0, 0, 0, 0)";
                    let port = Port::db(&db);
                    let n = port.execute(explicit, &[reserved.into()]).await.unwrap();
                    assert_eq!(n, 1, "{b:?}");
                }
            }
            db.close().await.unwrap();
        }
    }
}
