//! Import circles, in every crate of the workspace: each crate's modules (found from its
//! targets' root files through their `mod NAME;` declarations, `#[cfg(test)]` ones left
//! out), what each module's code outside its tests names of the others (`crate::…`,
//! `super::…`, `self::…` paths and `use` trees, comments left out), and the circles
//! among them. A module may name its ancestors and its descendants freely (a parent
//! declares its children; a child uses what its parent keeps); any other name is an
//! edge between the two siblings under their nearest common ancestor that hold them, so
//! `bench::kernel` naming `test::scenarios` is `bench` → `test`. A circle of such edges
//! is two modules of one layer that each need the other: the host test fails on it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A module: its path below the crate root (empty: the root) and its file.
struct Module {
    path: Vec<String>,
    file: PathBuf,
}

/// The modules of the crate whose root file is `root`.
fn modules(root: &Path) -> Vec<Module> {
    let mut out = Vec::new();
    let mut todo = vec![Module { path: Vec::new(), file: root.to_path_buf() }];
    while let Some(m) = todo.pop() {
        let text = std::fs::read_to_string(&m.file).unwrap_or_default();
        // A root file or a `mod.rs` keeps its children beside it; `a.rs` in `a/`.
        let stem = m.file.file_stem().and_then(|s| s.to_str()).unwrap_or("");
        let dir = if m.path.is_empty() || stem == "mod" {
            m.file.parent().map(Path::to_path_buf).unwrap_or_default()
        } else {
            m.file.with_extension("")
        };
        let lines: Vec<&str> = text.lines().collect();
        for (i, l) in lines.iter().enumerate() {
            let t = l.trim();
            let decl = t.strip_prefix("pub ").or_else(|| t.strip_prefix("pub(crate) ")).unwrap_or(t);
            let Some(name) = decl.strip_prefix("mod ").and_then(|r| r.strip_suffix(';')) else { continue };
            if i > 0 && lines[i - 1].trim() == "#[cfg(test)]" {
                continue;
            }
            let file = [dir.join(format!("{name}.rs")), dir.join(name).join("mod.rs")].into_iter().find(|f| f.exists());
            if let Some(file) = file {
                let mut path = m.path.clone();
                path.push(name.to_string());
                todo.push(Module { path, file });
            }
        }
        out.push(m);
    }
    out
}

/// `text` without its comments and the string literals' contents (a string's state
/// ends at the line's end: a literal that spans lines loses nothing that matters here).
fn code_of(text: &str) -> String {
    let text = text.replace("'\"'", "' '").replace("'\\\"'", "' '");
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let mut in_str = false;
        let mut prev = ' ';
        let mut chars = line.chars().peekable();
        while let Some(c) = chars.next() {
            if in_str {
                if c == '"' && prev != '\\' {
                    in_str = false;
                    out.push('"');
                }
                prev = if prev == '\\' && c == '\\' { ' ' } else { c };
                continue;
            }
            if c == '/' && chars.peek() == Some(&'/') {
                break;
            }
            if c == '"' {
                in_str = true;
                prev = ' ';
            }
            out.push(c);
        }
        out.push('\n');
    }
    out
}

/// The paths a use tree names, from `s` (just after `crate::`, `super::` or `self::`):
/// `a::b::{c, d::e}` names a::b::c and a::b::d::e. A path ending in a macro's name
/// (`protocol!`) names the module above it.
fn tree(s: &str) -> Vec<Vec<String>> {
    fn parse(s: &[u8], at: &mut usize, prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
        let mut path = prefix;
        loop {
            while *at < s.len() && s[*at].is_ascii_whitespace() {
                *at += 1;
            }
            if *at < s.len() && s[*at] == b'{' {
                *at += 1;
                loop {
                    parse(s, at, path.clone(), out);
                    while *at < s.len() && s[*at].is_ascii_whitespace() {
                        *at += 1;
                    }
                    match s.get(*at) {
                        Some(b',') => *at += 1,
                        Some(b'}') => {
                            *at += 1;
                            return;
                        }
                        _ => return,
                    }
                    while *at < s.len() && s[*at].is_ascii_whitespace() {
                        *at += 1;
                    }
                    if s.get(*at) == Some(&b'}') {
                        *at += 1;
                        return;
                    }
                }
            }
            let start = *at;
            while *at < s.len() && (s[*at].is_ascii_alphanumeric() || s[*at] == b'_') {
                *at += 1;
            }
            let word = String::from_utf8_lossy(&s[start..*at]).to_string();
            if word.is_empty() {
                out.push(path);
                return;
            }
            if s.get(*at) == Some(&b'!') {
                out.push(path);
                return;
            }
            path.push(word);
            if s.get(*at..*at + 2) == Some(b"::") {
                *at += 2;
            } else {
                out.push(path);
                return;
            }
        }
    }
    let mut out = Vec::new();
    parse(s.as_bytes(), &mut 0, Vec::new(), &mut out);
    out
}

/// The modules that module `at` names in its `code`, as full paths below the crate root.
fn names(at: &[String], code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let b = code.as_bytes();
    for (kw, base) in [("crate::", Some(Vec::new())), ("super::", None), ("self::", Some(at.to_vec()))] {
        for (i, _) in code.match_indices(kw) {
            if i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_' || b[i - 1] == b'$' || b[i - 1] == b':') {
                continue;
            }
            let mut rest = &code[i + kw.len()..];
            let mut from = match &base {
                Some(p) => p.clone(),
                None => at[..at.len().saturating_sub(1)].to_vec(),
            };
            while let Some(r) = rest.strip_prefix("super::").filter(|_| base.is_none()) {
                from.pop();
                rest = r;
            }
            for p in tree(rest) {
                out.push(from.iter().cloned().chain(p).collect());
            }
        }
    }
    out
}

/// The circles among the modules of the crate rooted at `root`, each as its modules
/// and, per edge, one line that makes it.
pub fn circles(root: &Path) -> Vec<String> {
    let mods = modules(root);
    let known: Vec<&Vec<String>> = mods.iter().map(|m| &m.path).collect();
    // Sibling edges (parent, from, to) -> an example: "file names crate::…".
    let mut edges: BTreeMap<(Vec<String>, String, String), String> = BTreeMap::new();
    for m in &mods {
        let text = std::fs::read_to_string(&m.file).unwrap_or_default();
        let text = text.split("\n#[cfg(test)]\nmod ").next().unwrap_or("");
        for named in names(&m.path, &code_of(text)) {
            // The longest prefix that is a module.
            let Some(target) =
                (0..=named.len()).rev().map(|k| &named[..k]).find(|p| known.iter().any(|k| k[..] == **p))
            else {
                continue;
            };
            let common = m.path.iter().zip(target).take_while(|(a, b)| a == b).count();
            if common == m.path.len() || common == target.len() {
                continue;
            }
            let key = (m.path[..common].to_vec(), m.path[common].clone(), target[common].clone());
            edges.entry(key).or_insert_with(|| format!("{} names {}", shown(&m.file), named.join("::")));
        }
    }
    // Depth-first search for a path back to each edge's start.
    let mut found = Vec::new();
    let mut reported: Vec<Vec<String>> = Vec::new();
    for (parent, from, to) in edges.keys() {
        let mut stack = vec![(to.clone(), vec![from.clone(), to.clone()])];
        let mut seen = vec![to.clone()];
        while let Some((n, trail)) = stack.pop() {
            if n == *from {
                let mut key = trail[..trail.len() - 1].to_vec();
                key.sort();
                if !reported.contains(&key) {
                    reported.push(key);
                    let how: Vec<&str> = trail
                        .windows(2)
                        .filter_map(|w| edges.get(&(parent.clone(), w[0].clone(), w[1].clone())).map(String::as_str))
                        .collect();
                    let scope = if parent.is_empty() { String::from("crate") } else { parent.join("::") };
                    found.push(format!("{} in {scope}: {} ({})", shown(root), trail.join(" → "), how.join("; ")));
                }
                break;
            }
            for ((p, f, t), _) in edges.iter() {
                if p == parent && *f == n && (*t == *from || !seen.contains(t)) {
                    seen.push(t.clone());
                    let mut tr = trail.clone();
                    tr.push(t.clone());
                    stack.push((t.clone(), tr));
                }
            }
        }
    }
    found
}

/// A file's path from the project's root.
fn shown(f: &Path) -> String {
    f.strip_prefix(crate::project_root()).unwrap_or(f).display().to_string()
}

/// The root files of every target of every crate in the workspace (`cargo metadata`),
/// build scripts aside.
pub fn crate_roots() -> Result<Vec<PathBuf>, String> {
    let out = std::process::Command::new(env!("CARGO"))
        .args(["metadata", "--no-deps", "--format-version", "1"])
        .current_dir(crate::project_root())
        .output()
        .map_err(|e| format!("cargo metadata: {e}"))?;
    let m: serde_json::Value = serde_json::from_slice(&out.stdout).map_err(|e| format!("cargo metadata: {e}"))?;
    let mut roots = Vec::new();
    for p in m["packages"].as_array().ok_or("cargo metadata names no packages")? {
        for t in p["targets"].as_array().into_iter().flatten() {
            let build = t["kind"].as_array().is_some_and(|k| k.iter().any(|k| k == "custom-build"));
            if let (false, Some(src)) = (build, t["src_path"].as_str()) {
                roots.push(PathBuf::from(src));
            }
        }
    }
    roots.sort();
    roots.dedup();
    Ok(roots)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn use_trees_name_their_paths() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(tree("a::b::{c, d::e};"), vec![s(&["a", "b", "c"]), s(&["a", "b", "d", "e"])]);
        assert_eq!(tree("{err, Blk, HOLDER};"), vec![s(&["err"]), s(&["Blk"]), s(&["HOLDER"])]);
        assert_eq!(tree("protocol! {"), vec![s(&[])]);
        assert_eq!(tree("a::{b::{c, d}, e}"), vec![s(&["a", "b", "c"]), s(&["a", "b", "d"]), s(&["a", "e"])]);
        let at = s(&["bench", "kernel"]);
        assert_eq!(names(&at, "use super::{plan, report};"), vec![s(&["bench", "plan"]), s(&["bench", "report"])]);
        assert_eq!(
            names(&at, "$crate::x::y; let a = crate::test::scenarios::load();")[0],
            s(&["test", "scenarios", "load"])
        );
        assert!(code_of("let u = \"crate::a\"; // crate::b\n").find("crate::").is_none());
    }
}
