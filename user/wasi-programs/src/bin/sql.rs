//! SQLite on Scion: `sql DATABASE SCRIPT` opens (or creates) DATABASE, runs the SQL
//! statements of file SCRIPT one by one, and prints each result row as `a|b|c` (as
//! `sqlite3`'s shell does) and each statement's error. The engine is SQLite itself
//! (the amalgamation `libsqlite3-sys` bundles), built for WASI; its journal makes a
//! transaction whole or absent after a power cut.
use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(db), Some(script)) = (args.get(1), args.get(2)) else {
        eprintln!("usage: sql DATABASE SCRIPT");
        std::process::exit(2);
    };
    let sql = match std::fs::read_to_string(script) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("sql: {script}: {e}");
            std::process::exit(2);
        }
    };
    // One program at a time: no locking (SQLite's "unix-none" VFS; WASI has no file
    // locks, and SQLite's dot-file locks would outlive a power cut).
    let c = match Connection::open_with_flags_and_vfs(db, OpenFlags::default(), c"unix-none") {
        Ok(c) => c,
        Err(e) => {
            eprintln!("sql: {db}: {e}");
            std::process::exit(2);
        }
    };
    println!("sql: SQLite {} on {db}", rusqlite::version());
    let mut errors = 0;
    for stmt in split(&sql) {
        if let Err(e) = run(&c, stmt) {
            println!("sql: error in `{stmt}`: {e}");
            errors += 1;
        }
    }
    std::process::exit(errors);
}

/// The statements of `sql`, split at semicolons outside quotes.
fn split(sql: &str) -> Vec<&str> {
    let (mut out, mut start, mut quote) = (Vec::new(), 0, None);
    for (i, ch) in sql.char_indices() {
        match (ch, quote) {
            ('\'' | '"', None) => quote = Some(ch),
            (c, Some(q)) if c == q => quote = None,
            (';', None) => {
                out.push(sql[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(sql[start..].trim());
    out.retain(|s| !s.is_empty());
    out
}

fn run(c: &Connection, stmt: &str) -> rusqlite::Result<()> {
    let mut st = c.prepare(stmt)?;
    let n = st.column_count();
    let mut rows = st.raw_query();
    while let Some(row) = rows.next()? {
        let cols: Vec<String> = (0..n)
            .map(|i| match row.get_ref(i) {
                Ok(ValueRef::Null) => String::new(),
                Ok(ValueRef::Integer(v)) => v.to_string(),
                Ok(ValueRef::Real(v)) => v.to_string(),
                Ok(ValueRef::Text(t)) => String::from_utf8_lossy(t).into_owned(),
                Ok(ValueRef::Blob(b)) => format!("<{} bytes>", b.len()),
                Err(e) => format!("<{e}>"),
            })
            .collect();
        println!("{}", cols.join("|"));
    }
    Ok(())
}
