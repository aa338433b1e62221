//! Interrupts and exceptions. A user thread's exception becomes a fault message to
//! its handler (or stops it); an exception in kernel mode is a kernel bug and halts.

use crate::arch::cpu::{TrapFrame, VEC_RESCHED, VEC_SPURIOUS, VEC_TIMER};
use crate::arch::serial::kprintln;
use crate::arch::{irqchip, lapic};
use crate::ipc;
use crate::kernel::{enter, Kernel};
use crate::sched::schedule;
use abi::ipc::fault;

#[no_mangle]
extern "C" fn trap_dispatch(frame: *mut TrapFrame) {
    // SAFETY: the entry stub passes the TrapFrame it just built on this stack.
    let f = unsafe { *frame };
    if f.vector == 2 || f.vector == 18 {
        // Taken without the kernel lock (it may arrive while this CPU holds it): report
        // only. The first CPU to take an NMI reports the kernel's state too.
        kprintln!(
            "[kernel] NMI/machine check (vector {}) on CPU {} at {:#x}",
            f.vector,
            crate::arch::cpu::cpu_index(),
            f.rip
        );
        static DUMPED: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);
        if f.vector == 2 && !DUMPED.swap(true, core::sync::atomic::Ordering::SeqCst) {
            crate::kernel::dump_state();
        }
        return;
    }
    crate::sched::idle_end();
    // SAFETY: this is the start of a kernel entry; no reference into kernel state is live
    // (the idle loop halts holding none).
    let k = unsafe { enter() };
    let from_user = f.cs & 3 == 3;
    match f.vector as u8 {
        VEC_TIMER => {
            lapic::eoi();
            k.tick();
        }
        VEC_SPURIOUS => {}
        crate::arch::iommu::VEC_IOMMU => {
            crate::arch::iommu::fault_interrupt();
            lapic::eoi();
        }
        VEC_RESCHED => {
            // Another CPU made a thread of this one ready.
            lapic::eoi();
            k.view.need_resched = true;
        }
        // (A thread stopped or destroyed from another CPU while its exception waited for
        // the kernel lock does not report it: it runs no more, or takes it again.)
        0..=31 if from_user && k.t(k.view.current).state != crate::kernel::State::Running => {}
        7 if from_user => k.fpu_trap(),
        v @ 0..=31 if from_user => user_fault(k, v as u64, &f),
        v @ 0..=31 => kernel_fault(v as u64, &f),
        v => match irqchip::line_of(v) {
            Some(line) => {
                crate::arch::cpu::count_irq();
                k.irq_counts[line as usize] += 1;
                // Masked (if so) before the EOI: a level line still up must not fire
                // again at once.
                let a = k.irq_lines[line as usize].fired(irqchip::trigger(line));
                irqchip::set_masked(line, a.mask);
                irqchip::eoi(line);
                if a.deliver {
                    ipc::irq_fired(k, line);
                }
            }
            None => {
                kprintln!("[kernel] unexpected interrupt vector {}", v);
                lapic::eoi();
            }
        },
    }
    schedule(k);
}

fn user_fault(k: &mut Kernel, vector: u64, f: &TrapFrame) {
    let addr = if vector == 14 { x86_64::registers::control::Cr2::read_raw() } else { 0 };
    let kind = match vector {
        14 => fault::PAGE_FAULT,
        13 => fault::GENERAL_PROTECTION,
        6 => fault::INVALID_OPCODE,
        0 => fault::DIVIDE_ERROR,
        _ => vector,
    };
    let cur = k.view.current;
    let task = k.t(cur).task;
    let handled = ipc::report_fault(k, cur, [kind, addr, f.rip, f.error], vector == 14);
    if vector == 14 && handled && k.t(cur).fault_to_pager {
        return; // an ordinary page fault, now the pager's business
    }
    kprintln!(
        "[kernel] thread {} (task {}) fault: vector {} ip {:#x} addr {:#x} error {:#x} -> {}",
        cur,
        task,
        vector,
        f.rip,
        addr,
        f.error,
        if handled { "fault handler" } else { "stopped" }
    );
}

fn kernel_fault(vector: u64, f: &TrapFrame) -> ! {
    let cr2 = x86_64::registers::control::Cr2::read_raw();
    panic!("kernel exception {} at {:#x} (error {:#x}, cr2 {:#x}, rsp {:#x})", vector, f.rip, f.error, cr2, f.rsp);
}
