//! The JSON objects of the XXL-JOB 2.4 protocol (protocol.md §1, §4), with the exact keys, including
//! the misspelled ones (`logDateTim`, `executorParams`, `glueUpdatetime`, `isEnd`).
//!
//! Parsing is lenient (protocol.md §1.5): missing keys default, unknown keys are ignored, nulls accepted,
//! and the envelope accepts `content` or `data`.

use serde::{Deserialize, Serialize};

/// `code` for success.
pub const SUCCESS_CODE: i32 = 200;
/// `code` for failure.
pub const FAIL_CODE: i32 = 500;
/// `handleCode` for a timeout.
pub const TIMEOUT_CODE: i32 = 502;

/// The `ReturnT<T>` envelope. Reading accepts the payload as `content` (2.x) or `data` (3.3+),
/// including both at once (what executors answering every admin version send).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ReturnT<T = String> {
    /// 200 success, anything else failure.
    pub code: i32,
    /// Message, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub msg: Option<String>,
    /// Payload (`data` from 3.3 on).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<T>,
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for ReturnT<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(bound(deserialize = "T: Deserialize<'de>"))]
        struct Raw<T> {
            #[serde(default)]
            code: i32,
            #[serde(default)]
            msg: Option<String>,
            #[serde(default = "none")]
            content: Option<T>,
            #[serde(default = "none")]
            data: Option<T>,
        }
        fn none<T>() -> Option<T> {
            None
        }
        let r = Raw::<T>::deserialize(d)?;
        Ok(ReturnT {
            code: r.code,
            msg: r.msg,
            content: r.content.or(r.data),
        })
    }
}

impl<T> ReturnT<T> {
    /// `{code:200}`.
    pub fn success() -> Self {
        ReturnT {
            code: SUCCESS_CODE,
            msg: None,
            content: None,
        }
    }

    /// `{code:500, msg}`.
    pub fn fail(msg: impl Into<String>) -> Self {
        ReturnT {
            code: FAIL_CODE,
            msg: Some(msg.into()),
            content: None,
        }
    }

    /// Whether `code` is 200.
    pub fn is_success(&self) -> bool {
        self.code == SUCCESS_CODE
    }
}

/// `TriggerParam`: admin → executor `/run` (protocol.md §4.1).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TriggerParam {
    /// Job id.
    pub job_id: i32,
    /// Handler name (BEAN).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub executor_handler: Option<String>,
    /// Effective param (plural on the wire).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub executor_params: Option<String>,
    /// Block strategy name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub executor_block_strategy: Option<String>,
    /// Seconds; ≤ 0 = none.
    pub executor_timeout: i32,
    /// Log row id.
    pub log_id: i64,
    /// Epoch ms of the log's trigger time (spelled in full here).
    pub log_date_time: i64,
    /// Glue type name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub glue_type: Option<String>,
    /// Script source.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub glue_source: Option<String>,
    /// Epoch ms of the source version.
    #[serde(rename = "glueUpdatetime")]
    pub glue_updatetime: i64,
    /// Shard index, 0-based.
    pub broadcast_index: i32,
    /// Shard total (1 when not sharded).
    pub broadcast_total: i32,
    /// xjob's addition, sent by a node of a cluster: that node's id. xjob's executors learn each
    /// admin address's node id from their registration answers and send the run's result to
    /// the node that dispatched it, which holds the run's outcome, so one row update writes
    /// both; other executors skip the field.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub xjob_node: Option<std::sync::Arc<str>>,
}

/// `HandleCallbackParam`: one result, executor → admin `/api/callback` (protocol.md §4.2). Written
/// with the date under both its names (2.x's misspelled `logDateTim` and XXL-JOB 3.5's
/// `logDateTime`; each admin ignores the key it does not know); read from either.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HandleCallbackParam {
    /// Log row id.
    pub log_id: i64,
    /// Epoch ms (misspelled on the 2.x wire).
    pub log_date_tim: i64,
    /// 200 success, 500 failure, 502 timeout.
    pub handle_code: i32,
    /// Message.
    pub handle_msg: Option<String>,
}

impl Serialize for HandleCallbackParam {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut o = s.serialize_struct("HandleCallbackParam", 5)?;
        o.serialize_field("logId", &self.log_id)?;
        o.serialize_field("logDateTim", &self.log_date_tim)?;
        o.serialize_field("logDateTime", &self.log_date_tim)?;
        o.serialize_field("handleCode", &self.handle_code)?;
        o.serialize_field("handleMsg", &self.handle_msg)?;
        o.end()
    }
}

impl<'de> Deserialize<'de> for HandleCallbackParam {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase", default)]
        #[derive(Default)]
        struct Wire {
            log_id: i64,
            #[serde(rename = "logDateTim")]
            old: Option<i64>,
            #[serde(rename = "logDateTime")]
            new: Option<i64>,
            handle_code: i32,
            handle_msg: Option<String>,
        }
        let w = Wire::deserialize(d)?;
        Ok(HandleCallbackParam {
            log_id: w.log_id,
            log_date_tim: w.old.or(w.new).unwrap_or_default(),
            handle_code: w.handle_code,
            handle_msg: w.handle_msg,
        })
    }
}

/// `RegistryParam` (protocol.md §4.3).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RegistryParam {
    /// Always `EXECUTOR`.
    pub registry_group: String,
    /// Appname.
    pub registry_key: String,
    /// Address.
    pub registry_value: String,
    /// Set by xjob's own executors (their version): an admin then knows the address takes
    /// xjob's `/runBatch`. XXL-JOB's admins ignore the field (their parsers skip unknown keys).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub xjob_executor: Option<String>,
}

/// `IdleBeatParam` and `KillParam` (protocol.md §4.4).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct JobIdParam {
    /// Job id.
    pub job_id: i32,
}

/// `LogParam` (protocol.md §4.5). Written with the date under both its names (2.x's misspelled
/// `logDateTim` and XXL-JOB 3.5's `logDateTime`); read from either.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LogParam {
    /// Epoch ms (misspelled on the 2.x wire).
    pub log_date_tim: i64,
    /// Log row id.
    pub log_id: i64,
    /// First line wanted, from 1.
    pub from_line_num: i32,
}

impl Serialize for LogParam {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut o = s.serialize_struct("LogParam", 4)?;
        o.serialize_field("logDateTim", &self.log_date_tim)?;
        o.serialize_field("logDateTime", &self.log_date_tim)?;
        o.serialize_field("logId", &self.log_id)?;
        o.serialize_field("fromLineNum", &self.from_line_num)?;
        o.end()
    }
}

impl<'de> Deserialize<'de> for LogParam {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize, Default)]
        #[serde(rename_all = "camelCase", default)]
        struct Wire {
            #[serde(rename = "logDateTim")]
            old: Option<i64>,
            #[serde(rename = "logDateTime")]
            new: Option<i64>,
            log_id: i64,
            from_line_num: i32,
        }
        let w = Wire::deserialize(d)?;
        Ok(LogParam {
            log_date_tim: w.old.or(w.new).unwrap_or_default(),
            log_id: w.log_id,
            from_line_num: w.from_line_num,
        })
    }
}

/// `LogResult` (protocol.md §4.5).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct LogResult {
    /// First line returned.
    pub from_line_num: i32,
    /// Line count of the file.
    pub to_line_num: i32,
    /// The lines, each followed by `\n`.
    pub log_content: String,
    /// Whether the log is complete.
    #[serde(rename = "isEnd")]
    pub is_end: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// TriggerParam serialises with XXL-JOB's exact JSON keys (including `logDateTime`).
    #[test]
    fn trigger_param_uses_exact_keys() {
        let p = TriggerParam {
            job_id: 1,
            executor_params: Some("x".into()),
            ..Default::default()
        };
        let v = serde_json::to_value(&p).expect("serialise");
        for key in [
            "jobId",
            "executorParams",
            "logDateTime",
            "glueUpdatetime",
            "broadcastTotal",
        ] {
            assert!(v.get(key).is_some(), "missing {key} in {v}");
        }
        assert!(
            v.get("executorHandler").is_none(),
            "null fields are omitted"
        );
    }

    /// Wire objects accept what real executors send: missing optional fields, `content` or `data`.
    #[test]
    fn lenient_parsing() {
        let r: ReturnT<LogResult> = serde_json::from_str(
            r#"{"code":200,"msg":null,"data":{"fromLineNum":1,"toLineNum":2,"logContent":"a\n","isEnd":true},"success":true}"#,
        )
        .expect("parse");
        assert!(r.content.expect("content from data").is_end);
        // both keys at once, as executors answering every admin version send
        let both: ReturnT<LogResult> = serde_json::from_str(
            r#"{"code":200,"content":{"toLineNum":3},"data":{"toLineNum":3}}"#,
        )
        .expect("parse both");
        assert_eq!(both.content.map(|c| c.to_line_num), Some(3));
        let c: Vec<HandleCallbackParam> = serde_json::from_str(
            r#"[{"logId":7,"logDateTim":1,"handleCode":200,"executeResult":{"code":200}}]"#,
        )
        .expect("parse");
        assert_eq!(c[0].log_id, 7);
        assert_eq!(c[0].handle_msg, None);
    }
}
