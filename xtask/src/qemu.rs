//! QEMU: installing it, choosing the accelerator, building the command line, and
//! running a boot to completion with a time limit while keeping the serial log.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub const QEMU: &str = "qemu-system-x86_64";

pub fn ensure_qemu() -> Result<(), String> {
    ensure_installed(QEMU, "qemu-system-x86", "QEMU")
}

/// `program` runs (`--version`), or is installed from Debian's package `package`.
pub fn ensure_installed(program: &str, package: &str, what: &str) -> Result<(), String> {
    if Command::new(program).arg("--version").output().is_ok() {
        return Ok(());
    }
    ensure_package(package, what)
}

/// Install Debian's package `package` (as root; else say the command).
pub fn ensure_package(package: &str, what: &str) -> Result<(), String> {
    let is_root = Command::new("id").arg("-u").output().map(|o| o.stdout.starts_with(b"0")).unwrap_or(false);
    let install = format!("apt-get update && apt-get install -y {package}");
    if !is_root {
        return Err(format!("{what} is missing; install it with: sudo sh -c '{install}'"));
    }
    eprintln!("xtask: installing {what} from Debian's packages");
    let st = Command::new("sh")
        .args(["-c", &format!("DEBIAN_FRONTEND=noninteractive {install} >/dev/null")])
        .status()
        .map_err(|e| e.to_string())?;
    if st.success() {
        Ok(())
    } else {
        Err(format!("installing {what} failed; try: {install}"))
    }
}

/// OVMF's firmware code and the template of its variable store (Debian's `ovmf`).
pub const OVMF_CODE: &str = "/usr/share/OVMF/OVMF_CODE_4M.fd";
pub const OVMF_VARS: &str = "/usr/share/OVMF/OVMF_VARS_4M.fd";

/// OVMF's files, installed from Debian's `ovmf` when missing (as QEMU is).
pub fn ensure_ovmf() -> Result<(PathBuf, PathBuf), String> {
    if !Path::new(OVMF_CODE).exists() || !Path::new(OVMF_VARS).exists() {
        ensure_package("ovmf", "OVMF (UEFI firmware for QEMU)")?;
    }
    if !Path::new(OVMF_CODE).exists() {
        return Err(format!("{OVMF_CODE} is missing after installing Debian's ovmf"));
    }
    Ok((PathBuf::from(OVMF_CODE), PathBuf::from(OVMF_VARS)))
}

/// A fresh copy of OVMF's variable store for one run (the firmware writes it).
pub fn vars_copy(name: &str) -> Result<PathBuf, String> {
    let (_, vars) = ensure_ovmf()?;
    let out = crate::out_dir().join(format!("{name}-ovmf-vars.fd"));
    std::fs::create_dir_all(crate::out_dir()).map_err(|e| e.to_string())?;
    std::fs::copy(&vars, &out).map_err(|e| format!("{}: {e}", vars.display()))?;
    Ok(out)
}

/// KVM only where the host CPU has hardware virtualisation and /dev/kvm opens;
/// `SCION_ACCEL` overrides.
pub fn accel() -> String {
    if let Ok(a) = std::env::var("SCION_ACCEL") {
        return a;
    }
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let hw = cpuinfo
        .lines()
        .filter(|l| l.starts_with("flags"))
        .any(|l| l.split_whitespace().any(|f| f == "vmx" || f == "svm"));
    let dev = std::fs::OpenOptions::new().read(true).write(true).open("/dev/kvm").is_ok();
    if hw && dev {
        "kvm".into()
    } else {
        "tcg".into()
    }
}

pub struct Options {
    pub accel: String,
    pub icount: bool,
    pub append: String,
    /// A disk image attached as a virtio-blk PCI device.
    pub disk: Option<std::path::PathBuf>,
    /// The disk's every flush fails (EIO, by QEMU's blkdebug driver; reads and writes
    /// go on): a disk whose write cache can no longer be made stable.
    pub disk_flush_fails: bool,
    /// The disk is served over NBD on this Unix socket (`cachedisk`: a disk whose write
    /// cache a power cut loses) instead of QEMU opening the image itself.
    pub disk_nbd: Option<std::path::PathBuf>,
    /// The disk is an NVMe controller's namespace (`-device nvme`) rather than a
    /// virtio-blk device.
    pub disk_nvme: bool,
    /// An Intel IOMMU (`-device intel-iommu`, q35 only): the firmware's ACPI DMAR table.
    pub iommu: bool,
    /// Whether the IOMMU offers interrupt remapping (`intremap=on|off`); None: QEMU's
    /// default, on under TCG (which needs no split irqchip; EIM stays off: xAPIC
    /// destinations).
    pub intremap: Option<bool>,
    /// A second disk image as an NVMe controller's namespace beside the first (a machine
    /// with virtio and NVMe devices at once).
    pub nvme_extra: Option<std::path::PathBuf>,
    /// QEMU's machine (`q35` unless a scenario says `pc`) and memory size.
    pub machine: String,
    pub memory: String,
    /// A virtio-net PCI device on QEMU's user network, restricted (the guest reaches
    /// nothing outside QEMU but what these rules give it).
    pub net: Option<NetOptions>,
    /// A gdb stub on this port of 127.0.0.1, the machine stopped until gdb continues it.
    pub gdb: Option<u16>,
    /// Virtual CPUs (`-smp`).
    pub cpus: u32,
    /// Boot by UEFI (OVMF) from this GPT disk image (`esp`), with this copy of OVMF's
    /// variable store, rather than by PVH; the machine has a VGA device (the firmware's
    /// framebuffer) and the disk is a SATA disk on q35's AHCI controller (no Scion
    /// driver claims it).
    pub uefi: Option<(std::path::PathBuf, std::path::PathBuf)>,
}

static CPUS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(1);

/// The CPUs a machine gets unless its scenario says otherwise (`--cpus N`).
pub fn set_default_cpus(n: u32) {
    CPUS.store(n, std::sync::atomic::Ordering::Relaxed);
}

pub fn default_cpus() -> u32 {
    CPUS.load(std::sync::atomic::Ordering::Relaxed)
}

/// The CPUs `run` and `test` give a machine unless told: 2 where the host has two
/// cores or more (multi-threaded TCG runs each virtual CPU on a host thread), else 1.
/// The benchmarks keep 1 (icount runs one CPU; the `smp` suite says 2 itself).
pub fn host_default_cpus() -> u32 {
    if std::thread::available_parallelism().map_or(1, |n| n.get()) >= 2 {
        2
    } else {
        1
    }
}

/// Take `--cpus N` (1 to 8) out of `args` and make it the default; the rest is returned.
pub fn cpus_arg(args: &[String]) -> Result<Vec<String>, String> {
    let mut rest = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--cpus" {
            let v = it.next().ok_or("--cpus needs a number")?;
            match v.parse::<u32>() {
                Ok(n @ 1..=8) => set_default_cpus(n),
                _ => return Err(format!("--cpus {v}: a number from 1 to 8")),
            }
        } else {
            rest.push(a.clone());
        }
    }
    Ok(rest)
}

#[derive(Clone, Default)]
pub struct NetOptions {
    /// Host port (on 127.0.0.1) → guest TCP port.
    pub forward: Vec<(u16, u16)>,
    /// Guest address:port (in 10.0.2.0/24) → a command QEMU runs on the host for each
    /// connection, its standard input and output the connection (`cat`: an echo server).
    pub guest_forward: Vec<(String, String)>,
    /// An Intel 82574 (`-device e1000e`) rather than a virtio-net device.
    pub e1000e: bool,
}

/// The PCI slot of the network device (its interrupt line on q35 follows from it:
/// 20 + slot % 4 = 23, apart from the disk's).
const NET_SLOT: u32 = 3;

impl Options {
    pub fn new(accel: String, icount: bool, append: String, disk: Option<std::path::PathBuf>) -> Options {
        Options {
            accel,
            icount,
            append,
            disk,
            disk_flush_fails: false,
            disk_nbd: None,
            disk_nvme: false,
            iommu: false,
            intremap: None,
            nvme_extra: None,
            machine: "q35".into(),
            memory: "512M".into(),
            net: None,
            gdb: None,
            cpus: default_cpus(),
            uefi: None,
        }
    }
}

/// A disk image QEMU can show the guest as it is. QEMU rounds a raw image's size up to
/// whole 512-byte sectors, reading zeros past its end, so the guest's block service
/// cannot see that an image ends mid-sector (and would mount one `cargo xtask fsck`
/// refuses): such an image is refused here, with fsck's reason. One of whole sectors but
/// not whole 4096-byte blocks goes to the guest, whose block service refuses it.
pub fn check_disk(d: &Path) -> Result<(), String> {
    let len = std::fs::metadata(d).map_err(|e| format!("{}: {e}", d.display()))?.len();
    if len % 512 != 0 {
        return Err(format!("{}: {len} bytes is not a whole number of {}-byte blocks (it ends inside a 512-byte sector, which QEMU would fill with zeros); `cargo xtask fsck` refuses it too", d.display(), baio::BLOCK));
    }
    Ok(())
}

/// The machine every Scion boot (and later the Linux baseline) uses.
pub fn command(kernel: &Path, image: &Path, o: &Options) -> Result<Command, String> {
    let mut c = Command::new(QEMU);
    c.args(["-machine", &o.machine, "-cpu", "max", "-m", &o.memory, "-smp", &o.cpus.to_string()]);
    if o.iommu {
        // Before the devices it translates for.
        c.args([
            "-device",
            match o.intremap {
                None => "intel-iommu",
                Some(true) => "intel-iommu,intremap=on",
                Some(false) => "intel-iommu,intremap=off",
            },
        ]);
    }
    c.args(["-nodefaults", "-no-reboot", "-display", "none"]);
    c.args(["-device", "isa-debug-exit,iobase=0xf4,iosize=0x04"]);
    c.args(["-accel", &o.accel]);
    if o.icount {
        c.args(["-icount", "shift=0,align=off,sleep=off"]);
    }
    if let Some(port) = o.gdb {
        c.args(["-gdb", &format!("tcp:127.0.0.1:{port}"), "-S"]);
    } else if std::env::var_os("SCION_GDB").is_some() {
        // A gdb stub on tcp::1234 (for looking at a machine that stopped making progress).
        c.arg("-s");
    }
    if let Some((disk, vars)) = &o.uefi {
        // The kernel, boot image and command line are on the disk's EFI system partition.
        let (code, _) = ensure_ovmf()?;
        c.arg("-drive").arg(format!("if=pflash,format=raw,unit=0,readonly=on,file={}", code.display()));
        c.arg("-drive").arg(format!("if=pflash,format=raw,unit=1,file={}", vars.display()));
        c.args(["-device", "VGA"]);
        c.arg("-drive").arg(format!("file={},if=none,id=esp,format=raw", disk.display()));
        c.args(["-device", "ide-hd,drive=esp,bus=ide.0,bootindex=0"]);
    } else {
        c.arg("-kernel").arg(kernel);
        c.arg("-initrd").arg(image);
        if !o.append.is_empty() {
            c.args(["-append", &o.append]);
        }
    }
    if let Some(d) = &o.disk {
        check_disk(d)?;
        // cache=writeback: the device has a volatile write cache (QEMU offers VIRTIO_BLK_F_FLUSH
        // and the guest's flushes are the host's fdatasync), as most disks have.
        let file = if let Some(sock) = &o.disk_nbd {
            // The export's name is the one the `nbd` crate's server lists (QEMU checks
            // that the name it asks for is listed before it asks for it).
            format!("nbd+unix:///rustnbd?socket={}", sock.display())
        } else if o.disk_flush_fails {
            // blkdebug: the first flush's event arms the rule, and every flush from then
            // on (that one too) fails with EIO.
            let cfg = d.with_extension("blkdebug");
            std::fs::write(&cfg, "[inject-error]\nevent = \"flush_to_os\"\nerrno = \"5\"\niotype = \"flush\"\n")
                .map_err(|e| format!("{}: {e}", cfg.display()))?;
            format!("blkdebug:{}:{}", cfg.display(), d.display())
        } else {
            d.display().to_string()
        };
        c.arg("-drive").arg(format!("file={file},if=none,id=disk0,format=raw,cache=writeback"));
        if o.disk_nvme {
            c.args(["-device", "nvme,drive=disk0,serial=scion0"]);
        } else {
            c.args(["-device", "virtio-blk-pci,drive=disk0"]);
        }
    }
    if let Some(d) = &o.nvme_extra {
        check_disk(d)?;
        c.arg("-drive").arg(format!("file={},if=none,id=disk1,format=raw,cache=writeback", d.display()));
        c.args(["-device", "nvme,drive=disk1,serial=scion1"]);
    }
    if let Some(n) = &o.net {
        let mut nd = String::from("user,id=net0,restrict=on");
        for (h, g) in &n.forward {
            nd.push_str(&format!(",hostfwd=tcp:127.0.0.1:{h}-:{g}"));
        }
        for (g, h) in &n.guest_forward {
            nd.push_str(&format!(",guestfwd=tcp:{g}-cmd:{h}"));
        }
        c.args(["-netdev", &nd]);
        let model = if n.e1000e { "e1000e" } else { "virtio-net-pci" };
        c.args(["-device", &format!("{model},netdev=net0,addr={NET_SLOT:#x}")]);
        if let Some(f) = std::env::var_os("SCION_PCAP") {
            // Every frame of the guest's network into a pcap file (for looking at a
            // failing exchange).
            c.args(["-object", &format!("filter-dump,id=dump0,netdev=net0,file={}", f.to_string_lossy())]);
        }
    }
    Ok(c)
}

/// A TCP port on 127.0.0.1 that is free now.
pub fn free_port() -> Result<u16, String> {
    Ok(free_ports(1)?[0])
}

/// `n` different free ports on 127.0.0.1 (all held while they are picked: a port let go
/// may be the next one given, and QEMU refuses a forwarding rule for a port twice).
pub fn free_ports(n: usize) -> Result<Vec<u16>, String> {
    let held: Vec<std::net::TcpListener> = (0..n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| format!("no free port: {e}")))
        .collect::<Result<_, _>>()?;
    held.iter().map(|l| l.local_addr().map(|a| a.port()).map_err(|e| e.to_string())).collect()
}

/// Passive data ports ftpd gets forwarded by `run`, the tests and the benchmark: a
/// transfer holds one, so this many run at once (ftpd's default range is as long).
pub const FTP_DATA_PORTS: u16 = 64;

/// The first of `n` consecutive TCP ports on 127.0.0.1 that are free now (a range
/// ftpd can be told in a few bytes: `pasv=G1-G2`), with the listeners that hold them
/// (dropped when the caller has picked its other ports). Picked below the kernel's
/// ephemeral range (Linux's starts at 32,768): the host clients of a test beside it
/// (`http_slowloris`'s thousands of connections, `bench net`'s 10,000) take their
/// local ports from that range, and a run of 64 free ones there can be rare.
pub fn free_port_range(n: u16) -> Result<(u16, Vec<std::net::TcpListener>), String> {
    const LOW: u32 = 20_000;
    const HIGH: u32 = 32_768;
    let span = HIGH - LOW - n as u32;
    let seed =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0)
            ^ std::process::id().wrapping_mul(2_654_435_761);
    for k in 0..400u32 {
        let p = (LOW + seed.wrapping_add(k.wrapping_mul(7_919)) % span) as u16;
        let held: Result<Vec<_>, _> = (0..n).map(|k| std::net::TcpListener::bind(("127.0.0.1", p + k))).collect();
        if let Ok(held) = held {
            return Ok((p, held));
        }
    }
    Err(format!("no {n} consecutive free ports on 127.0.0.1"))
}

pub struct Outcome {
    /// QEMU's exit status (isa-debug-exit: (code << 1) | 1), None on time-out.
    pub status: Option<i32>,
    pub log: String,
    pub timed_out: bool,
}

/// Boot and wait for QEMU to end (or kill it after `limit`); serial output is the log.
/// With `input` = (marker, text): once the marker appears on the serial port, the
/// text is typed into it.
pub fn run_to_end(
    kernel: &Path,
    image: &Path,
    o: &Options,
    limit: Duration,
    input: Option<(&str, &str)>,
) -> Result<Outcome, String> {
    run_until(kernel, image, o, limit, input, None)
}

/// As `run_to_end`; with `kill_at`, QEMU is killed (SIGKILL, no shutdown) as soon as
/// that text appears on the serial port.
pub fn run_until(
    kernel: &Path,
    image: &Path,
    o: &Options,
    limit: Duration,
    input: Option<(&str, &str)>,
    kill_at: Option<&str>,
) -> Result<Outcome, String> {
    let mut nothing = |_: &Typer| {};
    run_at(kernel, image, o, limit, input, kill_at.map(|k| (k, &mut nothing as &mut dyn FnMut(&Typer))))
}

/// As `run_at`, but the machine runs on after `at.1` until it ends (or `limit`): a
/// script that types, checks and finally ends the machine itself.
pub fn run_script(kernel: &Path, image: &Path, o: &Options, limit: Duration, at: At<'_>) -> Result<Outcome, String> {
    run_inner(kernel, image, o, limit, None, Some(at), false)
}

/// Types into the guest's serial port (its console) while a host check runs; reads
/// the serial log so far, and speaks to QEMU's monitor (the PS/2 keyboard, the screen).
#[derive(Clone)]
pub struct Typer {
    stdin: std::sync::Arc<std::sync::Mutex<Option<std::process::ChildStdin>>>,
    log: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
    monitor: PathBuf,
}

impl Typer {
    pub fn type_text(&self, text: &str) {
        if let Some(w) = self.stdin.lock().unwrap().as_mut() {
            let _ = w.write_all(text.as_bytes());
            let _ = w.flush();
        }
    }

    /// Wait until the serial log shows `text` (false after `limit`).
    pub fn wait_for(&self, text: &str, limit: Duration) -> bool {
        let t0 = Instant::now();
        while t0.elapsed() < limit {
            if String::from_utf8_lossy(&self.log.lock().unwrap()).replace('\r', "").contains(text) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    }

    /// One command to QEMU's monitor; its answer.
    pub fn monitor(&self, cmd: &str) -> Result<String, String> {
        use std::os::unix::net::UnixStream;
        let mut m = UnixStream::connect(&self.monitor).map_err(|e| format!("QEMU's monitor: {e}"))?;
        m.set_read_timeout(Some(Duration::from_millis(500))).map_err(|e| e.to_string())?;
        let mut answer = Vec::new();
        let mut chunk = [0u8; 4096];
        // The greeting, then the command and its answer up to the next prompt.
        let mut read_prompt = |m: &mut UnixStream, answer: &mut Vec<u8>| {
            let t0 = Instant::now();
            while t0.elapsed() < Duration::from_secs(10) {
                match m.read(&mut chunk) {
                    Ok(0) => break,
                    Ok(n) => answer.extend_from_slice(&chunk[..n]),
                    Err(_) => {}
                }
                if answer.ends_with(b"(qemu) ") {
                    break;
                }
            }
        };
        read_prompt(&mut m, &mut answer);
        answer.clear();
        m.write_all(format!("{cmd}\n").as_bytes()).map_err(|e| format!("QEMU's monitor: {e}"))?;
        read_prompt(&mut m, &mut answer);
        Ok(String::from_utf8_lossy(&answer).into_owned())
    }

    /// Type `text` on the machine's PS/2 keyboard (`sendkey`, one key at a time).
    pub fn send_keys(&self, text: &str) -> Result<(), String> {
        for c in text.chars() {
            let key = qemu_key(c).ok_or_else(|| format!("no key for {c:?} (sendkey)"))?;
            self.monitor(&format!("sendkey {key}"))?;
        }
        Ok(())
    }
}

/// QEMU's `sendkey` name for a character of a US keyboard.
pub fn qemu_key(c: char) -> Option<String> {
    Some(match c {
        'a'..='z' | '0'..='9' => c.to_string(),
        'A'..='Z' => format!("shift-{}", c.to_ascii_lowercase()),
        ' ' => "spc".into(),
        '\n' => "ret".into(),
        '-' => "minus".into(),
        '.' => "dot".into(),
        '/' => "slash".into(),
        ',' => "comma".into(),
        '=' => "equal".into(),
        _ => return None,
    })
}

/// What to do when a text appears on the serial port (`run_at`).
pub type At<'a> = (&'a str, &'a mut dyn FnMut(&Typer));

/// As `run_to_end`; once the text `at.0` appears on the serial port, `at.1` runs (on the
/// host, while the guest runs: it talks to the guest through forwarded ports, and may
/// type into its console), then QEMU is killed.
pub fn run_at(
    kernel: &Path,
    image: &Path,
    o: &Options,
    limit: Duration,
    input: Option<(&str, &str)>,
    at: Option<At<'_>>,
) -> Result<Outcome, String> {
    run_inner(kernel, image, o, limit, input, at, true)
}

fn run_inner(
    kernel: &Path,
    image: &Path,
    o: &Options,
    limit: Duration,
    input: Option<(&str, &str)>,
    at: Option<At<'_>>,
    kill_after: bool,
) -> Result<Outcome, String> {
    let (kill_at, mut then) = match at {
        Some((k, f)) => (Some(k), Some(f)),
        None => (None, None),
    };
    let mut c = command(kernel, image, o)?;
    // QEMU's monitor on a socket of this run's own: a machine that runs out of time is
    // sent an NMI through it first, and its kernel reports what every thread waits for.
    static RUNS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let monitor = std::env::temp_dir().join(format!(
        "scion-monitor-{}-{}.sock",
        std::process::id(),
        RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    let _ = std::fs::remove_file(&monitor);
    c.args(["-serial", "stdio", "-monitor"]).arg(format!("unix:{},server=on,wait=off", monitor.display()));
    c.stdin(if input.is_some() || then.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = c.spawn().map_err(|e| format!("cannot start {QEMU}: {e}"))?;
    let mut out = child.stdout.take().unwrap();
    let typer = Typer {
        stdin: std::sync::Arc::new(std::sync::Mutex::new(child.stdin.take())),
        log: Default::default(),
        monitor: monitor.clone(),
    };
    let stdin = typer.clone();
    let input = input.map(|(m, t)| (m.as_bytes().to_vec(), t.as_bytes().to_vec()));
    let kill_marker = kill_at.map(|k| k.as_bytes().to_vec());
    let seen = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let seen_r = seen.clone();
    let reader = std::thread::spawn(move || {
        let mut s = Vec::new();
        let mut chunk = [0u8; 4096];
        let mut typed = false;
        loop {
            match out.read(&mut chunk) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    s.extend_from_slice(&chunk[..n]);
                    stdin.log.lock().unwrap().extend_from_slice(&chunk[..n]);
                }
            }
            if let Some(k) = &kill_marker {
                if s.windows(k.len()).any(|x| x == &k[..]) {
                    seen_r.store(true, std::sync::atomic::Ordering::SeqCst);
                }
            }
            if let (false, Some((marker, text))) = (typed, input.as_ref()) {
                if s.windows(marker.len()).any(|x| x == &marker[..]) {
                    stdin.type_text(&String::from_utf8_lossy(text));
                    typed = true;
                }
            }
        }
        drop(stdin);
        s
    });
    let start = Instant::now();
    let mut timed_out = false;
    let status = loop {
        if let Some(st) = child.try_wait().map_err(|e| e.to_string())? {
            break st.code();
        }
        if seen.load(std::sync::atomic::Ordering::SeqCst) {
            if let Some(f) = then.take() {
                f(&typer);
                if !kill_after {
                    continue;
                }
            }
            if kill_after {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
        }
        if start.elapsed() > limit {
            if let Ok(mut m) = std::os::unix::net::UnixStream::connect(&monitor) {
                let _ = m.write_all(b"nmi\n");
                // Time for the report to come out of the serial port.
                std::thread::sleep(Duration::from_secs(3));
            }
            let _ = child.kill();
            let _ = child.wait();
            timed_out = true;
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let _ = std::fs::remove_file(&monitor);
    let mut log = String::from_utf8_lossy(&reader.join().unwrap_or_default()).replace('\r', "");
    if let Some(mut e) = child.stderr.take() {
        let mut s = String::new();
        let _ = e.read_to_string(&mut s);
        if !s.trim().is_empty() {
            log.push_str("\n[qemu stderr]\n");
            log.push_str(&s);
        }
    }
    Ok(Outcome { status, log, timed_out })
}
