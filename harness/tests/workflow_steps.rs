//! The GitHub workflow (`ci/workflows/scenarios.yml`) on this machine: its jobs' steps in order, as a
//! runner would take them, so that its first run is known to pass before GitHub runs it.
//!
//! Two trials:
//! - `workflow-steps-are-all-known` (always): the workflow parses, every action it uses is one this
//!   file knows how to stand in for, every expression in it is one it can fill in, and no `run:` script
//!   holds an expression (zizmor's template-injection rule, checked again).
//! - `workflow-steps-pass-here` (run by `ci/workflow-steps`, which sets `FAULTLAB_WORKFLOW_OUT`;
//!   ignored otherwise, with the reason): the `kind` job for this machine's architecture, each of its
//!   shards in a fresh clone of HEAD, then the `merge` job, each `run:` step through
//!   `bash --noprofile --norc -eo pipefail` (GitHub's shell for `run:`) in the job's environment, its
//!   `if:` honoured (`always()`, `failure()`, none). What stands in for GitHub, and why:
//!   - `actions/checkout`: `git clone` of this work tree's HEAD (what is committed, nothing else);
//!   - `actions/cache`: `target/` kept in `FAULTLAB_WORKFLOW_CACHE/<key>` (ci/workflow-steps: under
//!     /var/cache/faultlab), moved into the workspace on a hit and back at the job's end (the jobs run
//!     one after another here, and a build tree is gigabytes: a move costs no disk where GitHub copies);
//!     `~/.cargo` is this machine's own;
//!   - `actions/upload-artifact`: the files copied to `<out>/artifacts/<name>/`, the path after the
//!     part before the first wildcard kept, as upload-artifact keeps it; `actions/download-artifact`:
//!     each artefact matching the pattern copied to `<path>/<name>/`, as it downloads them;
//!   - the `Rust toolchain` step: the machine's toolchain (rustup has no network here);
//!   - the `Install kind` step: Debian's kind 0.27.0 (`ci/kind/up` installs it), not the release
//!     binary its checksum pins (no network); the rest of the step (versions) runs as written.
//!
//!   The environment given (`ci/workflow-steps`) carries `DOCKER_HOST` (our Docker) and
//!   `FAULTLAB_KIND_NODE_IMAGE` (our node image: kindest/node cannot be pulled here), which the
//!   workflow's `sudo --preserve-env` passes on. `FAULTLAB_WORKFLOW_FIRST_RUN=PLATFORM` removes that
//!   platform's reviewed snapshots from each clone: the run is then a first run on a platform with
//!   none, and its pending snapshots, uploaded, are compared with the reviewed ones here.
//!   Steps run as root here (a runner runs them as `runner`, with `sudo` for the steps that ask), in
//!   workspaces under a directory of mode 0750, as a runner's home is.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::Instant;

use libtest_mimic::{Arguments, Failed, Trial};
use serde::Deserialize;

const WORKFLOW: &str = "ci/workflows/scenarios.yml";

#[derive(Deserialize)]
struct Workflow {
    jobs: BTreeMap<String, Job>,
}

#[derive(Deserialize)]
struct Job {
    #[serde(default)]
    env: BTreeMap<String, String>,
    #[serde(default)]
    strategy: Option<Strategy>,
    steps: Vec<Step>,
}

#[derive(Deserialize)]
struct Strategy {
    matrix: Matrix,
}

#[derive(Deserialize)]
struct Matrix {
    arch: Vec<String>,
    shard: Vec<u32>,
    #[serde(default)]
    include: Vec<BTreeMap<String, String>>,
}

#[derive(Deserialize)]
struct Step {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    uses: Option<String>,
    #[serde(default)]
    run: Option<String>,
    #[serde(default, rename = "if")]
    condition: Option<String>,
    #[serde(default)]
    with: BTreeMap<String, serde_json::Value>,
}

/// What a step does here.
#[derive(Debug, PartialEq)]
enum Local {
    /// A `run:` script, as written or in place of one (and why).
    Script { script: String, instead: Option<&'static str> },
    Checkout,
    /// `actions/cache` or `actions/cache/restore` (`save` false: GitHub would not save it; here the
    /// build tree is moved back either way).
    Cache { key: String, save: bool },
    Upload { name: String, paths: Vec<String> },
    Download { pattern: String, path: String },
}

/// When a step runs, from its `if:`.
#[derive(Clone, Copy, Debug, PartialEq)]
enum When {
    Success,
    Always,
    Failure,
}

struct Planned {
    title: String,
    when: When,
    local: Local,
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn workflow() -> Result<Workflow, String> {
    let path = root().join(WORKFLOW);
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_saphyr::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// `text` with each `${{ expr }}` replaced from `vars`; an expression not there is an error naming it.
fn expand(text: &str, vars: &BTreeMap<String, String>) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("${{") {
        out.push_str(&rest[..start]);
        let end = rest[start..].find("}}").ok_or_else(|| format!("an unclosed expression in {text:?}"))? + start;
        let expr = rest[start + 3..end].trim();
        out.push_str(vars.get(expr).ok_or_else(|| format!("the expression `{expr}` (in {text:?}) is not one this trial fills in"))?);
        rest = &rest[end + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The expressions of one matrix entry of a job: `matrix.*`, `github.workspace` and the cache key's
/// `hashFiles('Cargo.lock')` (here a SHA-256 of the file: only equality matters for a key).
fn vars(matrix: &BTreeMap<String, String>, workspace: &Path) -> Result<BTreeMap<String, String>, String> {
    use sha2::Digest;
    let mut v: BTreeMap<String, String> = matrix.iter().map(|(k, x)| (format!("matrix.{k}"), x.clone())).collect();
    v.insert("github.workspace".into(), workspace.display().to_string());
    let lock = root().join("Cargo.lock");
    let bytes = std::fs::read(&lock).map_err(|e| format!("{}: {e}", lock.display()))?;
    v.insert("hashFiles('Cargo.lock')".into(), format!("{:x}", sha2::Sha256::digest(&bytes)));
    Ok(v)
}

/// The `kind` job's matrix entries for one architecture: one per shard, with the include's keys.
fn kind_matrix(job: &Job, arch: &str) -> Result<Vec<BTreeMap<String, String>>, String> {
    let m = &job.strategy.as_ref().ok_or("the kind job has no matrix")?.matrix;
    if !m.arch.iter().any(|a| a == arch) {
        return Err(format!("the kind job's matrix has no arch {arch} (it has {:?})", m.arch));
    }
    let include = m.include.iter().find(|i| i.get("arch").is_some_and(|a| a == arch)).ok_or_else(|| format!("no include entry for arch {arch}"))?;
    Ok(m.shard
        .iter()
        .map(|s| {
            let mut e = include.clone();
            e.insert("shard".into(), s.to_string());
            e
        })
        .collect())
}

fn with_str(step: &Step, key: &str) -> Result<String, String> {
    match step.with.get(key) {
        Some(serde_json::Value::String(s)) => Ok(s.clone()),
        other => Err(format!("step {:?}: `with.{key}` is {other:?}, not a string", step.name)),
    }
}

/// Each step of `job` as it runs here.
fn plan(job: &Job) -> Result<Vec<Planned>, String> {
    job.steps
        .iter()
        .map(|step| {
            let title = step.name.clone().or_else(|| step.uses.clone()).unwrap_or_else(|| "(unnamed)".into());
            let when = match step.condition.as_deref().map(str::trim) {
                None => When::Success,
                Some("always()") => When::Always,
                Some("failure()") => When::Failure,
                Some(other) => return Err(format!("step {title:?}: `if: {other}` is not one this trial knows")),
            };
            let local = match (step.uses.as_deref(), step.run.as_deref()) {
                (Some(uses), None) => match uses.split('@').next().unwrap_or_default() {
                    "actions/checkout" => Local::Checkout,
                    "actions/cache" => Local::Cache { key: with_str(step, "key")?, save: true },
                    "actions/cache/restore" => Local::Cache { key: with_str(step, "key")?, save: false },
                    "actions/upload-artifact" => Local::Upload { name: with_str(step, "name")?, paths: with_str(step, "path")?.lines().map(str::trim).filter(|l| !l.is_empty()).map(String::from).collect() },
                    "actions/download-artifact" => Local::Download { pattern: with_str(step, "pattern")?, path: with_str(step, "path")? },
                    other => return Err(format!("step {title:?} uses {other}, which this trial cannot stand in for")),
                },
                (None, Some(run)) => {
                    if run.contains("${{") {
                        return Err(format!("step {title:?}: its script holds an expression (pass it through `env:`)"));
                    }
                    match title.as_str() {
                        "Rust toolchain" => Local::Script { script: "cargo --version\n".into(), instead: Some("the machine's toolchain: rustup has no network here") },
                        t if t.starts_with("Install kind") => Local::Script {
                            script: "kind version\ndocker version --format 'docker {{.Server.Version}} {{.Server.Arch}}'\n".into(),
                            instead: Some("Debian's kind 0.27.0 (ci/kind/up): the release binary cannot be downloaded here"),
                        },
                        _ => Local::Script { script: run.to_string(), instead: None },
                    }
                }
                _ => return Err(format!("step {title:?} has both or neither of `uses` and `run`")),
            };
            Ok(Planned { title, when, local })
        })
        .collect()
}

/// Does `name` match `pattern`, whose only wildcard is `*`?
fn matches(pattern: &str, name: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == name;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !name.starts_with(first) || !name[first.len()..].ends_with(last) || name.len() < first.len() + last.len() {
        return false;
    }
    let mut rest = &name[first.len()..name.len() - last.len()];
    for middle in &parts[1..parts.len() - 1] {
        match rest.find(middle) {
            Some(i) => rest = &rest[i + middle.len()..],
            None => return false,
        }
    }
    true
}

/// The part of an upload path before its first wildcard (the whole path when it has none): what
/// upload-artifact leaves out of the artefact's paths.
fn upload_root(path: &str) -> PathBuf {
    let mut root = PathBuf::new();
    for c in Path::new(path).components() {
        if c.as_os_str().to_string_lossy().contains(['*', '?', '[']) {
            break;
        }
        root.push(c);
    }
    root
}

/// The always-run trial: everything in the workflow is something [`run_here`] can take.
fn known() -> Result<(), Failed> {
    let wf = workflow()?;
    let ws = Path::new("/workspace");
    let mut uploads = Vec::new();
    for (name, job) in &wf.jobs {
        let steps = plan(job).map_err(|e| format!("job {name}: {e}"))?;
        let entries = match name.as_str() {
            "kind" => ["amd64", "arm64"].into_iter().map(|a| kind_matrix(job, a)).collect::<Result<Vec<_>, _>>()?.concat(),
            "merge" => vec![BTreeMap::new()],
            other => return Err(format!("job {other}: this trial runs the kind and merge jobs only").into()),
        };
        for entry in &entries {
            let v = vars(entry, ws)?;
            for value in job.env.values() {
                expand(value, &v).map_err(|e| format!("job {name}: {e}"))?;
            }
            for step in &steps {
                if let Local::Cache { key, .. } = &step.local {
                    expand(key, &v).map_err(|e| format!("job {name}: {e}"))?;
                }
            }
        }
        for step in steps {
            if let Local::Upload { name, paths } = step.local {
                uploads.push((name, paths));
            }
        }
    }
    // The pending snapshots' artefact keeps `<platform>/<scenario>.snap.new`, the layout `faultlab
    // snapshots review/accept --from DIR` reads.
    let snaps = uploads.iter().find(|(n, _)| n.starts_with("snapshots-new-")).ok_or("no upload of pending snapshots")?;
    assert_eq!(snaps.1.iter().map(|p| upload_root(p)).collect::<Vec<_>>(), [PathBuf::from("expectations")], "{snaps:?}");
    // The helpers themselves.
    let v: BTreeMap<String, String> = [("matrix.arch".to_string(), "arm64".to_string())].into();
    assert_eq!(expand("kind-${{ matrix.arch }}-x", &v)?, "kind-arm64-x");
    assert!(expand("${{ secrets.TOKEN }}", &v).unwrap_err().contains("secrets.TOKEN"));
    assert!(matches("reports-*", "reports-amd64-1") && !matches("reports-*", "snapshots-new-amd64-1") && matches("a*b*c", "aXbYc") && !matches("a*b", "ab-x"));
    assert_eq!(upload_root("reports/"), PathBuf::from("reports"));
    Ok(())
}

/// A job's run: its workspace, the environment its steps see, whether a step failed.
struct JobRun<'a> {
    name: String,
    dir: PathBuf,
    ws: PathBuf,
    env: Vec<(String, String)>,
    vars: BTreeMap<String, String>,
    artifacts: &'a Path,
    cache_root: &'a Path,
    /// The cache's directory, where `target/` goes back at the job's end.
    to_save: Option<PathBuf>,
}

fn sh(argv: &[&str]) -> Result<(), String> {
    let out = Command::new(argv[0]).args(&argv[1..]).stdin(Stdio::null()).output().map_err(|e| format!("{}: {e}", argv.join(" ")))?;
    match out.status.success() {
        true => Ok(()),
        false => Err(format!("{}: {}\n{}", argv.join(" "), out.status, String::from_utf8_lossy(&out.stderr))),
    }
}

/// Copy `from` (a file or a directory, whole) to `to`, links as links.
fn copy(from: &Path, to: &Path) -> Result<(), String> {
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
    }
    sh(&["cp", "-a", "--no-target-directory", &from.to_string_lossy(), &to.to_string_lossy()])
}

impl JobRun<'_> {
    fn checkout(&self) -> Result<(), String> {
        sh(&["git", "clone", "--quiet", &root().to_string_lossy(), &self.ws.to_string_lossy()])?;
        if let Some(platform) = std::env::var("FAULTLAB_WORKFLOW_FIRST_RUN").ok().filter(|p| !p.is_empty()) {
            let dir = self.ws.join("expectations").join(&platform);
            std::fs::remove_dir_all(&dir).map_err(|e| format!("first run on {platform}: removing {}: {e}", dir.display()))?;
            println!("      first run: {platform}'s reviewed snapshots removed from the clone");
        }
        Ok(())
    }

    fn cache(&mut self, key: &str, _save: bool) -> Result<(), String> {
        let key = expand(key, &self.vars)?;
        let dir = self.cache_root.join(&key);
        self.to_save = Some(dir.clone());
        if dir.join("target").is_dir() {
            println!("      cache hit: {key}");
            return std::fs::rename(dir.join("target"), self.ws.join("target")).map_err(|e| format!("{}: {e}", dir.display()));
        }
        println!("      cache miss: {key}");
        Ok(())
    }

    fn upload(&self, name: &str, paths: &[String]) -> Result<(), String> {
        let name = expand(name, &self.vars)?;
        let paths: Vec<String> = paths.iter().map(|p| expand(p, &self.vars)).collect::<Result<_, _>>()?;
        let dest = self.artifacts.join(&name);
        if dest.exists() {
            return Err(format!("an artefact named {name} was already uploaded (upload-artifact v4 refuses a second)"));
        }
        let roots: Vec<PathBuf> = paths.iter().map(|p| upload_root(p)).collect();
        let mut root = roots[0].clone();
        while !roots.iter().all(|r| r.starts_with(&root)) {
            root.pop();
        }
        let mut count = 0;
        for pattern in &paths {
            let listed = Command::new("bash")
                .args(["-c", "shopt -s globstar nullglob dotglob; for f in $1; do printf '%s\\0' \"$f\"; done", "bash", pattern.trim_end_matches('/')])
                .current_dir(&self.ws)
                .output()
                .map_err(|e| e.to_string())?;
            for file in listed.stdout.split(|b| *b == 0).filter(|f| !f.is_empty()) {
                let file = PathBuf::from(String::from_utf8_lossy(file).into_owned());
                // A path without a wildcard that is not there: nothing to upload (the workflow's
                // uploads all say `if-no-files-found: ignore`).
                if std::fs::symlink_metadata(self.ws.join(&file)).is_err() {
                    continue;
                }
                let rel = file.strip_prefix(&root).map_err(|_| format!("{} lies outside {}", file.display(), root.display()))?;
                copy(&self.ws.join(&file), &dest.join(rel))?;
                count += 1;
            }
        }
        println!("      artefact {name}: {count} path(s) uploaded");
        Ok(())
    }

    fn download(&self, pattern: &str, path: &str) -> Result<(), String> {
        let (pattern, path) = (expand(pattern, &self.vars)?, expand(path, &self.vars)?);
        let (pattern, path) = (pattern.as_str(), path.as_str());
        let mut names: Vec<String> = std::fs::read_dir(self.artifacts)
            .map_err(|e| format!("{}: {e}", self.artifacts.display()))?
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|n| matches(pattern, n))
            .collect();
        names.sort();
        for n in &names {
            copy(&self.artifacts.join(n), &self.ws.join(path).join(n))?;
        }
        println!("      downloaded {}", names.join(", "));
        Ok(())
    }

    fn script(&self, index: usize, script: &str) -> Result<(), String> {
        let log = self.dir.join(format!("step-{index:02}.log"));
        let file = std::fs::File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?;
        let status = Command::new("bash")
            .args(["--noprofile", "--norc", "-eo", "pipefail", "-c", script])
            .current_dir(&self.ws)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(file.try_clone().map_err(|e| e.to_string())?)
            .stderr(file)
            .status()
            .map_err(|e| e.to_string())?;
        if status.success() {
            return Ok(());
        }
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(40).collect::<Vec<_>>().into_iter().rev().collect();
        Err(format!("{status}; the last lines of {}:\n{}", log.display(), tail.join("\n")))
    }
}

/// Run `job` for one matrix entry; whether every step that ran passed.
fn run_job(name: &str, job: &Job, entry: &BTreeMap<String, String>, out: &Path, cache_root: &Path) -> Result<bool, Failed> {
    let dir = out.join(name);
    let ws = dir.join("workspace");
    std::fs::create_dir_all(&dir)?;
    let vars = vars(entry, &ws)?;
    let mut env = Vec::new();
    for (k, v) in &job.env {
        env.push((k.clone(), expand(v, &vars)?));
    }
    env.push(("CI".into(), "true".into()));
    env.push(("GITHUB_WORKSPACE".into(), ws.display().to_string()));
    env.push(("GITHUB_STEP_SUMMARY".into(), dir.join("step-summary.md").display().to_string()));
    let artifacts = out.join("artifacts");
    std::fs::create_dir_all(&artifacts)?;
    let mut run = JobRun { name: name.into(), dir: dir.clone(), ws, env, vars, artifacts: &artifacts, cache_root, to_save: None };
    println!("== job {name}");
    let mut failed = false;
    for (i, step) in plan(job)?.into_iter().enumerate() {
        let go = match step.when {
            When::Success => !failed,
            When::Always => true,
            When::Failure => failed,
        };
        if !go {
            println!("  {:>2}. {}: not run (if: {:?})", i + 1, step.title, step.when);
            continue;
        }
        let started = Instant::now();
        let result = match &step.local {
            Local::Checkout => run.checkout(),
            Local::Cache { key, save } => run.cache(key, *save),
            Local::Upload { name, paths } => run.upload(name, paths),
            Local::Download { pattern, path } => run.download(pattern, path),
            Local::Script { script, instead } => {
                if let Some(why) = instead {
                    println!("      in its place: {}({why})", script.replace('\n', "; "));
                }
                run.script(i + 1, script)
            }
        };
        let secs = started.elapsed().as_secs();
        match result {
            Ok(()) => println!("  {:>2}. {}: ok ({secs} s)", i + 1, step.title),
            Err(e) => {
                failed = true;
                println!("  {:>2}. {}: FAILED ({secs} s): {e}", i + 1, step.title);
            }
        }
    }
    if let Some(dir) = run.to_save.as_ref().filter(|_| run.ws.join("target").is_dir()) {
        std::fs::create_dir_all(dir)?;
        let _ = std::fs::remove_dir_all(dir.join("target"));
        std::fs::rename(run.ws.join("target"), dir.join("target"))?;
        println!("      cache kept: {}", dir.display());
    }
    // A runner's workspace goes with its VM; here it would hold a clone per job. The step logs stay.
    if std::env::var_os("FAULTLAB_WORKFLOW_KEEP").is_none() {
        let _ = std::fs::remove_dir_all(&run.ws);
    }
    println!("== job {}: {}", run.name, if failed { "FAILED" } else { "passed" });
    Ok(!failed)
}

/// What the jobs left: each report's scenarios by verdict and snapshot status, and each pending
/// snapshot beside the reviewed one of this work tree.
fn summarise(out: &Path) -> Result<(), Failed> {
    let artifacts = out.join("artifacts");
    let merged = artifacts.join("reports");
    for entry in std::fs::read_dir(&merged).map_err(|e| format!("{}: {e}", merged.display()))? {
        let path = entry?.path();
        let Some(file) = path.file_name().and_then(|f| f.to_str()).filter(|f| f.starts_with("suite-") && f.ends_with(".json")) else { continue };
        let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path)?)?;
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        for s in report["scenarios"].as_array().ok_or("no scenarios")? {
            *counts.entry(format!("{} snapshot={}", s["status"].as_str().unwrap_or("?"), s["snapshot"].as_str().unwrap_or("none"))).or_default() += 1;
        }
        println!("merged report {file}: {counts:?}");
    }
    for entry in std::fs::read_dir(&artifacts)? {
        let dir = entry?.path();
        if !dir.file_name().is_some_and(|n| n.to_string_lossy().starts_with("snapshots-new-")) {
            continue;
        }
        for platform in std::fs::read_dir(&dir)? {
            let platform = platform?.path();
            let mut same = 0;
            let mut differ = Vec::new();
            for snap in std::fs::read_dir(&platform)? {
                let snap = snap?.path();
                let name = snap.file_name().unwrap().to_string_lossy().trim_end_matches(".new").to_string();
                let reviewed = root().join("expectations").join(platform.file_name().unwrap()).join(&name);
                match std::fs::read_to_string(&reviewed) {
                    Ok(r) if r == std::fs::read_to_string(&snap)? => same += 1,
                    _ => differ.push(name),
                }
            }
            println!("{}: {same} pending snapshot(s) equal to this work tree's reviewed ones; differing or unreviewed: {differ:?}", platform.strip_prefix(out).unwrap_or(&platform).display());
        }
    }
    Ok(())
}

/// The run trial: the kind job's shards for this machine's architecture, then the merge job.
fn run_here(out: PathBuf) -> Result<(), Failed> {
    let wf = workflow()?;
    let arch = faultlab::image::host_arch();
    let cache_root = std::env::var_os("FAULTLAB_WORKFLOW_CACHE").map(PathBuf::from).ok_or("FAULTLAB_WORKFLOW_CACHE is not set")?;
    if out.exists() {
        std::fs::remove_dir_all(&out)?;
    }
    // The jobs' workspaces lie under a directory others cannot enter, as a runner's do under its home
    // (mode 0750 on Ubuntu since 21.04): what faultlab starts as another user (nginx's workers) must
    // not need to reach into them.
    std::fs::create_dir_all(&out)?;
    std::fs::set_permissions(&out, std::os::unix::fs::PermissionsExt::from_mode(0o750))?;
    let mut failed = Vec::new();
    let kind = wf.jobs.get("kind").ok_or("no kind job")?;
    for entry in kind_matrix(kind, arch)? {
        let name = format!("kind-{arch}-{}", entry["shard"]);
        if !run_job(&name, kind, &entry, &out, &cache_root)? {
            failed.push(name);
        }
    }
    let merge = wf.jobs.get("merge").ok_or("no merge job")?;
    if !run_job("merge", merge, &BTreeMap::new(), &out, &cache_root)? {
        failed.push("merge".into());
    }
    summarise(&out)?;
    match failed.is_empty() {
        true => Ok(()),
        false => Err(format!("job(s) failed: {}", failed.join(", ")).into()),
    }
}

fn main() -> ExitCode {
    let mut args = Arguments::from_args();
    args.test_threads = Some(1);
    let out = std::env::var_os("FAULTLAB_WORKFLOW_OUT").filter(|v| !v.is_empty()).map(PathBuf::from);
    let known = Trial::test("workflow-steps-are-all-known", known);
    let run = Trial::test("workflow-steps-pass-here", {
        let out = out.clone();
        move || run_here(out.expect("checked below"))
    });
    let run = match out {
        Some(_) => run,
        None => {
            eprintln!("workflow-steps-pass-here ignored: it runs the workflow's scenarios on kind; ci/workflow-steps runs it (FAULTLAB_WORKFLOW_OUT)");
            run.with_kind("needs ci/workflow-steps").with_ignored_flag(true)
        }
    };
    libtest_mimic::run(&args, vec![known, run]).exit_code()
}
