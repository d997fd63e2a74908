//! CONSISTENT_HASH exactly as XXL-JOB computes it (protocol.md §7.6): 100 virtual nodes per address
//! keyed `SHARD-<address>-NODE-<i>`, hash = MD5 of the UTF-8 key with the first four digest bytes
//! read little-endian as an unsigned 32-bit number; a job (key = its decimal id) goes to the
//! first ring entry at or above its hash, wrapping to the smallest.

use std::collections::BTreeMap;

use md5::{Digest, Md5};

/// Virtual nodes per address.
pub(super) const VIRTUAL_NODES: usize = 100;

/// XXL-JOB's hash of a key.
pub(super) fn hash_key(key: &str) -> u32 {
    let d = Md5::digest(key.as_bytes());
    u32::from_le_bytes([d[0], d[1], d[2], d[3]])
}

/// A ring built once per address list.
#[derive(Debug)]
pub(crate) struct HashRing {
    ring: BTreeMap<u32, String>,
}

impl HashRing {
    /// Builds the ring for `addresses` (later addresses win a hash collision, as in XXL-JOB).
    pub(crate) fn new(addresses: &[String]) -> Self {
        let mut ring = BTreeMap::new();
        for a in addresses {
            for i in 0..VIRTUAL_NODES {
                ring.insert(hash_key(&format!("SHARD-{a}-NODE-{i}")), a.clone());
            }
        }
        HashRing { ring }
    }

    /// The address for `job_id`.
    pub(crate) fn pick(&self, job_id: i32) -> Option<&str> {
        let h = hash_key(&job_id.to_string());
        self.ring
            .range(h..)
            .next()
            .or_else(|| self.ring.iter().next())
            .map(|(_, a)| a.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The consistent-hash key is MD5's first four bytes little-endian, as the reference computes.
    #[test]
    fn md5_le_hash_matches_reference_digest() {
        // MD5("1") = c4ca4238a0b923820dcc509a6f75849b → first 4 bytes c4 ca 42 38 little-endian.
        assert_eq!(hash_key("1"), 0x3842_cac4);
    }
}
