//! Where the instructions of one IPC round trip go: `bench_kernel` makes one
//! more warm cross-task round trip after its measurements, with registers only in
//! `probe_rtt` and with a 512-byte string each way in `probe_str`; QEMU
//! (icount, so the figures are instructions) stops at it for gdb, which steps through
//! the round trip one instruction at a time — client, kernel, server, kernel, client —
//! and names each instruction's function (the innermost, inlined ones included) from
//! the programs' and the kernel's symbols. Nothing is sampled or estimated: every
//! instruction executed is counted once. `cargo xtask bench kernel` prints the table.

use crate::test::scenarios::Scenario;
use crate::{qemu, Artifacts};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// `bench_kernel`'s `PROBE_MAGIC` (in rdi when `probe_rtt` is entered).
const MAGIC: u64 = 0x5c10_4b1d_0000_0001;
/// A round trip is far below this; more means the stepping went astray.
const MAX_STEPS: usize = 20_000;

/// gdb's half (Python): break at `probe_rtt` when rdi is the magic, step to its return,
/// then resolve every address with the symbols of the program or kernel it ran in.
const SCRIPT: &str = r#"
import gdb, os
E = os.environ
gdb.execute("set pagination off")
gdb.execute("set confirm off")
gdb.execute("file " + E["PROBE_KERNEL"])
gdb.execute("target remote 127.0.0.1:" + E["PROBE_PORT"])
gdb.execute("break *%s if $rdi == %s" % (E["PROBE_ADDR"], E["PROBE_MAGIC"]))
gdb.execute("continue")
reg = lambda r: int(gdb.parse_and_eval("$" + r)) & 0xffffffffffffffff
sp = reg("rsp")
ret = int.from_bytes(gdb.selected_inferior().read_memory(sp, 8).tobytes(), "little")
gdb.execute("delete")
# From here on raw remote packets: gdb's own `stepi` works out the frame after every
# step (reading memory around it), which makes a step take a second or more.
def pkt(p):
    out = gdb.execute("maint packet " + p, to_string=True)
    return out.split('received: "', 1)[1].rsplit('"', 1)[0]
def raw(n):
    return int.from_bytes(bytes.fromhex(pkt("p%x" % n)), "little")
RSP, RCX, RIP = 7, 2, 16
steps, seg, kernel = [], 0, False
limit = int(E["PROBE_MAX"])
pc = raw(RIP)
while len(steps) < limit:
    k = pc >= 0xffff800000000000
    if k != kernel:
        seg, kernel = seg + 1, k
    steps.append((seg, pc))
    if seg == 4 and pc == ret and raw(RSP) == sp + 8:
        break
    pkt("s")
    nxt = raw(RIP)
    if nxt == pc:
        # A `rep` string instruction, which the stub steps an iteration at a time
        # (icount counts each as an instruction): count the iterations left in rcx and
        # run it to its end, with breakpoints just past it (its length, 2 to 5 bytes,
        # is not known without reading code; the first one reached on this stack is
        # the next instruction — other address spaces' code at those addresses is
        # stepped over).
        left, rsp = raw(RCX), raw(RSP)
        steps.extend([(seg, pc)] * left)
        for n in range(2, 6):
            pkt("Z0,%x,1" % (pc + n))
        while True:
            pkt("c")
            nxt = raw(RIP)
            if raw(RSP) == rsp and pc < nxt <= pc + 5:
                break
        for n in range(2, 6):
            pkt("z0,%x,1" % (pc + n))
    pc = nxt
gdb.execute("kill")
def names(pc):
    # The functions around pc, innermost (inlined) first; assembly without debug
    # information by its symbol.
    b = gdb.block_for_pc(pc)
    fs = []
    while b is not None:
        if b.function is not None:
            fs.append(b.function.print_name)
        b = b.superblock
    if not fs:
        s = gdb.execute("info symbol %d" % pc, to_string=True).split()
        fs = [s[0] if s and not s[0].startswith("No") else "?"]
    return ("|".join(fs), fs[-1])
out = {}
for seg_file, segs in ((E["PROBE_KERNEL"], (1, 3)), (E["PROBE_CLIENT"], (0, 4)), (E["PROBE_SERVER"], (2,))):
    gdb.execute("symbol-file " + seg_file)
    for i, (s, pc) in enumerate(steps):
        if s in segs:
            out[i] = names(pc)
with open(E["PROBE_OUT"], "w") as f:
    for i, (s, pc) in enumerate(steps):
        inner, outer = out.get(i, ("?", "?"))
        f.write("%d\t%x\t%s\t%s\n" % (s, pc, inner, outer))
"#;

/// One executed instruction: segment (0 client, 1 kernel, 2 server, 3 kernel, 4
/// client), the functions it ran in, innermost (inlined) first, and the outermost
/// (`probe-steps.tsv` has the addresses too).
pub struct Step {
    pub seg: u32,
    pub chain: Vec<String>,
    pub outer: String,
}

impl Step {
    /// The innermost of Scion's own functions it ran in (not a library's inlined helper).
    fn own(&self) -> &str {
        const OURS: [&str; 7] = ["kernel::", "kcore::", "abi::", "rt::", "echo_api::", "bench_kernel::", "syscall_"];
        self.chain.iter().find(|f| OURS.iter().any(|o| f.starts_with(o))).or(self.chain.first()).map_or("?", |s| s)
    }

    fn within(&self, name: &str) -> bool {
        self.chain.iter().any(|f| f.contains(name))
    }
}

/// A round trip to step through: the function in `bench_kernel` (entered with the magic
/// in rdi), the files' prefix, what the report calls it.
pub struct Probe {
    pub func: &'static str,
    pub files: &'static str,
    pub what: &'static str,
}

/// The register round trip (as `ipc_rtt_8b_cross`) and the 512-byte string one (as
/// `ipc_rtt_512b_cross`).
pub const PROBES: [Probe; 2] = [
    Probe {
        func: "probe_rtt",
        files: "probe",
        what: "One warm 8-byte round trip between two tasks (`probe_rtt`, as `ipc_rtt_8b_cross`)",
    },
    Probe {
        func: "probe_str",
        files: "probe-str",
        what: "One warm round trip with a 512-byte string each way (`probe_str`, as `ipc_rtt_512b_cross`, \
               through `echo strings`)",
    },
];

/// Step through `p`'s function (see the module's head); the executed instructions in order.
pub fn trace(a: &Artifacts, dir: &Path, p: &Probe) -> Result<Vec<Step>, String> {
    qemu::ensure_installed("gdb", "gdb", "gdb")?;
    let sc = Scenario { icount: true, ..Scenario::bench("bench-probe", "kernel", &[])? };
    let img = crate::make_image(a, &sc.manifest, &sc.name)?;
    let prog =
        |n: &str| a.programs.iter().find(|(p, _)| p == n).map(|(_, p)| p.clone()).ok_or(format!("no program {n}"));
    let (client, server) = (prog("bench_kernel")?, prog("echo")?);
    let addr = symbol(&client, p.func)?;
    let port = qemu::free_port()?;
    let opts = qemu::Options { gdb: Some(port), ..qemu::Options::new("tcg".into(), true, String::new(), None) };
    let mut q = qemu::command(&a.kernel, &img, &opts)?;
    let serial = dir.join(format!("{}-serial.log", p.files));
    q.args(["-monitor", "none", "-serial"]).arg(format!("file:{}", serial.display()));
    q.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
    let mut qemu_child = q.spawn().map_err(|e| format!("cannot start {}: {e}", qemu::QEMU))?;
    let script = dir.join("probe.py");
    let out = dir.join(format!("{}-steps.tsv", p.files));
    std::fs::write(&script, SCRIPT).map_err(|e| e.to_string())?;
    let _ = std::fs::remove_file(&out);
    // The stub listens once QEMU is up.
    let t0 = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if t0.elapsed() > Duration::from_secs(20) {
            let _ = qemu_child.kill();
            return Err("QEMU's gdb stub did not come up".into());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut g = Command::new("gdb");
    g.args(["-batch", "-nx", "-x"]).arg(&script);
    g.env("PROBE_KERNEL", &a.kernel).env("PROBE_CLIENT", &client).env("PROBE_SERVER", &server);
    g.env("PROBE_PORT", port.to_string())
        .env("PROBE_ADDR", format!("{addr:#x}"))
        .env("PROBE_MAGIC", format!("{MAGIC:#x}"));
    g.env("PROBE_MAX", MAX_STEPS.to_string()).env("PROBE_OUT", &out);
    g.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut gdb = g.spawn().map_err(|e| format!("cannot start gdb: {e}"))?;
    let t0 = Instant::now();
    let status = loop {
        if let Some(st) = gdb.try_wait().map_err(|e| e.to_string())? {
            break Some(st);
        }
        if t0.elapsed() > Duration::from_secs(1500) {
            let _ = gdb.kill();
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let _ = qemu_child.kill();
    let _ = qemu_child.wait();
    let log = gdb
        .wait_with_output()
        .map(|o| format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr)))
        .unwrap_or_default();
    let log_file = dir.join(format!("{}-gdb.log", p.files));
    std::fs::write(&log_file, &log).map_err(|e| e.to_string())?;
    if status.is_none() {
        return Err(format!("gdb did not finish stepping; see {}", log_file.display()));
    }
    let text = std::fs::read_to_string(&out).map_err(|_| format!("gdb wrote no steps; see {}", log_file.display()))?;
    let steps: Vec<Step> = text
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.splitn(4, '\t').collect();
            Some(Step {
                seg: f.first()?.parse().ok()?,
                chain: f.get(2)?.split('|').map(String::from).collect(),
                outer: f.get(3)?.to_string(),
            })
        })
        .collect();
    if steps.last().is_none_or(|s| s.seg != 4) || steps.len() >= MAX_STEPS {
        return Err(format!(
            "the stepping did not come back to the client ({} steps); see {}",
            steps.len(),
            log_file.display()
        ));
    }
    Ok(steps)
}

/// The address of `name` in an ELF file's symbol table.
fn symbol(elf: &Path, name: &str) -> Result<u64, String> {
    use object::{Object, ObjectSymbol};
    let data = std::fs::read(elf).map_err(|e| format!("{}: {e}", elf.display()))?;
    let f = object::File::parse(&*data).map_err(|e| format!("{}: {e}", elf.display()))?;
    f.symbols()
        .find(|s| s.name() == Ok(name))
        .map(|s| s.address())
        .ok_or(format!("{}: no symbol {name}", elf.display()))
}

/// The part of a round trip an instruction belongs to.
pub fn part(s: &Step, in_dispatch: bool) -> &'static str {
    let has = |n: &str| s.within(n);
    match s.seg {
        0 | 4 => "user: the client's call",
        2 => "user: the server's loop (reply and wait)",
        _ if s.outer == "syscall_entry" && !in_dispatch => "entry: syscall stub, registers saved",
        _ if s.outer == "syscall_entry" || s.outer.starts_with("ipc_fast_exit") => "exit: registers restored, sysret",
        _ if has("switch_context") => "switch: kernel stacks (switch_context)",
        _ if has("copy_string")
            || has("one_page_string")
            || has("CachedRange")
            || has("copy_forward")
            || has("copy_bytes")
            || has("UserRange")
            || has("user_phys")
            || has("pagetable::")
            || has("is_user_range")
            || has("usercopy")
            || has("copy_range")
            || has("compiler_builtins::mem")
            || has("phys_to_virt") =>
        {
            "string: both buffers resolved (page walks) and copied"
        }
        _ if has("fastpath::lookup")
            || has("fastpath::plan")
            || has("RunQueue::highest")
            || has("RunQueue::any_above") =>
        {
            "lookup: the fastpath's checks (capability, partner, priorities)"
        }
        _ if has("fastpath::switch") => "switch: to the partner (kernel stack pointer, address space, fs)",
        _ if has("fastpath::transfer")
            || has("fastpath::commit")
            || has("fastpath::to_partner")
            || has("TimerHeap::remove") =>
        {
            "transfer: states, timers, badge, the block count"
        }
        // The lean call and reply-and-wait: their checks and their changes to the caller's
        // side, inline in one function each (what they call inline is classed above).
        _ if has("fastpath::fast_call")
            || has("fastpath::fast_reply_wait")
            || has("ipc_fast_call")
            || has("ipc_fast_reply_wait")
            || has("kernel::tcb_in") =>
        {
            "checks and the caller's side: fast_call / fast_reply_wait (capability, partner, priorities, states)"
        }
        _ if has("reap") || has("kernel::enter") => "after the switch (enter, reap)",
        _ if has("switch_to") => "switch: to the partner (switch_to: address space, TSS, fs)",
        _ if has("ipc_fastpath") => "dispatch: ipc_fastpath (prologue, epilogue, the fastpath's own)",
        _ if has("syscall_dispatch") => "dispatch: syscall_dispatch",
        _ => "other",
    }
}

/// The breakdown as a Markdown section: instructions per part and per function.
pub fn report(p: &Probe, steps: &[Step]) -> String {
    let mut parts: Vec<(&str, u64)> = Vec::new();
    let mut funcs: BTreeMap<String, u64> = BTreeMap::new();
    let mut in_dispatch = false;
    let mut last_seg = u32::MAX;
    for s in steps {
        if s.seg != last_seg {
            in_dispatch = false;
            last_seg = s.seg;
        }
        if s.seg % 2 == 1 && s.outer != "syscall_entry" {
            in_dispatch = true;
        }
        let p = part(s, in_dispatch);
        match parts.iter_mut().find(|(n, _)| *n == p) {
            Some((_, c)) => *c += 1,
            None => parts.push((p, 1)),
        }
        let side = match s.seg {
            0 | 4 => "client",
            2 => "server",
            _ => "kernel",
        };
        *funcs.entry(format!("{side}: {}", s.own())).or_default() += 1;
    }
    let total = steps.len() as u64;
    let mut out = String::new();
    let _ = writeln!(out, "## Where the instructions of one round trip go: `{}` (`icount`)\n", p.func);
    let _ = writeln!(
        out,
        "{}, stepped through an instruction at a time with gdb on QEMU's stub (a `rep` string instruction \
         run to its end and counted an instruction per iteration, as icount counts it); each instruction \
         counted once under the function it ran in (`cargo xtask bench kernel`; method in \
         `docs/ipc-breakdown.md`). Total: **{total}** instructions.\n",
        p.what
    );
    let _ = writeln!(out, "| part | instructions |\n|---|---:|");
    for (p, c) in &parts {
        let _ = writeln!(out, "| {p} | {c} |");
    }
    let _ = writeln!(out, "\n| function (the innermost of Scion's own, inlined ones too) | instructions |\n|---|---:|");
    let mut fv: Vec<(String, u64)> = funcs.into_iter().collect();
    fv.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    for (f, c) in fv {
        let _ = writeln!(out, "| `{f}` | {c} |");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(seg: u32, chain: &str) -> Step {
        let chain: Vec<String> = chain.split('|').map(String::from).collect();
        Step { seg, outer: chain.last().cloned().unwrap_or_default(), chain }
    }

    /// The stub's instructions before the dispatcher are the entry, after it the exit;
    /// inlined helpers count for the function of Scion's they ran in.
    #[test]
    fn parts_and_functions() {
        let steps = [
            step(0, "rt::ipc::raw|bench_kernel::probe_rtt"),
            step(1, "syscall_entry"),
            step(1, "syscall_entry"),
            step(1, "kernel::fastpath::ipc|kernel::fastpath::ipc_fastpath"),
            step(1, "core::slice::index::index<u32>|kernel::fastpath::lookup|kernel::fastpath::ipc|kernel::fastpath::ipc_fastpath"),
            step(1, "kcore::runqueue::RunQueue::any_above<1024>|kernel::fastpath::lookup|kernel::fastpath::ipc_fastpath"),
            step(1, "kernel::fastpath::transfer|kernel::fastpath::ipc|kernel::fastpath::ipc_fastpath"),
            step(1, "kernel::fastpath::switch|kernel::fastpath::ipc_fastpath"),
            step(1, "kcore::pagetable::leaf_table<kernel::task::Walk>"),
            step(1, "kernel::fastpath::fast_call<false>|kernel::fastpath::ipc_fast_call_shared"),
            step(1, "kernel::fastpath::to_partner|kernel::fastpath::fast_call<false>|kernel::fastpath::ipc_fast_call_shared"),
            step(1, "kernel::task::copy_forward|kernel::fastpath::fast_call<true>|kernel::fastpath::ipc_fast_call_string_shared"),
            step(1, "ipc_fast_exit"),
            step(2, "echo_api::fast_loop"),
            step(3, "syscall_entry"),
            step(4, "bench_kernel::probe_rtt"),
        ];
        let r = report(&PROBES[0], &steps);
        for line in [
            "Total: **16**",
            "| string: both buffers resolved (page walks) and copied | 2 |",
            "| checks and the caller's side: fast_call / fast_reply_wait (capability, partner, priorities, states) | 1 |",
            "| entry: syscall stub, registers saved | 3 |",
            "| dispatch: ipc_fastpath (prologue, epilogue, the fastpath's own) | 1 |",
            "| exit: registers restored, sysret | 1 |",
            "| lookup: the fastpath's checks (capability, partner, priorities) | 2 |",
            "| transfer: states, timers, badge, the block count | 2 |",
            "| switch: to the partner (kernel stack pointer, address space, fs) | 1 |",
            "| `kernel: kernel::fastpath::lookup` | 1 |",
            "| `kernel: ipc_fast_exit` | 1 |",
            "| `client: rt::ipc::raw` | 1 |",
        ] {
            assert!(r.contains(line), "{line} in\n{r}");
        }
    }
}
