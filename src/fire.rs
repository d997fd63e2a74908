//! The scheduler's model of a fire, from plan to result: a [`PendingFire`] a scan planned, the
//! [`Fire`] the ring holds once it has a log id, the [`TriggerRecord`] a dispatch writes about
//! it and the [`HandleResult`] its executor reports. The store records these (`store::logs`,
//! the run-row writer); the actors and the trigger path make and read them.

use crate::model::TriggerType;

/// A fire the scan hands to the ring.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingFire {
    /// Job id.
    pub job_id: i32,
    /// Its group.
    pub job_group: i32,
    /// Nominal fire time, epoch ms.
    pub fire_time: i64,
    /// CRON or MISFIRE.
    pub trigger_type: TriggerType,
}

/// A recorded pending fire, with its log id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fire {
    /// `xxl_job_log.id`.
    pub log_id: i64,
    /// Job id.
    pub job_id: i32,
    /// Nominal fire time, epoch ms.
    pub fire_time: i64,
    /// CRON or MISFIRE.
    pub trigger_type: TriggerType,
    /// The job as the scan read it (shared, not copied), so dispatch needs no read; `None`
    /// for fires recovered from the database (dispatch reads the job).
    pub job: Option<std::sync::Arc<crate::jobs::JobDef>>,
    /// When `job` was read (epoch ms): an edit on this node after it makes dispatch read again.
    pub read_ms: i64,
    /// The epoch of the lease on the fire's bucket it was recorded (or taken over) under; 0
    /// without leases. A node dispatches a fire only while it holds that lease.
    pub epoch: i64,
}

/// The handle-message cap on the admin side (protocol.md §3.3).
pub(crate) const HANDLE_MSG_MAX: usize = 15_000;

/// Cuts a handle message to [`HANDLE_MSG_MAX`] characters.
pub(crate) fn cap_msg(text: String) -> String {
    if text.chars().count() > HANDLE_MSG_MAX {
        text.chars().take(HANDLE_MSG_MAX).collect()
    } else {
        text
    }
}

/// What a trigger wrote about one run.
#[derive(Clone, Debug, Default)]
pub struct TriggerRecord {
    /// Log id.
    pub log_id: i64,
    /// The run's job (as on its row; lets the writer skip reading it back).
    pub job_id: i32,
    /// The run's chain depth (as on its row).
    pub chain_depth: i16,
    /// The job's child jobs as dispatched (`child_jobid`; `None`: none): a successful run's
    /// children are triggered without reading the job again.
    pub children: Option<std::sync::Arc<str>>,
    /// When it was dispatched, epoch ms.
    pub trigger_ms: i64,
    /// Chosen executor address.
    pub executor_address: Option<String>,
    /// Handler name.
    pub executor_handler: Option<String>,
    /// Effective param.
    pub executor_param: Option<String>,
    /// `i/n` for broadcast shards.
    pub executor_sharding_param: Option<String>,
    /// Retries left.
    pub executor_fail_retry_count: i32,
    /// `/run` answer code.
    pub trigger_code: i32,
    /// HTML summary.
    pub trigger_msg: String,
    /// Why it fired.
    pub trigger_type: TriggerType,
}

/// The longest trigger summary kept (a summary is bounded when made; this bounds any other
/// text written there): at most 64,000 bytes, so a MySQL `TEXT` holds it.
const TRIGGER_MSG_MAX: usize = 16_000;

impl TriggerRecord {
    /// The record with every text cut (and marked) to its column and freed of what a database
    /// cannot store: one record with an over-long address or a NUL never fails a batch.
    pub(crate) fn bounded(mut self) -> Self {
        use crate::bounded::column;
        self.executor_address = self.executor_address.map(|a| column(a, 255));
        self.executor_handler = self.executor_handler.map(|h| column(h, 255));
        self.executor_param = self
            .executor_param
            .map(|p| column(p, crate::jobs::MAX_PARAM_CHARS));
        self.executor_sharding_param = self.executor_sharding_param.map(|p| column(p, 20));
        self.trigger_msg = column(self.trigger_msg, TRIGGER_MSG_MAX);
        self
    }
}

impl HandleResult {
    /// The result with its message cut to [`HANDLE_MSG_MAX`] and freed of NUL characters.
    pub(crate) fn bounded(mut self) -> Self {
        self.msg = self.msg.map(|m| crate::bounded::column(m, HANDLE_MSG_MAX));
        self
    }
}

/// One run's result as an executor reported it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HandleResult {
    /// Log id.
    pub log_id: i64,
    /// 200 success, else failure.
    pub code: i32,
    /// The executor's message.
    pub msg: Option<String>,
}
