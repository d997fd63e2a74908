//! LAST: the last address of the list.

/// Index of the pick.
pub(super) fn pick(len: usize) -> usize {
    len.saturating_sub(1)
}
