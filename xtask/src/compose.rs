//! Manifests made of parts: `system/parts/NAME.toml` holds entries several manifests
//! share (the storage stack, the network, the shell). A manifest names the parts it
//! takes (`include = [...]`: a scenario in its `[scenario]` header, `run.toml` and
//! `system/bench/*.toml` in a line before their first entry), and an entry of its own
//! whose `name` is an included program's *amends* that entry instead of adding another:
//! its keys replace the part's (or are added), the rest of the part's entry stays. So
//! `blk` with `cpu = 1`, or with its own `quota=…`, is two lines, not a copy of the
//! entry. Root reads the composed text; it never sees `include`.
//!
//! Root's manifest is line-based (`crates/manifest`: one `key = value` per line), so
//! the composition is done on lines, comments kept.

/// One `[[program]]` table: its lines (the header first) and its name.
#[derive(Debug)]
struct Entry {
    name: Option<String>,
    lines: Vec<String>,
}

/// The lines before the first entry, and the entries.
fn entries(text: &str) -> (Vec<String>, Vec<Entry>) {
    let mut head = Vec::new();
    let mut out: Vec<Entry> = Vec::new();
    for line in text.lines() {
        if line.trim() == "[[program]]" {
            out.push(Entry { name: None, lines: vec![line.to_string()] });
            continue;
        }
        match out.last_mut() {
            Some(e) => {
                if e.name.is_none() {
                    e.name = value_of(line, "name");
                }
                e.lines.push(line.to_string());
            }
            None => head.push(line.to_string()),
        }
    }
    (head, out)
}

/// The key of a `key = value` line (not a comment, not a table header).
fn key_of(line: &str) -> Option<&str> {
    let l = line.trim();
    if l.is_empty() || l.starts_with('#') || l.starts_with('[') {
        return None;
    }
    l.split_once('=').map(|(k, _)| k.trim())
}

/// The string value of `key = "value"` on this line.
fn value_of(line: &str, key: &str) -> Option<String> {
    let (k, v) = line.trim().split_once('=')?;
    (k.trim() == key).then(|| v.trim().trim_matches('"').to_string())
}

/// A manifest file's `include = ["a", "b"]` line before its first entry, taken out:
/// (the parts it names, the text without that line).
pub fn take_include(text: &str) -> Result<(Vec<String>, String), String> {
    let mut parts = Vec::new();
    let mut out = String::new();
    let mut before_entries = true;
    for line in text.lines() {
        if line.trim() == "[[program]]" {
            before_entries = false;
        }
        if before_entries && key_of(line) == Some("include") {
            let (_, v) = line.split_once('=').unwrap_or_default();
            let list: Vec<String> = toml::from_str::<toml::Table>(&format!("include = {}", v.trim()))
                .map_err(|e| format!("`{}`: {e}", line.trim()))?
                .get("include")
                .and_then(|v| v.as_array().cloned())
                .ok_or_else(|| format!("`{}`: include is a list of part names", line.trim()))?
                .into_iter()
                .map(|v| {
                    v.as_str()
                        .map(String::from)
                        .ok_or_else(|| format!("`{}`: include is a list of part names", line.trim()))
                })
                .collect::<Result<_, _>>()?;
            parts.extend(list);
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    Ok((parts, out))
}

/// The manifest of `parts` (their texts, in order) followed by `own`: an entry of `own`
/// named as an entry of the parts amends it (see the module's comment); others follow
/// the parts' entries in their order.
pub fn compose(parts: &[String], own: &str) -> String {
    let mut head: Vec<String> = Vec::new();
    let mut all: Vec<Entry> = Vec::new();
    for p in parts {
        let (h, e) = entries(p);
        head.extend(h);
        all.extend(e);
    }
    let included = all.len();
    let (own_head, own_entries) = entries(own);
    head.extend(own_head);
    for e in own_entries {
        let target = e.name.as_ref().and_then(|n| all[..included].iter().position(|x| x.name.as_ref() == Some(n)));
        let Some(t) = target else {
            all.push(e);
            continue;
        };
        for line in e.lines.into_iter().skip(1) {
            let slot = key_of(&line).and_then(|k| all[t].lines.iter().position(|l| key_of(l) == Some(k)));
            match slot {
                Some(i) => all[t].lines[i] = line,
                None if line.trim().is_empty() => {}
                None => all[t].lines.push(line),
            }
        }
    }
    let mut out = head.join("\n");
    for e in all {
        if !out.is_empty() && !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str(&e.lines.join("\n"));
    }
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const STORAGE: &str = "# the stack\n[[program]]\nname = \"cache\"\ncaps = [\"sigma0\"]\n\n[[program]]\nname = \"blk\"\nargs = \"quota=4096\"\nirq = [5, 9]\nrestart = true\n";

    #[test]
    fn an_entry_named_as_an_included_one_amends_it() {
        let own = "[[program]]\nname = \"blk\"\n# on CPU 1\ncpu = 1\nargs = \"quota=65536\"\n\n[[program]]\nname = \"t\"\ntest = true\n";
        let m = compose(&[STORAGE.to_string()], own);
        let progs = manifest::parse(&m).unwrap();
        assert_eq!(progs.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(), ["cache", "blk", "t"], "{m}");
        let blk = &progs[1];
        assert_eq!(
            (blk.cpu, blk.args.as_str(), blk.irq.as_slice(), blk.restart),
            (1, "quota=65536", &[5u8, 9][..], true),
            "{m}"
        );
        assert!(m.contains("# on CPU 1"), "comments stay: {m}");
    }

    #[test]
    fn entries_of_its_own_are_added_and_keys_replaced_not_doubled() {
        let own = "[[program]]\nname = \"blk\"\nrestart = false\n";
        let m = compose(&[STORAGE.to_string()], own);
        assert_eq!(m.matches("restart").count(), 1, "{m}");
        assert!(!manifest::parse(&m).unwrap()[1].restart);
        // Without parts, a manifest is what it was.
        let p = manifest::parse(&compose(&[], STORAGE)).unwrap();
        assert_eq!(p, manifest::parse(STORAGE).unwrap());
    }

    /// Every manifest file of the tree composes into one root reads, with each program
    /// once; the amendments land (run.toml's blk, irq_cpu's blk on CPU 1).
    #[test]
    fn the_trees_manifests_compose() {
        let root = crate::project_root().join("system");
        let mut files = vec![root.join("run.toml")];
        for d in ["bench"] {
            for e in std::fs::read_dir(root.join(d)).unwrap() {
                files.push(e.unwrap().path());
            }
        }
        for f in files {
            // A number xtask puts in per run (memory.toml's page limit) stands for itself.
            let text = std::fs::read_to_string(&f).unwrap().replace("${PAGES}", "131072");
            let m = crate::test::scenarios::with_parts(&text, &[]).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            let progs =
                manifest::parse(&m).unwrap_or_else(|e| panic!("{}: line {}: {}\n{m}", f.display(), e.line, e.msg));
            let mut names: Vec<&str> = progs.iter().map(|p| p.name.as_str()).collect();
            let n = names.len();
            names.sort();
            names.dedup();
            assert_eq!(names.len(), n, "{}: a program twice", f.display());
        }
        let run = manifest::parse(&crate::run_manifest().unwrap()).unwrap();
        let blk = run.iter().find(|p| p.name == "blk").unwrap();
        assert_eq!((blk.args.as_str(), blk.lent, blk.restart, blk.irq.len()), ("quota=65536", true, true, 12));
        assert_eq!(run.iter().find(|p| p.name == "cache").unwrap().args, "policy=auto");
        let sc = crate::test::scenarios::Scenario::load("irq_cpu", &[]).unwrap();
        let blk = manifest::parse(&sc.manifest).unwrap().into_iter().find(|p| p.name == "blk").unwrap();
        assert_eq!((blk.cpu, blk.args.as_str(), blk.kpages), (1, "quota=4096", 512));
    }

    #[test]
    fn include_lines_are_taken_out_and_checked() {
        let (parts, rest) =
            take_include("# run\ninclude = [\"storage\", \"net\"]\n[[program]]\nname = \"x\"\n").unwrap();
        assert_eq!(parts, ["storage", "net"]);
        assert!(!rest.contains("include"));
        assert!(take_include("include = \"storage\"\n").is_err(), "a list");
        assert!(take_include("include = [1]\n").is_err(), "of names");
        let (parts, rest) = take_include("[[program]]\nname = \"x\"\nargs = \"include = [1]\"\n").unwrap();
        assert!(parts.is_empty() && rest.contains("args"), "inside an entry it is not an include");
    }
}
