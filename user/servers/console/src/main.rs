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
//!
//! What it writes also goes to the firmware's screen when the machine has one (a UEFI
//! boot: the kernel's text console, `DEBUG_PUT` with `abi::DEBUG_PUT_SCREEN`), and when
//! its manifest entry grants the i8042's ports (0x60, 0x64) and IRQ 1, keys typed on a
//! PS/2 keyboard (scancode set 1, US layout: `pc-keyboard`) are input as typed bytes
//! beside the serial port's — Enter as a carriage return, Backspace as DEL, the arrows and
//! Home, End and Delete as the escapes a terminal sends. The keyboard's bytes are not
//! throttled: past `MAX_INPUT` unread, a key is dropped.
#![no_std]
#![no_main]

extern crate alloc;

use abi::ipc::label;
use alloc::collections::VecDeque;
use alloc::vec::Vec;
use core::arch::asm;
use pc_keyboard::{layouts, DecodedKey, HandleControl, KeyCode, PS2Keyboard as Keyboard, ScancodeSet1};
use rt::ipc::{self, Msg};
use rt::proto::console::{self as p, Request};
use rt::server::{self, Answer, Badge, Server};
use rt::{env, sys};

rt::entry!(main);

const COM1: u16 = 0x3F8;
const IRQ_BADGE: Badge = Badge::minted(4);
/// The i8042's data and status/command ports, its keyboard line.
const KBD_DATA: u16 = 0x60;
const KBD_STATUS: u16 = 0x64;
const KBD_IRQ: u64 = 1;
const KBD_BADGE: Badge = Badge::minted(1);
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
    // The screen's copy (nothing happens on a machine without one); after the serial
    // port's, which has touched every page of `bytes` (the kernel copies only from
    // present pages).
    for chunk in bytes.chunks(4096) {
        let _ = sys::debug_put_screen(chunk);
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
    let keyboard = keyboard_init();
    put(b"console: ready\n");
    let mut c = Console {
        keyboard,
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

/// Wait until the i8042 has room for a byte (false: it never had).
fn kbd_ready_to_write() -> bool {
    (0..100_000).any(|_| inb(KBD_STATUS) & 2 == 0)
}

/// The PS/2 keyboard, when the manifest grants its ports and line and an i8042 answers
/// there: its interrupt on, scancodes translated to set 1.
fn keyboard_init() -> Option<(u64, Keyboard<layouts::Us104Key, ScancodeSet1>)> {
    if env::io(KBD_DATA as u64, 0).is_err() || env::io(KBD_STATUS as u64, 0).is_err() {
        return None;
    }
    // No controller: the status port floats high.
    if inb(KBD_STATUS) == 0xff {
        put(b"console: no i8042 keyboard controller\n");
        return None;
    }
    let irq = rt::alloc_slot();
    if env::irq(KBD_IRQ, irq).is_err() || sys::irq_attach(irq, KBD_BADGE.0).is_err() {
        put(b"console: no IRQ 1 for the keyboard\n");
        return None;
    }
    // Empty the output buffer, then: configuration byte, keyboard interrupt on, its
    // clock on, translation on; the keyboard port enabled.
    for _ in 0..64 {
        if inb(KBD_STATUS) & 1 == 0 {
            break;
        }
        inb(KBD_DATA);
    }
    if kbd_ready_to_write() {
        outb(KBD_STATUS, 0x20);
        if (0..100_000).any(|_| inb(KBD_STATUS) & 1 != 0) {
            let cfg = (inb(KBD_DATA) | 0x01 | 0x40) & !0x10;
            if kbd_ready_to_write() {
                outb(KBD_STATUS, 0x60);
                if kbd_ready_to_write() {
                    outb(KBD_DATA, cfg);
                }
            }
        }
    }
    if kbd_ready_to_write() {
        outb(KBD_STATUS, 0xae);
    }
    put(b"console: PS/2 keyboard\n");
    Some((irq, Keyboard::new(ScancodeSet1::new(), layouts::Us104Key, HandleControl::MapLettersToUnicode)))
}

/// The bytes a key stands for, as a terminal sends them.
fn key_bytes(k: DecodedKey, out: &mut [u8; 4]) -> &[u8] {
    match k {
        DecodedKey::Unicode('\u{8}') => b"\x7f",
        DecodedKey::Unicode('\n') => b"\r",
        DecodedKey::Unicode(c) => c.encode_utf8(out).as_bytes(),
        DecodedKey::RawKey(KeyCode::ArrowUp) => b"\x1b[A",
        DecodedKey::RawKey(KeyCode::ArrowDown) => b"\x1b[B",
        DecodedKey::RawKey(KeyCode::ArrowRight) => b"\x1b[C",
        DecodedKey::RawKey(KeyCode::ArrowLeft) => b"\x1b[D",
        DecodedKey::RawKey(KeyCode::Home) => b"\x1b[H",
        DecodedKey::RawKey(KeyCode::End) => b"\x1b[F",
        DecodedKey::RawKey(KeyCode::Delete) => b"\x1b[3~",
        DecodedKey::RawKey(_) => b"",
    }
}

struct Console {
    /// The PS/2 keyboard's line (its capability slot) and decoder.
    keyboard: Option<(u64, Keyboard<layouts::Us104Key, ScancodeSet1>)>,
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

    /// What the keyboard controller holds: keys into `input` (mouse bytes dropped).
    fn keys(&mut self) {
        let Some((irq, kb)) = self.keyboard.as_mut() else { return };
        for _ in 0..64 {
            let st = inb(KBD_STATUS);
            if st & 1 == 0 {
                break;
            }
            let b = inb(KBD_DATA);
            if st & 0x20 != 0 {
                continue;
            }
            let Ok(Some(ev)) = kb.add_byte(b) else { continue };
            let Some(key) = kb.process_keyevent(ev) else { continue };
            let mut utf8 = [0u8; 4];
            for &c in key_bytes(key, &mut utf8) {
                if self.input.len() < MAX_INPUT {
                    self.input.push_back(c);
                }
            }
        }
        let _ = sys::irq_ack(*irq);
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
        if m.label() != label::IRQ {
            return None;
        }
        if from == KBD_BADGE {
            self.keys();
        } else if from == IRQ_BADGE {
            self.drain();
            // (A byte typed after the drain is not lost: the kernel hands an edge line
            // that fired during the service back once more at the ack.)
            let _ = sys::irq_ack(self.irq);
        } else {
            return None;
        }
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
