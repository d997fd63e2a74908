//! The trigger summary of a run (`xxl_job_log.trigger_msg`): stored compactly, shown as
//! XXL-JOB's HTML.
//!
//! Most of XXL-JOB's summary is the same ~400 bytes of labels and markup on every run. Writing it
//! into every row made the log table three times larger and every run's final update slower, so
//! a trigger stores only the variable parts, behind a marker ([`Summary::compact`]), and every
//! read of a run row renders the text ([`render`]). Rows written by XXL-JOB itself, or by
//! older xjob versions, carry the full text and are shown as stored.

use std::borrow::Cow;
use std::fmt::Write as _;

use crate::bounded::cut_bytes;
use crate::model::{BlockStrategy, RouteStrategy, TriggerType};

/// Starts a compact summary (format version 1). No text XXL-JOB writes starts with a control
/// character.
const MARK: &str = "\u{1}1";
/// Separates the fields of a compact summary.
const SEP: char = '\u{1f}';
/// Fields of a version-1 summary.
const FIELDS: usize = 13;
/// Bytes of the address list a summary keeps (the rest is counted): every shard of a broadcast
/// carries its own summary, so a whole list would make a broadcast's memory and rows grow with
/// the square of its addresses.
const MAX_ADDRESSES_SHOWN: usize = 1024;
/// Bytes a summary keeps of the routing transcript and of the executor's answer.
const MAX_TEXT_SHOWN: usize = 4096;

/// What a trigger knows about one dispatched shard.
#[derive(Clone, Debug)]
pub(crate) struct Summary<'a> {
    /// Why it fired.
    pub trigger_type: TriggerType,
    /// The admin address of the node that fired it.
    pub admin_address: &'a str,
    /// Addresses given by hand (a manual list or a manually registered group).
    pub manual_registration: bool,
    /// The addresses it could route to.
    pub addresses: &'a [String],
    /// The job's route strategy (`None`: not a known one).
    pub route: Option<RouteStrategy>,
    /// `(index, total)` of a broadcast shard.
    pub shard: Option<(i32, i32)>,
    /// The job's block strategy.
    pub block: Option<BlockStrategy>,
    /// Task timeout, seconds.
    pub timeout: i32,
    /// Retries left on failure.
    pub retry: i32,
    /// The routing transcript (failover / busyover probes, or why routing failed).
    pub route_msg: &'a str,
    /// The `/run` call made: address, answer code and message.
    pub run: Option<(&'a str, i32, Option<&'a str>)>,
}

fn push_field(out: &mut String, text: &str) {
    out.push(SEP);
    push_clean(out, text);
}

/// Appends `text` with the separator and the marker character replaced by spaces (allocates
/// nothing for text without them: the usual case, once per fire).
fn push_clean(out: &mut String, text: &str) {
    if text.contains([SEP, '\u{1}']) {
        out.extend(
            text.chars()
                .map(|c| if c == SEP || c == '\u{1}' { ' ' } else { c }),
        );
    } else {
        out.push_str(text);
    }
}

impl Summary<'_> {
    /// The stored form: the variable parts only.
    pub(crate) fn compact(&self) -> String {
        // sized for everything it holds (grown from a guess, it was copied on most fires)
        let listed: usize = self
            .addresses
            .iter()
            .map(|a| a.len().min(300) + 1)
            .sum::<usize>()
            .min(MAX_ADDRESSES_SHOWN + 310);
        let run = self.run.map_or(0, |(a, _, m)| {
            a.len().min(300) + 12 + m.map_or(4, |m| m.len().min(MAX_TEXT_SHOWN + 4))
        });
        let mut s = String::with_capacity(
            64 + self.admin_address.len()
                + self.route_msg.len().min(MAX_TEXT_SHOWN + 4)
                + listed
                + run,
        );
        s.push_str(MARK);
        push_field(&mut s, self.trigger_type.as_str());
        push_field(&mut s, self.admin_address);
        push_field(&mut s, if self.manual_registration { "M" } else { "A" });
        s.push(SEP);
        // a broadcast's every shard carries this summary: the list is kept short
        let mut listed = 0;
        for (i, a) in self.addresses.iter().enumerate() {
            if listed + a.len() > MAX_ADDRESSES_SHOWN && i > 0 {
                let _ = write!(s, ",… ({} more)", self.addresses.len() - i);
                break;
            }
            if i > 0 {
                s.push(',');
            }
            push_clean(&mut s, &crate::bounded::cut_bytes(a, 300));
            listed += a.len() + 1;
        }
        push_field(&mut s, self.route.map_or("", RouteStrategy::as_str));
        s.push(SEP);
        if let Some((i, n)) = self.shard {
            let _ = write!(s, "{i}/{n}");
        }
        push_field(&mut s, self.block.map_or("", BlockStrategy::as_str));
        let _ = write!(s, "{SEP}{}{SEP}{}", self.timeout, self.retry);
        push_field(&mut s, &cut_bytes(self.route_msg, MAX_TEXT_SHOWN));
        match self.run {
            Some((address, code, msg)) => {
                push_field(&mut s, &cut_bytes(address, 300));
                let _ = write!(s, "{SEP}{code}");
                push_field(&mut s, &cut_bytes(msg.unwrap_or("null"), MAX_TEXT_SHOWN));
            }
            None => {
                s.push(SEP);
                s.push(SEP);
                s.push(SEP);
            }
        }
        s
    }
}

/// The text to show for a stored `trigger_msg`: a compact summary rendered as XXL-JOB's HTML,
/// anything else as stored.
pub fn render(stored: &str) -> Cow<'_, str> {
    let Some(rest) = stored.strip_prefix(MARK) else {
        return Cow::Borrowed(stored);
    };
    let f: Vec<&str> = rest.split(SEP).skip(1).collect();
    if f.len() != FIELDS {
        return Cow::Borrowed(stored);
    }
    let title: &str = match f[0].parse::<TriggerType>() {
        Ok(t) => t.title(),
        Err(_) => f[0],
    };
    let mut s = String::with_capacity(480 + stored.len());
    let _ = write!(
        s,
        "Trigger type：{title}<br>Trigger admin address：{}<br>Executor registration type：{}\
         <br>Executor address list：{}<br>Route strategy：{}{}<br>Block strategy：{}\
         <br>Task timeout：{}<br>Retry count on failure：{}",
        f[1],
        if f[2] == "M" {
            "Manual registration"
        } else {
            "Automatic registration"
        },
        if f[3].is_empty() { "null" } else { f[3] },
        f[4].parse::<RouteStrategy>()
            .map_or("null", RouteStrategy::title),
        if f[5].is_empty() {
            String::new()
        } else {
            format!("({})", f[5])
        },
        f[6].parse::<BlockStrategy>()
            .unwrap_or(BlockStrategy::SerialExecution)
            .title(),
        f[7],
        f[8],
    );
    s.push_str(
        "<br><br><span style=\"color:#00c0ef;\" > >>>>>>>>>>>Trigger<<<<<<<<<<< </span><br>",
    );
    if !f[9].is_empty() {
        s.push_str(f[9]);
        s.push_str("<br><br>");
    }
    if !f[10].is_empty() {
        let _ = write!(
            s,
            "Trigger Job：<br>address：{}<br>code：{}<br>msg：{}",
            f[10], f[11], f[12]
        );
    }
    Cow::Owned(s)
}

/// The short reason of a failed trigger in a stored `trigger_msg`: its routing message, else
/// the executor's answer; anything not a compact summary as stored.
pub(crate) fn reason(stored: &str) -> String {
    let Some(rest) = stored.strip_prefix(MARK) else {
        return stored.to_string();
    };
    let f: Vec<&str> = rest.split(SEP).skip(1).collect();
    if f.len() != FIELDS {
        return stored.to_string();
    }
    if !f[9].is_empty() {
        return f[9].to_string();
    }
    format!("trigger failed at {}: code {} {}", f[10], f[11], f[12])
}

/// [`render`] in place on an optional stored value.
pub(crate) fn render_in_place(msg: &mut Option<String>) {
    if let Some(m) = msg
        && let Cow::Owned(text) = render(m)
    {
        *m = text;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn summary<'a>(addresses: &'a [String], route_msg: &'a str) -> Summary<'a> {
        Summary {
            trigger_type: TriggerType::Cron,
            admin_address: "http://admin:8080/",
            manual_registration: false,
            addresses,
            route: Some(RouteStrategy::Round),
            shard: None,
            block: Some(BlockStrategy::SerialExecution),
            timeout: 0,
            retry: 2,
            route_msg,
            run: Some(("http://e:9999/", 200, None)),
        }
    }

    /// A compact summary is a fraction of the text and renders as XXL-JOB's summary.
    #[test]
    fn a_compact_summary_renders_as_xxl_jobs_text() {
        let addresses = vec!["http://e:9999/".to_string(), "http://f:9999/".to_string()];
        let s = summary(&addresses, "");
        let stored = s.compact();
        let shown = render(&stored);
        assert_eq!(
            shown,
            "Trigger type：Cron trigger<br>Trigger admin address：http://admin:8080/<br>\
             Executor registration type：Automatic registration<br>Executor address list：\
             http://e:9999/,http://f:9999/<br>Route strategy：Round<br>Block strategy：Serial \
             execution<br>Task timeout：0<br>Retry count on failure：2<br><br><span \
             style=\"color:#00c0ef;\" > >>>>>>>>>>>Trigger<<<<<<<<<<< </span><br>Trigger Job：\
             <br>address：http://e:9999/<br>code：200<br>msg：null"
        );
        assert!(
            stored.len() * 3 < shown.len(),
            "{} vs {}",
            stored.len(),
            shown.len()
        );
        let failed = Summary {
            addresses: &[],
            route: None,
            shard: Some((1, 3)),
            route_msg: "Trigger Fail：registry address is empty",
            run: None,
            manual_registration: true,
            ..s
        };
        let shown = render(&failed.compact()).into_owned();
        assert!(
            shown.contains("registration type：Manual registration<br>Executor address list：null")
                && shown.contains("Route strategy：null(1/3)")
                && shown.ends_with("</span><br>Trigger Fail：registry address is empty<br><br>"),
            "{shown}"
        );
    }

    /// A summary's size does not grow with the address list or a long answer: a broadcast over
    /// 1,000 addresses keeps about 1 KiB of the list and counts the rest; a 1 MiB answer or
    /// transcript is cut to a few KiB and marked.
    #[test]
    fn a_summary_is_bounded_whatever_it_is_given() {
        let addresses: Vec<String> = (0..1_000)
            .map(|i| format!("http://10.0.{}.{}:9999/", i / 250, i % 250))
            .collect();
        let huge = "x".repeat(1 << 20);
        let s = Summary {
            shard: Some((7, 1_000)),
            run: Some(("http://e:9999/", 500, Some(&huge))),
            ..summary(&addresses, &huge)
        };
        let stored = s.compact();
        assert!(stored.len() < 10 * 1024, "{} bytes", stored.len());
        let shown = render(&stored).into_owned();
        assert!(
            shown.contains("http://10.0.0.0:9999/,http://10.0.0.1:9999/"),
            "{shown}"
        );
        assert!(shown.contains("more)"), "the rest is counted");
        assert!(
            shown.contains("[cut: 1048576 bytes in all]"),
            "answers are marked as cut"
        );
        // a short list is kept whole
        let few = vec!["http://a:1/".to_string(), "http://b:1/".to_string()];
        assert!(render(&summary(&few, "").compact()).contains("http://a:1/,http://b:1/<br>"));
    }

    /// Text that is not a compact summary (XXL-JOB's own rows, appended notes) is shown as
    /// stored.
    #[test]
    fn other_text_is_shown_as_stored() {
        for t in ["", "Trigger type：Cron trigger<br>…", "\u{1}1\u{1f}too few"] {
            assert_eq!(render(t), t);
        }
    }

    proptest! {
        /// Whatever the free-text fields hold, the summary renders every one of them (the
        /// separators become spaces) and never fails.
        #[test]
        fn free_text_round_trips(admin in ".{0,40}", transcript in ".{0,80}", msg in ".{0,80}") {
            let addresses = vec!["a".to_string()];
            let s = Summary {
                admin_address: &admin,
                run: Some(("a", 500, Some(&msg))),
                ..summary(&addresses, &transcript)
            };
            let shown = render(&s.compact()).into_owned();
            let clean = |t: &str| t.replace([SEP, '\u{1}'], " ");
            prop_assert!(shown.contains(&format!("admin address：{}<br>", clean(&admin))), "{}", shown);
            prop_assert!(shown.ends_with(&format!("msg：{}", clean(&msg))), "{}", shown);
            if !transcript.is_empty() {
                prop_assert!(shown.contains(&clean(&transcript)), "{}", shown);
            }
        }
    }
}
