//! Servers on every CPU (`rt::server::run_shared`), on two CPUs:
//!
//! 1. `rt::sys::cpu` (RDTSCP: the kernel keeps each CPU's index in TSC_AUX) names the CPU
//!    a thread runs on, on each CPU.
//! 2. `files` and the memory server hand out an endpoint per CPU (`ENDPOINTS`), two
//!    distinct threads, minted with the caller's badge.
//! 3. A client on CPU 1 calling files and its memory server is served on CPU 1: its
//!    calls ride that CPU's fastpath (the CPU's fastpath count grows by at least one per
//!    call; a server thread on the other CPU would take none of them there).
//! 4. Clients on both CPUs at once — a writer per CPU through files (every chunk read
//!    back and compared), memory-server calls (`USAGE`, `RESIDENT`: every answer
//!    checked) — while `files` is replaced by live update; afterwards every chunk each
//!    writer wrote is where it belongs (none lost), and the calls went on across it.
//! 5. A server's threads live and die together (a fault in any is the program's): files
//!    killed, a client on CPU 1 whose endpoints died with it finds the restarted files
//!    through its main capability and is served on CPU 1 again by the new one's thread.
#![no_std]
#![no_main]

extern crate alloc;

use abi::fpage::Fpage;
use abi::Error;
use alloc::format;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use files_api::client as f;
use rt::ipc::Msg;
use rt::{env, println, sys};
use tests::Checks;

rt::entry!(main);

static STOP: AtomicBool = AtomicBool::new(false);
/// Per CPU: operations done, operations that failed, chunks written (when done), and
/// operations done on another CPU than the worker's.
static OPS: [AtomicU64; 2] = [const { AtomicU64::new(0) }; 2];
static BAD: [AtomicU64; 2] = [const { AtomicU64::new(0) }; 2];
static WRITTEN: [AtomicU64; 2] = [const { AtomicU64::new(0) }; 2];
static MEM_OPS: [AtomicU64; 2] = [const { AtomicU64::new(0) }; 2];
static MEM_BAD: [AtomicU64; 2] = [const { AtomicU64::new(0) }; 2];
static DONE: AtomicU64 = AtomicU64::new(0);

const PATHS: [&str; 2] = ["/pc_0", "/pc_1"];
const TAGS: [u8; 2] = [b'p', b'q'];

/// The writer on CPU `cpu`: chunk after chunk of its file, each read back at once.
fn writer(cpu: u64) {
    arrive(cpu);
    let c = cpu as usize;
    let srv = rt::alloc_slot();
    let _ = env::lookup("files", srv);
    let (r, n) = tests::update_writer(
        srv,
        PATHS[c],
        TAGS[c],
        || STOP.load(Ordering::Relaxed),
        |ok| {
            OPS[c].fetch_add(1, Ordering::Relaxed);
            if !ok || sys::cpu() != cpu {
                BAD[c].fetch_add(1, Ordering::Relaxed);
            }
        },
    );
    if let Err(e) = r {
        println!("percpu_test: writer on CPU {}: {:?} after {} chunks", cpu, e, n);
        BAD[c].fetch_add(1, Ordering::Relaxed);
    }
    WRITTEN[c].store(n, Ordering::Relaxed);
    DONE.fetch_add(1, Ordering::Release);
}

/// Memory-server calls from CPU `cpu`: its usage (the limit never changes, pages are
/// held) and whether a page it uses is resident (it is).
fn mem_caller(cpu: u64) {
    arrive(cpu);
    let c = cpu as usize;
    let here = [0u8; 64];
    let first = mem_api::client::usage_raw(abi::cap::PAGER, u64::MAX).map(|u| u[1]);
    while !STOP.load(Ordering::Relaxed) {
        let ok = match (
            mem_api::client::usage_raw(abi::cap::PAGER, u64::MAX),
            mem_api::client::resident_raw(abi::cap::PAGER, here.as_ptr() as u64),
        ) {
            (Ok(u), Ok([1])) => Ok(u[1]) == first && u[0] > 0,
            _ => false,
        };
        MEM_OPS[c].fetch_add(1, Ordering::Relaxed);
        if !ok || sys::cpu() != cpu {
            MEM_BAD[c].fetch_add(1, Ordering::Relaxed);
        }
    }
    DONE.fetch_add(1, Ordering::Release);
}

/// Wait until this thread runs on CPU `cpu` (it was placed there by its creator).
fn arrive(cpu: u64) {
    let _ = tests::wait_until(300, || sys::cpu() == cpu);
}

/// Start `f(cpu)` on a thread placed on CPU `cpu`.
fn on_cpu(f: fn(u64), cpu: u64) -> bool {
    match rt::thread::spawn(f, cpu, rt::thread::my_priority()) {
        Ok(t) => sys::thread_set_cpu(t.slot, cpu).is_ok(),
        Err(_) => false,
    }
}

/// Ask `srv` for its endpoints by hand: (CPUs, the two slots' objects).
fn endpoints(srv: u64) -> Result<(u64, u64, u64), Error> {
    let block = rt::alloc_slot_block(3);
    let mut m = Msg::new(rt::server::ENDPOINTS, &[]);
    rt::server::request_mapping(srv, [Fpage(0), Fpage::caps(block, 3, 0), Fpage(0)], &mut m)?;
    Ok((m.word(2), sys::cap_object(block).unwrap_or(0), sys::cap_object(block + 1).unwrap_or(0)))
}

/// Fastpath IPCs on CPU `cpu` while `f` runs on this thread.
fn fast_during(cpu: u64, f: impl FnOnce()) -> u64 {
    let before = sys::cpu_info(cpu).map(|i| i.fast_ipcs).unwrap_or(0);
    f();
    sys::cpu_info(cpu).map(|i| i.fast_ipcs).unwrap_or(0).saturating_sub(before)
}

static ROUTED: [AtomicU64; 4] = [const { AtomicU64::new(0) }; 4];

/// On CPU 1: 200 files calls and 200 memory-server calls, the fastpath IPCs CPU 1 made
/// during each batch.
fn routed_on_1(files: u64) {
    arrive(1);
    // (The endpoints are asked for by the first call, outside the count.)
    let _ = f::profile(files);
    let _ = mem_api::client::usage_raw(abi::cap::PAGER, u64::MAX);
    let mut ok = 0;
    let d = fast_during(1, || {
        for _ in 0..200 {
            ok += f::profile(files).is_ok() as u64;
        }
    });
    ROUTED[0].store(d, Ordering::Relaxed);
    ROUTED[1].store(ok, Ordering::Relaxed);
    let mut ok = 0;
    let d = fast_during(1, || {
        for _ in 0..200 {
            ok += mem_api::client::usage_raw(abi::cap::PAGER, u64::MAX).is_ok() as u64;
        }
    });
    ROUTED[2].store(d, Ordering::Relaxed);
    ROUTED[3].store(ok, Ordering::Relaxed);
    DONE.fetch_add(1, Ordering::Release);
}

fn main() -> i32 {
    let mut c = Checks::new();
    let cpus = sys::smp_info().cpus;
    c.eq(cpus, 2, "two CPUs");
    // 1. The CPU a thread runs on, without a system call.
    for cpu in [1, 0] {
        let moved = sys::thread_set_cpu(abi::cap::SELF_THREAD, cpu);
        c.eq((moved, sys::cpu()), (Ok(()), cpu), &format!("RDTSCP names CPU {cpu} on CPU {cpu}"));
    }
    let files = rt::alloc_slot();
    c.eq(env::lookup("files", files), Ok(()), "look up files");
    // 2. An endpoint per CPU.
    for (name, srv) in [("files", files), ("the memory server", abi::cap::PAGER)] {
        match endpoints(srv) {
            Ok((n, a, b)) => {
                c.eq(n, 2, &format!("{name} has an endpoint on each CPU"));
                c.check(a != 0 && b != 0 && a != b, &format!("{name}'s two endpoints are two threads"));
            }
            Err(e) => {
                c.check(false, &format!("{name} hands out endpoints per CPU: {e:?}"));
            }
        }
    }
    // 3. Calls from CPU 1 served on CPU 1.
    let fsrv = files;
    static FILES: AtomicU64 = AtomicU64::new(0);
    FILES.store(fsrv, Ordering::Relaxed);
    c.check(on_cpu(|_| routed_on_1(FILES.load(Ordering::Relaxed)), 1), "a client thread on CPU 1");
    c.check(tests::wait_until(6000, || DONE.load(Ordering::Acquire) == 1), "it made its calls");
    let r: [u64; 4] = core::array::from_fn(|i| ROUTED[i].load(Ordering::Relaxed));
    println!(
        "percpu_test: from CPU 1: {} fastpath IPCs on CPU 1 in 200 files calls, {} in 200 memory-server calls",
        r[0], r[2]
    );
    c.eq(r[1], 200, "200 files calls from CPU 1 answered");
    c.check(r[0] >= 200, "files served them on CPU 1 (CPU 1's fastpath carried each)");
    c.eq(r[3], 200, "200 memory-server calls from CPU 1 answered");
    c.check(r[2] >= 200, "the memory server served them on CPU 1 (CPU 1's fastpath carried each)");

    // 4. Both CPUs at once, and a live update of files meanwhile.
    DONE.store(0, Ordering::Release);
    for cpu in 0..2 {
        c.check(on_cpu(writer, cpu), &format!("a writer through files on CPU {cpu}"));
        c.check(on_cpu(mem_caller, cpu), &format!("memory-server calls on CPU {cpu}"));
    }
    // Each client (files and memory server, each CPU) makes progress: a few more calls
    // each (a minute at most: the host may be slow).
    let going = |c: &mut Checks, what: &str| {
        let o: [u64; 2] = core::array::from_fn(|i| OPS[i].load(Ordering::Relaxed));
        let mo: [u64; 2] = core::array::from_fn(|i| MEM_OPS[i].load(Ordering::Relaxed));
        c.check(
            tests::wait_until(6000, || {
                (0..2).all(|i| {
                    OPS[i].load(Ordering::Relaxed) >= o[i] + 3 && MEM_OPS[i].load(Ordering::Relaxed) >= mo[i] + 3
                })
            }),
            &format!("both CPUs' clients go on {what}"),
        );
    };
    going(&mut c, "calling files and the memory server");
    let before = tests::id_of("files");
    c.eq(env::update("files files").map_err(|e| e.0), Ok(()), "update files while both CPUs call it");
    c.check(tests::id_of("files") != before, "a new files program serves");
    going(&mut c, "after the update");
    STOP.store(true, Ordering::Relaxed);
    c.check(tests::wait_until(6000, || DONE.load(Ordering::Acquire) == 4), "the clients end");
    for cpu in 0..2 {
        let (ops, bad, n) =
            (OPS[cpu].load(Ordering::Relaxed), BAD[cpu].load(Ordering::Relaxed), WRITTEN[cpu].load(Ordering::Relaxed));
        let (mops, mbad) = (MEM_OPS[cpu].load(Ordering::Relaxed), MEM_BAD[cpu].load(Ordering::Relaxed));
        println!("percpu_test: CPU {cpu}: {ops} chunks written and read back ({bad} wrong), {mops} memory-server rounds ({mbad} wrong)");
        c.eq(bad, 0, &format!("every files answer on CPU {cpu} right, on its CPU"));
        c.eq(mbad, 0, &format!("every memory-server answer on CPU {cpu} right, on its CPU"));
        c.check(
            n > 0 && tests::update_check(files, PATHS[cpu], TAGS[cpu], n),
            &format!("every chunk CPU {cpu}'s writer wrote is in its file"),
        );
    }
    // 5. files killed: the client on CPU 1 finds the restarted one, served on CPU 1 again.
    let old = tests::id_of("files");
    c.check(old.is_some_and(|id| env::kill(id).is_ok()), "kill files");
    c.check(
        tests::wait_until(1000, || tests::id_of("files").is_some_and(|n| Some(n) != old)),
        "root starts files again",
    );
    DONE.store(0, Ordering::Release);
    c.check(on_cpu(|_| routed_on_1(FILES.load(Ordering::Relaxed)), 1), "the client on CPU 1 calls again");
    c.check(tests::wait_until(6000, || DONE.load(Ordering::Acquire) == 1), "it made its calls");
    let r: [u64; 4] = core::array::from_fn(|i| ROUTED[i].load(Ordering::Relaxed));
    c.eq(r[1], 200, "200 files calls from CPU 1 answered by the restarted files");
    c.check(r[0] >= 200, "the restarted files served them on CPU 1");
    c.finish("percpu_test")
}
