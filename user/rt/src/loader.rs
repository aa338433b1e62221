//! Start programs in new tasks. Two ways, by who will page the program:
//!
//! - `spawn_paged`: a memory server pages it. The loader only makes the task and its
//!   first thread and names the server as the thread's pager; the caller (root)
//!   registers the program (its file in the boot image, its command line, its page
//!   limit) with the server (`mem_api`), which fills every page on first touch.
//! - `load_granted`: for servers paged by sigma0 (the memory servers themselves).
//!   The loader fills the ELF segments and the stack in a scratch range of its own
//!   (pages from its pager) and grants them to the child.
//!
//! Either way the child gets its own task and thread capabilities in the slots
//! `abi::cap` names, and starts with `rdi` = its `StartInfo`.

use crate::sys;
use abi::layout::{MAIN_STACK_PAGES, MAIN_STACK_TOP, MAIN_UTCB, PAGE_SIZE};
use abi::{cap, mem, rights, Error, StartInfo};
use kcore::elf::{self, ElfError};

const SCRATCH: u64 = crate::layout::LOADER_SCRATCH;

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
}

const START_INFO: u64 = MAIN_STACK_TOP - core::mem::size_of::<StartInfo>() as u64;

impl Child {
    /// Destroy the task (if still there) and give its capability slots back.
    pub fn discard(&self) {
        discard(self.task, self.thread);
    }

    /// Let the first thread run.
    pub fn start(&self) -> Result<(), Error> {
        sys::thread_start(self.thread, self.entry, START_INFO - 8, START_INFO)
    }
}

/// Destroy a task that was being made and give both slots back.
fn discard(task: u64, thread: u64) {
    let _ = sys::task_destroy(task);
    crate::free_slot(thread);
    crate::free_slot(task);
}

/// Make the task and first thread (stopped), with their capabilities in the child.
fn make(kquota: u64, prio: u64) -> Result<(u64, u64), Error> {
    let task = crate::alloc_slot();
    if let Err(e) = sys::task_create(task, kquota) {
        crate::free_slot(task);
        return Err(e);
    }
    let thread = crate::alloc_slot();
    let r = sys::thread_create(task, thread, MAIN_UTCB, prio)
        .and_then(|_| sys::cap_give(task, task, cap::SELF_TASK, rights::CONTROL))
        .and_then(|_| sys::cap_give(task, thread, cap::SELF_THREAD, rights::SEND | rights::CONTROL));
    if let Err(e) = r {
        discard(task, thread);
        return Err(e);
    }
    Ok((task, thread))
}

fn check_args(args: &str) -> Result<(), LoadError> {
    if args.len() > abi::START_ARGS_MAX {
        Err(LoadError::ArgsTooLong)
    } else {
        Ok(())
    }
}

/// Make a task for `cmdline` (checked against `image`, its ELF file) paged by the
/// memory server in `pager` under `badge`; the caller registers it with the server
/// before starting it, and calls `discard` if that fails.
pub fn spawn_paged(
    image: &[u8],
    cmdline: &str,
    kquota: u64,
    prio: u64,
    pager: u64,
    badge: u64,
) -> Result<Child, LoadError> {
    let e = elf::parse(image).map_err(LoadError::Elf)?;
    check_args(cmdline)?;
    let (task, thread) = make(kquota, prio)?;
    if let Err(e) = sys::thread_set_pager(thread, pager, badge) {
        discard(task, thread);
        return Err(LoadError::Sys(e));
    }
    Ok(Child { task, thread, entry: e.entry })
}

/// Fill `n` scratch pages with `fill` and move them to `dst` in `task`.
fn place(task: u64, dst: u64, n: u64, rights: u64, fill: impl FnOnce(&mut [u8])) -> Result<(), Error> {
    sys::prefault(SCRATCH, n);
    // SAFETY: the scratch range is this loader's alone, now present and writable, and
    // nothing else refers to it.
    let buf = unsafe { core::slice::from_raw_parts_mut(SCRATCH as *mut u8, (n * PAGE_SIZE) as usize) };
    buf.fill(0);
    fill(buf);
    // One MEM_MAP moves at most MAX_PAGES_PER_CALL pages.
    let mut done = 0;
    while done < n {
        let k = (n - done).min(mem::MAX_PAGES_PER_CALL);
        let off = done * PAGE_SIZE;
        // SAFETY: `buf` is not used after the grants remove the scratch pages.
        let r = unsafe { sys::mem_map(task, SCRATCH + off, dst + off, k, rights | mem::GRANT) };
        if r.is_err() {
            // SAFETY: as above; the pages not yet granted are still ours.
            let _ = unsafe { sys::unmap_pages(SCRATCH + off, n - done) };
            return r;
        }
        done += k;
    }
    Ok(())
}

/// Start a program whose memory the loader provides up front (granted from its own).
pub fn load_granted(image: &[u8], args: &str, kquota: u64, prio: u64) -> Result<Child, LoadError> {
    let e = elf::parse(image).map_err(LoadError::Elf)?;
    check_args(args)?;
    let (task, thread) = make(kquota, prio)?;
    let r = fill_task(task, &e, image, args);
    if let Err(err) = r {
        discard(task, thread);
        return Err(err);
    }
    Ok(Child { task, thread, entry: e.entry })
}

fn fill_task(task: u64, e: &elf::Elf, image: &[u8], args: &str) -> Result<(), LoadError> {
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
    Ok(())
}
