//! `faultlab new NAME --fault FAULT`: a scenario of your own, made from faultlab's scenario for that
//! fault. faultlab's scenarios are built into the binary, so an installed faultlab works anywhere.
//! The copy gets its own name (the run's namespace is made from it) and a header saying where it came
//! from; it is checked exactly as `faultlab validate` checks it before it is written, and an existing
//! file is never overwritten.

use std::io::Write;
use std::path::{Path, PathBuf};

use thiserror::Error;

use crate::faults::FaultSpec;
use crate::scenario::{self, ScenarioError};

#[derive(Debug, Error)]
pub enum ScaffoldError {
    #[error("unknown fault {fault:?}; faults: {}", FaultSpec::NAMES.join(", "))]
    UnknownFault { fault: String },
    #[error("{0}")]
    Name(String),
    #[error("{} already exists; it is left as it is (choose another name, or --dir)", path.display())]
    Exists { path: PathBuf },
    #[error("writing {}: {source}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The copy does not check: a fault in faultlab's own template, never the user's.
    #[error("the scenario made from faultlab's {fault} does not check (a bug in faultlab):\n{source}")]
    Invalid {
        fault: String,
        #[source]
        source: ScenarioError,
    },
}

/// faultlab's own scenario for `fault`, `scenarios/<fault>.yaml` as built into the binary (the set
/// [`crate::home`] embeds): a fault of the list has one. Its manifests are all inline, so a copy needs
/// no other file (a test checks it).
pub fn template(fault: &str) -> Option<&'static str> {
    FaultSpec::NAMES.contains(&fault).then(|| crate::home::builtin_scenario(fault)).flatten()
}

/// Check `name` as a scenario name: a Kubernetes name short enough for the run's namespace.
pub fn check_name(name: &str) -> Result<(), ScaffoldError> {
    if let Some(p) = crate::check::dns_label("NAME", name) {
        return Err(ScaffoldError::Name(p.to_string()));
    }
    if name.len() > scenario::MAX_NAME_LEN {
        return Err(ScaffoldError::Name(format!(
            "NAME: {name:?} is {} characters; at most {}, so that the run's namespace fl-<name>-<5 characters> is a valid name",
            name.len(),
            scenario::MAX_NAME_LEN
        )));
    }
    Ok(())
}

/// The text of scenario `name` made from faultlab's scenario for `fault`: its `metadata.name`
/// changed, and a header comment in place of the editor's schema line (there is no schema.json
/// beside a set of your own unless you write it).
pub fn render(name: &str, fault: &str) -> Result<String, ScaffoldError> {
    check_name(name)?;
    let text = template(fault).ok_or_else(|| ScaffoldError::UnknownFault { fault: fault.to_string() })?;
    let invalid = |message: String| ScaffoldError::Invalid {
        fault: fault.to_string(),
        source: ScenarioError::Invalid {
            problems: vec![scenario::Located {
                path: PathBuf::from(format!("scenarios/{fault}.yaml")),
                line: 1,
                column: 1,
                problem: crate::check::Problem::new("metadata.name", message),
            }],
        },
    };
    // The name's value, where the parser found it: replaced in place, so comments and layout stay.
    let (line, column) = crate::datafile::FieldLocations::of(text).get("metadata.name").ok_or_else(|| invalid("not found".into()))?;
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    let at = lines.get_mut(line as usize - 1).ok_or_else(|| invalid("not found".into()))?;
    let start = at.char_indices().nth(column as usize - 1).map(|(i, _)| i).ok_or_else(|| invalid("not found".into()))?;
    if !at[start..].starts_with(fault) {
        return Err(invalid(format!("is not {fault:?} at line {line}")));
    }
    at.replace_range(start..start + fault.len(), name);
    if lines.first().is_some_and(|l| l.starts_with("# yaml-language-server:")) {
        lines.remove(0);
    }
    let header = format!(
        "# Made by `faultlab new {name} --fault {fault}` (faultlab {version}) from faultlab's own\n\
         # scenario {fault}. Make it yours: the workload, the symptom and its events, the fix as your\n\
         # document says it, the hints. DIR is this file's directory, the scenario set.\n\
         #   the fault's fix steps:    faultlab show {name} --scenarios DIR\n\
         #   check the set's files:    faultlab validate DIR\n\
         #   run it:                   faultlab run {name} --scenarios DIR\n\
         #                             (the first run writes the snapshot to review)\n\
         #   editor completion:        faultlab schema > DIR/schema.json, and as this file's first line\n\
         #                             # yaml-language-server: $schema=schema.json\n",
        version = env!("CARGO_PKG_VERSION"),
    );
    Ok(format!("{header}{}\n", lines.join("\n")))
}

/// Write `dir/name.yaml` (making `dir` if needed), made from faultlab's scenario for `fault`, checked
/// as `faultlab validate` checks it; an existing file is refused.
pub fn create(dir: &Path, name: &str, fault: &str) -> Result<PathBuf, ScaffoldError> {
    let text = render(name, fault)?;
    let path = dir.join(format!("{name}.yaml"));
    scenario::parse(&path, &text).map_err(|source| ScaffoldError::Invalid { fault: fault.to_string(), source })?;
    if std::fs::symlink_metadata(&path).is_ok() {
        return Err(ScaffoldError::Exists { path });
    }
    std::fs::create_dir_all(dir).map_err(|source| ScaffoldError::Write { path: dir.to_path_buf(), source })?;
    let mut file = match std::fs::OpenOptions::new().write(true).create_new(true).open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Err(ScaffoldError::Exists { path }),
        Err(source) => return Err(ScaffoldError::Write { path, source }),
    };
    file.write_all(text.as_bytes()).map_err(|source| ScaffoldError::Write { path: path.clone(), source })?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_fault_has_its_scenario_built_in() {
        for fault in FaultSpec::NAMES {
            let text = &template(fault).unwrap_or_else(|| panic!("no scenarios/{fault}.yaml built in"));
            let on_disk = std::fs::read_to_string(scenario::default_dir().join(format!("{fault}.yaml"))).unwrap();
            assert_eq!(*text, on_disk, "{fault}");
            let s = scenario::parse(&scenario::default_dir().join(format!("{fault}.yaml")), text).unwrap();
            assert_eq!(s.fault.name(), *fault, "scenarios/{fault}.yaml is the scenario of fault {fault}");
            assert!(s.workload.manifests.iter().all(|m| matches!(m, scenario::Manifest::Inline(_))), "{fault}: a copy must not need other files");
        }
    }

    #[test]
    fn new_writes_a_scenario_that_loads_for_every_fault() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("my set");
        for fault in FaultSpec::NAMES {
            let name = format!("my-{fault}");
            let path = create(&dir, &name, fault).unwrap();
            assert_eq!(path, dir.join(format!("{name}.yaml")));
            let loaded = scenario::load(&path).unwrap_or_else(|e| panic!("{fault}: {e}"));
            assert_eq!(loaded.name(), name);
            assert_eq!(loaded.scenario.fault.name(), *fault);
            let text = std::fs::read_to_string(&path).unwrap();
            assert!(text.starts_with(&format!("# Made by `faultlab new {name} --fault {fault}`")), "{text}");
            assert!(!text.lines().any(|l| l.starts_with("# yaml-language-server:")), "no schema line pointing at a file that is not there");
            // The rest is faultlab's scenario, with the name changed.
            let original = template(fault).unwrap();
            let body = text.split_once("\napiVersion:").unwrap().1;
            assert_eq!(body, original.split_once("\napiVersion:").unwrap().1.replacen(&format!("name: {fault}\n"), &format!("name: {name}\n"), 1));
        }
        assert_eq!(scenario::load_set(&dir).unwrap().good.len(), FaultSpec::NAMES.len());
    }

    #[test]
    fn new_refuses_to_overwrite_or_to_take_a_bad_name_or_fault() {
        let tmp = tempfile::tempdir().unwrap();
        let path = create(tmp.path(), "web", "pause-missing").unwrap();
        let before = std::fs::read_to_string(&path).unwrap();
        let err = create(tmp.path(), "web", "configmap-missing").unwrap_err();
        assert_eq!(err.to_string(), format!("{} already exists; it is left as it is (choose another name, or --dir)", path.display()));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), before);
        // Not even through a dangling link.
        std::os::unix::fs::symlink(tmp.path().join("nowhere"), tmp.path().join("link.yaml")).unwrap();
        assert!(matches!(create(tmp.path(), "link", "pause-missing"), Err(ScaffoldError::Exists { .. })));
        assert!(!tmp.path().join("nowhere").exists());

        for bad in ["Web", "my_web", "-web", "web-", "", "a.b", "../web", &"x".repeat(55)] {
            let err = create(tmp.path(), bad, "pause-missing").unwrap_err();
            assert!(matches!(err, ScaffoldError::Name(_)), "{bad:?}: {err}");
            assert!(err.to_string().starts_with("NAME: "), "{err}");
        }
        assert!(create(tmp.path(), &"x".repeat(scenario::MAX_NAME_LEN), "pause-missing").is_ok());
        let err = create(tmp.path(), "other", "pause-mising").unwrap_err();
        assert!(err.to_string().starts_with("unknown fault \"pause-mising\"; faults: cni-broken, cni-plugin-missing, configmap-missing, configmap-subpath-restart"), "{err}");
        let names: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        assert_eq!(names.len(), 3, "only web.yaml, link.yaml and the longest name: {names:?}");
    }
}
