//! The library's modules depend downward only: no module reaches, through `crate::` paths, a module
//! that reaches it back. A cycle (faults -> provider::kind -> runner -> faults was one) fails with the
//! modules that form it. Test code (`#[cfg(test)]` modules) is left out: tests may use anything.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The top-level module a source file belongs to (`faults/disk_full.rs` -> `faults`).
fn module_of(src: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src).ok()?;
    let first = rel.components().next()?.as_os_str().to_str()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    (!matches!(name, "lib" | "main" | "bin")).then(|| name.to_string())
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The modules each module names as `crate::NAME` or in `use crate::{NAME, ...}`, outside tests.
fn graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let path_ref = regex::Regex::new(r"crate::([a-z_][a-z0-9_]*)").unwrap();
    let group = regex::Regex::new(r"use crate::\{([^}]*)\}").unwrap();
    let word = regex::Regex::new(r"(?:^|[\s,{])([a-z_][a-z0-9_]*)").unwrap();
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in files {
        let Some(module) = module_of(src, &file) else { continue };
        let text = std::fs::read_to_string(&file).unwrap();
        let code = text.split("#[cfg(test)]").next().unwrap_or_default();
        let mut names: Vec<String> = path_ref.captures_iter(code).map(|c| c[1].to_string()).collect();
        for c in group.captures_iter(code) {
            names.extend(word.captures_iter(&c[1]).map(|w| w[1].to_string()).filter(|w| w != "self"));
        }
        let deps = g.entry(module.clone()).or_default();
        deps.extend(names.into_iter().filter(|n| *n != module));
    }
    g
}

/// A cycle through `start`, if there is one: the modules in order.
fn cycle_from(g: &BTreeMap<String, BTreeSet<String>>, start: &str) -> Option<Vec<String>> {
    fn walk(g: &BTreeMap<String, BTreeSet<String>>, at: &str, start: &str, path: &mut Vec<String>, seen: &mut BTreeSet<String>) -> bool {
        for next in g.get(at).into_iter().flatten() {
            if next == start {
                return true;
            }
            if seen.insert(next.clone()) {
                path.push(next.clone());
                if walk(g, next, start, path, seen) {
                    return true;
                }
                path.pop();
            }
        }
        false
    }
    let mut path = vec![start.to_string()];
    walk(g, start, start, &mut path, &mut BTreeSet::new()).then_some(path)
}

#[test]
fn modules_depend_downward_only() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let g = graph(&src);
    assert!(g.contains_key("faults") && g.contains_key("runner") && g["runner"].contains("faults"), "the graph was not read: {g:?}");
    let cycles: Vec<String> = g.keys().filter_map(|m| cycle_from(&g, m)).map(|c| format!("{} -> {}", c.join(" -> "), c[0])).collect();
    assert!(cycles.is_empty(), "import cycles:\n  {}", cycles.join("\n  "));
}

#[test]
fn a_cycle_is_found() {
    let g: BTreeMap<String, BTreeSet<String>> = [("a", &["b"][..]), ("b", &["c"]), ("c", &["a"]), ("d", &["a"])]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.iter().map(|s| s.to_string()).collect()))
        .collect();
    assert_eq!(cycle_from(&g, "a"), Some(vec!["a".to_string(), "b".into(), "c".into()]));
    assert_eq!(cycle_from(&g, "d"), None);
}

/// The stages of `src/lib.rs`'s module list, top to bottom, as its documentation gives them: each
/// module uses only modules of its own stage or of stages above it.
fn stages(src: &Path) -> Vec<Vec<String>> {
    let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap();
    let stage = regex::Regex::new(r"^//! \d+\. [^:]+: (.*)$").unwrap();
    let name = regex::Regex::new(r"\[`([a-z_]+)`\]").unwrap();
    let mut out: Vec<Vec<String>> = Vec::new();
    for line in lib.lines() {
        if let Some(c) = stage.captures(line) {
            out.push(name.captures_iter(&c[1]).map(|n| n[1].to_string()).collect());
        } else if line.starts_with("//!    ") {
            if let Some(last) = out.last_mut() {
                last.extend(name.captures_iter(line).map(|n| n[1].to_string()));
            }
        }
    }
    out
}

#[test]
fn modules_use_only_their_stage_and_those_above() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let g = graph(&src);
    let stages = stages(&src);
    let stage_of = |m: &str| stages.iter().position(|s| s.iter().any(|n| n == m));
    let unplaced: Vec<&String> = g.keys().filter(|m| stage_of(m).is_none()).collect();
    assert!(unplaced.is_empty(), "modules lib.rs's stage list does not name: {unplaced:?}");
    let mut upward = Vec::new();
    for (m, deps) in &g {
        for d in deps.iter().filter(|d| g.contains_key(*d)) {
            if stage_of(d) > stage_of(m) {
                upward.push(format!("{m} (stage {}) uses {d} (stage {})", stage_of(m).unwrap() + 1, stage_of(d).unwrap() + 1));
            }
        }
    }
    assert!(upward.is_empty(), "modules that use a later stage:\n  {}", upward.join("\n  "));
}
