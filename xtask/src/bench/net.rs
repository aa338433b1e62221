//! The `net` suite: HTTP downloads, TCP round trips and concurrent requests from the
//! host; Scion's net+httpd beside Linux's server and nginx.

use super::plan::{bench_options, Plan, RUNS};
use super::report::{aggregate, get, Agg, Fig, Results};
use super::{netload, nginx};
use crate::qemu::{self, Options};
use crate::test::nettest;
use crate::test::scenarios::Scenario;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

/// The `net` suite's downloads: (name, file, fetches per figure).
const NET_SIZES: [(&str, &str, u64); 3] = [("64k", "64k.bin", 64), ("1m", "1m.bin", 8), ("16m", "16m.bin", 2)];
/// Figures the net report reads that a side has no measurement for: nginx serves no
/// echo (the round trip is the C echo server's).
const NET_ABSENT: &[(&str, &str)] = &[("nginx", "tcp_rr_64b"), ("nginx", "tcp_rr_64b_us")];
/// 64-byte round trips per figure.
const NET_RR: u64 = 1000;
/// A smoke run's 64-byte round trips (and one fetch of each file).
const NET_SMOKE_RR: u64 = 20;

/// The guest's busy ticks so far (GET /.busy on a new connection).
fn guest_busy(port: u16) -> Result<u64, String> {
    Ok(guest_busy_parts(port)?.0)
}

/// The guest's busy ticks so far and the `PART=TICKS` words of the answer (Scion's net's
/// busy ticks by part: `net_api::PROFILE_PARTS`).
fn guest_busy_parts(port: u16) -> Result<(u64, Vec<(String, u64)>), String> {
    use std::io::Write;
    let mut s = nettest::ready(port)?;
    write!(s, "GET /.busy HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n").map_err(|e| e.to_string())?;
    let r = nettest::response(&mut s, false)?;
    let busy = busy_of(&r.body)
        .ok_or_else(|| format!("GET /.busy answered {} {:?}", r.status, String::from_utf8_lossy(&r.body)))?;
    Ok((busy, parts_of(&r.body)))
}

/// The `PART=TICKS` words of a `/.busy` answer.
fn parts_of(body: &[u8]) -> Vec<(String, u64)> {
    String::from_utf8_lossy(body)
        .split_whitespace()
        .filter_map(|w| w.split_once('='))
        .filter_map(|(k, v)| Some((k.to_string(), v.parse().ok()?)))
        .collect()
}

/// The busy ticks in a `/.busy` answer: its first number (Scion's httpd answers "busy tsc
/// meter voluntary involuntary", Linux's server the busy ticks alone).
fn busy_of(body: &[u8]) -> Option<u64> {
    String::from_utf8_lossy(body).split_whitespace().next()?.parse().ok()
}

/// Measure one booted guest through its forwarded ports: per size, KiB/s (host clock)
/// and busy guest ticks per KiB; 64-byte round trips: µs and busy ticks per round trip.
/// `smoke`: one fetch of each file, `NET_SMOKE_RR` round trips.
fn measure_net(http: u16, echo: u16, smoke: bool) -> Result<Vec<(String, u64)>, String> {
    let mut out = downloads(http, http, smoke)?;
    out.extend(round_trips(http, echo, if smoke { NET_SMOKE_RR } else { NET_RR })?);
    Ok(out)
}

/// Downloads of each size from the web server on `http`, the guest's busy ticks read
/// through `busy` (the server answering GET /.busy): KiB/s and busy ticks per KiB.
/// `smoke`: one fetch of each file.
fn downloads(http: u16, busy: u16, smoke: bool) -> Result<Vec<(String, u64)>, String> {
    use std::io::Write;
    let mut out = Vec::new();
    for (tag, file, k) in NET_SIZES {
        let k = if smoke { 1 } else { k };
        let (_, _, size) = nettest::www_files().into_iter().find(|f| f.0 == file).ok_or("no such file")?;
        let fetch_all = |n: u64| -> Result<(), String> {
            let mut s = nettest::ready(http)?;
            for _ in 0..n {
                // One write (see nettest::request).
                s.write_all(format!("GET /{file} HTTP/1.1\r\nHost: bench\r\n\r\n").as_bytes())
                    .map_err(|e| e.to_string())?;
                let r = nettest::response(&mut s, false)?;
                if r.status != 200 || r.body.len() != size {
                    return Err(format!("GET /{file}: status {}, {} bytes", r.status, r.body.len()));
                }
            }
            Ok(())
        };
        fetch_all(1)?;
        let b0 = guest_busy(busy)?;
        let t0 = std::time::Instant::now();
        fetch_all(k)?;
        let secs = t0.elapsed().as_secs_f64();
        let b1 = guest_busy(busy)?;
        let kib = k * size as u64 / 1024;
        out.push((format!("http_download_kbps_{tag}"), (kib as f64 / secs) as u64));
        out.push((format!("http_download_ipk_{tag}"), b1.saturating_sub(b0) / kib.max(1)));
        eprintln!(
            "    | {file} × {k}: {:.0} KiB/s, {} busy ticks per KiB",
            kib as f64 / secs,
            b1.saturating_sub(b0) / kib.max(1)
        );
    }
    Ok(out)
}

/// 64-byte round trips with the echo server on `echo`: busy ticks (through the web
/// server on `http`) and µs per round trip.
fn round_trips(http: u16, echo: u16, rr: u64) -> Result<Vec<(String, u64)>, String> {
    use std::io::{Read, Write};
    let mut out = Vec::new();
    let (b0, p0) = guest_busy_parts(http)?;
    let msg = [0x5au8; 64];
    let mut back = [0u8; 64];
    // A connection whose first message comes back (see nettest::ready).
    let mut s = (0..4)
        .find_map(|_| {
            let mut s = nettest::connect(echo).ok()?;
            s.set_nodelay(true).ok()?;
            s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
            s.write_all(&msg).ok()?;
            s.read_exact(&mut back).ok()?;
            s.set_read_timeout(Some(Duration::from_secs(120))).ok()?;
            Some(s)
        })
        .ok_or("the echo server answered on none of four connections")?;
    let t0 = std::time::Instant::now();
    for _ in 0..rr {
        s.write_all(&msg).map_err(|e| format!("echo: {e}"))?;
        s.read_exact(&mut back).map_err(|e| format!("echo: {e}"))?;
    }
    let us = t0.elapsed().as_micros() as u64 / rr;
    drop(s);
    let (b1, p1) = guest_busy_parts(http)?;
    // Where net's share went (Scion), part by part.
    for (name, v1) in &p1 {
        if let Some((_, v0)) = p0.iter().find(|(n, _)| n == name) {
            out.push((format!("tcp_rr_64b_net_{name}"), v1.saturating_sub(*v0) / rr));
        }
    }
    out.push(("tcp_rr_64b".into(), b1.saturating_sub(b0) / rr));
    out.push(("tcp_rr_64b_us".into(), us));
    eprintln!("    | 64-byte round trips: {us} µs, {} busy ticks each", b1.saturating_sub(b0) / rr);
    Ok(out)
}

/// Forwarded ports to each web server for the concurrency levels (QEMU's user network
/// takes one forwarded connection at a time: `netload::at`).
const LOAD_PORTS: usize = 8;

/// Requests of the small file at each concurrency level (`netload::levels`) from the
/// web server behind `ports`, the busy ticks read through `busy`: `http_c{c}_rps`
/// (requests a second) and `http_c{c}_ipr` (busy ticks per request), each `prefix`ed;
/// and where a request's ticks went by part, when the server tells them (Scion's `/.busy`:
/// net's `PROFILE_PARTS`, `httpd`, `files`): `http_c{c}_part_{name}` per request.
fn levels(ports: &[u16], busy: u16, prefix: &str, which: &[(usize, usize)]) -> Result<Vec<(String, u64)>, String> {
    let mut out = Vec::new();
    for &(c, n) in which {
        let seen = std::cell::RefCell::new(Vec::new());
        let read = || {
            let (b, parts) = guest_busy_parts(busy)?;
            seen.borrow_mut().push(parts);
            Ok(b)
        };
        let (rps, ipr) = netload::at(ports, c, n, "/small.txt", nettest::SMALL.len(), &read)
            .map_err(|e| format!("{prefix}{c} clients: {e}"))?;
        eprintln!("    | {prefix}{c} clients × {n} requests: {rps} requests/s, {ipr} busy ticks each");
        out.push((format!("{prefix}http_c{c}_rps"), rps));
        out.push((format!("{prefix}http_c{c}_ipr"), ipr));
        // The web server measured is the one answering `/.busy` only for Scion's own
        // levels (nginx's run reads the C server's, which tells no parts).
        if let [p0, p1] = &seen.into_inner()[..] {
            let total = (c * n) as u64;
            for (name, v1) in p1 {
                if let Some((_, v0)) = p0.iter().find(|(k, _)| k == name) {
                    out.push((format!("{prefix}http_c{c}_part_{name}"), v1.saturating_sub(*v0) / total));
                }
            }
        }
    }
    Ok(out)
}

/// What a boot of `net_boot` measures: nginx beside (the Linux guest), the concurrency
/// levels (none: `&[]`), and the downloads and round trips (`transfers`; the 10,000
/// level's boot measures that level alone).
pub(super) struct Load<'a> {
    pub nginx: bool,
    pub levels: &'a [(usize, usize)],
    pub transfers: bool,
}

/// Boot `kernel` + `image` with ports 80 and 7 forwarded (and, with `nginx`, nginx's);
/// once `ready` shows on the serial port, measure: the downloads and round trips, then
/// the concurrency levels (`Load`). The network device is `opts.net`'s (virtio-net
/// unless it says e1000e). Returns the figures (nginx's named `nginx:…`; or why not) and
/// the serial log.
pub(super) type Measured = (Result<Vec<(String, u64)>, String>, String);

pub(super) fn net_boot(
    kernel: &Path,
    image: &Path,
    opts: Options,
    ready: &str,
    load: Load,
    smoke: bool,
) -> Result<Measured, String> {
    let Load { nginx, levels: load_levels, transfers } = load;
    let ports = qemu::free_ports(2 + LOAD_PORTS + if nginx { 1 + LOAD_PORTS } else { 0 })?;
    let (http, echo) = (ports[0], ports[1]);
    let load = ports[2..2 + LOAD_PORTS].to_vec();
    let ngx = ports[2 + LOAD_PORTS..].to_vec();
    let mut forward = vec![(http, 80), (echo, 7)];
    forward.extend(load.iter().map(|p| (*p, 80)));
    forward.extend(ngx.iter().map(|p| (*p, nginx::PORT)));
    let e1000e = opts.net.as_ref().is_some_and(|n| n.e1000e);
    let opts = Options { net: Some(qemu::NetOptions { forward, e1000e, ..Default::default() }), ..opts };
    let mut figs = Err("the guest never said it serves".to_string());
    let mut go = |_: &qemu::Typer| {
        // The echo server may come up a little after the web server.
        for _ in 0..100 {
            if nettest::connect(echo).is_ok() {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        figs = (|| {
            let mut v = if transfers { measure_net(http, echo, smoke)? } else { Vec::new() };
            v.extend(levels(&load, http, "", load_levels)?);
            if let Some((first, rest)) = ngx.split_first() {
                if transfers {
                    v.extend(downloads(*first, http, smoke)?.into_iter().map(|(m, x)| (format!("nginx:{m}"), x)));
                }
                v.extend(levels(rest, http, "nginx:", load_levels)?);
            }
            Ok(v)
        })();
    };
    let out = qemu::run_at(kernel, image, &opts, Duration::from_secs(3600), None, Some((ready, &mut go)))?;
    Ok((figs, out.log))
}

pub(super) fn net_suite(a: &crate::Artifacts, vmlinuz: &Path, initramfs: &Path, plan: &Plan) -> Result<String, String> {
    let dir = &plan.dir;
    let www = nettest::make_www()?;
    let disk = dir.join("net-disk.img");
    crate::image::make(&disk.display().to_string(), 64 << 20, &[format!("files:1:6144:fs={}/", www.display())])?;
    let sc = Scenario::bench("bench-net", "net", &[])?;
    let img = crate::make_image(a, &sc.manifest, &sc.name)?;
    let modes = plan.modes();
    let runs = |icount: bool| if icount { 1 } else { plan.runs(RUNS) };
    let steps: usize = modes.iter().map(|m| 2 * runs(m.1)).sum();
    let mut step = 0;
    let mut results: Results = BTreeMap::new();
    for (mode, icount, accel) in &modes {
        for run in 1..=runs(*icount) {
            for sys in ["scion", "linux"] {
                step += 1;
                eprintln!("[net {step}/{steps}] {sys}, {mode}, run {run}");
                let (figs, log) = if sys == "scion" {
                    net_boot(
                        &a.kernel,
                        &img,
                        bench_options(accel.clone(), *icount, String::new(), Some(disk.clone())),
                        nettest::HTTPD_READY,
                        Load { nginx: false, levels: netload::levels(plan.smoke), transfers: true },
                        plan.smoke,
                    )
                } else {
                    let append = plan.linux("console=ttyS0 rdinit=/init panic=-1 quiet kbench=net nginx=1");
                    net_boot(
                        vmlinuz,
                        initramfs,
                        bench_options(accel.clone(), *icount, append, None),
                        "lhttpd: serving",
                        Load { nginx: true, levels: netload::levels(plan.smoke), transfers: true },
                        plan.smoke,
                    )
                }
                .map_err(|e| format!("the {sys} net run ({mode}) failed: {e}"))?;
                plan.log(sys, &format!("{sys}-net-{mode}.log"), &log)?;
                let figs = figs.map_err(|e| format!("the {sys} net run ({mode}) failed: {e}"))?;
                for (m, v) in figs {
                    // The host clock's figures mean something under TCG only; the busy
                    // ticks under icount only (instructions).
                    let clock = m.contains("_kbps_") || m.ends_with("_us") || m.ends_with("_rps");
                    let (who, m) = match m.strip_prefix("nginx:") {
                        Some(m) => ("nginx", m.to_string()),
                        None => (sys, m),
                    };
                    if clock != *icount {
                        results.entry((who.into(), mode.to_string())).or_default().entry(m).or_default().push(Fig {
                            median: v,
                            min: v,
                            max: v,
                            samples: 1,
                        });
                    }
                }
            }
        }
    }
    // The 10,000 level (a real run, icount): its own boot of each side with the memory
    // it takes (`BIG_MEMORY`; Scion's net given the kernel memory to map that many
    // sockets' buffers, httpd the per-address limit, every host client being one address
    // behind QEMU's user network).
    let mut notes = Vec::new();
    if !plan.smoke && modes.iter().any(|m| m.1) {
        for sys in ["scion", "linux"] {
            eprintln!("[net] {sys}, icount, {} clients at {BIG_MEMORY}", BIG_LEVEL[0].0);
            let big = |o: Options| Options { memory: BIG_MEMORY.into(), ..o };
            let load = Load { nginx: sys == "linux", levels: &BIG_LEVEL, transfers: false };
            let run = if sys == "scion" {
                let manifest = crate::compose::compose(std::slice::from_ref(&sc.manifest), BIG_SCION);
                let img = crate::make_image(a, &manifest, "bench-net-big")?;
                let opts = bench_options("tcg".into(), true, String::new(), Some(disk.clone()));
                net_boot(&a.kernel, &img, big(opts), nettest::HTTPD_READY, load, false)
            } else {
                let append = plan.linux("console=ttyS0 rdinit=/init panic=-1 quiet kbench=net nginx=1");
                let opts = big(bench_options("tcg".into(), true, append, None));
                net_boot(vmlinuz, initramfs, opts, "lhttpd: serving", load, false)
            };
            // A side that does not carry the level is said in the report, the rest kept.
            let log_name = format!("{sys}-net-big.log");
            let figs = run.and_then(|(figs, log)| {
                plan.log(sys, &log_name, &log)?;
                figs
            });
            let figs = match figs {
                Ok(f) => f,
                Err(e) => {
                    let e = format!("{sys} at {} clients ({BIG_MEMORY}): {e} (its log: {log_name})", BIG_LEVEL[0].0);
                    eprintln!("[net] {e}");
                    notes.push(e);
                    continue;
                }
            };
            for (m, v) in figs.into_iter().filter(|(m, _)| !m.ends_with("_rps")) {
                let (who, m) = match m.strip_prefix("nginx:") {
                    Some(m) => ("nginx", m.to_string()),
                    None => (sys, m),
                };
                let fig = Fig { median: v, min: v, max: v, samples: 1 };
                results.entry((who.into(), "icount".into())).or_default().entry(m).or_default().push(fig);
            }
        }
    }
    let agg = aggregate(&results);
    let shown = report_levels(plan.smoke);
    plan.finish("net", &agg, &modes, plan.runs(RUNS), NET_ABSENT, || {
        (net_svg(&agg, &shown), net_report(&agg, plan.count(NET_RR, NET_SMOKE_RR), &shown, &notes))
    })
}

/// The 10,000-client level (one request each, as 1,000's two), measured in a boot of
/// its own at `BIG_MEMORY` in a real run (icount alone).
const BIG_LEVEL: [(usize, usize); 1] = [(10_000, 1)];
/// The big level's machine: at the suite's 512 MiB net allows httpd 1,140 connections,
/// at 2 GiB 2,357 (net's kernel memory, `kpages = 1024`, the bound); at 6 GiB with
/// `kpages = 4608` 10,824 (docs/network.md, "Connections and memory").
const BIG_MEMORY: &str = "6G";
/// The big level's amendments to Scion's bench manifest.
const BIG_SCION: &str =
    "[[program]]\nname = \"net\"\nkpages = 4608\n\n[[program]]\nname = \"httpd\"\nargs = \"busy per_addr=20000\"\n";

/// The levels the report and plot show: the run's, and the 10,000 level in a real run.
fn report_levels(smoke: bool) -> Vec<(usize, usize)> {
    let mut v = netload::levels(smoke).to_vec();
    if !smoke {
        v.extend(BIG_LEVEL);
    }
    v
}

/// The report; `rr`: the round trips per figure; `levels`: the concurrency levels run;
/// `failed`: the levels a side did not carry, and why.
fn net_report(agg: &Agg, rr: u64, levels: &[(usize, usize)], failed: &[String]) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# Suite `net`\n");
    let _ = writeln!(s, "The host fetches files over HTTP/1.1 (one keep-alive connection per size: {}) and makes {rr} round trips of 64 bytes over one TCP connection, through QEMU's user network (hostfwd) and the same virtio-net device, from Scion (net: virtio-net driver + smoltcp; httpd over the files server, the files on the virtio disk) and from Linux (Debian's kernel; a read/write HTTP server and an echo server in C, `bench/linux/net.c`, the files in its page cache). **kbps** = KiB/s on the host's clock under plain TCG (median of three runs; noisy); **ipk** = busy guest instructions per KiB delivered under icount (rdtsc minus idle time, read from the guest before and after through GET /.busy); `tcp_rr_64b` = busy instructions per round trip (icount), `tcp_rr_64b_us` = µs per round trip (TCG).\n", NET_SIZES.iter().map(|(t, _, k)| format!("{t} × {k}")).collect::<Vec<_>>().join(", "));
    let _ = writeln!(s, "Beside the C server, **nginx** (Debian's package, `sendfile on`, one worker; `xtask/src/bench/nginx.rs`) serves the same files in the same Linux guest: what a user would run instead. `http_c{{c}}_*`: {{c}} keep-alive connections at once (through {LOAD_PORTS} forwarded ports, since QEMU's user network takes one forwarded connection at a time), each making requests for the 26-byte `/small.txt` one after another ({}): **rps** = requests a second on the host's clock (TCG), **ipr** = busy guest instructions per request (icount).\n", levels.iter().map(|(c, n)| format!("{c} × {n}")).collect::<Vec<_>>().join(", "));
    if levels.iter().any(|l| BIG_LEVEL.contains(l)) {
        let _ = writeln!(s, "The {} level (icount alone) runs in a boot of each side of its own at {BIG_MEMORY}: in the suite's 512 MiB machine net allows httpd 1,140 connections, at 2 GiB 2,357 (net's kernel memory the bound); for it net gets `kpages = 4608` (10,824 for httpd) and httpd `per_addr=20000` (every host client is one address behind QEMU's user network).\n", BIG_LEVEL[0].0);
    }
    for f in failed {
        let _ = writeln!(s, "**Not carried:** {f}.\n");
    }
    let fmt = |v: Option<u64>| v.map_or("—".to_string(), |v| v.to_string());
    let ratio = |a: Option<u64>, b: Option<u64>| match (a, b) {
        (Some(a), Some(b)) if b > 0 => format!("{:.2}", a as f64 / b as f64),
        _ => "—".into(),
    };
    let _ = writeln!(s, "| metric | Scion | Linux (C) | nginx | Scion / C | Scion / nginx |");
    let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|");
    let mut rows: Vec<(String, &str)> = Vec::new();
    for (tag, _, _) in NET_SIZES {
        rows.push((format!("http_download_kbps_{tag}"), "tcg"));
        rows.push((format!("http_download_ipk_{tag}"), "icount"));
    }
    rows.push(("tcp_rr_64b_us".into(), "tcg"));
    rows.push(("tcp_rr_64b".into(), "icount"));
    for (c, _) in levels {
        rows.push((format!("http_c{c}_rps"), "tcg"));
        rows.push((format!("http_c{c}_ipr"), "icount"));
    }
    for (m, mode) in &rows {
        let (a, b, n) = (get(agg, "scion", mode, m), get(agg, "linux", mode, m), get(agg, "nginx", mode, m));
        let _ = writeln!(
            s,
            "| `{m}` ({mode}) | {} | {} | {} | {} | {} |",
            fmt(a),
            fmt(b),
            fmt(n),
            ratio(a, b),
            ratio(a, n)
        );
    }
    // Where Scion's round trip goes: net's parts (its own clock ticks, `net_api::PROFILE`),
    // the rest (the kernel's IPC, interrupts and switches, the echo program) by difference.
    let parts: Vec<(String, u64)> = agg
        .iter()
        .filter(|((sys, mode, m), _)| sys == "scion" && mode == "icount" && m.starts_with("tcp_rr_64b_net_"))
        .map(|((_, _, m), f)| (m.trim_start_matches("tcp_rr_64b_net_").to_string(), f.median))
        .collect();
    if let (Some(total), false) = (get(agg, "scion", "icount", "tcp_rr_64b"), parts.is_empty()) {
        let _ = writeln!(s, "\n### Where a 64-byte round trip's instructions go (Scion, icount)\n");
        let _ = writeln!(s, "net counts its own busy ticks by part (`net_api::PROFILE`, read through `/.busy` before and after the {NET_RR} round trips); the rest is the total less net's: the kernel (the IPC between the echo program and net, the device's interrupt, the switches) and the echo program (`bench_net`).\n");
        let _ = writeln!(s, "| part | instructions per round trip | share |");
        let _ = writeln!(s, "|---|---:|---:|");
        let order = ["requests", "device", "stack", "checksums", "cue", "after"];
        let mut sorted = parts.clone();
        sorted.sort_by_key(|(n, _)| order.iter().position(|o| o == n).unwrap_or(order.len()));
        let net: u64 = sorted.iter().map(|(_, v)| v).sum();
        for (n, v) in &sorted {
            let what = match n.as_str() {
                "requests" => "net: the echo program's requests (RECV, SEND, WAIT), the stack's run after each aside",
                "device" => "net: the virtio-net device (taking received frames, refilling, handing frames over, the interrupt's acknowledgement)",
                "stack" => "net: smoltcp's poll (TCP/IP in and out), checksums and the device aside",
                "checksums" => "net: summing the sent frames' TCP checksums (`crates/inet`)",
                "cue" => "net: Cue's transfers (none run here)",
                "after" => "net: after each run (DHCP, listeners' pools, lingering sockets, waking waiters)",
                _ => "net",
            };
            let _ = writeln!(s, "| {what} | {v} | {:.0}% |", 100.0 * *v as f64 / total.max(1) as f64);
        }
        let _ = writeln!(s, "| **net in all** | {net} | {:.0}% |", 100.0 * net as f64 / total.max(1) as f64);
        let rest = total.saturating_sub(net);
        let _ = writeln!(
            s,
            "| the kernel (IPC, interrupt, switches) and the echo program | {rest} | {:.0}% |",
            100.0 * rest as f64 / total.max(1) as f64
        );
        let _ =
            writeln!(s, "| **total** (Linux: {}) | {total} | 100% |", fmt(get(agg, "linux", "icount", "tcp_rr_64b")));
    }
    // Where Scion's small request goes at each level: httpd, files, net, smoltcp (net's
    // `stack` part) by their own clocks, the kernel and the rest by difference.
    let part = |c: usize, name: &str| get(agg, "scion", "icount", &format!("http_c{c}_part_{name}"));
    // (Looked up in `agg` itself: the smoke's check asks only for what the report reads,
    // and a run whose server tells no parts has no table.)
    let told = |c: usize| {
        let m = format!("http_c{c}_part_httpd");
        agg.keys().any(|(sys, mode, k)| sys == "scion" && mode == "icount" && *k == m)
    };
    let with_parts: Vec<usize> = levels.iter().map(|(c, _)| *c).filter(|c| told(*c)).collect();
    if !with_parts.is_empty() {
        let _ = writeln!(s, "\n### Where a small request's instructions go (Scion, icount)\n");
        let _ = writeln!(s, "Each server counts its own busy ticks (`/.busy`, read before and after each level): httpd its loop between waits less its calls to net and files, files its requests (`files_api::PROFILE`), net by part (`net_api::PROFILE`; smoltcp is its `stack` part). The kernel's share (IPC, interrupts, switches) and anything else is the total less theirs. Instructions per request.\n");
        let head: Vec<String> = with_parts.iter().map(|c| format!("{c} clients")).collect();
        let _ = writeln!(s, "| part | {} |", head.join(" | "));
        let _ = writeln!(s, "|---|{}", "---:|".repeat(with_parts.len()));
        let net_of = |c: usize| {
            ["requests", "device", "checksums", "cue", "after"].iter().filter_map(|n| part(c, n)).sum::<u64>()
        };
        type Row<'a> = (&'a str, &'a dyn Fn(usize) -> Option<u64>);
        let rows: [Row; 4] = [
            ("httpd", &|c| part(c, "httpd")),
            ("files", &|c| part(c, "files")),
            ("net (requests, device, checksums, Cue, after each run)", &|c| Some(net_of(c))),
            ("smoltcp (net's `stack`)", &|c| part(c, "stack")),
        ];
        for (name, f) in rows {
            let cells: Vec<String> = with_parts.iter().map(|c| fmt(f(*c))).collect();
            let _ = writeln!(s, "| {name} | {} |", cells.join(" | "));
        }
        let cells: Vec<String> = with_parts
            .iter()
            .map(|&c| {
                let known = part(c, "httpd").unwrap_or(0)
                    + part(c, "files").unwrap_or(0)
                    + net_of(c)
                    + part(c, "stack").unwrap_or(0);
                fmt(get(agg, "scion", "icount", &format!("http_c{c}_ipr")).map(|t| t.saturating_sub(known)))
            })
            .collect();
        let _ = writeln!(s, "| the kernel (IPC, interrupts, switches) and the rest | {} |", cells.join(" | "));
        let cells: Vec<String> =
            with_parts.iter().map(|c| fmt(get(agg, "scion", "icount", &format!("http_c{c}_ipr")))).collect();
        let _ = writeln!(s, "| **total** | {} |", cells.join(" | "));
    }
    let _ = writeln!(s, "\n## Target\n");
    for (tag, _, _) in NET_SIZES {
        let m = format!("http_download_ipk_{tag}");
        if let (Some(a), Some(b)) = (get(agg, "scion", "icount", &m), get(agg, "linux", "icount", &m)) {
            let x = a as f64 / b.max(1) as f64;
            let _ = writeln!(
                s,
                "- Scion's instructions per KiB ≤ 1.0× Linux's ({tag}): {x:.2}× — {}.",
                if x <= 1.0 { "**met**" } else { "**missed**" }
            );
        }
    }
    if let (Some(a), Some(b)) = (get(agg, "scion", "icount", "tcp_rr_64b"), get(agg, "linux", "icount", "tcp_rr_64b")) {
        let x = a as f64 / b.max(1) as f64;
        let _ = writeln!(
            s,
            "- A 64-byte TCP round trip ≤ 1.0× Linux's instructions: {x:.2}× — {}.",
            if x <= 1.0 { "**met**" } else { "**missed**" }
        );
    }
    let ipr = |sys: &str, c: usize| get(agg, sys, "icount", &format!("http_c{c}_ipr"));
    for (c, _) in levels {
        if let (Some(a), Some(b)) = (ipr("scion", *c), ipr("nginx", *c)) {
            let x = a as f64 / b.max(1) as f64;
            let met = if x <= 1.0 { "**met**" } else { "**missed**" };
            let _ = writeln!(s, "- A small request at {c} clients below nginx's instructions: {x:.2}× — {met}.");
        }
    }
    // (Read only where the run has the level: the smoke's check asks what is read.)
    let at_1000 = levels.iter().any(|l| l.0 == 1000);
    if let Some((Some(one), Some(k))) = at_1000.then(|| (ipr("scion", 1), ipr("scion", 1000))) {
        let x = k as f64 / one.max(1) as f64;
        let met = if x <= 1.3 { "**met**" } else { "**missed**" };
        let _ = writeln!(s, "- A small request at 1,000 clients ≤ 1.3× one client's: {x:.2}× — {met}.");
    }
    let _ = writeln!(s, "\n![net suite](net.svg)\n");
    s
}

/// The systems of the `net` suite, their colours and labels.
const NET_SYSTEMS: [(&str, &str, &str); 3] = [
    ("scion", "#2b7bb9", "Scion (httpd, Cue)"),
    ("linux", "#e07b39", "Linux, C server"),
    ("nginx", "#3a9a4a", "Linux, nginx (sendfile)"),
];

/// Busy instructions per KiB for each download size and per 64-byte round trip (top),
/// and per small request against the clients at once (bottom: a line a system, the
/// clients on a log axis; icount).
fn net_svg(agg: &BTreeMap<(String, String, String), Fig>, levels: &[(usize, usize)]) -> String {
    let of = |m: &str, div: u64| {
        NET_SYSTEMS.iter().map(|(sys, _, _)| get(agg, sys, "icount", m).map(|v| v / div)).collect::<Vec<_>>()
    };
    let top: Vec<(String, Vec<Option<u64>>)> = NET_SIZES
        .iter()
        .map(|(t, _, _)| (format!("download {t}"), of(&format!("http_download_ipk_{t}"), 1)))
        .chain(std::iter::once(("64 B round trip / 10".to_string(), of("tcp_rr_64b", 10))))
        .collect();
    let bottom: Vec<(String, Vec<Option<u64>>)> =
        levels.iter().map(|(c, _)| (format!("{c} clients"), of(&format!("http_c{c}_ipr"), 1))).collect();
    let (w, h) = (760.0, 380.0);
    let mut s = format!("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{}\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n", 2.0 * h);
    s.push_str(&bars(
        "Suite net: busy guest instructions per KiB delivered (icount; lower is better)",
        &top,
        0.0,
        w,
        h,
    ));
    let clients: Vec<usize> = levels.iter().map(|(c, _)| *c).collect();
    s.push_str(&lines_log(
        "Busy guest instructions per small request against clients (log axis; icount; lower is better)",
        &clients,
        &bottom,
        h,
        w,
        h,
    ));
    s.push_str("</svg>\n");
    s
}

/// One grouped bar chart (a bar per system of `NET_SYSTEMS` in each group) at `y0`.
fn bars(title: &str, groups: &[(String, Vec<Option<u64>>)], y0: f64, w: f64, h: f64) -> String {
    let maxv = groups.iter().flat_map(|g| g.1.iter()).flatten().max().copied().unwrap_or(1).max(1) as f64;
    let (left, top, bottom) = (80.0, 60.0, 50.0);
    let ph = h - top - bottom;
    let gw = (w - left - 20.0) / groups.len().max(1) as f64;
    let mut s = String::new();
    let _ = writeln!(s, "<text x=\"10\" y=\"{}\" font-size=\"15\" font-weight=\"bold\">{title}</text>", y0 + 22.0);
    for (i, (_, color, label)) in NET_SYSTEMS.iter().enumerate() {
        let x = left + 200.0 * i as f64;
        let _ = writeln!(s, "<rect x=\"{x}\" y=\"{}\" width=\"12\" height=\"12\" fill=\"{color}\"/><text x=\"{}\" y=\"{}\">{label}</text>", y0 + 32.0, x + 16.0, y0 + 42.0);
    }
    let base = y0 + top + ph;
    let _ = writeln!(s, "<line x1=\"{left}\" y1=\"{base}\" x2=\"{}\" y2=\"{base}\" stroke=\"black\"/>", w - 20.0);
    for (i, (label, vals)) in groups.iter().enumerate() {
        let bw = gw * 0.8 / vals.len().max(1) as f64;
        let x0 = left + gw * i as f64 + gw * 0.1;
        for (j, v) in vals.iter().enumerate() {
            if let Some(v) = v {
                let bh = *v as f64 / maxv * ph;
                let x = x0 + j as f64 * bw;
                let _ = writeln!(s, "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"{bw:.1}\" height=\"{bh:.1}\" fill=\"{}\"/><text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" font-size=\"10\">{v}</text>", base - bh, NET_SYSTEMS[j % NET_SYSTEMS.len()].1, x + bw / 2.0, base - bh - 3.0);
            }
        }
        let _ =
            writeln!(s, "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{label}</text>", x0 + gw * 0.4, base + 18.0);
    }
    s
}

/// A line per system of `NET_SYSTEMS` through its value at each of `xs` (clients, on a
/// log axis), `groups[i]` holding the systems' values at `xs[i]`, at `y0`.
fn lines_log(title: &str, xs: &[usize], groups: &[(String, Vec<Option<u64>>)], y0: f64, w: f64, h: f64) -> String {
    let maxv = groups.iter().flat_map(|g| g.1.iter()).flatten().max().copied().unwrap_or(1).max(1) as f64;
    let (left, top, bottom, right) = (80.0, 60.0, 50.0, 40.0);
    let ph = h - top - bottom;
    let lx = |c: usize| (c.max(1) as f64).log10();
    let (x_lo, x_hi) =
        (lx(*xs.first().unwrap_or(&1)), lx(*xs.last().unwrap_or(&10)).max(lx(*xs.first().unwrap_or(&1)) + 1.0));
    let px = |c: usize| left + (lx(c) - x_lo) / (x_hi - x_lo) * (w - left - right);
    let base = y0 + top + ph;
    let py = |v: u64| base - v as f64 / maxv * ph;
    let mut s = String::new();
    let _ = writeln!(s, "<text x=\"10\" y=\"{}\" font-size=\"15\" font-weight=\"bold\">{title}</text>", y0 + 22.0);
    let _ = writeln!(s, "<line x1=\"{left}\" y1=\"{base}\" x2=\"{}\" y2=\"{base}\" stroke=\"black\"/>", w - right);
    let _ = writeln!(s, "<line x1=\"{left}\" y1=\"{}\" x2=\"{left}\" y2=\"{base}\" stroke=\"black\"/>", y0 + top);
    let _ = writeln!(
        s,
        "<text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\" font-size=\"10\">{}</text>",
        left - 4.0,
        y0 + top + 4.0,
        maxv as u64
    );
    let _ = writeln!(s, "<text x=\"{}\" y=\"{base}\" text-anchor=\"end\" font-size=\"10\">0</text>", left - 4.0);
    for &c in xs {
        let _ = writeln!(s, "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{c} clients</text>", px(c), base + 18.0);
    }
    for (j, (_, color, label)) in NET_SYSTEMS.iter().enumerate() {
        let x = left + 200.0 * j as f64;
        let _ = writeln!(s, "<rect x=\"{x}\" y=\"{}\" width=\"12\" height=\"12\" fill=\"{color}\"/><text x=\"{}\" y=\"{}\">{label}</text>", y0 + 32.0, x + 16.0, y0 + 42.0);
        let pts: Vec<(f64, f64, u64)> = xs
            .iter()
            .zip(groups)
            .filter_map(|(c, (_, vals))| vals.get(j).copied().flatten().map(|v| (px(*c), py(v), v)))
            .collect();
        let path: Vec<String> = pts.iter().map(|(x, y, _)| format!("{x:.1},{y:.1}")).collect();
        let _ = writeln!(
            s,
            "<polyline points=\"{}\" fill=\"none\" stroke=\"{color}\" stroke-width=\"2\"/>",
            path.join(" ")
        );
        for (x, y, v) in pts {
            let _ = writeln!(s, "<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"3\" fill=\"{color}\"/><text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\" font-size=\"10\">{v}</text>", y - 6.0);
        }
    }
    s
}

#[cfg(test)]
mod busy_tests {
    #[test]
    fn busy_parts_are_named_words() {
        let p = super::parts_of(b"10 20 0 1 2 requests=5 device=7 bad=x stack=9\n");
        assert_eq!(p, vec![("requests".to_string(), 5), ("device".to_string(), 7), ("stack".to_string(), 9)]);
        assert!(super::parts_of(b"176220186 2239599184 0 2592 1").is_empty());
    }

    #[test]
    fn busy_is_the_first_number() {
        assert_eq!(super::busy_of(b"176220186 2239599184 0 2592 1"), Some(176220186));
        assert_eq!(super::busy_of(b"42\n"), Some(42));
        assert_eq!(super::busy_of(b""), None);
        assert_eq!(super::busy_of(b"x 1"), None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use super::super::report::{agg_of, missing, reads};

    #[test]
    fn the_plot_draws_a_line_a_system_on_a_log_axis() {
        let svg = net_svg(&agg_of(&net_icount()), netload::levels(false));
        assert_eq!(svg.matches("<polyline").count(), NET_SYSTEMS.len());
        assert!(svg.contains("1000 clients") && svg.contains("log axis"));
        assert!(!svg.contains("NaN") && !svg.contains("inf"));
    }

    /// The net suite's figures in icount, both sides, as the guests' answers give them.
    fn net_icount() -> Vec<(&'static str, &'static str, &'static str)> {
        let mut v = Vec::new();
        for sys in ["scion", "linux", "nginx"] {
            for m in [
                "http_download_ipk_64k",
                "http_download_ipk_1m",
                "http_download_ipk_16m",
                "tcp_rr_64b",
                "http_c1_ipr",
                "http_c10_ipr",
            ] {
                if !(sys == "nginx" && m == "tcp_rr_64b") {
                    v.push((sys, "icount", m));
                }
            }
        }
        v
    }

    /// The check reads what the report reads: all of the net report's icount figures
    /// there, it passes; one side's figure gone (a guest stops printing it, a parser no
    /// longer matches), it names that figure; the tcg figures, not measured, are not asked.
    #[test]
    fn smoke_check_names_each_figure_a_report_lacks() {
        let full = agg_of(&net_icount());
        let (_, read) = reads(|| net_report(&full, 20, netload::levels(true), &[]));
        assert!(
            read.contains(&("linux".into(), "tcg".into(), "tcp_rr_64b_us".into())),
            "the report reads the tcg figures too"
        );
        assert_eq!(missing(&read, &full, &["icount"], NET_ABSENT), Vec::<String>::new());
        let mut broken = net_icount();
        broken.retain(|f| *f != ("linux", "icount", "tcp_rr_64b"));
        let agg = agg_of(&broken);
        let (_, read) = reads(|| net_report(&agg, 20, netload::levels(true), &[]));
        assert_eq!(missing(&read, &agg, &["icount"], NET_ABSENT), vec!["linux/icount/tcp_rr_64b".to_string()]);
        // Both modes measured: the tcg figures are wanted as well (downloads, the
        // round trip but nginx's, each concurrency level's requests a second).
        let tcg = 3 + 1 + netload::levels(true).len();
        assert_eq!(missing(&read, &agg, &["icount", "tcg"], NET_ABSENT).len(), 1 + 3 * tcg - 1);
        // A figure a side does not have by design is not asked of it.
        assert_eq!(
            missing(&read, &agg, &["icount"], &[("linux", "tcp_rr_64b"), ("nginx", "tcp_rr_64b")]),
            Vec::<String>::new()
        );
    }
}
