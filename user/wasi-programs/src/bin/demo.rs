//! A Rust `std` program with nothing Scion-specific in it: what a small tool does with
//! its arguments, environment, clocks, randomness and files. `demo` prints what it
//! finds, one check a line (`ok …` or `FAILED …`), and exits with the number of
//! failures + 0 (or `demo panic` panics, `demo exit N` exits with N).
use std::collections::HashMap;
use std::fs;
use std::io::{ErrorKind, Read, Seek, SeekFrom, Write};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("panic") => panic!("demo was asked to panic"),
        Some("exit") => std::process::exit(args.get(2).and_then(|a| a.parse().ok()).unwrap_or(1)),
        _ => {}
    }
    let mut failed = 0;
    let mut check = |what: &str, ok: bool| {
        println!("{} {what}", if ok { "ok" } else { "FAILED" });
        failed += !ok as i32;
    };
    println!("demo: args {:?}", &args[1..]);
    check("environment", std::env::var("GREETING").as_deref() == Ok("hello-from-scion"));
    let t = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    check("realtime clock after 2020", t > 1_577_836_800);
    let t0 = Instant::now();
    std::thread::sleep(std::time::Duration::from_millis(20));
    check("sleep 20 ms on the monotonic clock", t0.elapsed().as_millis() >= 20);
    // HashMap's seed comes from random_get.
    let mut m = HashMap::new();
    m.insert("k", 1);
    check("random seed and a HashMap", m["k"] == 1);

    // Files: create, write, read back, seek, append, truncate by re-creating.
    let r = (|| -> std::io::Result<()> {
        fs::create_dir_all("/work/sub")?;
        let mut f = fs::File::create("/work/sub/a.txt")?;
        f.write_all(b"hello, wasi\n")?;
        f.sync_all()?;
        drop(f);
        let mut s = String::new();
        fs::File::open("/work/sub/a.txt")?.read_to_string(&mut s)?;
        assert_eq!(s, "hello, wasi\n");
        let mut f = fs::OpenOptions::new().append(true).open("/work/sub/a.txt")?;
        f.write_all(b"more\n")?;
        drop(f);
        let mut f = fs::File::open("/work/sub/a.txt")?;
        f.seek(SeekFrom::Start(7))?;
        let mut tail = String::new();
        f.read_to_string(&mut tail)?;
        assert_eq!(tail, "wasi\nmore\n");
        assert_eq!(fs::metadata("/work/sub/a.txt")?.len(), 17);
        fs::write("/work/sub/a.txt", b"short")?; // O_TRUNC over 17 bytes
        assert_eq!(fs::read("/work/sub/a.txt")?, b"short");
        Ok(())
    })();
    check(&format!("files: create, write, sync, read, seek, append, truncate ({r:?})"), r.is_ok());

    // Directories: list, rename, remove.
    let r = (|| -> std::io::Result<()> {
        fs::write("/work/sub/b.txt", b"b")?;
        let mut names: Vec<String> = fs::read_dir("/work/sub")?
            .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
            .collect::<Result<_, _>>()?;
        names.sort();
        assert_eq!(names, ["a.txt", "b.txt"]);
        fs::rename("/work/sub/b.txt", "/work/c.txt")?;
        assert!(fs::metadata("/work/c.txt")?.is_file());
        // ENOTEMPTY is 55 in WASI (Rust's std names no ErrorKind for it there).
        assert_eq!(fs::remove_dir("/work/sub").map_err(|e| e.raw_os_error()), Err(Some(55)));
        fs::remove_file("/work/sub/a.txt")?;
        fs::remove_dir("/work/sub")?;
        fs::remove_file("/work/c.txt")?;
        assert_eq!(fs::metadata("/work/sub").map_err(|e| e.kind()).err(), Some(ErrorKind::NotFound));
        Ok(())
    })();
    check(&format!("directories: list, rename, remove ({r:?})"), r.is_ok());

    // Nothing outside the preopened directory.
    let outside = fs::read("/work/../secret.txt");
    check(&format!("nothing outside the preopen ({:?})", outside.as_ref().map_err(|e| e.kind())), outside.is_err());
    let outside = fs::read("/secret.txt");
    check("no absolute path outside it either", outside.is_err());

    println!("demo: {failed} failed");
    std::process::exit(failed);
}
