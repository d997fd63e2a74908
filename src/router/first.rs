//! FIRST: the first address of the list.

/// Index of the pick.
pub(super) fn pick(_len: usize) -> usize {
    0
}
