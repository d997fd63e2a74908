//! SHARDING_BROADCAST: every address gets the trigger, address i as shard i of n.

/// The shards of one broadcast trigger: `(index, total)` for each address, or the single shard
/// given (a retry of one shard), or `(0, 1)` when there is nothing to broadcast to.
pub(crate) fn shards(addresses: usize, given: Option<(i32, i32)>) -> Vec<(i32, i32)> {
    match given {
        Some(s) => vec![s],
        None if addresses > 0 => {
            let n = addresses as i32;
            (0..n).map(|i| (i, n)).collect()
        }
        None => vec![(0, 1)],
    }
}

/// The address of shard `index` (the first when out of range, as XXL-JOB does).
pub(crate) fn address(addresses: &[String], index: i32) -> Option<&String> {
    usize::try_from(index)
        .ok()
        .and_then(|i| addresses.get(i))
        .or_else(|| addresses.first())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SHARDING_BROADCAST gives every address one shard index of the total.
    #[test]
    fn every_address_one_shard() {
        assert_eq!(shards(3, None), vec![(0, 3), (1, 3), (2, 3)]);
        assert_eq!(shards(3, Some((1, 3))), vec![(1, 3)]);
        assert_eq!(shards(0, None), vec![(0, 1)]);
        let a = vec!["x".to_string(), "y".to_string()];
        assert_eq!(address(&a, 1), Some(&a[1]));
        assert_eq!(address(&a, 5), Some(&a[0]));
    }
}
