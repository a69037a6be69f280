//! The scenario files: `faultlab list`, `validate`, `show` and `new`. None touches a cluster.

use std::path::{Path, PathBuf};

use anyhow::Result;
use faultlab::faults::Reach;
use faultlab::scenario;

use crate::cli::out::{emit, exit, indent, status};
use crate::Output;

/// `faultlab list`: the good scenarios of the set, the documented causes not reproduced (with why),
/// then each broken file with its errors (exit status 2).
pub fn list(dir: &Path, output: Output) -> Result<()> {
    let set = scenario::load_set(dir)?;
    if set.good.is_empty() && set.broken.is_empty() && set.gaps.is_empty() {
        usage!("{}: no scenario files (*.yaml, *.yml) in this directory", dir.display());
    }
    let listed = serde_json::json!({
        "scenarios": set.good.iter().map(|(name, s)| serde_json::json!({
            "name": name, "fault": s.scenario.fault.name(), "path": s.path, "description": s.scenario.metadata.description.trim(),
        })).collect::<Vec<_>>(),
        "notReproducible": set.gaps.iter().map(|(name, (path, g))| serde_json::json!({
            "name": name, "path": path, "description": g.metadata.description.trim(), "reason": g.reason.trim(),
        })).collect::<Vec<_>>(),
        "broken": set.broken.iter().map(|(path, e)| serde_json::json!({"path": path, "error": e.to_string()})).collect::<Vec<_>>(),
    });
    if emit(output, &listed)? {
        if !set.broken.is_empty() {
            exit(status::USAGE);
        }
        return Ok(());
    }
    // Columns as wide as the longest name and fault.
    let wn = set.good.keys().map(String::len).max().unwrap_or(0);
    let wf = set.good.values().map(|s| s.scenario.fault.name().len()).max().unwrap_or(0);
    for (name, s) in &set.good {
        let line = s.scenario.metadata.description.lines().next().unwrap_or_default().to_string();
        out!("{name:<wn$}  {:<wf$}  {line}", s.scenario.fault.name());
    }
    if !set.gaps.is_empty() {
        out!("\nnot reproducible ({}; `faultlab show NAME` says why):", set.gaps.len());
        let wg = set.gaps.keys().map(String::len).max().unwrap_or(0);
        for (name, (_, g)) in &set.gaps {
            out!("{name:<wg$}  {}", g.metadata.description.lines().next().unwrap_or_default());
        }
    }
    if !set.broken.is_empty() {
        out!("\nbroken ({}; `faultlab validate` checks files):", set.broken.len());
        for (path, e) in &set.broken {
            out!("{}\n{}", path.display(), indent(&e.to_string()));
        }
        exit(status::USAGE);
    }
    Ok(())
}

/// `faultlab validate`: every file of every path (default: the set), every error; exit status 2 if
/// any file is broken.
pub fn validate(dir: &Path, paths: Vec<PathBuf>) -> Result<()> {
    let paths = if paths.is_empty() { vec![dir.to_path_buf()] } else { paths };
    if validate_files(&paths)? > 0 {
        exit(status::USAGE);
    }
    Ok(())
}

/// Every file of every path, every error. Returns how many files are broken.
fn validate_files(paths: &[PathBuf]) -> Result<usize> {
    let mut files = Vec::new();
    for path in paths {
        if path.is_dir() {
            let found = scenario::files(path)?;
            if found.is_empty() {
                usage!("{}: no scenario files (*.yaml, *.yml) in this directory", path.display());
            }
            files.extend(found);
        } else {
            files.push(path.clone());
        }
    }
    let mut broken = 0;
    for file in &files {
        match scenario::load(file) {
            Ok(s) => out!("ok      {} ({})", file.display(), s.scenario.fault.name()),
            Err(scenario::ScenarioError::NotReproducible { .. }) => out!("ok      {} (not reproducible)", file.display()),
            Err(e) => {
                broken += 1;
                out!("broken  {}\n{}", file.display(), indent(&e.to_string()));
            }
        }
    }
    out!("{} file(s): {} valid, {broken} broken", files.len(), files.len() - broken);
    Ok(broken)
}

/// `faultlab show`: a scenario's fault, symptom, documented fix and recovery.
pub fn show(dir: &Path, name: &str, output: Output) -> Result<()> {
    let s = match scenario::find(dir, name) {
        Err(scenario::ScenarioError::NotReproducible { path, gap }) => return show_gap(&path, &gap, output),
        found => found?,
    };
    let sc = &s.scenario;
    let shown = serde_json::json!({
        "path": s.path,
        "reach": reach_text(sc.fault.fault().reach()),
        "hostWideOnKind": sc.fault.fault().host_wide_on_kind(),
        "scenario": sc,
    });
    if emit(output, &shown)? {
        return Ok(());
    }
    out!("{} ({})\n\n{}\n", sc.metadata.name, s.path.display(), sc.metadata.description.trim());
    out!("source:   {} — {}{}", sc.metadata.source.document, sc.metadata.source.title, sc.metadata.source.section.as_ref().map(|x| format!(" / {x}")).unwrap_or_default());
    if let Some(fixed) = &sc.metadata.source.fixed_upstream {
        out!("upstream: fixed in {fixed}; this scenario is a regression guard (the documented bug must not occur)");
    }
    out!("fault:    {} (fix steps it offers: {})", sc.fault.name(), sc.fault.fix_steps().join(", "));
    if !sc.workload.cluster_objects.is_empty() {
        out!("cluster:  creates cluster-scoped {} (deleted at teardown)", sc.workload.cluster_objects.join(", "));
    }
    out!("reach:    {}", reach_text(sc.fault.fault().reach()));
    if let Some(reach) = sc.fault.fault().host_wide_on_kind() {
        out!("on kind:  reaches past the node container into the host: {reach}; runs on kind only with --allow-host-wide");
    }
    out!("symptom:  within {}", faultlab::duration::format(sc.symptom.within.0));
    if let Some(p) = &sc.symptom.pod {
        out!("          pod {}", faultlab::wait::gate_text(p));
    }
    if let Some(d) = &sc.symptom.deployment {
        out!("          {}", faultlab::wait::deployment_text(d));
    }
    for e in &sc.symptom.events {
        out!("          event {} /{}/", e.reason, e.message);
    }
    out!("fix:");
    for (i, f) in sc.fix.iter().enumerate() {
        out!("  {}. {} — {}", i + 1, f.step, f.doc.trim());
    }
    if let Some(p) = &sc.recovery.pod {
        out!("recovery: within {}: pod {}", faultlab::duration::format(sc.recovery.within.0), faultlab::wait::gate_text(p));
    }
    if let Some(d) = &sc.recovery.deployment {
        out!("recovery: within {}: {}", faultlab::duration::format(sc.recovery.within.0), faultlab::wait::deployment_text(d));
    }
    Ok(())
}

/// `faultlab show` of a documented cause not reproduced: what it is, its source, and why not.
fn show_gap(path: &Path, gap: &scenario::Gap, output: Output) -> Result<()> {
    if emit(output, &serde_json::json!({"path": path, "reproducible": false, "scenario": gap}))? {
        return Ok(());
    }
    out!("{} ({})\n\n{}\n", gap.metadata.name, path.display(), gap.metadata.description.trim());
    let source = &gap.metadata.source;
    out!("source:   {} — {}{}", source.document, source.title, source.section.as_ref().map(|x| format!(" / {x}")).unwrap_or_default());
    out!("not reproducible:\n{}", indent(gap.reason.trim()));
    if let Some(fix) = &source.fix {
        out!("the document's fix:\n{}", indent(fix.trim()));
    }
    Ok(())
}

/// How far a fault reaches, in words.
fn reach_text(reach: Reach) -> &'static str {
    match reach {
        Reach::Namespace => "the run's namespace only",
        Reach::Node => "the node",
        Reach::NodeFailure => "the node, which fails, and the node its workload moves to",
        Reach::Cluster => "the whole cluster",
        Reach::Host(_) => "the node, and on kind the host",
    }
}

/// `faultlab new NAME --fault FAULT`: a scenario of the user's, made from faultlab's for FAULT.
pub fn new(into: &Path, name: &str, fault: &str) -> Result<()> {
    let path = faultlab::scaffold::create(into, name, fault)?;
    out!("wrote {} (from faultlab's scenario {fault}); `faultlab validate {}` checks it", path.display(), into.display());
    Ok(())
}
