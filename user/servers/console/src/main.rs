//! The user-level serial console driver: COM1's ports come from root (which has them
//! from sigma0), its interrupt line (IRQ 4) arrives as IPC. It writes what programs
//! send it and answers reads with typed bytes; a read that finds nothing typed yet
//! is answered later, through a saved reply capability, when the interrupt brings
//! input; a poll is answered at once, with what was typed (perhaps nothing). Waiting
//! reads are bounded (`MAX_READERS_PER_CLIENT` per program, `MAX_READERS` in all): past
//! that, the oldest is answered `WouldBlock` and its capability slot used again, so
//! callers that gave up cannot use up the server's slots. Typed bytes nobody has read
//! wait in a buffer of `MAX_INPUT` bytes, as a terminal's line discipline keeps them.
//! When it is full the console throttles the line, as a tty with hardware flow control
//! does: it stops taking bytes from the UART (whose FIFO then fills, and the sender
//! waits: QEMU stops reading its input), drops RTS and turns the receive interrupt off
//! (on a level line it would fire again at every acknowledgement); a read that makes
//! room takes them again. Nothing typed is lost, and the console's memory stays bounded.
#![no_std]
#![no_main]

extern crate alloc;

use abi::ipc::label;
use alloc::collections::VecDeque;
use alloc::vec::Vec;
use core::arch::asm;
use rt::ipc::{self, Msg};
use rt::proto::console::{self as p, Request};
use rt::server::{self, Answer, Badge, Server};
use rt::{env, sys};

rt::entry!(main);

const COM1: u16 = 0x3F8;
const IRQ_BADGE: Badge = Badge::minted(4);
/// Reads one program may leave waiting; reads waiting in all.
const MAX_READERS_PER_CLIENT: usize = 4;
const MAX_READERS: usize = 32;
/// Typed bytes kept unread.
const MAX_INPUT: usize = 4096;
/// The modem control register: DTR, RTS and OUT2 (which routes the UART's interrupt);
/// throttled, without RTS.
const MCR_OPEN: u8 = 0x0B;
const MCR_THROTTLED: u8 = 0x09;
/// The interrupt enable register: an interrupt when bytes are received.
const IER_RECEIVE: u8 = 0x01;

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
    if env::irq(4, irq).is_err() || sys::irq_attach(irq, IRQ_BADGE.0).is_err() {
        let _ = sys::debug_put(b"console: no IRQ 4\n");
        return 1;
    }
    // 115200 8N1, FIFOs on, OUT2 (routes the UART's interrupt), interrupt on receive.
    for (off, v) in [(1, 0x00), (3, 0x80), (0, 0x01), (1, 0x00), (3, 0x03), (2, 0xC7), (4, MCR_OPEN), (1, IER_RECEIVE)]
    {
        outb(COM1 + off, v);
    }
    put(b"console: ready\n");
    let mut c = Console {
        irq,
        input: VecDeque::new(),
        throttled: false,
        readers: VecDeque::new(),
        free_slots: Vec::new(),
        out: [0; 256],
    };
    let mut buf = alloc::vec![0u8; 4096];
    server::run(&mut c, &mut buf)
}

struct Console {
    irq: u64,
    input: VecDeque<u8>,
    /// `input` filled up with bytes still in the UART: they stay there until a read
    /// makes room.
    throttled: bool,
    /// Readers waiting for input, oldest first: (program, saved reply slot, most bytes
    /// wanted).
    readers: VecDeque<(u32, u64, u64)>,
    free_slots: Vec<u64>,
    out: [u8; 256],
}

impl Console {
    /// Up to `want` typed bytes, into `out`, as a READ reply.
    fn take(&mut self, want: u64) -> Msg {
        let n = (want as usize).min(self.input.len()).min(self.out.len());
        for b in self.out.iter_mut().take(n) {
            *b = self.input.pop_front().unwrap_or(0);
        }
        if self.throttled {
            // Room again: take what waits in the UART, then let it interrupt again
            // (its line was kept down meanwhile; it goes up for new bytes).
            self.throttled = false;
            outb(COM1 + 4, MCR_OPEN);
            self.drain();
            if !self.throttled {
                // (After the drain: the UART's line goes up again only for new bytes.)
                outb(COM1 + 1, IER_RECEIVE);
            }
        }
        ipc::set_send_string(&self.out[..n]);
        Msg::new(p::READ, &[0]).with_string()
    }

    /// What the UART holds, into `input` while there is room; with none left and a
    /// byte still waiting, the line is throttled.
    fn drain(&mut self) {
        while inb(COM1 + 5) & 1 != 0 {
            if self.input.len() >= MAX_INPUT {
                self.throttled = true;
                outb(COM1 + 4, MCR_THROTTLED);
                outb(COM1 + 1, 0);
                return;
            }
            self.input.push_back(inb(COM1));
        }
    }

    /// Answer waiting reader `i` with an error and free its slot.
    fn drop_reader(&mut self, i: usize, e: abi::Error) {
        if let Some((_, slot, _)) = self.readers.remove(i) {
            let _ = ipc::send(slot, &Msg::new(0, &[e as u64]), ipc::timeouts(ipc::POLL, ipc::POLL));
            // A reply capability is one shot; if the send failed (the caller gave up),
            // the slot still holds it.
            let _ = sys::cap_delete(slot);
            self.free_slots.push(slot);
        }
    }
}

impl Server for Console {
    type Request<'a> = Request<'a>;

    fn event(&mut self, from: Badge, m: &Msg) -> Option<Answer> {
        if from != IRQ_BADGE || m.label() != label::IRQ {
            return None;
        }
        self.drain();
        // (A byte typed after the drain is not lost: the kernel hands an edge line
        // that fired during the service back once more at the ack.)
        let _ = sys::irq_ack(self.irq);
        // Answer waiting readers while there is input.
        while !self.input.is_empty() {
            let Some((_, slot, want)) = self.readers.pop_front() else { break };
            let r = self.take(want);
            let _ = ipc::send(slot, &r, ipc::timeouts(ipc::POLL, ipc::POLL));
            let _ = sys::cap_delete(slot);
            self.free_slots.push(slot);
        }
        Some(Answer::Later)
    }

    fn handle(&mut self, from: Badge, req: Request<'_>) -> Answer {
        match req {
            Request::Write(bytes) => {
                put(bytes);
                Answer::Reply(Msg::new(p::WRITE, &[0]))
            }
            Request::Read { max } if !self.input.is_empty() => Answer::Reply(self.take(max)),
            Request::Poll { max } => Answer::Reply(self.take(max)),
            Request::Read { max } => {
                let client = from.program();
                if self.readers.iter().filter(|r| r.0 == client).count() >= MAX_READERS_PER_CLIENT {
                    let oldest = self.readers.iter().position(|r| r.0 == client).unwrap_or(0);
                    self.drop_reader(oldest, abi::Error::WouldBlock);
                } else if self.readers.len() >= MAX_READERS {
                    self.drop_reader(0, abi::Error::WouldBlock);
                }
                let slot = self.free_slots.pop().unwrap_or_else(rt::alloc_slot);
                if ipc::save_reply(slot).is_ok() {
                    self.readers.push_back((client, slot, max));
                } else {
                    self.free_slots.push(slot);
                }
                Answer::Later
            }
        }
    }
}
