//! The Scion side of a WASI program compiled ahead of time: xtask translates the module
//! to C with wasm2c, compiles it with `c/harness.c` by clang, and links it with this
//! static library into an ordinary Scion program (`cargo xtask wasm IN.wasm`; the boot
//! image holds one for each of `user/wasi-programs`). What is here:
//!
//! - `main`: the `wasi` runner's options (`wasi_host::options`) and descriptor table
//!   (`wasi_host::start`), a stack of its own for the program, and `_start` called on it.
//! - Every preview-1 import (`Z_wasi_snapshot_preview1Z_*`, the names wasm2c gives
//!   them), from `wasi_host::preview1_calls!` as the wasmi runner's are: the same calls
//!   of `wasip1::ctx::Ctx` over the same checked view of linear memory.
//! - The runtime wasm2c's code calls: linear memory and tables in the program's heap
//!   (from its memory server, under its page limit and `--mem`), and traps.
//!
//! Linear memory is checked on every access by the generated code (wasm2c's bounds
//! checks); the stack by the pointer at every function's entry (`c/include/wasm-rt.h`).
//! A trap says which and ends the program with 134, as the wasmi runner does.
#![no_std]

extern crate alloc;

use alloc::alloc::{alloc, alloc_zeroed, dealloc, Layout};
use alloc::string::String;
use core::cell::UnsafeCell;
use rt::println;
use wasi_host::{options, Scion, Unsigned};
use wasip1::ctx::Ctx;
use wasip1::mem::Mem;

rt::entry!(main);

/// The program's stack (from the heap: its pages are touched only as it grows).
const STACK: usize = 8 << 20;
/// Room kept below the lowest place a generated function may begin its body: its own
/// frame is already made (at most 64 KiB: xtask's `-Werror=frame-larger-than`), and
/// the runtime's functions and a WASI import it calls take the rest.
const STACK_MARGIN: usize = 256 << 10;
/// A WebAssembly page.
const PAGE: u64 = 64 << 10;
/// How linear memory and tables are aligned in the heap.
const ALIGN: usize = 16;

/// `wasm_rt_memory_t` (`c/include/wasm-rt.h`).
#[repr(C)]
pub struct Memory {
    data: *mut u8,
    pages: u64,
    max_pages: u64,
    size: u64,
}

/// `wasm_rt_funcref_t`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct FuncRef {
    func_type: u32,
    func: *const u8,
    instance: *mut u8,
}

/// `wasm_rt_funcref_table_t` and `wasm_rt_externref_table_t`.
#[repr(C)]
pub struct Table<T> {
    data: *mut T,
    max_size: u32,
    size: u32,
}

extern "C" {
    /// The instance's memory (`c/harness.c`).
    fn scion_wasi_memory() -> *mut Memory;
    /// Run `_start` on the stack [floor, top) (`c/harness.c`).
    fn scion_wasi_run(floor: *mut u8, top: *mut u8, margin: usize);
}

struct State {
    ctx: Ctx<Scion>,
    /// `--trace`.
    trace: bool,
    /// The program's file, for what is said about it.
    prog: String,
    /// The most pages linear memory may have (`--mem`).
    mem_pages: u64,
    /// Bytes allocated for linear memory (at least its size: it grows into them).
    mem_cap: u64,
}

struct Global(UnsafeCell<Option<State>>);

// SAFETY: the program has one thread; `STATE` is written once by `main` before the
// module runs, and then used by one call at a time (an import, the runtime or a trap,
// each called by the module's code and returning before the next).
unsafe impl Sync for Global {}

static STATE: Global = Global(UnsafeCell::new(None));

fn state() -> &'static mut State {
    // SAFETY: see `Global`: no other reference to the state is alive while a call
    // of the module's into this side runs.
    match unsafe { (*STATE.0.get()).as_mut() } {
        Some(s) => s,
        None => rt::exit(134),
    }
}

fn main() -> i32 {
    let o = match options(rt::args()) {
        Ok(o) => o,
        Err(e) => {
            println!("wasi: {e}\nusage: {} {}", rt::args().split(' ').next().unwrap_or("wasi"), wasi_host::USAGE);
            return 2;
        }
    };
    let ctx = match wasi_host::start(&o, "wasi") {
        Ok(c) => c,
        Err(code) => return code,
    };
    let prog = o.args[0].clone();
    // SAFETY: nothing else runs yet (see `Global`).
    unsafe { *STATE.0.get() = Some(State { ctx, trace: o.trace, prog, mem_pages: o.mem_mib as u64 * 16, mem_cap: 0 }) };
    let Ok(layout) = Layout::from_size_align(STACK, 4096) else { return 2 };
    // SAFETY: the layout's size is not zero.
    let floor = unsafe { alloc(layout) };
    if floor.is_null() {
        println!("wasi: {}: no memory for its stack", state().prog);
        return 2;
    }
    // SAFETY: [floor, floor + STACK) is the stack just allocated, never freed (the
    // program ends when `_start` returns); the harness checks every function against
    // floor + STACK_MARGIN.
    unsafe { scion_wasi_run(floor, floor.add(STACK), STACK_MARGIN) };
    0
}

/// The program's linear memory as the calls see it.
fn memory() -> Mem<'static> {
    // SAFETY: the instance's memory, whose `size` bytes at `data` are the allocation
    // `wasm_rt_allocate_memory` / `wasm_rt_grow_memory` made (never null); the
    // module's code does not run while an import holds this view.
    unsafe {
        let m = &*scion_wasi_memory();
        Mem(core::slice::from_raw_parts_mut(m.data, m.size as usize))
    }
}

/// Every preview-1 import but `proc_exit`, under the name wasm2c gives it.
macro_rules! import {
    ($name:literal, |$c:ident, $m:ident $(, $a:ident: $t:ty)*| $body:expr) => {
        const _: () = {
            #[export_name = concat!("Z_wasi_snapshot_preview1Z_", $name)]
            extern "C" fn import(_instance: *mut u8, $($a: $t),*) -> i32 {
                let st = state();
                let trace = st.trace;
                let ($c, $m) = (&mut st.ctx, &mut memory());
                $(let $a = Unsigned::u($a);)*
                let e = $body;
                if trace && e != 0 {
                    wasi_host::trace($name, &[$($a as u64),*], e);
                }
                e as i32
            }
        };
    };
}
wasi_host::preview1_calls!(import);

#[export_name = "Z_wasi_snapshot_preview1Z_proc_exit"]
extern "C" fn proc_exit(_instance: *mut u8, code: i32) -> ! {
    state().ctx.proc_exit(code as u32);
    rt::exit(code)
}

#[no_mangle]
extern "C" fn wasm_rt_trap(code: u32) -> ! {
    let why = match code {
        1 => "out of bounds memory access",
        2 => "integer overflow",
        3 => "integer divide by zero",
        4 => "invalid conversion to integer",
        5 => "wasm `unreachable` instruction executed",
        6 => "indirect call to a null, missing or mistyped function",
        8 => "call stack exhausted",
        _ => "trap",
    };
    println!("wasi: {}: trapped: {why}", state().prog);
    rt::exit(134)
}

fn layout(bytes: u64) -> Option<Layout> {
    Layout::from_size_align(usize::try_from(bytes).ok()?.max(1), ALIGN).ok()
}

#[no_mangle]
extern "C" fn wasm_rt_allocate_memory(m: *mut Memory, initial: u32, max: u32) {
    let st = state();
    let max = (max as u64).min(st.mem_pages);
    if initial as u64 > max {
        println!(
            "wasi: {}: cannot start it: {} KiB of memory at start, more than its limit (--mem)",
            st.prog,
            initial as u64 * PAGE / 1024
        );
        rt::exit(2);
    }
    let bytes = initial as u64 * PAGE;
    // SAFETY: a layout of at least one byte.
    let data = layout(bytes).map_or(core::ptr::null_mut(), |l| unsafe { alloc_zeroed(l) });
    if data.is_null() {
        println!("wasi: {}: cannot start it: no memory for its {} KiB", st.prog, bytes / 1024);
        rt::exit(2);
    }
    st.mem_cap = bytes;
    // SAFETY: the generated code's instance memory, which it hands over to be filled.
    unsafe { *m = Memory { data, pages: initial as u64, max_pages: max, size: bytes } };
}

/// `memory.grow`: the old size in pages, or −1 past the limit or when the memory
/// server has no more for it. The allocation grows by at least half again, so a
/// program growing a page at a time copies its memory a few times, not each time.
#[no_mangle]
extern "C" fn wasm_rt_grow_memory(m: *mut Memory, delta: u32) -> u32 {
    let st = state();
    // SAFETY: the instance's memory, allocated by `wasm_rt_allocate_memory`.
    let m = unsafe { &mut *m };
    let (old, new) = (m.pages, m.pages + delta as u64);
    if new > m.max_pages {
        return u32::MAX;
    }
    let (old_bytes, new_bytes) = (m.size, new * PAGE);
    if new_bytes > st.mem_cap {
        let cap = new_bytes.max(st.mem_cap + st.mem_cap / 2).min(m.max_pages * PAGE);
        let (Some(lo), Some(ln)) = (layout(st.mem_cap), layout(cap)) else { return u32::MAX };
        // SAFETY: a layout of at least one byte.
        let data = unsafe { alloc(ln) };
        if data.is_null() {
            return u32::MAX;
        }
        // SAFETY: both allocations hold the memory's `old_bytes`; the old one, made
        // with `lo`, is given back once copied.
        unsafe {
            core::ptr::copy_nonoverlapping(m.data, data, old_bytes as usize);
            dealloc(m.data, lo);
        }
        m.data = data;
        st.mem_cap = cap;
    }
    // SAFETY: [old_bytes, new_bytes) lies in the allocation (`mem_cap` bytes).
    unsafe { core::ptr::write_bytes(m.data.add(old_bytes as usize), 0, (new_bytes - old_bytes) as usize) };
    m.pages = new;
    m.size = new_bytes;
    old as u32
}

#[no_mangle]
extern "C" fn wasm_rt_free_memory(m: *mut Memory) {
    let st = state();
    // SAFETY: the instance's memory, allocated with `mem_cap` bytes.
    unsafe {
        if let Some(l) = layout(st.mem_cap) {
            dealloc((*m).data, l);
        }
        (*m).size = 0;
    }
}

fn table_layout<T>(entries: u32) -> Option<Layout> {
    layout(entries as u64 * core::mem::size_of::<T>() as u64)
}

fn table_allocate<T>(t: *mut Table<T>, elements: u32, max: u32) {
    // SAFETY: a layout of at least one byte.
    let data = table_layout::<T>(elements).map_or(core::ptr::null_mut(), |l| unsafe { alloc_zeroed(l) });
    if data.is_null() {
        println!("wasi: {}: cannot start it: no memory for a table of {elements} entries", state().prog);
        rt::exit(2);
    }
    // SAFETY: the generated code's table, handed over to be filled; all-zero entries
    // are null references.
    unsafe { *t = Table { data: data.cast(), max_size: max, size: elements } };
}

/// `table.grow`: the old size, or −1 past the table's maximum or the memory's.
fn table_grow<T: Copy>(t: *mut Table<T>, delta: u32, init: T) -> u32 {
    // SAFETY: a table made by `table_allocate` (its allocation holds `size` entries).
    let t = unsafe { &mut *t };
    let old = t.size;
    let Some(new) = old.checked_add(delta).filter(|&n| n <= t.max_size) else { return u32::MAX };
    let (Some(lo), Some(ln)) = (table_layout::<T>(old), table_layout::<T>(new)) else { return u32::MAX };
    // SAFETY: a layout of at least one byte.
    let data: *mut T = unsafe { alloc(ln) }.cast();
    if data.is_null() {
        return u32::MAX;
    }
    // SAFETY: the old allocation holds `old` entries, the new one `new`; the old one,
    // made with `lo`, is given back once copied.
    unsafe {
        core::ptr::copy_nonoverlapping(t.data, data, old as usize);
        dealloc(t.data.cast(), lo);
        for i in old..new {
            data.add(i as usize).write(init);
        }
    }
    t.data = data;
    t.size = new;
    old
}

fn table_free<T>(t: *mut Table<T>) {
    // SAFETY: a table made by `table_allocate` / `table_grow`, of `size` entries.
    unsafe {
        if let Some(l) = table_layout::<T>((*t).size) {
            dealloc((*t).data.cast(), l);
        }
        (*t).size = 0;
    }
}

#[no_mangle]
extern "C" fn wasm_rt_allocate_funcref_table(t: *mut Table<FuncRef>, elements: u32, max: u32) {
    table_allocate(t, elements, max)
}
#[no_mangle]
extern "C" fn wasm_rt_allocate_externref_table(t: *mut Table<*mut u8>, elements: u32, max: u32) {
    table_allocate(t, elements, max)
}
#[no_mangle]
extern "C" fn wasm_rt_grow_funcref_table(t: *mut Table<FuncRef>, delta: u32, init: FuncRef) -> u32 {
    table_grow(t, delta, init)
}
#[no_mangle]
extern "C" fn wasm_rt_grow_externref_table(t: *mut Table<*mut u8>, delta: u32, init: *mut u8) -> u32 {
    table_grow(t, delta, init)
}
#[no_mangle]
extern "C" fn wasm_rt_free_funcref_table(t: *mut Table<FuncRef>) {
    table_free(t)
}
#[no_mangle]
extern "C" fn wasm_rt_free_externref_table(t: *mut Table<*mut u8>) {
    table_free(t)
}
