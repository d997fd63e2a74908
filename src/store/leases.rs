//! `xjob_node` and `xjob_lease`: the nodes of a cluster and which node schedules which bucket
//! of jobs (PostgreSQL and MySQL/MariaDB; a SQLite file serves one node and never reads them).
//!
//! A bucket's row names its holder and epoch; how long the holder's leases last is in the
//! holder's own `xjob_node` row (`lease_until_ms`), so a node renews every lease it holds with
//! one update of that row ([`renew`]), and a node whose lease lapsed holds nothing until it
//! rejoins (its buckets free, or already another node's). A bucket is held by `owner` exactly
//! while the owner's lease is valid ([`holder`]); no other node takes it before then.
//!
//! Every time here is epoch milliseconds on the database's clock ([`db_now_ms`], computed in
//! the statement): a lease's expiry is never compared with a node's clock. Each statement that
//! depends on holding a lease is conditional on it (owner, epoch, the owner's lease valid), so
//! a node that lost a bucket changes nothing of it.
//!
//! A node's row also carries what its scans and dispatches need to hold, so that the steady
//! state writes no bucket row: a scan fences on the node's row ([`fence`]) and the dispatch
//! mark is the node's ([`mark_dispatched`]). Every statement taking a bucket from its holder
//! therefore locks the holder's row first ([`lock_node`], [`acquire`]) and folds the holder's
//! mark into the bucket's row ([`FOLD_MARK`], and [`leave`] for a forgotten row). The same
//! statements serve PostgreSQL and MySQL/MariaDB; where they differ it is in syntax
//! ([`share_lock`]) and in what a plain read sees inside a transaction ([`held_of`]).
//!
//! Nodes that keep these rules differently must never share a database: a mark one writes
//! where the other does not read it lets a fire go out twice. Each node's row says which rules
//! it follows ([`LEASE_RULES`]); a node joins only while no other live node follows others
//! ([`renew`]), and a live node that sees one arrive takes and hands back no bucket while it
//! is there ([`Nodes::other_rules`]).

use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, Statement, TransactionTrait, Value};

use crate::error::Result;

/// The rules this build keeps leases, dispatch marks and fences by, as its `xjob_node` row
/// says (`lease_rules`; 0 in a row of a build before the column: per-bucket leases before
/// 2026-12-02, per-bucket marks on MySQL/MariaDB before 2026-12-03's evening). Raised with any
/// change that nodes of the old rules could not follow.
/// - 1 (2026-12-03): one lease per node row; dispatch marks and fences on the node's row,
///   folded into a bucket's row by whatever takes the bucket; the same on PostgreSQL and
///   MySQL/MariaDB.
pub(crate) const LEASE_RULES: i32 = 1;

/// Buckets jobs fall into (the migration creates one lease row each). Never changes.
pub(crate) const BUCKETS: i32 = 1024;

/// Multiplier of the bucket hash (Knuth's multiplicative hash: consecutive job ids land far
/// apart, so the jobs of any id range spread over every bucket, and over every node).
const HASH: i64 = 2_654_435_761;

/// The bucket of a job: the top 10 bits of the low 32 bits of `id × HASH`. The same in SQL:
/// [`bucket_sql`].
pub(crate) fn bucket_of(job_id: i32) -> i32 {
    (((job_id as i64).wrapping_mul(HASH) & 0xFFFF_FFFF) >> 22) as i32
}

/// [`bucket_of`] of the integer column `column`, as an SQL expression of `backend`.
pub(crate) fn bucket_sql(backend: DbBackend, column: &str) -> String {
    let div = match backend {
        DbBackend::MySql => "DIV",
        _ => "/",
    };
    format!("((({column}) * {HASH}) % 4294967296) {div} 4194304")
}

/// The database's clock in epoch milliseconds, as an SQL expression.
pub(crate) fn db_now_ms(backend: DbBackend) -> &'static str {
    match backend {
        DbBackend::Postgres => "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)",
        DbBackend::MySql => "CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)",
        _ => "CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)",
    }
}

/// A lease this node holds: its bucket and epoch (the epoch grows by one each time the bucket
/// changes hands, so a statement conditional on it fails once the bucket moved on).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Lease {
    /// The bucket.
    pub bucket: i32,
    /// Its epoch.
    pub epoch: i64,
}

/// A lease just taken: with the nominal time up to which the previous holder handed fires to
/// executors (its fires after that were never sent).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Taken {
    /// The lease.
    pub lease: Lease,
    /// Nominal time (epoch ms) through which the previous holders dispatched.
    pub dispatched_through: i64,
}

/// What a renewal found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Renewal {
    /// The node's lease had not lapsed: every bucket it holds is its own for another lease
    /// time, at the same epochs (no other node can take a bucket of a live node).
    Renewed,
    /// The node's lease had lapsed (or the node is new): it holds nothing now (the buckets it
    /// had are free, or another node's), and its lease starts again.
    Rejoined,
}

/// The nodes as one of them sees them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Nodes {
    /// Nodes whose lease is valid, sorted, the caller included.
    pub live: Vec<String>,
    /// Nodes whose lease lapsed at least the rescue delay ago and less than
    /// [`RECENT_LAPSE_MS`] ago: their buckets may wait to be rescued.
    pub lapsed: Vec<String>,
    /// Live nodes following other rules than [`LEASE_RULES`] (a node of another build started
    /// while this one ran): no bucket is taken or handed back while one is live.
    pub other_rules: Vec<String>,
}

/// A node that lapsed longer ago than this has had its buckets rescued (any node takes them
/// within a round), so a round no longer looks for them; a periodic full look covers the rest.
pub(crate) const RECENT_LAPSE_MS: i64 = 60_000;

/// What the lease keeper asks of the lease tables: [`Sql`] on a database; a model of the same
/// semantics drives the same keeper in the paused-time property test of bucket ownership.
pub(crate) trait LeaseStore {
    /// [`renew`].
    fn renew(
        &self,
        node: &str,
        address: &str,
        lease_ms: i64,
    ) -> impl std::future::Future<Output = Result<Renewal>>;
    /// [`nodes`].
    fn nodes(&self, rescue_after_ms: i64) -> impl std::future::Future<Output = Result<Nodes>>;
    /// [`renew`], then [`nodes`] ([`renew_and_read`] on a database).
    fn renew_and_read(
        &self,
        node: &str,
        address: &str,
        lease_ms: i64,
        rescue_after_ms: i64,
    ) -> impl std::future::Future<Output = Result<(Renewal, Nodes)>> {
        async move {
            let renewal = self.renew(node, address, lease_ms).await?;
            Ok((renewal, self.nodes(rescue_after_ms).await?))
        }
    }
    /// [`held`].
    fn held(&self, node: &str) -> impl std::future::Future<Output = Result<Vec<Lease>>>;
    /// [`acquire`].
    fn acquire(
        &self,
        node: &str,
        n: usize,
        rescue_after_ms: i64,
    ) -> impl std::future::Future<Output = Result<Vec<Taken>>>;
    /// [`release`].
    fn release(
        &self,
        node: &str,
        leases: &[Lease],
    ) -> impl std::future::Future<Output = Result<u64>>;
}

/// The lease tables of a database.
pub(crate) struct Sql<'a>(pub &'a DatabaseConnection);

impl LeaseStore for Sql<'_> {
    async fn renew(&self, node: &str, address: &str, lease_ms: i64) -> Result<Renewal> {
        renew(self.0, node, address, lease_ms).await
    }
    async fn nodes(&self, rescue_after_ms: i64) -> Result<Nodes> {
        nodes(self.0, rescue_after_ms).await
    }
    async fn renew_and_read(
        &self,
        node: &str,
        address: &str,
        lease_ms: i64,
        rescue_after_ms: i64,
    ) -> Result<(Renewal, Nodes)> {
        renew_and_read(self.0, node, address, lease_ms, rescue_after_ms).await
    }
    async fn held(&self, node: &str) -> Result<Vec<Lease>> {
        held(self.0, node).await
    }
    async fn acquire(&self, node: &str, n: usize, rescue_after_ms: i64) -> Result<Vec<Taken>> {
        acquire(self.0, node, n, rescue_after_ms).await
    }
    async fn release(&self, node: &str, leases: &[Lease]) -> Result<u64> {
        release(self.0, node, leases).await
    }
}

fn stmt(backend: DbBackend, sql: String, values: Vec<Value>) -> Statement {
    Statement::from_sql_and_values(backend, sql, values)
}

/// `$n` on PostgreSQL, `?` elsewhere.
fn p(backend: DbBackend, n: usize) -> String {
    match backend {
        DbBackend::Postgres => format!("${n}"),
        _ => "?".into(),
    }
}

/// `n` parameters numbered from `after + 1` ([`p`]), comma-separated.
fn params(b: DbBackend, after: usize, n: usize) -> String {
    let marks: Vec<String> = (after + 1..=after + n).map(|i| p(b, i)).collect();
    marks.join(", ")
}

/// `(bucket, epoch) IN ((b, e), …)` for `leases` (numbers only: written into the SQL).
fn lease_list(leases: &[Lease]) -> String {
    use std::fmt::Write;
    let mut s = String::with_capacity(16 + leases.len() * 14);
    s.push_str("(bucket, epoch) IN (");
    for (i, l) in leases.iter().enumerate() {
        if i > 0 {
            s.push_str(", ");
        }
        let _ = write!(s, "({}, {})", l.bucket, l.epoch);
    }
    s.push(')');
    s
}

/// The node whose id is parameter `n`, as an SQL expression: its id while its lease is valid,
/// else NULL. `owner = <this>` holds exactly for the buckets that node holds now.
fn holder(b: DbBackend, n: usize) -> String {
    format!(
        "(SELECT id FROM xjob_node WHERE id = {} AND lease_until_ms > {})",
        p(b, n),
        db_now_ms(b)
    )
}

/// The first `SET` assignment of a statement taking a bucket from its holder:
/// folds the holder's dispatch mark (its `xjob_node` row's, [`mark_dispatched`]) into the
/// bucket's row, never lowering it, for the next holder to read. First, because MySQL assigns
/// left to right, each assignment seeing the ones before it: after `owner` changed, the holder
/// would be lost.
const FOLD_MARK: &str = "dispatched_through = GREATEST(dispatched_through, COALESCE((SELECT \
     n.dispatched_through FROM xjob_node n WHERE n.id = xjob_lease.owner), 0))";

/// The clause that locks the rows a `SELECT` reads, shared, until the transaction ends. On
/// PostgreSQL the key-share lock, which an update leaving the key alone (a lease renewal) does
/// not wait for; MySQL/MariaDB have only the full shared lock.
fn share_lock(b: DbBackend) -> &'static str {
    match b {
        DbBackend::Postgres => "FOR KEY SHARE",
        _ => "LOCK IN SHARE MODE",
    }
}

/// After `xjob_lease` in a statement naming buckets: on MySQL their rows are found by the
/// primary key. Its optimizer would otherwise scan the table for a long list, and a locking
/// read or an update locks every row it scans, there, waiting for (or blocking) the rows
/// other nodes' fences hold.
fn by_bucket(b: DbBackend) -> &'static str {
    match b {
        DbBackend::MySql => " FORCE INDEX (PRIMARY)",
        _ => "",
    }
}

/// Renews node `node`'s lease (and heartbeat) for `lease_ms`: one update of its row while the
/// lease is valid. A node whose lease lapsed (a stall, the database unreachable) or that has
/// no row yet rejoins: in one transaction the buckets still in its name are freed (they stopped
/// being its own when the lease lapsed; another node may have taken some already), then its
/// row gets a new lease. A row of another build (other [`LEASE_RULES`]) always rejoins, and
/// the rejoin is refused while another node following other rules is live: the two cannot
/// share a cluster.
pub(crate) async fn renew(
    db: &DatabaseConnection,
    node: &str,
    address: &str,
    lease_ms: i64,
) -> Result<Renewal> {
    let b = db.get_database_backend();
    let now = db_now_ms(b);
    let renewed = db
        .execute_raw(stmt(
            b,
            format!(
                "UPDATE xjob_node SET heartbeat_ms = {now}, lease_until_ms = {now} + {} \
                 WHERE id = {} AND lease_until_ms > {now} AND lease_rules = {LEASE_RULES}",
                p(b, 1),
                p(b, 2)
            ),
            vec![lease_ms.into(), node.into()],
        ))
        .await?
        .rows_affected();
    if renewed == 1 {
        return Ok(Renewal::Renewed);
    }
    let txn = db.begin().await?;
    // (a scan of this node still fencing under its old lease commits first: `fence`)
    lock_node(&txn, node).await?;
    // live: a valid lease, or (a node renewing per bucket, `lease_until_ms` 0) a heartbeat
    let other = txn
        .query_all_raw(stmt(
            b,
            format!(
                "SELECT id, lease_rules FROM xjob_node WHERE id <> {} AND lease_rules <> \
                 {LEASE_RULES} AND (lease_until_ms > {now} OR heartbeat_ms > {now} - {})",
                p(b, 1),
                p(b, 2)
            ),
            vec![node.into(), lease_ms.into()],
        ))
        .await?;
    if let Some(r) = other.first() {
        let id: String = r.try_get("", "id")?;
        let rules: i32 = r.try_get("", "lease_rules")?;
        return Err(crate::Error::Config(format!(
            "node {id} of another xjob version is live on this database (lease rules {rules}, \
             this build's {LEASE_RULES}): stop every node of that version before starting this \
             one; nodes keeping leases and dispatch marks by other rules would send fires twice"
        )));
    }
    fold_marks(&txn, &[node.to_string()], true).await?;
    let updated = txn
        .execute_raw(stmt(
            b,
            format!(
                "UPDATE xjob_node SET heartbeat_ms = {now}, lease_until_ms = {now} + {}, \
                 lease_rules = {LEASE_RULES} WHERE id = {}",
                p(b, 1),
                p(b, 2)
            ),
            vec![lease_ms.into(), node.into()],
        ))
        .await?
        .rows_affected();
    if updated == 0 {
        txn.execute_raw(stmt(
            b,
            format!(
                "INSERT INTO xjob_node (id, address, started_ms, heartbeat_ms, lease_until_ms, \
                 lease_rules) VALUES ({}, {}, {now}, {now}, {now} + {}, {LEASE_RULES})",
                p(b, 1),
                p(b, 2),
                p(b, 3)
            ),
            vec![node.into(), address.into(), lease_ms.into()],
        ))
        .await?;
    }
    txn.commit().await?;
    Ok(Renewal::Rejoined)
}

/// A lease round's [`renew`] and [`nodes`]: on PostgreSQL one statement while the lease is
/// valid (the renewal's update in a `WITH`, the nodes read beside it), else the two.
///
/// The read sees the rows as they were before the update (a statement's snapshot), which for
/// the other nodes is what a read just after it would see; this node's row, renewed, is live
/// whatever its old lease had left by then.
pub(crate) async fn renew_and_read(
    db: &DatabaseConnection,
    node: &str,
    address: &str,
    lease_ms: i64,
    rescue_after_ms: i64,
) -> Result<(Renewal, Nodes)> {
    let b = db.get_database_backend();
    if b == DbBackend::Postgres {
        let now = db_now_ms(b);
        let rows = db
            .query_all_raw(stmt(
                b,
                format!(
                    "WITH r AS (UPDATE xjob_node SET heartbeat_ms = {now}, lease_until_ms = \
                     {now} + $1 WHERE id = $2 AND lease_until_ms > {now} AND lease_rules = \
                     {LEASE_RULES} RETURNING id) SELECT id, lease_until_ms - {now} AS left_ms, \
                     lease_rules, EXISTS (SELECT 1 FROM r) AS renewed FROM xjob_node ORDER BY id"
                ),
                vec![lease_ms.into(), node.into()],
            ))
            .await?;
        // (no row at all: this node has none, so none was renewed)
        let renewed = match rows.first() {
            Some(r) => r.try_get::<bool>("", "renewed")?,
            None => false,
        };
        if renewed {
            return Ok((
                Renewal::Renewed,
                nodes_of(rows, rescue_after_ms, Some(node))?,
            ));
        }
    }
    let renewal = renew(db, node, address, lease_ms).await?;
    Ok((renewal, nodes(db, rescue_after_ms).await?))
}

/// The live nodes (a valid lease) and those that lapsed recently enough that their buckets may
/// wait to be rescued ([`Nodes`]), on the database's clock.
pub(crate) async fn nodes(c: &impl ConnectionTrait, rescue_after_ms: i64) -> Result<Nodes> {
    let b = c.get_database_backend();
    let rows = c
        .query_all_raw(stmt(
            b,
            format!(
                "SELECT id, lease_until_ms - {} AS left_ms, lease_rules FROM xjob_node ORDER BY id",
                db_now_ms(b)
            ),
            vec![],
        ))
        .await?;
    nodes_of(rows, rescue_after_ms, None)
}

/// [`Nodes`] of the node rows `rows` (`id`, `left_ms`, `lease_rules`, ordered by id);
/// `renewed` is live whatever its row says.
fn nodes_of(
    rows: Vec<sea_orm::QueryResult>,
    rescue_after_ms: i64,
    renewed: Option<&str>,
) -> Result<Nodes> {
    let mut out = Nodes::default();
    for r in rows {
        let id: String = r.try_get("", "id")?;
        let left: i64 = r.try_get("", "left_ms")?;
        let rules: i32 = r.try_get("", "lease_rules")?;
        let left = if renewed == Some(id.as_str()) {
            left.max(1)
        } else {
            left
        };
        if left > 0 {
            if rules != LEASE_RULES {
                out.other_rules.push(id.clone());
            }
            out.live.push(id);
        } else if left <= -rescue_after_ms && left > -RECENT_LAPSE_MS {
            out.lapsed.push(id);
        }
    }
    Ok(out)
}

/// Removes node `id` (it stopped) and the rows of nodes silent for `forget_after_ms`, their
/// dispatch marks first folded into the rows of the buckets still in their names. Their rows
/// are locked meanwhile, so no mark is written between the fold and the delete.
pub(crate) async fn leave(db: &DatabaseConnection, id: &str, forget_after_ms: i64) -> Result<()> {
    let txn = db.begin().await?;
    let b = txn.get_database_backend();
    let cond = format!(
        "id = {} OR heartbeat_ms < {} - {}",
        p(b, 1),
        db_now_ms(b),
        p(b, 2)
    );
    let gone: Vec<String> =
        lock_nodes_where(&txn, &cond, vec![id.into(), forget_after_ms.into()], "")
            .await?
            .into_iter()
            .map(|(id, _)| id)
            .collect();
    if !gone.is_empty() {
        fold_marks(&txn, &gone, false).await?;
        let ids: Vec<Value> = gone.iter().map(|g| g.as_str().into()).collect();
        let sql = format!(
            "DELETE FROM xjob_node WHERE id IN ({})",
            params(b, 0, ids.len())
        );
        txn.execute_raw(stmt(b, sql, ids)).await?;
    }
    txn.commit().await?;
    Ok(())
}

/// Folds the dispatch marks of `owners` (whose rows the caller's transaction locked) into the
/// rows of the buckets in their names, and frees those buckets when `free`. The buckets are
/// read first and written by primary key ([`by_bucket`]): nothing else changes them while
/// their holders' rows are locked.
async fn fold_marks(txn: &impl ConnectionTrait, owners: &[String], free: bool) -> Result<()> {
    let b = txn.get_database_backend();
    let ids: Vec<Value> = owners.iter().map(|o| o.as_str().into()).collect();
    let owned = format!("owner IN ({})", params(b, 0, ids.len()));
    let sql = format!("SELECT bucket FROM xjob_lease WHERE {owned}");
    let buckets: Vec<String> = txn
        .query_all_raw(stmt(b, sql, ids.clone()))
        .await?
        .iter()
        .map(|r| r.try_get::<i32>("", "bucket").map(|n| n.to_string()))
        .collect::<std::result::Result<_, _>>()?;
    if buckets.is_empty() {
        return Ok(());
    }
    let free = if free { ", owner = NULL" } else { "" };
    let sql = format!(
        "UPDATE xjob_lease{} SET {FOLD_MARK}{free} WHERE {owned} AND bucket IN ({})",
        by_bucket(b),
        buckets.join(", ")
    );
    txn.execute_raw(stmt(b, sql, ids)).await?;
    Ok(())
}

/// Locks for update the rows of the nodes matching `cond` (SQL with `args`), each with how
/// long its lease has left (ms, negative once lapsed); `rest` after `FOR UPDATE` (` SKIP
/// LOCKED`). Found by a plain read, then locked by id with `cond` checked again: a locking
/// read scanning the table would lock every row it scanned on MySQL, and wait for the nodes
/// whose scans are fenced.
async fn lock_nodes_where(
    txn: &impl ConnectionTrait,
    cond: &str,
    args: Vec<Value>,
    rest: &str,
) -> Result<Vec<(String, i64)>> {
    let b = txn.get_database_backend();
    let sql = format!("SELECT id FROM xjob_node WHERE {cond}");
    let found: Vec<Value> = txn
        .query_all_raw(stmt(b, sql, args.clone()))
        .await?
        .iter()
        .map(|r| r.try_get::<String>("", "id").map(Value::from))
        .collect::<std::result::Result<_, _>>()?;
    if found.is_empty() {
        return Ok(Vec::new());
    }
    let sql = format!(
        "SELECT id, lease_until_ms - {} AS left_ms FROM xjob_node WHERE ({cond}) \
         AND id IN ({}) FOR UPDATE{rest}",
        db_now_ms(b),
        params(b, args.len(), found.len())
    );
    let mut all = args;
    all.extend(found);
    let rows = txn.query_all_raw(stmt(b, sql, all)).await?;
    rows.iter()
        .map(|r| Ok((r.try_get("", "id")?, r.try_get("", "left_ms")?)))
        .collect()
}

/// Every lease `node` holds now (its lease valid).
pub(crate) async fn held(c: &impl ConnectionTrait, node: &str) -> Result<Vec<Lease>> {
    leases_where(c, node, "ORDER BY bucket").await
}

/// The leases `node` holds now (its lease valid, each at its epoch) among the rows `rest`
/// selects (SQL after the condition on the holder: `AND …`, `ORDER BY …`).
async fn leases_where(c: &impl ConnectionTrait, node: &str, rest: &str) -> Result<Vec<Lease>> {
    let b = c.get_database_backend();
    let rows = c
        .query_all_raw(stmt(
            b,
            format!(
                "SELECT bucket, epoch FROM xjob_lease{} WHERE owner = {} {rest}",
                by_bucket(b),
                holder(b, 1)
            ),
            vec![node.into()],
        ))
        .await?;
    rows.iter()
        .map(|r| {
            Ok(Lease {
                bucket: r.try_get("", "bucket")?,
                epoch: r.try_get("", "epoch")?,
            })
        })
        .collect()
}

/// Which of `leases` `node` holds now. `every` is every bucket at the epochs the node knows,
/// when it believes it holds them all (one node alone): then one aggregate read answers
/// ([`holds_every`]), and only when that fails are rows compared.
///
/// Otherwise on PostgreSQL compared in the node with every bucket it holds (a list of 1,024
/// `(bucket, epoch)` pairs in the statement cost PostgreSQL 3.4–4.2 ms a look). On
/// MySQL/MariaDB with shared locks, a locking read: inside a transaction its plain reads see
/// the snapshot of its first read, and a scan's fence ([`fence`]) must see the leases as they
/// are now. There the statement names the buckets (found and locked by primary key, no other
/// node's row locked), except for a node that believes it holds every bucket: it reads its rows
/// without a list (the read scans and locks every row, all of them its own) and compares in
/// the node.
async fn held_of(
    c: &impl ConnectionTrait,
    node: &str,
    leases: &[Lease],
    every: Option<&[Lease]>,
) -> Result<Vec<Lease>> {
    let b = c.get_database_backend();
    if let Some(every) = every
        && leases.iter().all(|l| every.binary_search(l).is_ok())
        && holds_every(c, node, every).await?
    {
        return Ok(leases.to_vec());
    }
    if b == DbBackend::Postgres || every.is_some() {
        let rows = match b {
            DbBackend::Postgres => held(c, node).await?,
            _ => leases_where(c, node, share_lock(b)).await?,
        };
        let held: std::collections::HashSet<Lease> = rows.into_iter().collect();
        return Ok(leases
            .iter()
            .filter(|l| held.contains(l))
            .copied()
            .collect());
    }
    let rest = format!("AND {} {}", lease_list(leases), share_lock(b));
    leases_where(c, node, &rest).await
}

/// Whether `node` holds every bucket at the epochs of `every` (each bucket once, sorted), from
/// one aggregate read of the rows in its name (locked shared on MySQL/MariaDB): as many rows
/// as buckets, and the sum of their epochs that of `every`. Sound because a bucket's epoch only
/// grows: each is at least the one the node was told, so equal sums mean equal epochs. The
/// rows' comparison it saves cost MariaDB 1.7 ms for a list of 1,024 pairs (0.5 ms without a
/// list) and PostgreSQL 0.35 ms, twice a second, besides the node's reading of 1,024 rows
/// (2026-12-04).
async fn holds_every(c: &impl ConnectionTrait, node: &str, every: &[Lease]) -> Result<bool> {
    // each bucket once (sorted by bucket, then epoch)
    let each_once = every.windows(2).all(|w| w[0].bucket < w[1].bucket);
    if every.len() != BUCKETS as usize || !each_once {
        return Ok(false);
    }
    let b = c.get_database_backend();
    let (int, lock) = match b {
        DbBackend::Postgres => ("BIGINT", ""),
        _ => ("SIGNED", share_lock(b)),
    };
    let sql = format!(
        "SELECT COUNT(*) AS n, CAST(COALESCE(SUM(epoch), 0) AS {int}) AS e FROM xjob_lease{} \
         WHERE owner = {} {lock}",
        by_bucket(b),
        holder(b, 1)
    );
    let Some(row) = c.query_one_raw(stmt(b, sql, vec![node.into()])).await? else {
        return Ok(false);
    };
    let (n, e): (i64, i64) = (row.try_get("", "n")?, row.try_get("", "e")?);
    Ok(n == i64::from(BUCKETS) && e == every.iter().map(|l| l.epoch).sum::<i64>())
}

/// Takes up to `n` buckets that no live node holds (free, or their holder's lease lapsed) for
/// `node`, each at its next epoch, and also every bucket whose holder's lease lapsed more than
/// `rescue_after_ms` ago, whatever `n` (a bucket of a dead node is never left unscheduled
/// while the live nodes' shares still count a node that stalled); answers them. Rows another
/// node is taking at the same moment are skipped (`SKIP LOCKED`), never waited for. Takes
/// nothing when `node`'s own lease is not valid.
pub(crate) async fn acquire(
    db: &DatabaseConnection,
    node: &str,
    n: usize,
    rescue_after_ms: i64,
) -> Result<Vec<Taken>> {
    let txn = db.begin().await?;
    let b = txn.get_database_backend();
    let now = db_now_ms(b);
    let bucket_list = |rows: Vec<sea_orm::QueryResult>| -> Result<Vec<i32>> {
        rows.iter()
            .map(|r| r.try_get::<i32>("", "bucket").map_err(Into::into))
            .collect()
    };
    // A lapsed holder's buckets are taken only under its row's lock, which its own scan holds
    // shared while fencing (`fence`): one still committing is skipped. The statements after it
    // name nodes by id, not by a subquery: MySQL would lock the rows a subquery of a locking
    // read reads, and wait for that scan.
    let lapsed = lock_nodes_where(
        &txn,
        &format!("lease_until_ms <= {now}"),
        vec![],
        " SKIP LOCKED",
    )
    .await?;
    let all: Vec<String> = txn
        .query_all_raw(stmt(b, "SELECT id FROM xjob_node".into(), vec![]))
        .await?
        .iter()
        .map(|r| r.try_get("", "id"))
        .collect::<std::result::Result<_, _>>()?;
    // the rows held by none, by a node no longer in the table, or by one of `of`: a condition
    // and its parameters
    let held_by_none_or = |of: Vec<&String>| {
        let mut cond = match all.len() {
            0 => "owner IS NOT NULL".to_string(),
            n => format!("owner NOT IN ({})", params(b, 0, n)),
        };
        if !of.is_empty() {
            cond.push_str(&format!(
                " OR owner IN ({})",
                params(b, all.len(), of.len())
            ));
        }
        let args: Vec<Value> = all.iter().chain(of).map(|id| id.as_str().into()).collect();
        (cond, args)
    };
    let mut buckets = if n == 0 {
        Vec::new()
    } else {
        let (cond, args) = held_by_none_or(lapsed.iter().map(|(id, _)| id).collect());
        let sql = format!(
            "SELECT bucket FROM xjob_lease WHERE owner IS NULL OR {cond} ORDER BY bucket \
             LIMIT {n} FOR UPDATE SKIP LOCKED"
        );
        bucket_list(txn.query_all_raw(stmt(b, sql, args)).await?)?
    };
    let rescue = lapsed.iter().filter(|(_, left)| *left <= -rescue_after_ms);
    let (cond, args) = held_by_none_or(rescue.map(|(id, _)| id).collect());
    let sql = format!(
        "SELECT bucket FROM xjob_lease WHERE owner IS NOT NULL AND ({cond}) ORDER BY bucket \
         FOR UPDATE SKIP LOCKED"
    );
    let rescued = bucket_list(txn.query_all_raw(stmt(b, sql, args)).await?)?;
    buckets.extend(rescued);
    buckets.sort_unstable();
    buckets.dedup();
    if buckets.is_empty() {
        txn.commit().await?;
        return Ok(Vec::new());
    }
    let list = buckets
        .iter()
        .map(i32::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    // (owner NULL, and the buckets free, if this node's own lease lapsed meanwhile)
    txn.execute_raw(stmt(
        b,
        format!(
            "UPDATE xjob_lease{} SET {FOLD_MARK}, owner = {}, epoch = epoch + 1 \
             WHERE bucket IN ({list})",
            by_bucket(b),
            holder(b, 1)
        ),
        vec![node.into()],
    ))
    .await?;
    let rows = txn
        .query_all_raw(stmt(
            b,
            format!(
                "SELECT bucket, epoch, dispatched_through FROM xjob_lease \
                 WHERE bucket IN ({list}) AND owner = {} ORDER BY bucket",
                p(b, 1)
            ),
            vec![node.into()],
        ))
        .await?;
    txn.commit().await?;
    rows.iter()
        .map(|r| {
            Ok(Taken {
                lease: Lease {
                    bucket: r.try_get("", "bucket")?,
                    epoch: r.try_get("", "epoch")?,
                },
                dispatched_through: r.try_get("", "dispatched_through")?,
            })
        })
        .collect()
}

/// Gives `leases` back (a node handing buckets to one that joined, or stopping): free at once
/// for any node. Only leases still held at their epoch are released.
pub(crate) async fn release(c: &DatabaseConnection, node: &str, leases: &[Lease]) -> Result<u64> {
    if leases.is_empty() {
        return Ok(0);
    }
    let txn = c.begin().await?;
    // (a scan of this node fencing these buckets commits first: `fence`)
    lock_node(&txn, node).await?;
    let b = txn.get_database_backend();
    let n = txn
        .execute_raw(stmt(
            b,
            format!(
                "UPDATE xjob_lease{} SET {FOLD_MARK}, owner = NULL WHERE owner = {} AND {}",
                by_bucket(b),
                p(b, 1),
                lease_list(leases)
            ),
            vec![node.into()],
        ))
        .await?
        .rows_affected();
    txn.commit().await?;
    Ok(n)
}

/// Locks node `node`'s row for update in the caller's transaction: every statement that takes
/// a bucket from its holder does, so none does while the holder's scan is between its fence
/// and its commit ([`fence`]), and no mark of the holder's is written meanwhile.
async fn lock_node(c: &impl ConnectionTrait, node: &str) -> Result<()> {
    let b = c.get_database_backend();
    let sql = format!("SELECT id FROM xjob_node WHERE id = {} FOR UPDATE", p(b, 1));
    c.query_all_raw(stmt(b, sql, vec![node.into()])).await?;
    Ok(())
}

/// Records that `node` is handing the fires of `leases` with nominal times up to `through_ms`
/// to executors: only for the leases it still holds unexpired at their epoch (the others'
/// fires are not its to send); answers those. A bucket's next holder treats its fires up to
/// this time as sent (never sends them again). One update of the node's row (the mark covers
/// every bucket it holds, [`FOLD_MARK`]) and a read of the leases ([`held_of`]; `every`: every
/// lease the node holds, sorted, when it believes it holds every bucket).
pub(crate) async fn mark_dispatched(
    db: &DatabaseConnection,
    node: &str,
    leases: &[Lease],
    through_ms: i64,
    every: Option<&[Lease]>,
) -> Result<Vec<Lease>> {
    if leases.is_empty() {
        return Ok(Vec::new());
    }
    let txn = db.begin().await?;
    let b = txn.get_database_backend();
    // the node's own row (locked until the commit: nothing takes a bucket from it meanwhile,
    // `lock_node`), then which leases it still holds
    let live = txn
        .execute_raw(stmt(
            b,
            format!(
                "UPDATE xjob_node SET dispatched_through = GREATEST(dispatched_through, {}) \
                 WHERE id = {} AND lease_until_ms > {}",
                p(b, 1),
                p(b, 2),
                db_now_ms(b)
            ),
            vec![through_ms.into(), node.into()],
        ))
        .await?
        .rows_affected();
    let held = if live == 1 {
        held_of(&txn, node, leases, every).await?
    } else {
        Vec::new()
    };
    txn.commit().await?;
    Ok(held)
}

/// Inside a scan's transaction, just before it commits: whether `node` still holds every one
/// of `leases` at its epoch, unexpired. The node's own row is locked shared ([`share_lock`])
/// while its lease is valid, until the commit; every statement taking a bucket from its holder
/// locks the holder's row for update first ([`lock_node`], `acquire`, which skips a locked
/// one), so no node takes a bucket over between this check and the commit, and the buckets'
/// rows are only read (on PostgreSQL, locking 1,024 bucket rows wrote each one's lock to the
/// table and its log: 5.4 µs of statement time per fire at 1,000 fires/s).
pub(crate) async fn fence(c: &impl ConnectionTrait, node: &str, leases: &[Lease]) -> Result<bool> {
    if leases.is_empty() {
        return Ok(true);
    }
    let b = c.get_database_backend();
    let sql = format!(
        "SELECT id FROM xjob_node WHERE id = {} AND lease_until_ms > {} {}",
        p(b, 1),
        db_now_ms(b),
        share_lock(b)
    );
    if c.query_all_raw(stmt(b, sql, vec![node.into()]))
        .await?
        .is_empty()
    {
        return Ok(false);
    }
    let every = (leases.len() >= BUCKETS as usize).then_some(leases);
    Ok(held_of(c, node, leases, every).await?.len() == leases.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A dispatch mark reaches whichever node takes a bucket next, however the bucket leaves
    /// its holder: taken after the holder's lease lapsed, released, or its holder's row
    /// forgotten. The mark is the node's row's and is folded into the bucket's
    /// row then; a later, lower mark never lowers it. A bucket the holder no longer holds is
    /// not marked (not answered). Marking writes the node's row alone, never a bucket's.
    #[tokio::test]
    async fn a_dispatch_mark_reaches_the_next_holder_of_each_bucket() {
        for (db, seen) in crate::store::tests::servers_recording().await {
            let b = db.get_database_backend();
            let taken_by = |node: &'static str, n: usize| {
                let db = db.clone();
                async move {
                    renew(&db, node, node, 60_000).await.unwrap();
                    acquire(&db, node, n, 60_000).await.unwrap()
                }
            };
            let leases = |t: &[Taken]| t.iter().map(|t| t.lease).collect::<Vec<_>>();
            let a = taken_by("a", 4).await;
            assert!(a.iter().all(|t| t.dispatched_through == 0), "{b:?}");
            seen.lock().unwrap().clear();
            let held = mark_dispatched(&db, "a", &leases(&a), 5_000, None)
                .await
                .unwrap();
            assert_eq!(held, leases(&a), "{b:?}");
            let writes: Vec<String> = std::mem::take(&mut *seen.lock().unwrap())
                .into_iter()
                .filter(|s| s.starts_with("UPDATE") || s.starts_with("INSERT"))
                .collect();
            assert_eq!(writes.len(), 1, "{b:?}: {writes:?}");
            assert!(
                writes[0].starts_with("UPDATE xjob_node "),
                "{b:?}: {writes:?}"
            );
            // a mark no higher than the one written changes nothing, and a still holds them
            for through in [4_000, 5_000] {
                let held = mark_dispatched(&db, "a", &leases(&a), through, None)
                    .await
                    .unwrap();
                assert_eq!(held, leases(&a), "{b:?}: a mark of {through}");
            }
            // a's lease lapses: b takes its buckets with its mark
            db.execute_unprepared("UPDATE xjob_node SET lease_until_ms = 1 WHERE id = 'a'")
                .await
                .unwrap();
            assert!(
                mark_dispatched(&db, "a", &leases(&a), 6_000, None)
                    .await
                    .unwrap()
                    .is_empty(),
                "{b:?}: a lapsed lease marks nothing"
            );
            let b_got = taken_by("b", 4).await;
            assert_eq!(leases(&b_got).len(), 4);
            for t in &b_got {
                let was_a = a.iter().any(|x| x.lease.bucket == t.lease.bucket);
                assert_eq!(t.dispatched_through, if was_a { 5_000 } else { 0 }, "{b:?}");
            }
            // b marks and releases two: c takes them with b's mark
            mark_dispatched(&db, "b", &leases(&b_got), 7_000, None)
                .await
                .unwrap();
            assert_eq!(release(&db, "b", &leases(&b_got)[..2]).await.unwrap(), 2);
            let c_got = taken_by("c", 2).await;
            assert!(c_got.iter().all(|t| t.dispatched_through == 7_000), "{b:?}");
            // c marks and its row is forgotten: d takes them with c's mark
            mark_dispatched(&db, "c", &leases(&c_got), 9_000, None)
                .await
                .unwrap();
            leave(&db, "c", 3_600_000).await.unwrap();
            let d_got = taken_by("d", 1024).await;
            for t in c_got.iter() {
                let d = d_got
                    .iter()
                    .find(|x| x.lease.bucket == t.lease.bucket)
                    .unwrap();
                assert_eq!(d.dispatched_through, 9_000, "{b:?}");
            }
            db.close().await.unwrap();
        }
    }

    /// A scan that passed its fence keeps its buckets until it commits, even if its node's
    /// lease lapses meanwhile: another node's acquire skips them, and neither it, nor that
    /// node's release of buckets of its own, nor a third node's rejoin and leave waits for the
    /// scan (on MySQL a statement scanning the bucket table would, for the rows the fence
    /// locked); once the scan commits they are taken, with the others freed meanwhile. A fence after that fails. The lease lapses with the database's clock, not by a
    /// write (MySQL's would wait for the scan's lock on the node's row).
    #[tokio::test]
    async fn a_fenced_scan_keeps_its_buckets_until_it_commits() {
        for db in crate::store::tests::every_backend().await {
            let b = db.get_database_backend();
            if b == DbBackend::Sqlite {
                continue;
            }
            assert_eq!(
                renew(&db, "a", "http://a", 60_000).await.unwrap(),
                Renewal::Rejoined
            );
            assert_eq!(
                renew(&db, "b", "http://b", 60_000).await.unwrap(),
                Renewal::Rejoined
            );
            let mine: Vec<Lease> = acquire(&db, "a", 4, 60_000)
                .await
                .unwrap()
                .into_iter()
                .map(|t| t.lease)
                .collect();
            assert_eq!(mine.len(), 4, "{b:?}");
            renew(&db, "c", "http://c", 60_000).await.unwrap();
            assert_eq!(acquire(&db, "c", 4, 60_000).await.unwrap().len(), 4);
            let now = db_now_ms(b);
            let sql = format!("UPDATE xjob_node SET lease_until_ms = {now} + 300 WHERE id = 'a'");
            db.execute_unprepared(&sql).await.unwrap();
            let scan = db.begin().await.unwrap();
            assert!(fence(&scan, "a", &mine).await.unwrap(), "{b:?}");
            // a's lease lapses while its scan is between its fence and its commit
            let left = format!("SELECT lease_until_ms - {now} AS l FROM xjob_node WHERE id = 'a'");
            loop {
                let row = db.query_one_raw(Statement::from_string(b, &*left)).await;
                let l: i64 = row.unwrap().unwrap().try_get("", "l").unwrap();
                if l < 0 {
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
            let taken = acquire(&db, "b", 1024, 0).await.unwrap();
            assert!(
                taken
                    .iter()
                    .all(|t| !mine.iter().any(|l| l.bucket == t.lease.bucket)),
                "{b:?}: a bucket of a fenced scan taken before its commit"
            );
            // b hands two of its buckets back meanwhile, without waiting for a's scan
            let back: Vec<Lease> = taken[..2].iter().map(|t| t.lease).collect();
            assert_eq!(release(&db, "b", &back).await.unwrap(), 2, "{b:?}");
            // and c, whose lease lapses, rejoins (freeing its buckets) and leaves
            db.execute_unprepared("UPDATE xjob_node SET lease_until_ms = 1 WHERE id = 'c'")
                .await
                .unwrap();
            let again = renew(&db, "c", "http://c", 60_000).await.unwrap();
            assert_eq!(again, Renewal::Rejoined, "{b:?}");
            leave(&db, "c", 3_600_000).await.unwrap();
            scan.commit().await.unwrap();
            let taken = acquire(&db, "b", 1024, 0).await.unwrap();
            assert!(
                mine.iter().all(|l| taken
                    .iter()
                    .any(|t| t.lease.bucket == l.bucket && t.lease.epoch == l.epoch + 1)),
                "{b:?}: taken at the next epoch once the scan committed"
            );
            assert_eq!(taken.len(), 4 + 2 + 4, "{b:?}: a's, the two released, c's");
            // a's next scan fails its fence: its buckets moved on
            let scan = db.begin().await.unwrap();
            assert!(!fence(&scan, "a", &mine).await.unwrap(), "{b:?}");
            scan.rollback().await.unwrap();
            db.close().await.unwrap();
        }
    }

    /// A node holding every bucket fences and marks (all of them, or the few its fires were
    /// of) with one aggregate read of its rows, naming no bucket (`held_of`, `holds_every`),
    /// and the answers are those of a comparison row by row: all of them while it holds them,
    /// and neither a bucket that moved on to its next epoch, nor a lease named at a stale
    /// epoch, nor a bucket no longer in its name, as the leases are when the fence reads them.
    #[tokio::test]
    async fn a_node_holding_every_bucket_checks_them_without_a_list() {
        for mut db in crate::store::tests::every_backend().await {
            let b = db.get_database_backend();
            if b == DbBackend::Sqlite {
                continue;
            }
            renew(&db, "a", "http://a", 60_000).await.unwrap();
            let mut all: Vec<Lease> = acquire(&db, "a", BUCKETS as usize, 60_000)
                .await
                .unwrap()
                .into_iter()
                .map(|t| t.lease)
                .collect();
            all.sort();
            assert_eq!(all.len(), BUCKETS as usize, "{b:?}");
            let seen = crate::store::tests::recording(&mut db);
            let scan = db.begin().await.unwrap();
            assert!(fence(&scan, "a", &all).await.unwrap(), "{b:?}");
            scan.rollback().await.unwrap();
            let marked = mark_dispatched(&db, "a", &all, 1_000, Some(&all))
                .await
                .unwrap();
            assert_eq!(marked, all, "{b:?}");
            // a mark of some of them (the buckets of the fires sent) by a node holding every one
            let some: Vec<Lease> = all.iter().step_by(3).copied().collect();
            let marked = mark_dispatched(&db, "a", &some, 1_500, Some(&all))
                .await
                .unwrap();
            assert_eq!(marked, some, "{b:?}");
            let reads: Vec<String> = std::mem::take(&mut *seen.lock().unwrap())
                .into_iter()
                .filter(|s| s.contains("FROM xjob_lease"))
                .collect();
            assert_eq!(reads.len(), 3, "{b:?}: {} reads", reads.len());
            let listed = reads.iter().filter(|s| s.contains(" IN (")).count();
            assert_eq!(listed, 0, "{b:?}: {listed} reads list the buckets");
            let summed = reads.iter().filter(|s| s.contains("SUM(epoch)")).count();
            assert_eq!(summed, 3, "{b:?}: {summed} of 3 reads aggregate");
            // bucket 7 moves on to its next epoch (as if it had been taken and given back)
            db.execute_unprepared("UPDATE xjob_lease SET epoch = epoch + 1 WHERE bucket = 7")
                .await
                .unwrap();
            let scan = db.begin().await.unwrap();
            assert!(!fence(&scan, "a", &all).await.unwrap(), "{b:?}");
            scan.rollback().await.unwrap();
            let marked = mark_dispatched(&db, "a", &all, 2_000, Some(&all))
                .await
                .unwrap();
            let without_7: Vec<Lease> = all.iter().filter(|l| l.bucket != 7).copied().collect();
            assert_eq!(marked, without_7, "{b:?}");
            let marked = mark_dispatched(&db, "a", &all[..20], 2_500, Some(&all))
                .await
                .unwrap();
            assert_eq!(marked, without_7[..19], "{b:?}");
            // the node's list brought up to date holds again; one stale lease in it does not
            let mut now_held = held(&db, "a").await.unwrap();
            now_held.sort();
            let scan = db.begin().await.unwrap();
            assert!(fence(&scan, "a", &now_held).await.unwrap(), "{b:?}");
            scan.rollback().await.unwrap();
            // the fence sees the leases as they are now, not as its transaction first read
            // them (a plain read on MySQL would see that first snapshot)
            let scan = db.begin().await.unwrap();
            assert_eq!(held(&scan, "a").await.unwrap().len(), BUCKETS as usize);
            db.execute_unprepared("UPDATE xjob_lease SET epoch = epoch + 1 WHERE bucket = 9")
                .await
                .unwrap();
            assert!(!fence(&scan, "a", &now_held).await.unwrap(), "{b:?}");
            scan.rollback().await.unwrap();
            let mut now_held = held(&db, "a").await.unwrap();
            now_held.sort();
            let fresh = now_held.clone();
            // a list naming a bucket twice is no list of every bucket, whatever its sums
            let mut twice = fresh.clone();
            twice[5] = Lease {
                bucket: twice[4].bucket,
                epoch: twice[5].epoch,
            };
            let scan = db.begin().await.unwrap();
            assert!(!holds_every(&scan, "a", &twice).await.unwrap(), "{b:?}");
            assert!(holds_every(&scan, "a", &fresh).await.unwrap(), "{b:?}");
            scan.rollback().await.unwrap();
            now_held[3].epoch -= 1;
            let scan = db.begin().await.unwrap();
            assert!(!fence(&scan, "a", &now_held).await.unwrap(), "{b:?}");
            scan.rollback().await.unwrap();
            // a bucket no longer in the node's name: one row fewer
            db.execute_unprepared(
                "UPDATE xjob_lease SET owner = NULL, epoch = epoch + 1 WHERE bucket = 11",
            )
            .await
            .unwrap();
            let scan = db.begin().await.unwrap();
            assert!(!fence(&scan, "a", &fresh).await.unwrap(), "{b:?}");
            scan.rollback().await.unwrap();
            let marked = mark_dispatched(&db, "a", &fresh[8..14], 3_000, Some(&fresh))
                .await
                .unwrap();
            let expect: Vec<Lease> = fresh[8..14]
                .iter()
                .filter(|l| l.bucket != 11)
                .copied()
                .collect();
            assert_eq!(marked, expect, "{b:?}");
            db.close().await.unwrap();
        }
    }

    /// Buckets are in range, spread consecutive ids, and the SQL computes the same ones on
    /// every backend.
    #[tokio::test]
    async fn buckets_spread_ids_and_match_in_sql() {
        let ids: Vec<i32> = (1..=3000).collect();
        let buckets: std::collections::HashSet<i32> = ids.iter().map(|&i| bucket_of(i)).collect();
        assert!(buckets.iter().all(|b| (0..BUCKETS).contains(b)));
        assert!(
            buckets.len() > 900,
            "3,000 ids over {} buckets",
            buckets.len()
        );
        // 200 consecutive ids over three equal shares of the buckets: none gets most of them
        let thirds = (1..=200).fold([0; 3], |mut n, i| {
            n[(bucket_of(i) * 3 / BUCKETS) as usize] += 1;
            n
        });
        assert!(thirds.iter().all(|&n| (45..=90).contains(&n)), "{thirds:?}");
        for db in crate::store::tests::every_backend().await {
            let b = db.get_database_backend();
            for id in [1, 2, 1023, 1024, 123_456, i32::MAX] {
                let row = db
                    .query_one_raw(Statement::from_string(
                        b,
                        format!("SELECT {} AS b", bucket_sql(b, &id.to_string())),
                    ))
                    .await
                    .unwrap()
                    .unwrap();
                let got: i64 = row.try_get("", "b").unwrap();
                assert_eq!(got as i32, bucket_of(id), "{b:?} id {id}");
            }
            db.close().await.unwrap();
        }
    }
}
