//! The kernel's module order, checked: which of its modules import which, read from
//! the paths in their source (`crate::…`, `super::…` within a folder, and the crate
//! root's own module paths), and any circle among them. The kernel's build script
//! runs it over `kernel/src` and fails the build on a circle, so ARCHITECTURE's
//! "Module order" stays true.
//!
//! A module is named by its path under `src/` without `.rs` (`arch/smp.rs` →
//! `arch::smp`); `main.rs` is the crate root, `main`. A path to something that is no
//! module (`crate::kprintln`, an item of the root) is an import of `main`. Comments
//! are not read; a string that spells a path would be (the kernel has none).

use alloc::collections::BTreeMap;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

/// The crate root's module name.
pub const ROOT: &str = "main";

/// The module a source file under `src/` is (`arch/smp.rs` → `arch::smp`), or `None`
/// for a file that is not Rust.
pub fn module_of(path: &str) -> Option<String> {
    let p = path.strip_suffix(".rs")?;
    let p = p.strip_suffix("/mod").unwrap_or(p);
    Some(p.split('/').collect::<Vec<_>>().join("::"))
}

/// The source without its comments (line comments, and block comments not nested).
fn strip_comments(src: &str) -> String {
    let mut out = String::with_capacity(src.len());
    let b = src.as_bytes();
    let mut i = 0;
    let mut in_block = false;
    while i < b.len() {
        if in_block {
            if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                in_block = false;
                i += 2;
            } else {
                if b[i] == b'\n' {
                    out.push('\n');
                }
                i += 1;
            }
        } else if b[i] == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
            in_block = true;
            i += 2;
        } else {
            // Whole UTF-8 sequences: a comment marker is ASCII, so this stays on a
            // character boundary.
            let len = utf8_len(b[i]);
            out.push_str(&src[i..(i + len).min(b.len())]);
            i += len;
        }
    }
    out
}

fn utf8_len(first: u8) -> usize {
    match first {
        0xf0..=0xff => 4,
        0xe0..=0xef => 3,
        0xc0..=0xdf => 2,
        _ => 1,
    }
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// The identifier at the start of `s` (after spaces), and the rest.
fn ident(s: &str) -> (&str, &str) {
    let s = s.trim_start();
    let n = s.bytes().take_while(|&c| is_ident(c)).count();
    (&s[..n], &s[n..])
}

/// The paths that follow `prefix` at the start of `rest` (one, or each of a `{…}`
/// group's), as their first two segments.
fn paths_after(rest: &str, out: &mut Vec<(String, Option<String>)>) {
    let rest = rest.trim_start();
    if let Some(group) = rest.strip_prefix('{') {
        // Items up to the matching brace, split at top-level commas.
        let mut depth = 0;
        let mut start = 0;
        let g = group.as_bytes();
        for (i, &c) in g.iter().enumerate() {
            match c {
                b'{' => depth += 1,
                b'}' if depth == 0 => {
                    item(&group[start..i], out);
                    return;
                }
                b'}' => depth -= 1,
                b',' if depth == 0 => {
                    item(&group[start..i], out);
                    start = i + 1;
                }
                _ => {}
            }
        }
    } else {
        item(rest, out);
    }
}

/// One path (perhaps `a::b::…`, perhaps `a::{b, c}`): its first segment and second.
fn item(s: &str, out: &mut Vec<(String, Option<String>)>) {
    let (first, rest) = ident(s);
    if first.is_empty() || first == "self" {
        return;
    }
    match rest.trim_start().strip_prefix("::") {
        Some(r) if r.trim_start().starts_with('{') => {
            let mut inner = Vec::new();
            paths_after(r, &mut inner);
            if inner.is_empty() {
                out.push((first.to_string(), None));
            }
            for (second, _) in inner {
                out.push((first.to_string(), Some(second)));
            }
        }
        Some(r) => {
            let (second, _) = ident(r);
            out.push((first.to_string(), (!second.is_empty()).then(|| second.to_string())));
        }
        None => out.push((first.to_string(), None)),
    }
}

/// The modules `module` imports, given the source and every module's name (`known`).
/// Its own name is left out.
pub fn imports(module: &str, src: &str, known: &[String]) -> Vec<String> {
    let src = strip_comments(src);
    let b = src.as_bytes();
    let folder = module.rsplit_once("::").map(|(f, _)| f);
    let mut raw: Vec<(String, Option<String>)> = Vec::new();
    let mut i = 0;
    while i < b.len() {
        // A path starts where no identifier character (or `::`) runs into it.
        let starts = i == 0 || !(is_ident(b[i - 1]) || b[i - 1] == b':');
        if !starts {
            i += 1;
            continue;
        }
        let rest = &src[i..];
        if let Some(r) = rest.strip_prefix("crate::") {
            paths_after(r, &mut raw);
            i += "crate::".len();
            continue;
        }
        if let (Some(f), Some(r)) = (folder, rest.strip_prefix("super::")) {
            if !r.starts_with("super::") {
                let mut here = Vec::new();
                paths_after(r, &mut here);
                for (first, _) in here {
                    raw.push((f.to_string(), Some(first)));
                }
            }
            i += "super::".len();
            continue;
        }
        if module == ROOT {
            // The root names its modules by their own paths.
            let (first, r) = ident(rest);
            if !first.is_empty()
                && r.starts_with("::")
                && known.iter().any(|k| k == first || k.starts_with(&[first, "::"].concat()))
            {
                paths_after(rest, &mut raw);
            }
            i += first.len().max(1);
            continue;
        }
        i += 1;
    }
    let mut out: Vec<String> = Vec::new();
    for (first, second) in raw {
        let name = match second {
            Some(s) if known.iter().any(|k| *k == [first.as_str(), "::", s.as_str()].concat()) => {
                [first.as_str(), "::", s.as_str()].concat()
            }
            _ if known.contains(&first) => first,
            // A folder named alone (`crate::arch`): no module of its own.
            _ if known.iter().any(|k| k.starts_with(&[first.as_str(), "::"].concat())) => continue,
            // Anything else lives at the crate root (an exported macro, a root item).
            _ => ROOT.to_string(),
        };
        if name != module && !out.contains(&name) {
            out.push(name);
        }
    }
    out.sort();
    out
}

/// The circles among `graph`'s modules (module → the modules it imports): each a
/// list of the modules that import each other round a loop, in name order; none when
/// the modules can be laid out in floors, each importing only the ones below it.
pub fn circles(graph: &BTreeMap<String, Vec<String>>) -> Vec<Vec<String>> {
    let names: Vec<&String> = graph.keys().collect();
    let index = |n: &String| names.iter().position(|k| *k == n);
    let n = names.len();
    // Reachability by repeated closure (a kernel has a few dozen modules).
    let mut reach = alloc::vec![alloc::vec![false; n]; n];
    for (a, deps) in graph.values().enumerate() {
        for d in deps {
            if let Some(b) = index(d) {
                reach[a][b] = true;
            }
        }
    }
    for k in 0..n {
        let via = reach[k].clone();
        for row in reach.iter_mut().filter(|row| row[k]) {
            for (r, v) in row.iter_mut().zip(&via) {
                *r |= *v;
            }
        }
    }
    let mut seen = alloc::vec![false; n];
    let mut out = Vec::new();
    for a in 0..n {
        if seen[a] || !reach[a][a] {
            continue;
        }
        let members: Vec<String> = (0..n).filter(|&b| reach[a][b] && reach[b][a]).map(|b| names[b].clone()).collect();
        for m in &members {
            if let Some(i) = index(m) {
                seen[i] = true;
            }
        }
        out.push(members);
    }
    out
}

/// Check the sources (`path` under `src/`, text): `Err` names every circle and the
/// imports that tie it.
pub fn check(files: &[(String, String)]) -> Result<(), String> {
    let mods: Vec<(String, &String)> = files.iter().filter_map(|(p, s)| module_of(p).map(|m| (m, s))).collect();
    let known: Vec<String> = mods.iter().map(|(m, _)| m.clone()).collect();
    let graph: BTreeMap<String, Vec<String>> = mods.iter().map(|(m, s)| (m.clone(), imports(m, s, &known))).collect();
    let found = circles(&graph);
    if found.is_empty() {
        return Ok(());
    }
    let mut msg = String::from("kernel modules import each other round a circle (docs/kernel.md, \"Module order\"):");
    for c in &found {
        msg.push_str("\n  circle: ");
        msg.push_str(&c.join(", "));
        for m in c {
            for d in graph[m].iter().filter(|d| c.contains(d)) {
                msg.push_str("\n    ");
                msg.push_str(m);
                msg.push_str(" -> ");
                msg.push_str(d);
            }
        }
    }
    Err(msg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    fn files(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter().map(|(p, s)| (p.to_string(), s.to_string())).collect()
    }

    fn known(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn names_of_files() {
        assert_eq!(module_of("arch/smp.rs").as_deref(), Some("arch::smp"));
        assert_eq!(module_of("kernel.rs").as_deref(), Some("kernel"));
        assert_eq!(module_of("arch/mod.rs").as_deref(), Some("arch"));
        assert_eq!(module_of("linker.ld"), None);
    }

    #[test]
    fn reads_paths_groups_super_and_the_root() {
        let k = known(&["main", "kernel", "klock", "sched", "arch::cpu", "arch::smp", "arch::serial"]);
        let src = "use crate::kernel::{enter, Kernel};\nuse crate::{klock, sched::schedule};\nfn f() { crate::arch::cpu::x(); super::smp::y(); }\n";
        assert_eq!(imports("arch::lapic", src, &k), vec!["arch::cpu", "arch::smp", "kernel", "klock", "sched"]);
        // Comments are not imports; a folder alone is no module; an unknown name is the root's.
        let src = "// crate::sched::schedule\n/* crate::klock */ use crate::arch; crate::kprintln!(\"x\");\n";
        assert_eq!(imports("kernel", src, &k), vec!["main"]);
        // `use crate::arch::{cpu, smp}` and the root's own paths.
        assert_eq!(imports("kernel", "use crate::arch::{cpu, smp::cpus};", &k), vec!["arch::cpu", "arch::smp"]);
        assert_eq!(
            imports("main", "mod kernel; fn k() { kernel::init(); arch::smp::start(); sched::go(); }", &k),
            vec!["arch::smp", "kernel", "sched"]
        );
        // Its own name and `$crate` paths into itself are left out; `crate::` inside a
        // longer identifier is not a path.
        assert_eq!(
            imports("arch::serial", "$crate::arch::serial::_print(); notcrate::kernel::x();", &k),
            Vec::<String>::new()
        );
    }

    #[test]
    fn a_circle_is_found_and_named() {
        let f = files(&[
            ("main.rs", "fn k() { kernel::init(); }"),
            ("kernel.rs", "use crate::klock;"),
            ("klock.rs", "fn l() { crate::kernel::take_view(); }"),
            ("mem.rs", "use crate::klock::settle;"),
        ]);
        let e = check(&f).unwrap_err();
        assert!(e.contains("circle: kernel, klock"), "{e}");
        assert!(e.contains("klock -> kernel") && e.contains("kernel -> klock"), "{e}");
        assert!(!e.contains("mem"), "{e}");
    }

    #[test]
    fn a_root_item_used_below_is_a_circle() {
        // `kprintln!` exported at the crate root: every user imports `main`.
        let f = files(&[("main.rs", "fn k() { timer::init(); }"), ("timer.rs", "fn t() { crate::kprintln!(\"x\"); }")]);
        assert!(check(&f).unwrap_err().contains("circle: main, timer"));
    }

    #[test]
    fn floors_pass() {
        let f = files(&[
            ("main.rs", "fn k() { sched::go(); kernel::init(); arch::cpu::init(); }"),
            ("sched.rs", "use crate::kernel::Kernel; use crate::arch::cpu;"),
            ("kernel.rs", "use crate::arch::cpu;"),
            ("arch/cpu.rs", "use super::boot; // crate::sched"),
            ("arch/boot.rs", ""),
        ]);
        assert_eq!(check(&f), Ok(()));
    }

    #[test]
    fn a_long_circle_through_a_folder() {
        let f = files(&[
            ("main.rs", ""),
            ("arch/smp.rs", "fn ap() { crate::sched::start(); }"),
            ("sched.rs", "use crate::thread;"),
            ("thread.rs", "use crate::arch::smp;"),
        ]);
        let e = check(&f).unwrap_err();
        assert!(e.contains("circle: arch::smp, sched, thread"), "{e}");
    }
}
