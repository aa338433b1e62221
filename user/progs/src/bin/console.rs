//! The user-level serial console driver: COM1's ports come from root (which has them
//! from sigma0), its interrupt line (IRQ 4) arrives as IPC. It writes what programs
//! send it and answers reads with typed bytes; a read that finds nothing typed yet
//! is answered later, through a saved reply capability, when the interrupt brings
//! input.
#![no_std]
#![no_main]

extern crate alloc;

use abi::ipc::label;
use alloc::collections::VecDeque;
use alloc::vec::Vec;
use core::arch::asm;
use rt::ipc::{self, Msg};
use rt::proto::console as p;
use rt::{env, sys};

rt::entry!(main);

const COM1: u16 = 0x3F8;
const IRQ_BADGE: u64 = 0x1_0000_0000;

fn outb(port: u16, v: u8) {
    // SAFETY: the port was granted to this program (root, from sigma0); the TSS I/O
    // bitmap lets exactly those through, anything else would fault.
    unsafe { asm!("out dx, al", in("dx") port, in("al") v, options(nostack, nomem)) };
}

fn inb(port: u16) -> u8 {
    let v: u8;
    // SAFETY: as for outb.
    unsafe { asm!("in al, dx", in("dx") port, out("al") v, options(nostack, nomem)) };
    v
}

fn put(bytes: &[u8]) {
    for &b in bytes {
        if b == b'\n' {
            put_raw(b'\r');
        }
        put_raw(b);
    }
}

fn put_raw(b: u8) {
    for _ in 0..100_000 {
        if inb(COM1 + 5) & 0x20 != 0 {
            break;
        }
    }
    outb(COM1, b);
}

fn main() -> i32 {
    if env::io(COM1 as u64, 3).is_err() {
        let _ = sys::debug_put(b"console: no I/O ports for COM1\n");
        return 1;
    }
    let irq = rt::alloc_slot();
    if env::irq(4, irq).is_err() || sys::irq_attach(irq, IRQ_BADGE).is_err() {
        let _ = sys::debug_put(b"console: no IRQ 4\n");
        return 1;
    }
    // 115200 8N1, FIFOs on, OUT2 (routes the UART's interrupt), interrupt on receive.
    for (off, v) in [(1, 0x00), (3, 0x80), (0, 0x01), (1, 0x00), (3, 0x03), (2, 0xC7), (4, 0x0B), (1, 0x01)] {
        outb(COM1 + off, v);
    }
    put(b"console: ready\n");
    let mut input: VecDeque<u8> = VecDeque::new();
    // Readers waiting for input: (saved reply slot, most bytes wanted).
    let mut readers: VecDeque<(u64, u64)> = VecDeque::new();
    let mut free_slots: Vec<u64> = Vec::new();
    let mut buf = alloc::vec![0u8; 4096];
    let mut out = [0u8; 256];
    let mut reply: Option<Msg> = None;
    loop {
        let Ok((badge, m)) = ipc::serve(reply.take(), &mut buf) else { continue };
        if badge == IRQ_BADGE && m.label() == label::IRQ {
            while inb(COM1 + 5) & 1 != 0 {
                input.push_back(inb(COM1));
            }
            let _ = sys::irq_ack(irq);
            // Answer waiting readers while there is input.
            while !input.is_empty() {
                let Some((slot, want)) = readers.pop_front() else { break };
                let n = (want as usize).min(input.len()).min(out.len());
                for b in out.iter_mut().take(n) {
                    *b = input.pop_front().unwrap_or(0);
                }
                ipc::set_send_string(&out[..n]);
                let _ = ipc::send(slot, &Msg::new(p::READ, &[0]).with_string(), ipc::timeouts(ipc::POLL, ipc::POLL));
                free_slots.push(slot);
            }
            continue;
        }
        reply = Some(match m.label() {
            p::WRITE => {
                let n = ipc::received_string_len().min(buf.len());
                put(&buf[..n]);
                Msg::new(p::WRITE, &[0])
            }
            p::READ if !input.is_empty() => {
                let n = (m.word(1) as usize).min(input.len()).min(out.len());
                for b in out.iter_mut().take(n) {
                    *b = input.pop_front().unwrap_or(0);
                }
                ipc::set_send_string(&out[..n]);
                Msg::new(p::READ, &[0]).with_string()
            }
            p::READ => {
                let slot = free_slots.pop().unwrap_or_else(rt::alloc_slot);
                if ipc::save_reply(slot).is_ok() {
                    readers.push_back((slot, m.word(1).max(1)));
                } else {
                    free_slots.push(slot);
                }
                continue;
            }
            _ => Msg::new(0, &[abi::Error::NoSys as u64]),
        });
    }
}
