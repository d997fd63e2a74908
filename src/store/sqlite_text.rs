//! DATETIME columns as text on the run-row writer's SQLite connection: written as sqlx
//! writes them and read as chrono reads what sqlx wrote, so the writer's connection and the
//! pool read the same values.

use crate::clock::ms_to_naive;

/// DATETIME text as sqlx writes it (`%F %T%.f`), so both connections read the same values.
/// Written digit by digit: chrono's formatter parsed the pattern on every call and was 5 % of the
/// SQLite writer's time at 5,000 remote fires/s.
pub(crate) fn naive_text(ms: i64) -> String {
    use chrono::{Datelike, Timelike};
    let t = ms_to_naive(ms);
    if !(0..=9999).contains(&t.year()) {
        return t.format("%F %T%.f").to_string();
    }
    fn push(out: &mut String, v: u32, digits: u32) {
        for d in (0..digits).rev() {
            out.push(char::from(b'0' + (v / 10u32.pow(d) % 10) as u8));
        }
    }
    let mut out = String::with_capacity(23);
    push(&mut out, t.year() as u32, 4);
    out.push('-');
    push(&mut out, t.month(), 2);
    out.push('-');
    push(&mut out, t.day(), 2);
    out.push(' ');
    push(&mut out, t.hour(), 2);
    out.push(':');
    push(&mut out, t.minute(), 2);
    out.push(':');
    push(&mut out, t.second(), 2);
    let nanos = t.nanosecond();
    // `%.f`: nothing for whole seconds, else 3, 6 or 9 digits
    if nanos != 0 {
        out.push('.');
        if nanos.is_multiple_of(1_000_000) {
            push(&mut out, nanos / 1_000_000, 3);
        } else if nanos.is_multiple_of(1_000) {
            push(&mut out, nanos / 1_000, 6);
        } else {
            push(&mut out, nanos, 9);
        }
    }
    out
}

/// Reads a DATETIME column written by either connection.
pub(crate) fn naive(text: Option<String>) -> Option<chrono::NaiveDateTime> {
    let t = text?;
    naive_fast(t.as_bytes()).or_else(|| {
        ["%Y-%m-%d %H:%M:%S%.f", "%Y-%m-%dT%H:%M:%S%.f"]
            .iter()
            .find_map(|f| chrono::NaiveDateTime::parse_from_str(&t, f).ok())
    })
}

/// `YYYY-MM-DD HH:MM:SS` (or `T` between), then `.` and 1–9 fraction digits or nothing: what
/// both connections write, read digit by digit (chrono's parser walks its pattern on every call,
/// 1.5 % of a job start's server time). Anything else is left to chrono.
fn naive_fast(b: &[u8]) -> Option<chrono::NaiveDateTime> {
    fn num(b: &[u8]) -> Option<u32> {
        b.iter().try_fold(0u32, |n, &c| {
            c.is_ascii_digit().then(|| n * 10 + u32::from(c - b'0'))
        })
    }
    if b.len() < 19
        || (b[4], b[7], b[13], b[16]) != (b'-', b'-', b':', b':')
        || !matches!(b[10], b' ' | b'T')
    {
        return None;
    }
    let nanos = match &b[19..] {
        [] => 0,
        [b'.', digits @ ..] if (1..=9).contains(&digits.len()) => {
            num(digits)? * 10u32.pow(9 - digits.len() as u32)
        }
        _ => return None,
    };
    let date = chrono::NaiveDate::from_ymd_opt(
        i32::try_from(num(&b[0..4])?).ok()?,
        num(&b[5..7])?,
        num(&b[8..10])?,
    )?;
    let time = chrono::NaiveTime::from_hms_nano_opt(
        num(&b[11..13])?,
        num(&b[14..16])?,
        num(&b[17..19])?,
        nanos,
    )?;
    Some(date.and_time(time))
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// A DATETIME text reads as chrono's parser reads it (the hand-written reader takes the
        /// written forms, chrono the rest); junk after it is refused by both.
        #[test]
        fn datetimes_read_as_chrono_reads_them(
            ms in -70_000_000_000_000i64..300_000_000_000_000,
            frac in 0usize..11,
            t: bool,
            junk in proptest::option::of("[0-9:. T-]{1,3}"),
        ) {
            // the written form, its fraction cut to `frac` digits, a `T`, trailing junk
            let mut text = ms_to_naive(ms).format("%F %T%.9f").to_string();
            if let Some(dot) = text.find('.') {
                text.truncate(if frac == 0 { dot } else { (dot + 1 + frac).min(text.len()) });
            }
            if t {
                text = text.replacen(' ', "T", 1);
            }
            text.push_str(junk.as_deref().unwrap_or_default());
            let chrono = ["%Y-%m-%d %H:%M:%S%.f", "%Y-%m-%dT%H:%M:%S%.f"]
                .iter()
                .find_map(|f| chrono::NaiveDateTime::parse_from_str(&text, f).ok());
            proptest::prop_assert_eq!(naive(Some(text.clone())), chrono, "{}", text);
            if junk.is_none() && (0..=9999).contains(&chrono::Datelike::year(&ms_to_naive(ms))) {
                proptest::prop_assert!(naive_fast(text.as_bytes()).is_some(), "{}", text);
            }
        }

        /// The hand-written DATETIME text is exactly chrono's `%F %T%.f`, whole seconds included.
        #[test]
        fn naive_text_is_chronos_format(ms in -70_000_000_000_000i64..300_000_000_000_000, whole: bool) {
            let ms = if whole { ms - ms.rem_euclid(1000) } else { ms };
            proptest::prop_assert_eq!(
                naive_text(ms),
                ms_to_naive(ms).format("%F %T%.f").to_string()
            );
        }
    }
}
