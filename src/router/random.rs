//! RANDOM: a uniformly random address.

use rand::Rng;

/// Index of the pick.
pub(super) fn pick(len: usize, rng: &mut impl Rng) -> usize {
    rng.random_range(0..len)
}
