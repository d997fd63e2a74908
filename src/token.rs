//! Access tokens on the wire (protocol.md §1): header `XXL-JOB-ACCESS-TOKEN` (and the pre-2.2
//! `XXL-RPC-ACCESS-TOKEN`), compared in constant time.

use actix_web::HttpRequest;

/// The header XXL-JOB 2.2+ sends.
pub(crate) const TOKEN_HEADER: &str = "XXL-JOB-ACCESS-TOKEN";
/// The header XXL-JOB before 2.2 sent (still sent by some clients).
pub(crate) const OLD_TOKEN_HEADER: &str = "XXL-RPC-ACCESS-TOKEN";
/// The header XXL-JOB 3.5 sends (and requires) with the caller's or callee's app name, in both
/// directions.
pub(crate) const APP_HEADER: &str = "XXL-JOB-APPNAME";
/// The answer to a wrong token.
pub(crate) const WRONG_TOKEN: &str = "The access token is wrong.";

/// Bytes as lower-case hex.
pub(crate) fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

/// `bytes` random bytes (from the OS-seeded CSPRNG) as lower-case hex: generated tokens and
/// passwords.
pub fn random_hex(bytes: usize) -> String {
    hex(&(0..bytes)
        .map(|_| rand::random::<u8>())
        .collect::<Vec<u8>>())
}

/// Compares two byte strings in time independent of where they differ; strings of different
/// lengths are never equal, whatever the difference (all of it counts, not some of its bits).
pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = u8::from(a.len() != b.len());
    for i in 0..a.len().max(b.len()) {
        let x = a.get(i).copied().unwrap_or(0);
        let y = b.get(i).copied().unwrap_or(0);
        diff |= x ^ y;
    }
    diff == 0
}

/// Whether `req` carries `expected` (any request passes when no token is configured).
pub(crate) fn token_ok(req: &HttpRequest, expected: Option<&str>) -> bool {
    let Some(expected) = expected.filter(|t| !t.trim().is_empty()) else {
        return true;
    };
    [TOKEN_HEADER, OLD_TOKEN_HEADER].iter().any(|h| {
        req.headers()
            .get(*h)
            .is_some_and(|v| constant_time_eq(v.as_bytes(), expected.as_bytes()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Token comparison is equal only for equal bytes, whatever the lengths.
    #[test]
    fn equality() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"abcd"));
        assert!(!constant_time_eq(b"", b"a"));
        assert!(constant_time_eq(b"", b""));
        // lengths that differ by a multiple of 65,536 (the old fold kept 16 bits of the
        // difference) and a longer string padded with NULs are still unequal
        let short = b"tok".to_vec();
        let mut long = short.clone();
        long.resize(short.len() + 65_536, 0);
        assert!(!constant_time_eq(&short, &long));
        assert!(!constant_time_eq(&long, &short));
        assert!(!constant_time_eq(b"", &[0u8; 65_536]));
    }
}
