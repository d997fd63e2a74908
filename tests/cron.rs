//! The Quartz dialect against known next fire times: the spec's vector table (`L`, `W`, `#`,
//! years, steps, names), rejections, DST changes in a named zone, and properties (monotonic,
//! matching, and agreeing with the `cron` crate where both parse an expression).
#![allow(clippy::unwrap_used)]

use chrono::{NaiveDate, TimeZone};
use chrono_tz::Tz;
use proptest::prelude::*;
use xjob::testing::CronExpr;

/// 2026-11-21 14:00:00 UTC.
const FROM: i64 = 1_795_269_600_000;

fn utc(s: &str) -> i64 {
    let s = if s.len() == 10 {
        format!("{s} 00:00:00")
    } else {
        s.to_string()
    };
    chrono::NaiveDateTime::parse_from_str(&s, "%Y-%m-%d %H:%M:%S")
        .unwrap()
        .and_utc()
        .timestamp_millis()
}

fn next3(expr: &str, tz: Tz, from: i64) -> Vec<i64> {
    let c = CronExpr::parse(expr).unwrap_or_else(|e| panic!("{expr}: {e}"));
    let mut out = vec![];
    let mut t = from;
    while out.len() < 3 {
        match c.next_after(t, tz) {
            Some(n) => {
                out.push(n);
                t = n;
            }
            None => break,
        }
    }
    out
}

/// The spec's cron vectors give the spec's next times.
#[test]
fn spec_vectors() {
    let table: &[(&str, &[&str])] = &[
        (
            "0/5 * * * * ?",
            &[
                "2026-11-21 14:00:05",
                "2026-11-21 14:00:10",
                "2026-11-21 14:00:15",
            ],
        ),
        (
            "0 0 1 ? * L",
            &[
                "2026-11-28 01:00:00",
                "2026-12-05 01:00:00",
                "2026-12-12 01:00:00",
            ],
        ),
        (
            "0 15 10 ? * 6#3",
            &[
                "2026-12-18 10:15:00",
                "2027-01-15 10:15:00",
                "2027-02-19 10:15:00",
            ],
        ),
        (
            "0 0 12 1/5 * ?",
            &[
                "2026-11-26 12:00:00",
                "2026-12-01 12:00:00",
                "2026-12-06 12:00:00",
            ],
        ),
        ("0 0 0 L * ?", &["2026-11-30", "2026-12-31", "2027-01-31"]),
        (
            "0 0 12 15W * ?",
            &[
                "2026-12-15 12:00:00",
                "2027-01-15 12:00:00",
                "2027-02-15 12:00:00",
            ],
        ),
        ("0 0 0 LW * ?", &["2026-11-30", "2026-12-31", "2027-01-29"]),
        (
            "0 15 10 ? * 6L",
            &[
                "2026-11-27 10:15:00",
                "2026-12-25 10:15:00",
                "2027-01-29 10:15:00",
            ],
        ),
        (
            "0 0 12 ? * 2#1",
            &[
                "2026-12-07 12:00:00",
                "2027-01-04 12:00:00",
                "2027-02-01 12:00:00",
            ],
        ),
        ("0 0 0 L-3 * ?", &["2026-11-27", "2026-12-28", "2027-01-28"]),
        (
            "0 15 10 ? * 1",
            &[
                "2026-11-22 10:15:00",
                "2026-11-29 10:15:00",
                "2026-12-06 10:15:00",
            ],
        ),
        (
            "0 0 10 ? * MON-FRI",
            &[
                "2026-11-23 10:00:00",
                "2026-11-24 10:00:00",
                "2026-11-25 10:00:00",
            ],
        ),
        (
            "0 0/30 9-17 * * ?",
            &[
                "2026-11-21 14:30:00",
                "2026-11-21 15:00:00",
                "2026-11-21 15:30:00",
            ],
        ),
        ("0 0 0 * * ? *", &["2026-11-22", "2026-11-23", "2026-11-24"]),
        ("0 0 0 1 1 ? 2028", &["2028-01-01"]),
        (
            "0 0 12 ? * SAT#2",
            &[
                "2026-12-12 12:00:00",
                "2027-01-09 12:00:00",
                "2027-02-13 12:00:00",
            ],
        ),
    ];
    for (expr, want) in table {
        let want: Vec<i64> = want.iter().map(|s| utc(s)).collect();
        assert_eq!(next3(expr, chrono_tz::UTC, FROM), want, "{expr}");
    }
}

/// Further Quartz forms (wrapping hour ranges, month names, lists, steps over ranges) give the expected next times.
#[test]
fn more_forms() {
    // wrapping hour range 22-2, month names, lists, and a step over a range
    assert_eq!(
        next3("0 0 22-2 * * ?", chrono_tz::UTC, FROM),
        vec![
            utc("2026-11-21 22:00:00"),
            utc("2026-11-21 23:00:00"),
            utc("2026-11-22 00:00:00")
        ]
    );
    assert_eq!(
        next3("0 0 0 1 JAN,jul ?", chrono_tz::UTC, FROM),
        vec![utc("2027-01-01"), utc("2027-07-01"), utc("2028-01-01")]
    );
    assert_eq!(
        next3("10-40/15 0 15 * * ?", chrono_tz::UTC, FROM),
        vec![
            utc("2026-11-21 15:00:10"),
            utc("2026-11-21 15:00:25"),
            utc("2026-11-21 15:00:40")
        ]
    );
    // 31W in a 30-day month does not fire; Feb 29 only in leap years
    assert_eq!(
        next3("0 0 0 29 2 ?", chrono_tz::UTC, FROM),
        vec![utc("2028-02-29"), utc("2032-02-29"), utc("2036-02-29")]
    );
}

/// Invalid cron expressions are refused with a message naming the problem.
#[test]
fn rejections_name_the_problem() {
    for (expr, needle) in [
        ("0 0 1 15 * 2", "day-of-week"),
        ("* * * * *", "expected 6 or 7 fields"),
        ("60 * * * * ?", "second field"),
        ("0 0 0 ? * 6#6", "must be 1-5"),
        ("0 0 0 ? * ?", "only one"),
        ("0 0 25 * * ?", "hour field"),
        ("0 0 0 * 13 ?", "month field"),
        ("*/0 * * * * ?", "step 0"),
        ("0 ? * * * ?", "minute field"),
        ("0 0 0 1 1 ? 1969", "year field"),
    ] {
        let e = CronExpr::parse(expr).unwrap_err().to_string();
        assert!(
            e.contains(needle),
            "`{expr}` → `{e}` should mention `{needle}`"
        );
    }
}

/// Next times stay right across Berlin's DST changes (a time in the spring gap fires just after it).
#[test]
fn dst_changes_in_berlin() {
    let tz: Tz = "Europe/Berlin".parse().unwrap();
    let berlin = |y, mo, d, h, mi| {
        tz.with_ymd_and_hms(y, mo, d, h, mi, 0)
            .earliest()
            .unwrap()
            .timestamp_millis()
    };
    // Spring forward 2026-03-29 02:00 CET → 03:00 CEST: 02:30 does not exist and fires at the
    // matching instant after the gap (01:30 UTC = 03:30 CEST).
    let from = berlin(2026, 3, 28, 12, 0);
    assert_eq!(
        next3("0 30 2 * * ?", tz, from),
        vec![
            berlin(2026, 3, 29, 3, 30),
            berlin(2026, 3, 30, 2, 30),
            berlin(2026, 3, 31, 2, 30)
        ]
    );
    assert_eq!(berlin(2026, 3, 29, 3, 30), utc("2026-03-29 01:30:00"));
    // Fall back 2026-10-25 03:00 CEST → 02:00 CET: a daily 02:30 fires once (first occurrence).
    let from = berlin(2026, 10, 24, 12, 0);
    assert_eq!(
        next3("0 30 2 * * ?", tz, from),
        vec![
            utc("2026-10-25 00:30:00"),
            utc("2026-10-26 01:30:00"),
            utc("2026-10-27 01:30:00")
        ]
    );
    // …while an every-30-minutes expression keeps its interval through both occurrences.
    let from = utc("2026-10-24 23:50:00");
    let c = CronExpr::parse("0 0/30 * * * ?").unwrap();
    let mut t = from;
    let mut got = vec![];
    for _ in 0..6 {
        t = c.next_after(t, tz).unwrap();
        got.push(t);
    }
    let want: Vec<i64> = ["00:00", "00:30", "01:00", "01:30", "02:00", "02:30"]
        .iter()
        .map(|hm| utc(&format!("2026-10-25 {hm}:00")))
        .collect();
    assert_eq!(got, want);
}

fn field(max: u32, min: u32) -> impl Strategy<Value = String> {
    prop_oneof![
        Just("*".to_string()),
        (min..=max).prop_map(|v| v.to_string()),
        (min..=max, 1..=max.max(2)).prop_map(|(a, s)| format!("{a}/{s}")),
        (min..=max, min..=max).prop_map(|(a, b)| format!("{}-{}", a.min(b), a.max(b))),
        (min..=max, min..=max).prop_map(|(a, b)| format!("{a},{b}")),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Where the `cron` crate also parses an expression (no L/W/#, day-of-week given as `?`),
    /// both agree on the next fire time.
    #[test]
    fn agrees_with_the_cron_crate(
        s in field(59, 0), m in field(59, 0), h in field(23, 0), d in field(28, 1), mo in field(12, 1),
        from in 0i64..2_000_000_000, // Quartz years end at 2099; the cron crate goes on
    ) {
        let expr = format!("{s} {m} {h} {d} {mo} ?");
        let ours = CronExpr::parse(&expr).unwrap();
        let theirs: cron::Schedule = expr.parse().unwrap();
        let from_ms = FROM + from * 1000;
        let start = chrono::Utc.timestamp_millis_opt(from_ms).unwrap();
        let want = theirs.after(&start).next().map(|t| t.timestamp_millis());
        prop_assert_eq!(ours.next_after(from_ms, chrono_tz::UTC), want, "{}", expr);
    }

    /// Next times are strictly increasing and each one matches the expression's wall time.
    #[test]
    fn monotonic_and_matching(
        s in field(59, 0), m in field(59, 0), h in field(23, 0),
        zone in prop::sample::select(vec!["UTC", "Europe/Berlin", "America/New_York", "Asia/Shanghai"]),
        from in 0i64..400_000_000,
    ) {
        let expr = format!("{s} {m} {h} * * ?");
        let c = CronExpr::parse(&expr).unwrap();
        let tz: Tz = zone.parse().unwrap();
        let mut t = FROM + from * 1000;
        for _ in 0..5 {
            let n = c.next_after(t, tz).unwrap();
            prop_assert!(n > t);
            let wall = chrono::DateTime::from_timestamp_millis(n).unwrap().with_timezone(&tz).naive_local();
            // the wall time is one the expression matches (a DST gap shifts it by the gap)
            let again = c.next_after_naive(wall - chrono::Duration::seconds(1));
            prop_assert!(again == Some(wall) || tz.from_local_datetime(&(wall - chrono::Duration::hours(1))).single().is_none()
                || tz.from_local_datetime(&wall).single().is_none(), "{} at {}", expr, wall);
            t = n;
        }
    }
}

/// The next time after an instant is strictly later than it.
#[test]
fn next_after_naive_is_strict() {
    let c = CronExpr::parse("* * * * * ?").unwrap();
    let t = NaiveDate::from_ymd_opt(2026, 1, 1)
        .unwrap()
        .and_hms_opt(0, 0, 0)
        .unwrap();
    assert_eq!(
        c.next_after_naive(t),
        Some(t + chrono::Duration::seconds(1))
    );
}
