//! Load an ELF program into a new task: segments and stack are filled in a scratch
//! range of the loader's own space and granted to the child; the child gets its own
//! task and thread capabilities and a `StartInfo`. Used by root.

use crate::sys;
use abi::layout::{MAIN_STACK_PAGES, MAIN_STACK_TOP, MAIN_UTCB, PAGE_SIZE};
use abi::{cap, mem, rights, Error, StartInfo};
use kcore::elf::{self, ElfError};

const SCRATCH: u64 = 0x0000_3000_0000_0000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadError {
    Elf(ElfError),
    Sys(Error),
    ArgsTooLong,
}

impl From<Error> for LoadError {
    fn from(e: Error) -> Self {
        LoadError::Sys(e)
    }
}

pub struct Child {
    /// Slot (in the loader's space) of the child's task capability (CONTROL).
    pub task: u64,
    /// Slot of its first thread (SEND | CONTROL).
    pub thread: u64,
    pub entry: u64,
    pub start_info: u64,
}

impl Child {
    /// Let the first thread run.
    pub fn start(&self) -> Result<(), Error> {
        sys::thread_start(self.thread, self.entry, self.start_info - 8, self.start_info)
    }
}

/// Fill `n` scratch pages with `fill` and move them to `dst` in `task`.
fn place(task: u64, dst: u64, n: u64, rights: u64, fill: impl FnOnce(&mut [u8])) -> Result<(), Error> {
    // All rights on the scratch copy, so that any subset can be granted.
    sys::mem_alloc(cap::SELF_TASK, SCRATCH, n, mem::READ | mem::WRITE | mem::EXEC)?;
    // SAFETY: the scratch range was just mapped, writable, n pages long, and nothing
    // else refers to it.
    let buf = unsafe { core::slice::from_raw_parts_mut(SCRATCH as *mut u8, (n * PAGE_SIZE) as usize) };
    fill(buf);
    // SAFETY: `buf` is not used after the grant removes the scratch pages.
    let r = unsafe { sys::mem_map(task, SCRATCH, dst, n, rights | mem::GRANT) };
    if r.is_err() {
        // SAFETY: as above; the pages are still ours after a failed grant.
        let _ = unsafe { sys::unmap_pages(SCRATCH, n) };
    }
    r
}

pub fn load(image: &[u8], args: &str, quota: u64, prio: u64) -> Result<Child, LoadError> {
    let e = elf::parse(image).map_err(LoadError::Elf)?;
    if args.len() > abi::START_ARGS_MAX {
        return Err(LoadError::ArgsTooLong);
    }
    let task = crate::alloc_slot();
    sys::task_create(task, quota)?;
    let r = fill_task(task, &e, image, args, prio);
    if r.is_err() {
        let _ = sys::task_destroy(task);
        let _ = sys::cap_delete(task);
    }
    r
}

fn fill_task(task: u64, e: &elf::Elf, image: &[u8], args: &str, prio: u64) -> Result<Child, LoadError> {
    for s in e.segments() {
        let (start, end) = s.page_range();
        let mut r = mem::READ;
        if s.write {
            r |= mem::WRITE;
        }
        if s.exec {
            r |= mem::EXEC;
        }
        let data = &image[s.offset as usize..(s.offset + s.filesz) as usize];
        place(task, start, (end - start) / PAGE_SIZE, r, |buf| {
            let at = (s.vaddr - start) as usize;
            buf[at..at + data.len()].copy_from_slice(data);
        })?;
    }
    let si_addr = MAIN_STACK_TOP - core::mem::size_of::<StartInfo>() as u64;
    place(task, MAIN_STACK_TOP - MAIN_STACK_PAGES * PAGE_SIZE, MAIN_STACK_PAGES, mem::READ | mem::WRITE, |buf| {
        let mut si = StartInfo {
            magic: abi::START_MAGIC,
            utcb: MAIN_UTCB,
            bootfs_addr: 0,
            bootfs_len: 0,
            args_len: args.len() as u64,
            args: [0; abi::START_ARGS_MAX],
        };
        si.args[..args.len()].copy_from_slice(args.as_bytes());
        let off = buf.len() - core::mem::size_of::<StartInfo>();
        // SAFETY: StartInfo is plain old data; viewing it as bytes is sound.
        let bytes = unsafe {
            core::slice::from_raw_parts(&si as *const StartInfo as *const u8, core::mem::size_of::<StartInfo>())
        };
        buf[off..].copy_from_slice(bytes);
    })?;
    let thread = crate::alloc_slot();
    sys::thread_create(task, thread, MAIN_UTCB, prio)?;
    sys::cap_give(task, task, cap::SELF_TASK, rights::CONTROL)?;
    sys::cap_give(task, thread, cap::SELF_THREAD, rights::SEND | rights::CONTROL)?;
    Ok(Child { task, thread, entry: e.entry, start_info: si_addr })
}
