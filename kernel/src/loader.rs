//! Start the root task from the boot image: load its ELF, give it a stack, the
//! boot image (read-only), its first capabilities and a `StartInfo`.

use crate::kernel::kernel;
use crate::mem::{self, phys_to_virt, BootInfo};
use crate::task::{self, Obj};
use abi::layout::{self, PAGE_SIZE};
use abi::{cap, mem as m, rights, StartInfo};
use kcore::cspace::Cap;

/// Frames kept back from root's quota for kernel objects of its own.
const KERNEL_RESERVE: u64 = 256;

pub fn start_root(bi: &BootInfo) {
    assert!(bi.bootfs_len > 0, "no boot image (pass it with -initrd)");
    // SAFETY: the boot image module lies in reserved frames within the direct map and
    // stays there (it is only ever mapped read-only to users).
    let image = unsafe { core::slice::from_raw_parts(phys_to_virt(bi.bootfs_phys), bi.bootfs_len as usize) };
    let fs = bootfs::BootFs::parse(image).expect("boot image is malformed");
    let root = fs.find("root").expect("boot image has no `root`");
    let elf = kcore::elf::parse(root.data).expect("root is not a valid ELF executable");

    let k = kernel();
    let quota = mem::free_frames().saturating_sub(KERNEL_RESERVE);
    let tid = k.create_task(quota, None).expect("root task");
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
            let f = mem::alloc_frame().expect("memory for root");
            // Bytes of the file that land in this page.
            let lo = page.max(s.vaddr);
            let hi = (page + PAGE_SIZE).min(s.vaddr + s.filesz);
            if hi > lo {
                let src = &root.data[(s.offset + (lo - s.vaddr)) as usize..(s.offset + (hi - s.vaddr)) as usize];
                // SAFETY: the fresh frame is ours; `lo - page + len <= PAGE_SIZE`.
                unsafe { core::ptr::copy_nonoverlapping(src.as_ptr(), phys_to_virt(f + (lo - page)), src.len()) };
            }
            t.map_frame(page, f, task::pte_flags(rights)).expect("map root segment");
            page += PAGE_SIZE;
        }
    }
    let stack_bottom = layout::MAIN_STACK_TOP - layout::MAIN_STACK_PAGES * PAGE_SIZE;
    for i in 0..layout::MAIN_STACK_PAGES {
        let f = mem::alloc_frame().expect("memory for root stack");
        t.map_frame(stack_bottom + i * PAGE_SIZE, f, task::pte_flags(m::READ | m::WRITE)).expect("map root stack");
    }
    let pages = bi.bootfs_len.div_ceil(PAGE_SIZE);
    for i in 0..pages {
        t.map_frame(layout::BOOTFS_VADDR + i * PAGE_SIZE, bi.bootfs_phys + i * PAGE_SIZE, task::pte_flags(m::READ))
            .expect("map boot image");
    }

    let th = k.create_thread(tid, layout::MAIN_UTCB, abi::sched::ROOT_PRIORITY as u8, false).expect("root thread");
    let (task_ref, thread_ref) = (k.task_ref(tid), k.thread_ref(th));
    let caps = [
        (cap::SELF_TASK, Obj::Task(task_ref), rights::CONTROL),
        (cap::SELF_THREAD, Obj::Thread(thread_ref), rights::SEND | rights::CONTROL),
        (cap::MACHINE_SLOT, Obj::Machine, rights::SHUTDOWN),
        (cap::IRQ_CONTROL_SLOT, Obj::IrqControl, rights::CONTROL),
    ];
    for (slot, obj, r) in caps {
        k.cap_install(tid, slot, Cap { obj, rights: r, badge: 0 }).expect("root capability");
    }
    // Root holds every I/O port until it passes them on.
    k.io_root = tid;

    let mut si = StartInfo {
        magic: abi::START_MAGIC,
        utcb: layout::MAIN_UTCB,
        bootfs_addr: layout::BOOTFS_VADDR,
        bootfs_len: bi.bootfs_len,
        args_len: 4,
        args: [0; abi::START_ARGS_MAX],
    };
    si.args[..4].copy_from_slice(b"root");
    let si_addr = layout::MAIN_STACK_TOP - core::mem::size_of::<StartInfo>() as u64;
    // SAFETY: StartInfo is plain old data; viewing it as bytes is sound.
    let bytes = unsafe {
        core::slice::from_raw_parts(&si as *const StartInfo as *const u8, core::mem::size_of::<StartInfo>())
    };
    let pml4 = k.task(tid).pml4;
    task::copy_to_user(pml4, si_addr, bytes).expect("write root start info");
    let f = k.t(th).frame();
    f.rip = elf.entry;
    f.rsp = si_addr - 16;
    f.rdi = si_addr;
    k.make_ready(th);
    crate::kprintln!("[kernel] root task started: entry {:#x}, quota {} pages", elf.entry, quota);
}
