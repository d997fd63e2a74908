//! Pure domain types with XXL-JOB's exact spellings (protocol.md §4, §5): enums that parse from and
//! print to their stored names, and the JSON objects of the wire protocol.

mod enums;
mod stored;
pub mod wire;

pub use enums::*;
pub use stored::{AddressType, AlarmStatus, TriggerStatus, fire_state};
