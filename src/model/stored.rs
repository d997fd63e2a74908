//! Numbers the tables store, named (protocol.md §4, §5): XXL-JOB's `alarm_status`, `trigger_status`
//! and `address_type`, and xjob's `fire_state`. Each enum's [`code`](AlarmStatus::code) is the
//! stored value.

macro_rules! code_enum {
    ($(#[$m:meta])* $name:ident { $($(#[$vm:meta])* $v:ident = $n:literal),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vm])* $v),+
        }

        impl $name {
            /// The stored value.
            pub const fn code(self) -> i16 {
                match self { $($name::$v => $n),+ }
            }

            /// The value stored as `code`, if it is one.
            pub fn of(code: i16) -> Option<Self> {
                match code { $($n => Some($name::$v),)+ _ => None }
            }
        }
    };
}

code_enum!(
    /// `xxl_job_log.alarm_status`: where a run stands with the fail monitor.
    AlarmStatus {
        /// Taken by a node's fail monitor (XXL-JOB's lock, so one node alarms).
        Locked = -1,
        /// Not looked at yet: a run in flight, or a failure the monitor has still to handle.
        Unchecked = 0,
        /// Nothing to alarm (a success, or a failure whose job is gone).
        NotNeeded = 1,
        /// Every alarm was delivered.
        Sent = 2,
        /// An alarm could not be delivered.
        Failed = 3,
    }
);

code_enum!(
    /// `xxl_job_info.trigger_status`: whether the scan fires the job.
    TriggerStatus {
        /// Stopped.
        Stopped = 0,
        /// Running: the scan records its fires.
        Running = 1,
    }
);

code_enum!(
    /// `xxl_job_group.address_type`: where a group's executor addresses come from.
    AddressType {
        /// From executors' heartbeats (`/api/registry`).
        Automatic = 0,
        /// The group's own `address_list`.
        Manual = 1,
    }
);

/// `xxl_job_log.fire_state` (xjob's column): where a fire stands between the scan and the
/// executor. Values from [`fire_state::FIRST_CLAIM`] on are a node's claim token.
pub mod fire_state {
    /// Dispatched (or failed to dispatch): the row is a run the console lists.
    pub const DISPATCHED: i64 = 0;
    /// Recorded by the scan, waiting for its second.
    pub const PENDING: i64 = 1;
    /// May have been sent without its outcome being recorded (its node stopped, or lost its
    /// bucket, at or after sending it): settled by asking its executors, never sent again
    /// under another log id ([`crate::store::in_doubt`]).
    pub const IN_DOUBT: i64 = 2;
    /// The lowest claim token (the values between are kept for states).
    pub const FIRST_CLAIM: i64 = 16;

    /// Whether `state` is a fire some node may have sent without recording it (in doubt, or
    /// claimed by a node).
    pub const fn is_claim(state: i64) -> bool {
        state > PENDING
    }

    /// A new random claim token.
    pub fn new_claim() -> i64 {
        rand::random_range(FIRST_CLAIM..i64::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every stored value maps back to its name, and unknown values to none.
    #[test]
    fn codes_round_trip() {
        for s in [
            AlarmStatus::Locked,
            AlarmStatus::Unchecked,
            AlarmStatus::NotNeeded,
            AlarmStatus::Sent,
            AlarmStatus::Failed,
        ] {
            assert_eq!(AlarmStatus::of(s.code()), Some(s));
        }
        assert_eq!(AlarmStatus::of(4), None);
        assert_eq!(TriggerStatus::of(1), Some(TriggerStatus::Running));
        assert_eq!(AddressType::of(1), Some(AddressType::Manual));
        assert_eq!(AddressType::of(2), None);
        assert!(fire_state::is_claim(2) && !fire_state::is_claim(fire_state::PENDING));
    }
}
