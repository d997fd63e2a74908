//! Texts kept within bounds: what a run row, a log line or a message stores of a text that came
//! from outside (an executor's answer, a param, an address) is cut to fit, and marked as cut,
//! and holds nothing a database cannot store.

use std::borrow::Cow;

/// `text` in at most `max` bytes: whole when it fits, otherwise its start (cut at a character
/// boundary) followed by a marker saying how long it was.
pub(crate) fn cut_bytes(text: &str, max: usize) -> Cow<'_, str> {
    if text.len() <= max {
        return Cow::Borrowed(text);
    }
    let mut marker = format!("… [cut: {} bytes in all]", text.len());
    if marker.len() > max / 2 {
        // a bound too small for the whole marker still says the text goes on
        marker = "…".into();
    }
    let mut end = max.saturating_sub(marker.len());
    while end > 0 && !text.is_char_boundary(end) {
        end -= 1;
    }
    Cow::Owned(format!("{}{marker}", &text[..end]))
}

/// `text` in at most `max` characters, cut and marked like [`cut_bytes`].
pub(crate) fn cut_chars(text: String, max: usize) -> String {
    // a byte length within the limit settles it without counting
    if text.len() <= max || text.chars().count() <= max {
        return text;
    }
    let mut marker = format!("… [cut: {} characters in all]", text.chars().count());
    if marker.len() > max / 2 {
        marker = "…".into();
    }
    let keep = max.saturating_sub(marker.chars().count());
    let mut s: String = text.chars().take(keep).collect();
    s.push_str(&marker);
    s
}

/// `text` without NUL characters (PostgreSQL cannot store them in a text column; the other
/// backends would keep a character nobody can see).
pub(crate) fn storable(text: String) -> String {
    if text.contains('\0') {
        text.replace('\0', "")
    } else {
        text
    }
}

/// [`storable`] and [`cut_chars`] at once: what a text column of `max` characters keeps.
pub(crate) fn column(text: String, max: usize) -> String {
    cut_chars(storable(text), max)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Cut texts fit their bound, keep their start, say they were cut, and never split a
    /// character; texts within bounds are kept whole.
    #[test]
    fn cut_texts_fit_and_say_so() {
        assert_eq!(cut_bytes("short", 10), "short");
        let long = "é".repeat(5_000);
        let c = cut_bytes(&long, 1_000);
        assert!(c.len() <= 1_000, "{}", c.len());
        assert!(
            c.starts_with("éé") && c.ends_with("[cut: 10000 bytes in all]"),
            "{c}"
        );
        let c = cut_chars("字".repeat(300), 255);
        assert_eq!(c.chars().count(), 255);
        assert!(c.ends_with("[cut: 300 characters in all]"), "{c}");
        assert_eq!(cut_chars("abc".into(), 3), "abc");
        assert_eq!(storable("a\0b\0".into()), "ab");
        assert_eq!(
            column(format!("x\0{}", "y".repeat(20)), 10).chars().count(),
            10
        );
    }
}
