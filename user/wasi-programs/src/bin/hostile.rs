//! A hostile WASI program: each mode breaks a rule a sandbox must hold, and must end
//! alone (the runner says why; nothing else on Scion notices). `hostile MODE`:
//! - `oob`: reads far past its linear memory (a trap);
//! - `grow`: allocates until its memory limit refuses (Rust aborts: a trap);
//! - `lies`: calls every preview-1 function with pointers and lengths that lie (past
//!   the memory's end, wrapping, huge counts) and descriptors that do not exist; each
//!   must answer an errno, and it prints how many did;
//! - `spin`: loops forever (for `kill`);
//! - `deep`: recurses without end (each call a frame of the engine's or the native
//!   stack, none of its linear memory's): the stack's limit must trap;
//! - `badcall`: calls a function pointer that is no function (an index past its
//!   table): the indirect call's check must trap;
//! - `moved`: a call grows its memory (which moves it) and writes through a pointer its
//!   caller then reads: a compiled program must read 42, not the old place's 0.
#![allow(clippy::missing_safety_doc)]

#[link(wasm_import_module = "wasi_snapshot_preview1")]
extern "C" {
    fn args_get(a: u32, b: u32) -> u32;
    fn args_sizes_get(a: u32, b: u32) -> u32;
    fn environ_get(a: u32, b: u32) -> u32;
    fn environ_sizes_get(a: u32, b: u32) -> u32;
    fn clock_res_get(id: u32, out: u32) -> u32;
    fn clock_time_get(id: u32, p: u64, out: u32) -> u32;
    fn fd_fdstat_get(fd: u32, out: u32) -> u32;
    fn fd_filestat_get(fd: u32, out: u32) -> u32;
    fn fd_prestat_get(fd: u32, out: u32) -> u32;
    fn fd_prestat_dir_name(fd: u32, p: u32, n: u32) -> u32;
    fn fd_read(fd: u32, v: u32, n: u32, out: u32) -> u32;
    fn fd_write(fd: u32, v: u32, n: u32, out: u32) -> u32;
    fn fd_pread(fd: u32, v: u32, n: u32, off: u64, out: u32) -> u32;
    fn fd_pwrite(fd: u32, v: u32, n: u32, off: u64, out: u32) -> u32;
    fn fd_readdir(fd: u32, b: u32, n: u32, cookie: u64, out: u32) -> u32;
    fn fd_seek(fd: u32, off: i64, whence: u32, out: u32) -> u32;
    fn fd_tell(fd: u32, out: u32) -> u32;
    fn path_create_directory(fd: u32, p: u32, n: u32) -> u32;
    fn path_filestat_get(fd: u32, f: u32, p: u32, n: u32, out: u32) -> u32;
    fn path_open(fd: u32, df: u32, p: u32, n: u32, of: u32, rb: u64, ri: u64, ff: u32, out: u32) -> u32;
    fn path_remove_directory(fd: u32, p: u32, n: u32) -> u32;
    fn path_rename(fd: u32, p: u32, n: u32, g: u32, q: u32, k: u32) -> u32;
    fn path_unlink_file(fd: u32, p: u32, n: u32) -> u32;
    fn poll_oneoff(i: u32, o: u32, n: u32, out: u32) -> u32;
    fn random_get(b: u32, n: u32) -> u32;
    fn sock_accept(fd: u32, f: u32, out: u32) -> u32;
    fn sock_recv(fd: u32, v: u32, n: u32, f: u32, o: u32, of: u32) -> u32;
    fn sock_send(fd: u32, v: u32, n: u32, f: u32, out: u32) -> u32;
}

fn lies() {
    // The memory's end, and past it.
    let end = (core::arch::wasm32::memory_size(0) * 65536) as u32;
    let bad = [end, end - 1, u32::MAX, u32::MAX - 7, 0x8000_0000];
    let fds = [0u32, 1, 3, 77, u32::MAX];
    let (mut calls, mut refused) = (0u32, 0u32);
    for &p in &bad {
        for &q in &[8u32, 4096, u32::MAX, 0x1000_0000] {
            for &fd in &fds {
                // SAFETY (of the program): each call gets pointers the runner must check;
                // none of them is dereferenced here.
                let r = unsafe {
                    [
                        args_get(p, q),
                        args_sizes_get(p, p),
                        environ_get(q, p),
                        environ_sizes_get(p, q),
                        clock_res_get(0, p),
                        clock_time_get(1, 0, p),
                        fd_fdstat_get(fd, p),
                        fd_filestat_get(fd, p),
                        fd_prestat_get(fd, p),
                        fd_prestat_dir_name(3, p, q),
                        fd_read(fd, p, q, 16),
                        fd_write(fd, p, q, 16),
                        fd_pread(fd, p, q, 0, 16),
                        fd_pwrite(fd, p, q, u64::MAX, 16),
                        fd_readdir(fd, p, q, u64::MAX, 16),
                        fd_seek(fd, i64::MIN, 1, p),
                        fd_tell(fd, p),
                        path_create_directory(fd, p, q),
                        path_filestat_get(fd, 0, p, q, 16),
                        path_open(fd, 0, p, q, 1, u64::MAX, u64::MAX, 0, 16),
                        path_remove_directory(fd, p, q),
                        path_rename(fd, p, q, fd, q, p),
                        path_unlink_file(fd, p, q),
                        poll_oneoff(p, q, q, 16),
                        random_get(p, q),
                        sock_accept(fd, 0, p),
                        sock_recv(fd, p, q, 0, 16, 24),
                        sock_send(fd, p, q, 0, 16),
                    ]
                };
                calls += r.len() as u32;
                refused += r.iter().filter(|&&e| e != 0).count() as u32;
            }
        }
    }
    println!("hostile: {refused} of {calls} lying calls answered an errno");
}

/// Recursion without end, each frame on the engine's (or the native) stack and none in
/// linear memory (no local's address is taken): `f` is this function, called through a
/// pointer the compiler cannot see through, so it cannot make the recursion a loop.
#[inline(never)]
fn deep(n: u64, f: usize) -> u64 {
    // SAFETY (of the program): `f` is `deep`'s own address (main passes it).
    let g: fn(u64, usize) -> u64 = unsafe { std::mem::transmute::<usize, fn(u64, usize) -> u64>(f) };
    g(n.wrapping_sub(1), f).wrapping_add(n)
}

/// Grow linear memory (16 MiB more than a program starts with: the memory moves) and
/// then write 42 through `p`, a place in it the caller holds.
#[inline(never)]
fn grow_then_write(p: *mut u64) {
    let big = std::hint::black_box(vec![7u8; 16 << 20]);
    // SAFETY (of the program): `p` points at the caller's live box.
    unsafe { p.write_volatile(42) };
    std::mem::forget(big);
}

fn main() {
    match std::env::args().nth(1).as_deref() {
        Some("oob") => {
            let p = 0xffff_fff0usize as *const u64;
            // SAFETY (of the program): none; this is the point: the engine must trap.
            println!("hostile: read {}", unsafe { p.read_volatile() });
        }
        Some("grow") => {
            let mut v: Vec<Vec<u8>> = Vec::new();
            loop {
                v.push(vec![1u8; 1 << 20]);
                if v.len() % 16 == 0 {
                    println!("hostile: holding {} MiB", v.len());
                }
            }
        }
        Some("lies") => lies(),
        Some("spin") => {
            println!("hostile: spinning");
            let mut x = 0u64;
            loop {
                x = x.wrapping_add(1);
                std::hint::black_box(x);
            }
        }
        Some("deep") => {
            println!("hostile: {}", deep(u64::MAX, std::hint::black_box(deep as fn(u64, usize) -> u64 as usize)))
        }
        Some("badcall") => {
            // SAFETY (of the program): none; a table index no function has.
            let f: fn() -> u32 =
                unsafe { std::mem::transmute::<usize, fn() -> u32>(std::hint::black_box(0x7fff_fff0)) };
            println!("hostile: called {}", f());
        }
        Some("moved") => {
            // The caller reads, after a call that moved the memory, what the call wrote:
            // a compiled program must not keep using the memory's old place.
            let mut cell = Box::new(0u64);
            let p: *mut u64 = &mut *cell;
            grow_then_write(p);
            // SAFETY (of the program): `p` points at `cell`, alive.
            println!("hostile: after the memory moved, read {}", unsafe { p.read_volatile() });
        }
        _ => println!("usage: hostile oob|grow|lies|spin|deep|badcall|moved"),
    }
}
