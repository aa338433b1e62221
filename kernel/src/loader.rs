//! Start the two boot tasks from the boot image:
//!
//! - **sigma0** receives every usable frame the kernel does not keep for itself, and
//!   the device-memory window, mapped at `SIGMA0_PHYS + physical address`, plus every
//!   I/O port. It hands them out (L4's sigma0). Its start arguments list its RAM runs.
//! - **root** gets the boot image (read-only), its first capabilities (its task and
//!   thread, the machine, IRQ control, sigma0), and sigma0 as its pager.

use crate::kernel::Kernel;
use crate::mem::{self, phys_to_virt, BootInfo};
use crate::task::{self, Obj};
use abi::layout::{self, PAGE_SIZE};
use abi::{cap, mem as m, rights, StartInfo};
use alloc::string::String;
use core::fmt::Write;
use kcore::cspace::Cap;
use kcore::pagetable as pt;

/// Quota (kernel pages) for sigma0's page tables and thread.
/// sigma0's kernel quota before the page tables for its memory.
const SIGMA0_QUOTA: u64 = 1024;

struct Boot {
    task: u32,
    thread: u32,
    entry: u64,
}

/// Load an ELF from the boot image into a new task with a stack and a first thread.
fn load(k: &mut Kernel, image: &[u8], name: &str, quota: u64, prio: u64) -> Boot {
    let elf = kcore::elf::parse(image).unwrap_or_else(|e| panic!("{} is not a valid ELF executable: {:?}", name, e));
    let tid = k.create_task(quota, None).expect("boot task");
    let t = k.task(tid);
    for s in elf.segments() {
        let (start, end) = s.page_range();
        let mut rights = m::READ;
        if s.write {
            rights |= m::WRITE;
        }
        if s.exec {
            rights |= m::EXEC;
        }
        let mut page = start;
        while page < end {
            let f = mem::alloc_frame().expect("memory for a boot task");
            let lo = page.max(s.vaddr);
            let hi = (page + PAGE_SIZE).min(s.vaddr + s.filesz);
            if hi > lo {
                let src = &image[(s.offset + (lo - s.vaddr)) as usize..(s.offset + (hi - s.vaddr)) as usize];
                // SAFETY: the fresh frame is ours; `lo - page + len <= PAGE_SIZE`.
                unsafe { core::ptr::copy_nonoverlapping(src.as_ptr(), phys_to_virt(f + (lo - page)), src.len()) };
            }
            t.map_frame(page, f, task::pte_flags(rights)).expect("map boot task segment");
            page += PAGE_SIZE;
        }
    }
    let stack_bottom = layout::MAIN_STACK_TOP - layout::MAIN_STACK_PAGES * PAGE_SIZE;
    for i in 0..layout::MAIN_STACK_PAGES {
        let f = mem::alloc_frame().expect("memory for a boot stack");
        t.map_frame(stack_bottom + i * PAGE_SIZE, f, task::pte_flags(m::READ | m::WRITE)).expect("map boot stack");
    }
    let th = k.create_thread(tid, layout::MAIN_UTCB, prio as u8, false).expect("boot thread");
    let (task_ref, thread_ref) = (k.task_ref(tid), k.thread_ref(th));
    k.cap_install(tid, cap::SELF_TASK, Cap { obj: Obj::Task(task_ref), rights: rights::CONTROL, badge: 0 }).unwrap();
    k.cap_install(
        tid,
        cap::SELF_THREAD,
        Cap { obj: Obj::Thread(thread_ref), rights: rights::SEND | rights::CONTROL, badge: 0 },
    )
    .unwrap();
    Boot { task: tid, thread: th, entry: elf.entry }
}

fn start(k: &mut Kernel, b: &Boot, args: &str, bootfs: (u64, u64)) {
    let mut si = StartInfo {
        magic: abi::START_MAGIC,
        utcb: layout::MAIN_UTCB,
        bootfs_addr: bootfs.0,
        bootfs_len: bootfs.1,
        args_len: args.len().min(abi::START_ARGS_MAX) as u64,
        args: [0; abi::START_ARGS_MAX],
    };
    let n = si.args_len as usize;
    si.args[..n].copy_from_slice(&args.as_bytes()[..n]);
    let si_addr = layout::MAIN_STACK_TOP - core::mem::size_of::<StartInfo>() as u64;
    // SAFETY: StartInfo is plain old data; viewing it as bytes is sound.
    let bytes =
        unsafe { core::slice::from_raw_parts(&si as *const StartInfo as *const u8, core::mem::size_of::<StartInfo>()) };
    let pml4 = k.task(b.task).pml4;
    task::copy_to_user(pml4, si_addr, bytes).expect("write start info");
    let f = k.t(b.thread).frame();
    f.rip = b.entry;
    f.rsp = si_addr - 8;
    f.rdi = si_addr;
    k.make_ready(b.thread);
}

pub fn start_boot_tasks(k: &mut Kernel, bi: &BootInfo) {
    assert!(bi.bootfs_len > 0, "no boot image (pass it with -initrd)");
    // SAFETY: the boot image module lies in reserved frames within the direct map and
    // stays there (it is only ever mapped read-only to users).
    let image = unsafe { core::slice::from_raw_parts(phys_to_virt(bi.bootfs_phys), bi.bootfs_len as usize) };
    let fs = bootfs::BootFs::parse(image).expect("boot image is malformed");
    let s0_image = fs.find("sigma0").expect("boot image has no `sigma0`").data;
    let root_image = fs.find("root").expect("boot image has no `root`").data;

    // sigma0: its program, then all memory but the kernel's reserve.
    // Its quota covers the page tables that map all its memory and the device window
    // (one table per 512 pages, twice over for the directories above them).
    let mmio_pages = (layout::MMIO_END - layout::MMIO_START) / PAGE_SIZE;
    let s0_quota = SIGMA0_QUOTA + (mem::free_frames() + mmio_pages) / 256;
    let s0 = load(k, s0_image, "sigma0", s0_quota, abi::sched::MAX_PRIORITY);
    // The kernel keeps an eighth of RAM for its objects (at least 12 MiB): page tables,
    // stacks, and the heap as it grows (mapping-database nodes: every page mapped costs
    // one, charged to the task it is mapped into).
    let reserve = (mem::free_frames() / 8).max(3072);
    let mut args = String::from("sigma0");
    let mut given = 0u64;
    let mut run: Option<(u64, u64)> = None; // (first frame address, pages)
    let flush = |k: &mut Kernel, run: (u64, u64), args: &mut String| {
        let t = k.task(s0.task);
        let n = pt::map_range(
            &mut mem::KernelPhys { quota: &mut t.quota },
            t.pml4,
            layout::SIGMA0_PHYS + run.0,
            run.0,
            run.1,
            task::pte_flags(m::RIGHTS_MASK),
        )
        .expect("map memory into sigma0");
        assert_eq!(n, run.1);
        for i in 0..run.1 {
            assert!(mem::frame_ref(run.0 + i * PAGE_SIZE), "a fresh frame is counted");
        }
        let _ = write!(args, " ram={:#x}-{:#x}", run.0, run.0 + run.1 * PAGE_SIZE);
    };
    while mem::free_frames() > reserve {
        let Some(f) = mem::alloc_frame_raw() else { break };
        given += 1;
        run = match run {
            Some((start, n)) if start + n * PAGE_SIZE == f => Some((start, n + 1)),
            Some(r) => {
                flush(k, r, &mut args);
                Some((f, 1))
            }
            None => Some((f, 1)),
        };
    }
    if let Some(r) = run {
        flush(k, r, &mut args);
    }
    // The device-memory window, uncached.
    {
        let t = k.task(s0.task);
        pt::map_range(
            &mut mem::KernelPhys { quota: &mut t.quota },
            t.pml4,
            layout::SIGMA0_PHYS + layout::MMIO_START,
            layout::MMIO_START,
            mmio_pages,
            task::pte_flags(m::READ | m::WRITE) | task::CACHE_BITS,
        )
        .expect("map device memory into sigma0");
        for i in 0..mmio_pages {
            assert!(mem::frame_ref(layout::MMIO_START + i * PAGE_SIZE), "a device frame is counted once at boot");
        }
    }
    let _ = write!(args, " mmio={:#x}-{:#x}", layout::MMIO_START, layout::MMIO_END);
    k.io_root = s0.task;
    start(k, &s0, &args, (0, 0));
    crate::arch::serial::kprintln!(
        "[kernel] sigma0 started with {} MiB of memory; kernel keeps {} MiB",
        given >> 8,
        mem::free_frames() >> 8
    );

    // root: the boot image, capabilities, sigma0 as its pager.
    let quota = mem::free_frames().saturating_sub(512);
    let root = load(k, root_image, "root", quota, abi::sched::ROOT_PRIORITY);
    let t = k.task(root.task);
    let pages = bi.bootfs_len.div_ceil(PAGE_SIZE);
    for i in 0..pages {
        t.map_frame(layout::BOOTFS_VADDR + i * PAGE_SIZE, bi.bootfs_phys + i * PAGE_SIZE, task::pte_flags(m::READ))
            .expect("map boot image");
    }
    let s0_thread = k.thread_ref(s0.thread);
    let caps = [
        (cap::MACHINE_SLOT, Obj::Machine, rights::SHUTDOWN),
        (cap::IRQ_CONTROL_SLOT, Obj::IrqControl, rights::CONTROL),
        (cap::SIGMA0_SLOT, Obj::Thread(s0_thread), rights::SEND),
    ];
    for (slot, obj, r) in caps {
        k.cap_install(root.task, slot, Cap { obj, rights: r, badge: 0 }).expect("root capability");
    }
    // Root's page faults go to sigma0; badge 1 names root there.
    k.tm(root.thread).pager = Some((s0_thread, 1));
    start(k, &root, "root", (layout::BOOTFS_VADDR, bi.bootfs_len));
    crate::arch::serial::kprintln!("[kernel] root started: entry {:#x}, kernel quota {} pages", root.entry, quota);
}
