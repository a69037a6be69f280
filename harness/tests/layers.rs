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
        // `cli/` is the binary's (main.rs's commands), which reaches the library as `faultlab::`.
        let Some(module) = module_of(src, &file).filter(|m| m != "cli") else { continue };
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

/// Each function's name and length in lines (from its `fn` line to the closing brace rustfmt puts at
/// the same indentation), outside `#[cfg(test)]`.
fn function_lengths(file: &Path) -> Vec<(String, usize)> {
    let text = std::fs::read_to_string(file).unwrap();
    let code = text.split("#[cfg(test)]").next().unwrap_or_default();
    let lines: Vec<&str> = code.lines().collect();
    let head = regex::Regex::new(r"^(\s*)(?:pub(?:\([a-z]+\))? )?(?:const )?(?:async )?(?:unsafe )?fn ([a-z_][a-z0-9_]*)").unwrap();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(c) = head.captures(line) else { continue };
        let indent = &c[1];
        let end = format!("{indent}}}");
        // A declaration without a body (a trait's required method) ends with `;` before any `{`.
        let body_opens = lines[i..].iter().find_map(|l| if l.trim_end().ends_with(';') { Some(false) } else if l.contains('{') { Some(true) } else { None });
        if body_opens != Some(true) {
            continue;
        }
        if line.trim_end().ends_with('}') {
            out.push((c[2].to_string(), 1));
            continue;
        }
        if let Some(n) = lines[i + 1..].iter().position(|l| l.trim_end() == end || l.starts_with(&format!("{end} "))) {
            out.push((c[2].to_string(), n + 2));
        }
    }
    out
}

/// The modules of the last stage (the top floor) and `main.rs`'s own files (`src/main.rs`, `src/cli/`).
fn top_floor_files(src: &Path) -> Vec<PathBuf> {
    let last = stages(src).pop().unwrap_or_default();
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files.retain(|f| match module_of(src, f) {
        Some(m) => last.contains(&m) || m == "cli",
        None => f.ends_with("main.rs"),
    });
    files.sort();
    files
}

/// Import statements inside `faults/` that run back up to the module's own `mod.rs` (`super::X` or
/// `crate::faults::X` where X is not a sibling file): a fault's file should use the Fault API's own
/// module, below the list of faults.
fn faults_back_up_imports(src: &Path) -> Vec<String> {
    let dir = src.join("faults");
    let mut files = Vec::new();
    rust_files(&dir, &mut files);
    let siblings: BTreeSet<String> = files.iter().filter_map(|f| f.file_stem()?.to_str().map(String::from)).collect();
    let up = regex::Regex::new(r"(?:super|crate::faults)::(?:\{([^}]*)\}|([A-Za-z_][A-Za-z0-9_]*))").unwrap();
    let mut out = Vec::new();
    for f in files.iter().filter(|f| !f.ends_with("mod.rs")) {
        let text = std::fs::read_to_string(f).unwrap();
        let code = text.split("#[cfg(test)]").next().unwrap_or_default();
        for c in up.captures_iter(code) {
            let names: Vec<&str> = c.get(1).or(c.get(2)).unwrap().as_str().split(',').map(|n| n.trim().split("::").next().unwrap_or_default().trim()).collect();
            let up: Vec<&str> = names.into_iter().filter(|n| !n.is_empty() && !siblings.contains(*n)).collect();
            if !up.is_empty() {
                out.push(format!("{}: {}", f.file_name().unwrap().to_string_lossy(), up.join(", ")));
            }
        }
    }
    out
}

/// The house's measures, printed (`cargo test -p faultlab --test layers measures -- --nocapture`):
/// rooms (top-level modules and main), floors (the longest chain of imports), imports, back-up imports
/// (to a later stage; inside `faults/`, to its `mod.rs`), the biggest files, the longest functions on
/// the top floor.
#[test]
fn measures() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let g = graph(&src);
    fn depth(g: &BTreeMap<String, BTreeSet<String>>, m: &str, memo: &mut BTreeMap<String, usize>) -> usize {
        if let Some(d) = memo.get(m) {
            return *d;
        }
        // A cycle is modules_depend_downward_only's to name: here it only must not recurse for ever
        // (it overflowed the stack and aborted every test of this file, that one's message with them).
        memo.insert(m.to_string(), 0);
        let d = 1 + g.get(m).into_iter().flatten().filter(|d| g.contains_key(*d)).map(|d| depth(g, d, memo)).max().unwrap_or(0);
        memo.insert(m.to_string(), d);
        d
    }
    let mut memo = BTreeMap::new();
    let floors = g.keys().map(|m| depth(&g, m, &mut memo)).max().unwrap_or(0);
    let imports: usize = g.values().map(|d| d.iter().filter(|d| g.contains_key(*d)).count()).sum();
    let stages = stages(&src);
    let stage_of = |m: &str| stages.iter().position(|s| s.iter().any(|n| n == m));
    let upward: usize = g.iter().map(|(m, d)| d.iter().filter(|d| g.contains_key(*d) && stage_of(d) > stage_of(m)).count()).sum();
    let faults_up = faults_back_up_imports(&src);
    println!("rooms: {} modules and main.rs; floors (longest import chain): {floors}; imports: {imports}", g.len());
    println!("back-up imports: {upward} to a later stage; {} inside faults/ to faults/mod.rs", faults_up.len());
    for f in &faults_up {
        println!("  {f}");
    }
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut sizes: Vec<(usize, String)> = files
        .iter()
        .map(|f| (std::fs::read_to_string(f).unwrap().lines().count(), f.strip_prefix(&src).unwrap().display().to_string()))
        .collect();
    sizes.sort_by(|a, b| b.cmp(a));
    println!("biggest files (lines, tests included):");
    for (n, f) in sizes.iter().take(8) {
        println!("  {n:5} {f}");
    }
    let mut longest: Vec<(usize, String)> = top_floor_files(&src)
        .iter()
        .flat_map(|f| {
            let name = f.strip_prefix(&src).unwrap().display().to_string();
            function_lengths(f).into_iter().map(move |(func, n)| (n, format!("{name}: {func}")))
        })
        .collect();
    longest.sort_by(|a, b| b.cmp(a));
    println!("longest functions on the top floor (lines):");
    for (n, f) in longest.iter().take(8) {
        println!("  {n:5} {f}");
    }
}

#[test]
fn function_lengths_are_counted_to_the_closing_brace() {
    let dir = std::env::temp_dir().join(format!("layers-fn-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("x.rs");
    std::fs::write(&file, "fn a() {}\npub fn b(\n    x: u8,\n) -> u8 {\n    x\n}\ntrait T {\n    fn c(&self);\n    fn d(&self) {\n        {\n        }\n    }\n}\n#[cfg(test)]\nfn e() {\n}\n").unwrap();
    let got = function_lengths(&file);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(got, vec![("a".to_string(), 1), ("b".to_string(), 5), ("d".to_string(), 4)]);
}

#[test]
fn faults_use_their_api_not_their_list() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let up = faults_back_up_imports(&src);
    assert!(up.is_empty(), "imports in faults/ of faults/mod.rs (use super::api instead):\n  {}", up.join("\n  "));
}

#[test]
fn no_function_on_the_top_floor_is_over_80_lines() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let files = top_floor_files(&src);
    assert!(files.iter().any(|f| f.ends_with("main.rs")) && files.iter().any(|f| f.ends_with("suite.rs")), "the top floor was not read: {files:?}");
    let long: Vec<String> = files
        .iter()
        .flat_map(|f| function_lengths(f).into_iter().map(move |(func, n)| (f.clone(), func, n)))
        .filter(|(_, _, n)| *n > 80)
        .map(|(f, func, n)| format!("{}: {func} ({n} lines)", f.strip_prefix(&src).unwrap().display()))
        .collect();
    assert!(long.is_empty(), "functions over 80 lines on the top floor (split them):\n  {}", long.join("\n  "));
}
