//! The files `faultlab run` and `faultlab report` write where they are told (`--junit PATH`,
//! `--html DIR`) are written whole through a temporary file beside them, and never through a symbolic
//! link found there: the link is refused, naming it, and what it points to is left as it was. No
//! cluster: a description that does not exist fails the run in setup, which still writes its reports.

use std::path::Path;
use std::process::{Command, Output};

fn faultlab(args: &[&str], state: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_faultlab"))
        .args(args)
        .env("FAULTLAB_STATE_DIR", state)
        // Machine locks of their own: a real run elsewhere on this machine (CI's kind suite) holds the host.
        .env("FAULTLAB_LOCK_DIR", state.join("locks"))
        .env("FAULTLAB_SCENARIOS", faultlab::scenario::default_dir())
        .env_remove("FAULTLAB_EXPECTATIONS")
        .env_remove("FAULTLAB_STRICT_SNAPSHOTS")
        .output()
        .unwrap()
}

fn files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    names
}

/// `run --junit LINK --html DIR` (DIR/index.html a link): both refused, the JSON report on standard
/// output still complete; then `report --html DIR` from that JSON report refused too. Without links,
/// both are written, and nothing else is left beside them.
#[test]
fn reports_are_not_written_through_links() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, state) = (tmp.path().join("out"), tmp.path().join("state"));
    std::fs::create_dir_all(dir.join("html")).unwrap();
    let outside = tmp.path().join("outside");
    std::fs::write(&outside, "keep me").unwrap();
    let junit = dir.join("junit.xml");
    let page = dir.join("html/index.html");
    std::os::unix::fs::symlink(&outside, &junit).unwrap();
    std::os::unix::fs::symlink(&outside, &page).unwrap();
    let description = tmp.path().join("absent.yaml");
    let run = |junit: &Path| {
        faultlab(
            &["run", "pause-missing", "--provider", "existing", "--description", description.to_str().unwrap(), "--output", "json", "--junit", junit.to_str().unwrap(), "--html", dir.join("html").to_str().unwrap()],
            &state,
        )
    };
    let out = run(&junit);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&format!("error: --junit: refusing to write {}: it is a symbolic link", junit.display())), "{stderr}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["scenarios"][0]["status"], "failed");
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "keep me");

    let json = tmp.path().join("report.json");
    std::fs::write(&json, &out.stdout).unwrap();
    let out = faultlab(&["report", "--html", dir.join("html").to_str().unwrap(), json.to_str().unwrap()], &state);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains(&format!("error: --html: refusing to write {}: it is a symbolic link", page.display())), "{stderr}");
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "keep me");
    assert!(std::fs::symlink_metadata(&page).unwrap().file_type().is_symlink());

    std::fs::remove_file(&junit).unwrap();
    std::fs::remove_file(&page).unwrap();
    let out = run(&junit);
    assert!(std::fs::read_to_string(&junit).unwrap().contains("<testcase name=\"pause-missing\""), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(std::fs::read_to_string(&page).unwrap().starts_with("<!DOCTYPE html>"));
    assert_eq!(files(&dir), ["html", "junit.xml"]);
    assert_eq!(files(&dir.join("html")), ["index.html"]);
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "keep me");
}
