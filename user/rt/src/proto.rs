//! The protocol between programs and root (message labels and their words).
//!
//! - `EXIT` (call to `PARENT`): MR1 = exit code. Root destroys the task; no reply.
//! - `SPAWN` (call to `PARENT`, string = "name args"): MR1 = slot in the caller's
//!   capability space for a SEND capability to the new program's first thread; the
//!   slot after it receives a CONTROL capability for the new task. The new program
//!   gets a SEND capability to the caller's first thread in its `PEER` slot, badged
//!   with the new program's id. Reply: MR1 = 0 or an error code, MR2 = the new
//!   program's id.

pub const EXIT: u64 = 1;
pub const SPAWN: u64 = 2;

/// Badges root gives: the program id, plus this bit on fault messages.
pub const FAULT_BADGE: u64 = 1 << 32;
