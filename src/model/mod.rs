//! Pure domain types with XXL-JOB's exact spellings (spec §5, §6): enums that parse from and
//! print to their stored names, and the JSON objects of the wire protocol.

mod enums;
pub mod wire;

pub use enums::*;
