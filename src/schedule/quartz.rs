//! A Quartz-dialect cron expression (the one XXL-JOB uses): `sec min hour dom month dow [year]`,
//! with `*`, `?`, lists, ranges (wrapping, e.g. `22-2`), steps, month and day names, `L`, `L-n`,
//! `W`, `LW` in day-of-month, and `L`, `nL`, `n#k` in day-of-week (1 = SUN … 7 = SAT).
//! As in Quartz, exactly one of the two day fields must be `?`.
//!
//! Evaluation is in a named time zone. Across DST changes: a wall time that does not exist
//! (spring forward) fires at the matching instant after the gap; a wall time that occurs twice
//! (fall back) fires once, at its first occurrence, unless the expression matches every hour, in
//! which case it keeps its interval through both occurrences.

use chrono::{Datelike, Duration, NaiveDate, NaiveDateTime, Offset, TimeZone, Timelike};
use chrono_tz::Tz;

use crate::error::{Error, Result};

const MAX_YEAR: i32 = 2099;
const MIN_YEAR: i32 = 1970;

#[derive(Clone, Debug, PartialEq, Eq)]
enum DomSpec {
    NoSpec,
    Days(u32),
    Last(u32),
    LastWeekday,
    NearestWeekday(u32),
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum DowSpec {
    NoSpec,
    Days(u8),
    LastOf(u32),
    Nth(u32, u32),
}

/// A parsed Quartz cron expression.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CronExpr {
    seconds: u64,
    minutes: u64,
    hours: u32,
    dom: DomSpec,
    months: u16,
    dow: DowSpec,
    /// Bit i = year 1970 + i; `None` = every year.
    years: Option<[u64; 3]>,
}

const MONTHS: [&str; 12] = [
    "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
];
const DAYS: [&str; 7] = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];

struct Field<'a> {
    name: &'static str,
    min: u32,
    max: u32,
    names: &'a [&'a str],
}

impl Field<'_> {
    fn err(&self, text: &str, why: impl std::fmt::Display) -> Error {
        Error::InvalidSchedule {
            conf: text.to_string(),
            reason: format!("{} field: {why}", self.name),
        }
    }

    fn value(&self, full: &str, s: &str) -> Result<u32> {
        let up = s.to_ascii_uppercase();
        if let Some(i) = self.names.iter().position(|n| *n == up) {
            return Ok(self.min + i as u32);
        }
        let v: u32 = s
            .parse()
            .map_err(|_| self.err(full, format!("`{s}` is not a number")))?;
        if v < self.min || v > self.max {
            return Err(self.err(
                full,
                format!("{v} is out of range {}-{}", self.min, self.max),
            ));
        }
        Ok(v)
    }

    /// Parses a list of `*`, `a`, `a-b`, `a/s`, `a-b/s`, `*/s` into the set of values.
    fn set(&self, full: &str, text: &str) -> Result<Vec<u32>> {
        let mut out = Vec::new();
        for part in text.split(',') {
            if part.is_empty() {
                return Err(self.err(full, "empty list item"));
            }
            let (range, step) = match part.split_once('/') {
                Some((r, s)) => {
                    let step: u32 = s
                        .parse()
                        .map_err(|_| self.err(full, format!("step `{s}` is not a number")))?;
                    if step == 0 || step > self.max {
                        return Err(self.err(full, format!("step {step} is out of range")));
                    }
                    (r, Some(step))
                }
                None => (part, None),
            };
            let (lo, hi) = if range == "*" {
                (self.min, self.max)
            } else if let Some((a, b)) = range.split_once('-') {
                (self.value(full, a)?, self.value(full, b)?)
            } else {
                let v = self.value(full, range)?;
                (v, if step.is_some() { self.max } else { v })
            };
            let span = self.max - self.min + 1;
            let count = if hi >= lo { hi - lo } else { hi + span - lo };
            let step = step.unwrap_or(1);
            let mut k = 0;
            while k <= count {
                let v = lo + k;
                out.push(if v > self.max { v - span } else { v });
                k += step;
            }
        }
        Ok(out)
    }
}

fn bits64(vals: &[u32]) -> u64 {
    vals.iter().fold(0, |acc, v| acc | (1u64 << v))
}

/// The lowest set bit at or above `from`.
fn next_bit(mask: u64, from: u32) -> Option<u32> {
    if from >= 64 {
        return None;
    }
    let m = mask >> from;
    (m != 0).then(|| from + m.trailing_zeros())
}

fn days_in_month(y: i32, m: u32) -> u32 {
    let (ny, nm) = if m == 12 { (y + 1, 1) } else { (y, m + 1) };
    NaiveDate::from_ymd_opt(ny, nm, 1)
        .and_then(|d| d.pred_opt())
        .map_or(28, |d| d.day())
}

/// Day of week, 1 = SUN … 7 = SAT.
fn quartz_dow(d: NaiveDate) -> u32 {
    d.weekday().num_days_from_sunday() + 1
}

impl std::str::FromStr for CronExpr {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        CronExpr::parse(s)
    }
}

impl CronExpr {
    /// Parses a Quartz expression; the error names the field and what is wrong.
    pub fn parse(text: &str) -> Result<Self> {
        let parts: Vec<&str> = text.split_whitespace().collect();
        if parts.len() != 6 && parts.len() != 7 {
            return Err(Error::InvalidSchedule {
                conf: text.to_string(),
                reason: format!(
                    "expected 6 or 7 fields (sec min hour day-of-month month day-of-week [year]), found {}",
                    parts.len()
                ),
            });
        }
        let f = |name, min, max, names| Field {
            name,
            min,
            max,
            names,
        };
        let sec = f("second", 0, 59, &[]);
        let min = f("minute", 0, 59, &[]);
        let hour = f("hour", 0, 23, &[]);
        let domf = f("day-of-month", 1, 31, &[]);
        let mon = f("month", 1, 12, &MONTHS);
        let dowf = f("day-of-week", 1, 7, &DAYS);
        let yearf = f("year", MIN_YEAR as u32, MAX_YEAR as u32, &[]);

        let no_q = |fl: &Field, p: &str| {
            if p.contains('?') {
                Err(fl.err(text, "`?` is only allowed in day-of-month or day-of-week"))
            } else {
                Ok(())
            }
        };
        for (fl, p) in [
            (&sec, parts[0]),
            (&min, parts[1]),
            (&hour, parts[2]),
            (&mon, parts[4]),
        ] {
            no_q(fl, p)?;
        }
        let seconds = bits64(&sec.set(text, parts[0])?);
        let minutes = bits64(&min.set(text, parts[1])?);
        let hours = bits64(&hour.set(text, parts[2])?) as u32;
        let months = bits64(&mon.set(text, parts[4])?) as u16;
        let dom = Self::parse_dom(&domf, text, parts[3])?;
        let dow = Self::parse_dow(&dowf, text, parts[5])?;
        match (&dom, &dow) {
            (DomSpec::NoSpec, DowSpec::NoSpec) => {
                return Err(dowf.err(text, "`?` may stand in only one of the two day fields"));
            }
            (DomSpec::NoSpec, _) | (_, DowSpec::NoSpec) => {}
            _ => {
                return Err(dowf.err(
                    text,
                    "day-of-month and day-of-week cannot both be set; use `?` in one of them",
                ));
            }
        }
        let years = match parts.get(6) {
            None => None,
            Some(p) if *p == "*" => None,
            Some(p) => {
                no_q(&yearf, p)?;
                let mut bits = [0u64; 3];
                for y in yearf.set(text, p)? {
                    let i = (y - MIN_YEAR as u32) as usize;
                    bits[i / 64] |= 1 << (i % 64);
                }
                Some(bits)
            }
        };
        Ok(CronExpr {
            seconds,
            minutes,
            hours,
            dom,
            months,
            dow,
            years,
        })
    }

    fn parse_dom(fl: &Field, text: &str, p: &str) -> Result<DomSpec> {
        let up = p.to_ascii_uppercase();
        if up == "?" {
            return Ok(DomSpec::NoSpec);
        }
        if up == "L" {
            return Ok(DomSpec::Last(0));
        }
        if up == "LW" {
            return Ok(DomSpec::LastWeekday);
        }
        if let Some(off) = up.strip_prefix("L-") {
            let n: u32 = off
                .parse()
                .map_err(|_| fl.err(text, format!("`{p}`: offset is not a number")))?;
            if n > 30 {
                return Err(fl.err(text, format!("`{p}`: offset must be 0-30")));
            }
            return Ok(DomSpec::Last(n));
        }
        if let Some(day) = up.strip_suffix('W') {
            let d = fl.value(text, day)?;
            return Ok(DomSpec::NearestWeekday(d));
        }
        if up.contains('L') || up.contains('W') {
            return Err(fl.err(
                text,
                format!("`{p}`: L and W cannot be combined with lists"),
            ));
        }
        Ok(DomSpec::Days(bits64(&fl.set(text, p)?) as u32))
    }

    fn parse_dow(fl: &Field, text: &str, p: &str) -> Result<DowSpec> {
        let up = p.to_ascii_uppercase();
        if up == "?" {
            return Ok(DowSpec::NoSpec);
        }
        if up == "L" {
            return Ok(DowSpec::Days(1 << 7));
        }
        if let Some((d, n)) = up.split_once('#') {
            let d = fl.value(text, d)?;
            let n: u32 = n
                .parse()
                .map_err(|_| fl.err(text, format!("`{p}`: the week after # is not a number")))?;
            if !(1..=5).contains(&n) {
                return Err(fl.err(text, format!("`{p}`: the week after # must be 1-5")));
            }
            return Ok(DowSpec::Nth(d, n));
        }
        if let Some(d) = up.strip_suffix('L') {
            return Ok(DowSpec::LastOf(fl.value(text, d)?));
        }
        if up.contains('L') {
            return Err(fl.err(text, format!("`{p}`: L cannot be combined with lists")));
        }
        Ok(DowSpec::Days(bits64(&fl.set(text, p)?) as u8))
    }

    fn year_ok(&self, y: i32) -> bool {
        if !(MIN_YEAR..=MAX_YEAR).contains(&y) {
            return false;
        }
        match &self.years {
            None => true,
            Some(b) => {
                let i = (y - MIN_YEAR) as usize;
                b[i / 64] & (1 << (i % 64)) != 0
            }
        }
    }

    fn day_ok(&self, d: NaiveDate) -> bool {
        let (y, m, day) = (d.year(), d.month(), d.day());
        let last = days_in_month(y, m);
        match self.dom {
            DomSpec::NoSpec => {}
            DomSpec::Days(b) => return b & (1 << day) != 0,
            DomSpec::Last(off) => return last > off && day == last - off,
            DomSpec::LastWeekday => {
                let wd = quartz_dow(d.with_day(last).unwrap_or(d));
                let target = match wd {
                    7 => last - 1,
                    1 => last - 2,
                    _ => last,
                };
                return day == target;
            }
            DomSpec::NearestWeekday(n) => {
                if n > last {
                    return false;
                }
                let Some(nd) = d.with_day(n) else {
                    return false;
                };
                let target = match quartz_dow(nd) {
                    7 if n == 1 => 3,
                    7 => n - 1,
                    1 if n == last => n - 2,
                    1 => n + 1,
                    _ => n,
                };
                return day == target;
            }
        }
        let wd = quartz_dow(d);
        match self.dow {
            DowSpec::NoSpec => true,
            DowSpec::Days(b) => b & (1 << wd) != 0,
            DowSpec::LastOf(w) => wd == w && day + 7 > last,
            DowSpec::Nth(w, n) => wd == w && (day - 1) / 7 + 1 == n,
        }
    }

    /// First matching (h, m, s) at or after the given time of day.
    fn time_from(&self, h0: u32, m0: u32, s0: u32) -> Option<(u32, u32, u32)> {
        let mut h = next_bit(self.hours as u64, h0)?;
        loop {
            let mstart = if h == h0 { m0 } else { 0 };
            let mut mm = next_bit(self.minutes, mstart);
            while let Some(m) = mm {
                let sstart = if h == h0 && m == m0 { s0 } else { 0 };
                if let Some(s) = next_bit(self.seconds, sstart) {
                    return Some((h, m, s));
                }
                mm = next_bit(self.minutes, m + 1);
            }
            h = next_bit(self.hours as u64, h + 1)?;
        }
    }

    /// The next matching wall time strictly after `after` (second resolution), if any by 2099.
    pub fn next_after_naive(&self, after: NaiveDateTime) -> Option<NaiveDateTime> {
        let start = after.with_nanosecond(0)? + Duration::seconds(1);
        let mut date = start.date();
        let (mut h, mut m, mut s) = (start.hour(), start.minute(), start.second());
        loop {
            let y = date.year();
            if y > MAX_YEAR {
                return None;
            }
            if !self.year_ok(y) {
                date = NaiveDate::from_ymd_opt(y + 1, 1, 1)?;
                (h, m, s) = (0, 0, 0);
                continue;
            }
            if self.months & (1 << date.month()) == 0 {
                date = if date.month() == 12 {
                    NaiveDate::from_ymd_opt(y + 1, 1, 1)?
                } else {
                    NaiveDate::from_ymd_opt(y, date.month() + 1, 1)?
                };
                (h, m, s) = (0, 0, 0);
                continue;
            }
            if self.day_ok(date)
                && let Some((hh, mm, ss)) = self.time_from(h, m, s)
            {
                return date.and_hms_opt(hh, mm, ss);
            }
            date = date.succ_opt()?;
            (h, m, s) = (0, 0, 0);
        }
    }

    fn all_hours(&self) -> bool {
        self.hours == (1 << 24) - 1
    }

    /// The next fire time strictly after `after_ms` (epoch ms), evaluated in `tz`.
    pub fn next_after(&self, after_ms: i64, tz: Tz) -> Option<i64> {
        let after = chrono::DateTime::from_timestamp_millis(after_ms)?;
        let mut cursor = after.with_timezone(&tz).naive_local();
        // Bounded: a wall time is skipped only inside a repeated hour.
        for _ in 0..100_000 {
            let cand = self.next_after_naive(cursor)?;
            cursor = cand;
            let inst = match tz.from_local_datetime(&cand) {
                chrono::LocalResult::Single(x) => x.timestamp_millis(),
                chrono::LocalResult::Ambiguous(e, l) => {
                    if e.timestamp_millis() > after_ms {
                        e.timestamp_millis()
                    } else if self.all_hours() && l.timestamp_millis() > after_ms {
                        l.timestamp_millis()
                    } else {
                        continue;
                    }
                }
                chrono::LocalResult::None => {
                    // In a spring-forward gap: use the offset in force before the gap.
                    let before = tz
                        .from_local_datetime(&(cand - Duration::hours(3)))
                        .earliest()?;
                    let off = i64::from(before.offset().fix().local_minus_utc());
                    (cand.and_utc().timestamp() - off) * 1000
                }
            };
            if inst <= after_ms {
                continue;
            }
            if self.all_hours()
                && let Some(alt) = self.repeated_hour_fire(after_ms, inst, tz)
            {
                return Some(alt);
            }
            return Some(inst);
        }
        None
    }

    /// If the offset fell back between `after_ms` and `inst`, an interval expression also fires
    /// in the repeated wall-clock period; returns such an earlier instant.
    fn repeated_hour_fire(&self, after_ms: i64, inst: i64, tz: Tz) -> Option<i64> {
        let off = |ms: i64| -> Option<i32> {
            let t = chrono::DateTime::from_timestamp_millis(ms)?;
            Some(
                tz.offset_from_utc_datetime(&t.naive_utc())
                    .fix()
                    .local_minus_utc(),
            )
        };
        let (oa, oi) = (off(after_ms)?, off(inst)?);
        if oi >= oa {
            return None;
        }
        let (mut lo, mut hi) = (after_ms.div_euclid(1000), inst.div_euclid(1000));
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if off(mid * 1000)? == oa {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        let x = hi * 1000;
        let wall = chrono::DateTime::from_timestamp_millis(x)?
            .with_timezone(&tz)
            .naive_local();
        let cand = self.next_after_naive(wall - Duration::seconds(1))?;
        let alt = tz.from_local_datetime(&cand).latest()?.timestamp_millis();
        (alt >= x && alt > after_ms && alt < inst).then_some(alt)
    }
}
