//! nginx in the Linux guest: the web server a user would run instead of
//! Scion's httpd, beside the `net` suite's small C server. Debian's `nginx` package is
//! fetched (`apt-get download`, no install) and unpacked under `target/bench/nginx`;
//! the binary, the shared libraries `ldd` names for it (from the host, which runs the
//! same Debian) and a configuration of ours (`sendfile on`, the files the C server makes
//! in `/www`, port 8080) go into the initramfs. `bench/linux/net.c` starts it when the
//! kernel's command line says `nginx=1`.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The guest port nginx listens on.
pub const PORT: u16 = 8080;

/// nginx's configuration in the guest: one worker (the guest has one CPU), the files of
/// `/www` by sendfile, keep-alive connections as long as the host keeps them, room for
/// thousands of connections, no log but errors on the console.
const CONF: &str = "daemon off;
master_process on;
worker_processes 1;
worker_rlimit_nofile 32768;
user root;
pid /tmp/nginx.pid;
error_log stderr warn;
events {
    worker_connections 16384;
}
http {
    access_log off;
    sendfile on;
    tcp_nopush on;
    tcp_nodelay on;
    keepalive_requests 1000000;
    keepalive_timeout 300s;
    default_type application/octet-stream;
    client_body_temp_path /tmp/body;
    proxy_temp_path /tmp/proxy;
    fastcgi_temp_path /tmp/fastcgi;
    uwsgi_temp_path /tmp/uwsgi;
    scgi_temp_path /tmp/scgi;
    server {
        listen 8080 backlog=4096;
        root /www;
    }
}
";

/// The unpacked nginx binary (fetched and unpacked once, into `dir/nginx`).
fn binary(dir: &Path) -> Result<PathBuf, String> {
    let root = dir.join("nginx");
    let bin = root.join("usr/sbin/nginx");
    if bin.exists() {
        return Ok(bin);
    }
    eprintln!("xtask: fetching Debian's nginx package for the Linux side of the net suite");
    std::fs::create_dir_all(&root).map_err(|e| e.to_string())?;
    let dl = root.join("deb");
    std::fs::create_dir_all(&dl).map_err(|e| e.to_string())?;
    crate::sh(
        Command::new("sh")
            .current_dir(&dl)
            .args(["-c", "apt-get download nginx 2>/dev/null || (apt-get update -qq && apt-get download nginx)"]),
    )?;
    let deb = std::fs::read_dir(&dl)
        .map_err(|e| e.to_string())?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|x| x == "deb"))
        .ok_or("apt-get download nginx gave no .deb")?;
    crate::sh(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&root))?;
    if !bin.exists() {
        return Err(format!("{} holds no usr/sbin/nginx", deb.display()));
    }
    Ok(bin)
}

/// The shared libraries and the loader `bin` needs, as `ldd` finds them on the host.
fn libraries(bin: &Path) -> Result<Vec<String>, String> {
    let out = Command::new("ldd").arg(bin).output().map_err(|e| format!("ldd: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut libs = Vec::new();
    for l in text.lines() {
        let l = l.trim();
        if l.contains("not found") {
            return Err(format!(
                "nginx needs a library the host lacks ({l}); install it (e.g. apt-get install libssl3 libpcre2-8-0)"
            ));
        }
        // "libz.so.1 => /lib/x86_64-linux-gnu/libz.so.1 (0x…)" or "/lib64/ld-linux-x86-64.so.2 (0x…)".
        let path = match l.split_once("=>") {
            Some((_, r)) => r.split_whitespace().next(),
            None => l.split_whitespace().next().filter(|p| p.starts_with('/')),
        };
        if let Some(p) = path.filter(|p| p.starts_with('/')) {
            libs.push(p.to_string());
        }
    }
    if !libs.iter().any(|l| l.contains("ld-linux")) {
        return Err(format!("ldd named no loader for {}: {text}", bin.display()));
    }
    Ok(libs)
}

/// Files to put into the initramfs for nginx: (path in the guest without the leading
/// '/', mode, bytes); directories have no bytes (mode 0o040755).
pub fn files(dir: &Path) -> Result<Vec<(String, u32, Vec<u8>)>, String> {
    let bin = binary(dir)?;
    let mut out: Vec<(String, u32, Vec<u8>)> = Vec::new();
    let mut dirs: Vec<String> = Vec::new();
    let mut add = |out: &mut Vec<(String, u32, Vec<u8>)>, path: &str, mode: u32, data: Vec<u8>| {
        let path = path.trim_start_matches('/');
        let mut at = String::new();
        for part in path.split('/').collect::<Vec<_>>().split_last().map(|(_, d)| d).unwrap_or(&[]) {
            at = if at.is_empty() { part.to_string() } else { format!("{at}/{part}") };
            if !dirs.contains(&at) && at != "dev" && at != "m" {
                dirs.push(at.clone());
                out.push((at.clone(), 0o040755, Vec::new()));
            }
        }
        out.push((path.to_string(), mode, data));
    };
    add(&mut out, "usr/sbin/nginx", 0o100755, std::fs::read(&bin).map_err(|e| e.to_string())?);
    for l in libraries(&bin)? {
        let data = std::fs::read(&l).map_err(|e| format!("{l}: {e}"))?;
        add(&mut out, &l, 0o100755, data);
    }
    add(&mut out, "etc/nginx/nginx.conf", 0o100644, CONF.as_bytes().to_vec());
    // `user root` looks its user and group up.
    add(&mut out, "etc/passwd", 0o100644, b"root:x:0:0:root:/:/bin/sh\n".to_vec());
    add(&mut out, "etc/group", 0o100644, b"root:x:0:\n".to_vec());
    add(&mut out, "var/log/nginx/.keep", 0o100644, Vec::new());
    Ok(out)
}
