//! Kernel logic that runs on the host as well as in the kernel.
//!
//! Everything here is free of hardware access so that it is tested with
//! `cargo test -p kcore`. The kernel is a thin layer around these pieces.
#![forbid(unsafe_code)]
#![no_std]

extern crate alloc;
#[cfg(test)]
extern crate std;

pub mod cspace;
pub mod elf;
pub mod framedb;
pub mod frames;
pub mod idlist;
pub mod irqline;
pub mod mapdb;
pub mod modorder;
pub mod pagetable;
pub mod quota;
pub mod runqueue;
pub mod syscall;
pub mod timerheap;
pub mod usercopy;
