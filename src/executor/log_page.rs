//! A page out of a `/log` answer too large to read whole.
//!
//! XXL-JOB executors answer `/log` with every line from `fromLineNum` to the end of the file in
//! one JSON body, so a long run's log can be any size. The HTTP client reads at most
//! [`LOG_BODY_CAP`] bytes of it; when the body is longer, the page is cut out of that prefix:
//! the whole lines of `logContent` it holds, with `toLineNum` moved back to the last of them, so
//! the reader asks again from `toLineNum + 1` and reads the rest in pages of the same size.

use crate::model::wire::{LogResult, ReturnT, SUCCESS_CODE};

/// Most bytes of a `/log` body read per answer (XXL-JOB's 5 MiB).
pub(super) const LOG_BODY_CAP: usize = 5 * 1024 * 1024;

/// The page in `prefix`, the first bytes of a longer `ReturnT<LogResult>` body asked from line
/// `from`; `None` when the prefix holds no `logContent` or names a code other than 200.
pub(super) fn page_from_prefix(prefix: &[u8], from: i32) -> Option<ReturnT<LogResult>> {
    // the cap may fall inside a character: keep what decodes
    let text = match std::str::from_utf8(prefix) {
        Ok(t) => t,
        Err(e) => std::str::from_utf8(&prefix[..e.valid_up_to()]).ok()?,
    };
    let content_at = value_after_key(text, "logContent")?;
    if let Some(code_at) = value_after_key(&text[..content_at], "code") {
        let digits: String = text[code_at..]
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '-')
            .collect();
        if digits.parse::<i32>().ok()? != SUCCESS_CODE {
            return None;
        }
    }
    let (mut content, complete) = decode_string_prefix(text[content_at..].strip_prefix('"')?);
    let lines = if complete {
        content.matches('\n').count()
    } else if let Some(last) = content.rfind('\n') {
        content.truncate(last + 1);
        content.matches('\n').count()
    } else {
        // one line longer than the page: its start, marked, stands for the whole line
        let cut = content.len();
        content.push_str(&format!(" … [line cut: longer than {cut} bytes]\n"));
        1
    };
    Some(ReturnT {
        code: SUCCESS_CODE,
        msg: None,
        content: Some(LogResult {
            from_line_num: from,
            to_line_num: from.saturating_add(lines as i32).saturating_sub(1),
            log_content: content,
            is_end: false,
        }),
    })
}

/// Where the value of `"key":` starts in `text` (after blanks), if the key is there.
fn value_after_key(text: &str, key: &str) -> Option<usize> {
    let quoted = format!("\"{key}\"");
    let mut from = 0;
    while let Some(at) = text[from..].find(&quoted) {
        let after = from + at + quoted.len();
        let rest = text[after..].trim_start();
        if let Some(value) = rest.strip_prefix(':') {
            let value = value.trim_start();
            return Some(text.len() - value.len());
        }
        from = after;
    }
    None
}

/// Decodes the JSON string text that starts `s` (after its opening quote): the decoded text and
/// whether its closing quote was reached. A prefix ending inside an escape stops before it.
fn decode_string_prefix(s: &str) -> (String, bool) {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => return (out, true),
            '\\' => {
                let rest = chars.as_str();
                let Some((decoded, used)) = unescape(rest) else {
                    return (out, false);
                };
                out.push(decoded);
                chars = rest[used..].chars();
            }
            c => out.push(c),
        }
    }
    (out, false)
}

/// The character an escape (text after its `\`) stands for and the bytes it used; `None` when
/// the escape is cut off. An invalid escape or a lone surrogate reads as U+FFFD.
fn unescape(rest: &str) -> Option<(char, usize)> {
    let first = rest.chars().next()?;
    let simple = match first {
        '"' => '"',
        '\\' => '\\',
        '/' => '/',
        'b' => '\u{8}',
        'f' => '\u{c}',
        'n' => '\n',
        'r' => '\r',
        't' => '\t',
        'u' => {
            let hex = |h: &str| u32::from_str_radix(h, 16).ok();
            let Some(hi) = rest.get(1..5) else {
                // cut off, unless a non-ASCII character sits in the four digits
                return (rest.len() >= 5).then_some(('\u{FFFD}', 1));
            };
            let Some(hi) = hex(hi) else {
                return Some(('\u{FFFD}', 5));
            };
            if !(0xD800..0xDC00).contains(&hi) {
                return Some((char::from_u32(hi).unwrap_or('\u{FFFD}'), 5));
            }
            // a high surrogate pairs with the `\uXXXX` after it
            let after = &rest[5..];
            let Some(tail) = after.get(..6) else {
                if after.is_empty() || after.starts_with('\\') {
                    return None;
                }
                return Some(('\u{FFFD}', 5));
            };
            let lo = tail.strip_prefix("\\u").and_then(hex);
            if let Some(lo) = lo.filter(|lo| (0xDC00..0xE000).contains(lo)) {
                let c = 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00);
                return Some((char::from_u32(c).unwrap_or('\u{FFFD}'), 11));
            }
            return Some(('\u{FFFD}', 5));
        }
        _ => '\u{FFFD}',
    };
    Some((simple, first.len_utf8()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(content: &str, to: i32) -> Vec<u8> {
        serde_json::to_vec(&serde_json::json!({
            "code": 200,
            "msg": null,
            "content": {"fromLineNum": 3, "toLineNum": to, "logContent": content, "end": false},
        }))
        .expect("encode")
    }

    /// A prefix cut anywhere keeps only whole lines and says where they end.
    #[test]
    fn a_cut_body_pages_at_its_last_whole_line() {
        let content = "first \"line\" \u{4e2d}\u{6587}\nsecond\ttab \u{1F600}\nthird\n";
        let full = body(content, 5);
        for cut in 0..full.len() {
            let Some(page) = page_from_prefix(&full[..cut], 3) else {
                continue;
            };
            let p = page.content.expect("a page");
            assert!(!p.is_end);
            if let Some((start, _)) = p.log_content.split_once(" … [line cut") {
                // the cut fell inside the first line: its start stands for it
                assert!(content.starts_with(start), "cut {cut}: {p:?}");
                assert!(!start.contains('\n'), "cut {cut}: {p:?}");
                assert_eq!(p.to_line_num, 3, "cut {cut}");
                continue;
            }
            assert!(content.starts_with(&p.log_content), "cut {cut}: {p:?}");
            assert!(p.log_content.ends_with('\n'), "cut {cut}: {p:?}");
            let lines = p.log_content.matches('\n').count() as i32;
            assert_eq!(p.to_line_num, 3 + lines - 1, "cut {cut}");
        }
        let whole = page_from_prefix(&full, 3)
            .expect("whole")
            .content
            .expect("page");
        assert_eq!(whole.log_content, content);
        assert_eq!(whole.to_line_num, 5);
    }

    /// A single line longer than the prefix is read as its start, marked as cut.
    #[test]
    fn a_line_longer_than_the_page_is_cut_and_marked() {
        let long = "x".repeat(1000);
        let full = body(&format!("{long}\nnext\n"), 4);
        let page = page_from_prefix(&full[..500], 3)
            .expect("page")
            .content
            .expect("content");
        assert_eq!(page.to_line_num, 3);
        assert!(page.log_content.starts_with("xxx"));
        assert!(page.log_content.ends_with("]\n"), "{}", page.log_content);
        assert!(page.log_content.contains("line cut"));
    }

    /// A failure code or a body without log text is not a page.
    #[test]
    fn failures_and_other_bodies_are_not_pages() {
        let failed = br#"{"code":500,"msg":"no","content":{"logContent":"a\nb\n"#;
        assert!(page_from_prefix(failed, 1).is_none());
        assert!(page_from_prefix(br#"{"code":200,"msg":"xxxxxxxx"#, 1).is_none());
        // spacing as any JSON writer may put it
        let spaced = b"{ \"code\" : 200 , \"content\" : { \"logContent\" : \"a\\nb";
        let p = page_from_prefix(spaced, 1)
            .expect("page")
            .content
            .expect("c");
        assert_eq!((p.log_content.as_str(), p.to_line_num), ("a\n", 1));
    }

    /// Escapes decode as JSON defines them, surrogate pairs included; cut escapes stop the text.
    #[test]
    fn escapes_decode_and_cut_escapes_stop() {
        assert_eq!(
            decode_string_prefix(r#"a\"b\\c\/d\n\u00e9\ud83d\ude00" tail"#),
            ("a\"b\\c/d\né😀".to_string(), true)
        );
        assert_eq!(decode_string_prefix(r"ab\u00"), ("ab".to_string(), false));
        assert_eq!(
            decode_string_prefix(r"ab\ud83d\ude"),
            ("ab".to_string(), false)
        );
        assert_eq!(decode_string_prefix(r"ab\"), ("ab".to_string(), false));
        assert_eq!(
            decode_string_prefix(r"\ud83dx"),
            ("\u{FFFD}x".to_string(), false)
        );
    }
}
