//! SQLite across power cuts (xtask's `sqlcrash` check): `sqlcrash BOOT` opens
//! `/work/c.db` (rollback journal, deleted at commit on odd boots and kept on even ones;
//! `synchronous=FULL`: a commit is on stable storage when it returns), checks it (`PRAGMA integrity_check`, and every row's bytes against the
//! checksum stored beside them), says what it found, then commits transactions until
//! the host cuts the power: each inserts a row of 3–9 KiB, updates an older one and
//! deletes another, and is said (`SQLCRASH committed N`) only once COMMIT has returned.
use rusqlite::{params, Connection, OpenFlags};

fn payload(n: i64, len: usize) -> Vec<u8> {
    let mut x = (n as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn sum(b: &[u8]) -> i64 {
    b.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &c| (h ^ c as u64).wrapping_mul(0x100_0000_01b3)) as i64
        & 0x7fff_ffff_ffff
}

/// What the database holds: (integrity_check's answer, last commit, rows, rows whose
/// bytes do not match their checksum).
fn check(c: &Connection) -> rusqlite::Result<(String, i64, i64, u32)> {
    let integrity: String = c.query_row("pragma integrity_check", [], |r| r.get(0))?;
    let have: i64 = c.query_row("select coalesce(max(n), 0) from t", [], |r| r.get(0))?;
    let mut bad = 0;
    let mut st = c.prepare("select payload, sum from t")?;
    let mut rows = st.query([])?;
    while let Some(r) = rows.next()? {
        let (p, s): (Vec<u8>, i64) = (r.get(0)?, r.get(1)?);
        bad += (sum(&p) != s) as u32;
    }
    let n: i64 = c.query_row("select count(*) from t", [], |r| r.get(0))?;
    Ok((integrity, have, n, bad))
}

fn main() {
    let boot = std::env::args().nth(1).unwrap_or_default();
    std::fs::create_dir_all("/work").expect("/work");
    // One program owns the database: no locking (SQLite's "unix-none" VFS). WASI has no
    // file locks, and the dot-file locks SQLite would use instead outlive a power cut.
    let c = Connection::open_with_flags_and_vfs("/work/c.db", OpenFlags::default(), c"unix-none").expect("open");
    // Odd boots delete the journal at commit (baiofs's remove flushes the disk), even
    // ones keep it and zero its header (a plain write): there only the fsyncs SQLite
    // asks for make a commit durable.
    let mode = if boot.parse::<u64>().unwrap_or(1) % 2 == 0 { "PERSIST" } else { "DELETE" };
    let setup = c
        .pragma_update(None, "synchronous", "FULL")
        .and_then(|_| c.query_row(&format!("pragma journal_mode={mode}"), [], |r| r.get::<_, String>(0)))
        .and_then(|_| {
            c.execute_batch(
                "create table if not exists t(n integer primary key, payload blob not null, sum integer not null)",
            )
        });
    let (integrity, have, rows, bad) = match setup.and_then(|_| check(&c)) {
        Ok(r) => r,
        Err(e) => {
            // One word for the checker: the error, its spaces joined.
            let e = e.to_string().replace(' ', "_");
            println!("SQLCRASH boot {boot} integrity error:{e} have 0 rows 0 bad 0");
            std::process::exit(1);
        }
    };
    println!("SQLCRASH boot {boot} integrity {integrity} have {have} rows {rows} bad {bad}");
    let mut n = have;
    loop {
        n += 1;
        let p = payload(n, 3000 + (n as usize * 1237) % 6000);
        let tx = c.unchecked_transaction().expect("begin");
        tx.execute("insert into t(n, payload, sum) values (?1, ?2, ?3)", params![n, p, sum(&p)]).expect("insert");
        if n > 3 {
            let q = payload(n * 7, 2000);
            tx.execute("update t set payload = ?2, sum = ?3 where n = ?1", params![n - 3, q, sum(&q)]).expect("update");
        }
        if n > 6 && n % 3 == 0 {
            tx.execute("delete from t where n = ?1", params![n - 6]).expect("delete");
        }
        tx.commit().expect("commit");
        println!("SQLCRASH committed {n}");
    }
}
