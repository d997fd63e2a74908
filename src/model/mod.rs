//! Pure domain types with XXL-JOB's exact spellings (spec §5, §6): enums that parse from and
//! print to their stored names, and the JSON objects of the wire protocol.

mod enums;
mod stored;
pub mod wire;

pub use enums::*;
pub use stored::{AddressType, AlarmStatus, TriggerStatus, fire_state};
