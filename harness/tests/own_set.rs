//! Scenario sets of one's own, driven as a user drives them: through the `faultlab` command, in a
//! temporary directory outside the repository. `faultlab new` writes a scenario, `validate`, `show`
//! and `plan` accept it; on the test bed its first run passes with the "no reviewed snapshot yet"
//! notice (snapshot `new`) and the file to review beside the set, the same run with
//! `--strict-snapshots` fails naming the scenario and the platform, `snapshots review` lists it,
//! `snapshots accept` accepts it, and the next strict run passes (`matched`). Snapshots a CI run
//! left (`snapshots review --from`, `accept --from`) are taken in without a cluster. The example set (`examples/my-scenarios/`) passes against its
//! reviewed snapshot. Nothing is ever written into the repository's `expectations/`. The trials that
//! need the test bed are reported ignored, with the reason, without it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Output, Stdio};

use faultlab::scenario::workspace_root;
use faultlab::suite;
use libtest_mimic::{Arguments, Failed, Trial};

/// A trial that runs on the test bed, given its description.
type BedTrial = fn(&Path) -> Result<(), Failed>;

/// A platform the example set's snapshots were recorded on: the test bed's (on containerd 1.6; it has
/// containerd 2.1's too).
const TESTBED_PLATFORM: &str = "k8s-1.20-containerd-1.6-amd64";

fn main() -> ExitCode {
    let mut args = Arguments::from_args();
    // One at a time: the trials on the test bed share its node.
    args.test_threads = Some(1);
    let bed = suite::require_testbed("own-set runs").map_err(|e| e.to_string());
    if let Err(reason) = &bed {
        eprintln!("own-set runs ignored: {reason}");
    }
    let mut trials = vec![
        Trial::test("new-validate-show-plan-outside-the-repository", new_validate_show_plan),
        Trial::test("example-set-validates-and-has-reviewed-snapshots", example_validates),
        Trial::test("snapshots-from-a-ci-artefact-are-reviewed-and-accepted", snapshots_from_elsewhere),
    ];
    let on_bed: Vec<(&str, BedTrial)> = vec![
        ("own-set-first-run-passes-as-new-strict-fails-then-matches", first_run_then_accept),
        ("example-set-passes-on-the-test-bed", example_passes),
    ];
    for (name, f) in on_bed {
        let bed = bed.clone();
        let ignored = bed.is_err();
        let t = Trial::test(name, move || f(&bed.map_err(Failed::from)?));
        trials.push(if ignored { t.with_kind("no test bed").with_ignored_flag(true) } else { t });
    }
    libtest_mimic::run(&args, trials).exit_code()
}

/// A user in a temporary directory outside the repository, with faultlab's state there too.
struct User {
    tmp: tempfile::TempDir,
    description: Option<PathBuf>,
}

impl User {
    fn new(description: Option<&Path>) -> Result<User, Failed> {
        let tmp = tempfile::Builder::new().prefix("faultlab-own-set-").tempdir().map_err(|e| e.to_string())?;
        let real = tmp.path().canonicalize().map_err(|e| e.to_string())?;
        let root = workspace_root().canonicalize().map_err(|e| e.to_string())?;
        if real.starts_with(&root) {
            return Err(format!("the temporary directory {} is inside the repository {}", real.display(), root.display()).into());
        }
        Ok(User { tmp, description: description.map(Path::to_path_buf) })
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.tmp.path().join(rel)
    }

    /// `faultlab ARGS` in `cwd` (default: the temporary directory), with no terminal on stdin.
    fn faultlab_in(&self, cwd: &Path, args: &[&str]) -> Result<Output, Failed> {
        let mut c = Command::new(env!("CARGO_BIN_EXE_faultlab"));
        c.args(args)
            .current_dir(cwd)
            .env("FAULTLAB_STATE_DIR", self.path("state"))
            // Outside the repository faultlab's own scenarios are the binary's built-in copy, unpacked here.
            .env("FAULTLAB_DATA_DIR", self.path("data"))
            .env_remove("FAULTLAB_SCENARIOS")
            .env_remove("FAULTLAB_EXPECTATIONS")
            .env_remove("FAULTLAB_PROVIDER")
            .env_remove("FAULTLAB_STRICT_SNAPSHOTS")
            .stdin(Stdio::null());
        if let Some(d) = &self.description {
            c.env("FAULTLAB_TESTBED", d);
        }
        // What it printed is in the trial's failure message when a check fails.
        c.output().map_err(|e| Failed::from(e.to_string()))
    }

    fn faultlab(&self, args: &[&str]) -> Result<Output, Failed> {
        self.faultlab_in(self.tmp.path(), args)
    }

    /// Succeeds, or the trial fails with the output.
    fn ok(&self, args: &[&str]) -> Result<String, Failed> {
        let out = self.faultlab(args)?;
        if !out.status.success() {
            return Err(format!("faultlab {} failed ({}):\n{}", args.join(" "), out.status, text(&out)).into());
        }
        Ok(text(&out))
    }

    /// Fails, or the trial fails with the output.
    fn fails(&self, args: &[&str]) -> Result<String, Failed> {
        let out = self.faultlab(args)?;
        if out.status.success() {
            return Err(format!("faultlab {} succeeded where it must fail:\n{}", args.join(" "), text(&out)).into());
        }
        Ok(text(&out))
    }
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

fn expect(cond: bool, what: impl FnOnce() -> String) -> Result<(), Failed> {
    if cond {
        Ok(())
    } else {
        Err(what().into())
    }
}

/// Every file under `dir` with its contents.
fn tree(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    fn walk(dir: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for e in entries.filter_map(|e| e.ok()) {
            let p = e.path();
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                walk(&p, out);
            } else {
                out.insert(p.clone(), std::fs::read(&p).unwrap_or_default());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, &mut out);
    out
}

/// Asserts that nothing under the repository's `expectations/` changed.
struct Untouched {
    dir: PathBuf,
    before: BTreeMap<PathBuf, Vec<u8>>,
}

impl Untouched {
    fn new() -> Untouched {
        let dir = workspace_root().join("expectations");
        let before = tree(&dir);
        Untouched { dir, before }
    }

    fn check(&self) -> Result<(), Failed> {
        let after = tree(&self.dir);
        let changed: Vec<String> = self
            .before
            .keys()
            .chain(after.keys())
            .filter(|p| self.before.get(*p) != after.get(*p))
            .map(|p| p.display().to_string())
            .collect();
        expect(changed.is_empty(), || format!("the repository's expectations/ changed: {}", changed.join(", ")))
    }
}

fn new_validate_show_plan() -> Result<(), Failed> {
    let u = User::new(None)?;
    let untouched = Untouched::new();
    let set = u.path("my-scenarios");
    let set_arg = set.to_str().ok_or("path")?;
    let wrote = u.ok(&["new", "shop-config-missing", "--fault", "configmap-missing", "--dir", set_arg])?;
    let file = set.join("shop-config-missing.yaml");
    expect(wrote.contains(&format!("wrote {}", file.display())), || format!("new says what it wrote: {wrote}"))?;
    expect(file.is_file(), || format!("{} was not written", file.display()))?;

    // Never over an existing file, never a name that is not a Kubernetes name, never an unknown fault.
    let before = std::fs::read(&file).map_err(|e| e.to_string())?;
    let again = u.fails(&["new", "shop-config-missing", "--fault", "pause-missing", "--dir", set_arg])?;
    expect(again.contains("already exists; it is left as it is"), || again.clone())?;
    expect(std::fs::read(&file).map_err(|e| e.to_string())? == before, || "the existing file was changed".into())?;
    let bad = u.fails(&["new", "Shop_Config", "--fault", "configmap-missing", "--dir", set_arg])?;
    expect(bad.contains("is not a valid Kubernetes name"), || bad.clone())?;
    let unknown = u.fails(&["new", "other", "--fault", "configmap-mising", "--dir", set_arg])?;
    expect(unknown.contains("unknown fault \"configmap-mising\"; faults: ") && unknown.contains(", configmap-missing, "), || unknown.clone())?;

    // Without --dir: the set --scenarios names, else the current directory.
    u.ok(&["new", "node-pause", "--fault", "pause-missing", "--scenarios", set_arg])?;
    expect(set.join("node-pause.yaml").is_file(), || "--scenarios is where new writes without --dir".into())?;
    let cwd = u.path("here");
    std::fs::create_dir_all(&cwd).map_err(|e| e.to_string())?;
    let out = u.faultlab_in(&cwd, &["new", "in-cwd", "--fault", "disk-full"])?;
    expect(out.status.success() && cwd.join("in-cwd.yaml").is_file(), || format!("new writes into the current directory: {}", text(&out)))?;

    // The set checks, shows and plans.
    let validated = u.ok(&["validate", set_arg])?;
    expect(validated.contains("2 file(s): 2 valid, 0 broken"), || validated.clone())?;
    let shown = u.ok(&["show", "shop-config-missing", "--scenarios", set_arg])?;
    expect(shown.contains("fault:    configmap-missing") && shown.contains(&file.display().to_string()), || shown.clone())?;
    let listed = u.ok(&["list", "--scenarios", set_arg])?;
    expect(listed.contains("shop-config-missing") && listed.contains("node-pause"), || listed.clone())?;
    let none = u.path("no-testbed.yaml");
    let planned = u.ok(&["plan", "shop-config-missing", "--scenarios", set_arg, "--provider", "existing", "--description", none.to_str().ok_or("path")?])?;
    expect(planned.contains("## shop-config-missing (existing)") && planned.contains("DELETE /api/v1/namespaces/fl-shop-config-missing-<id>/configmaps/app-config"), || planned.clone())?;

    // Outside the repository, faultlab's own set is the copy built into the binary, unpacked into the
    // data directory (`new` read its scenario for disk-full there).
    let builtin: Vec<PathBuf> = std::fs::read_dir(u.path("data")).map_err(|e| e.to_string())?.filter_map(|e| e.ok().map(|e| e.path())).collect();
    let [builtin] = builtin.as_slice() else { return Err(format!("one built-in copy in the data directory, not {builtin:?}").into()) };
    expect(builtin.join("scenarios/disk-full.yaml").is_file() && builtin.join("kind-configs/amd64.yaml").is_file(), || format!("{}", builtin.display()))?;

    // A set of one's own may not keep its snapshots in faultlab's expectations/ (here the built-in
    // copy's); refused before any cluster is looked at.
    let own = builtin.join("expectations");
    let refused = u.fails(&["run", "shop-config-missing", "--scenarios", set_arg, "--provider", "existing", "--description", none.to_str().ok_or("path")?, "--expectations", own.to_str().ok_or("path")?])?;
    expect(refused.contains(&format!("refusing to keep the snapshots of scenario set {} in faultlab's own {}", set.display(), own.display())), || refused.clone())?;
    expect(refused.contains(&format!("to keep them in {}", set.join("expectations").display())), || refused.clone())?;

    // No snapshot waits yet: review says so and succeeds, accept has nothing to accept.
    let review = u.ok(&["snapshots", "review", "--scenarios", set_arg])?;
    expect(review.contains(&format!("no snapshots waiting for review in {}", set.join("expectations").display())), || review.clone())?;
    let accept = u.fails(&["snapshots", "accept", "shop-config-missing", "--scenarios", set_arg])?;
    expect(accept.contains("no snapshot of shop-config-missing waits for review in"), || accept.clone())?;
    untouched.check()
}

/// The repository's example set.
fn example_set() -> PathBuf {
    workspace_root().join("examples/my-scenarios")
}

fn example_validates() -> Result<(), Failed> {
    let u = User::new(None)?;
    let set = example_set();
    let set_arg = set.to_str().ok_or("path")?;
    let validated = u.ok(&["validate", set_arg])?;
    expect(validated.contains(" valid, 0 broken"), || validated.clone())?;
    let loaded = faultlab::scenario::load_set(&set).map_err(|e| e.to_string())?;
    expect(!loaded.good.is_empty() && loaded.broken.is_empty(), || "the example set has scenarios, none broken".into())?;
    for name in loaded.good.keys() {
        let snap = set.join("expectations").join(TESTBED_PLATFORM).join(format!("{name}.snap"));
        let text = std::fs::read_to_string(&snap).map_err(|e| format!("{}: {e} (every example has a reviewed snapshot for the test bed)", snap.display()))?;
        let events = faultlab::snapshot::stored_events(&text).ok_or_else(|| format!("{} does not read as events", snap.display()))?;
        expect(!events.is_empty(), || format!("{} has no events", snap.display()))?;
    }
    // Nothing waits for review in what is committed.
    let review = u.ok(&["snapshots", "review", "--scenarios", set_arg])?;
    expect(review.contains("no snapshots waiting for review"), || review.clone())
}

fn first_run_then_accept(description: &Path) -> Result<(), Failed> {
    let u = User::new(Some(description))?;
    let untouched = Untouched::new();
    let set = u.path("my-scenarios");
    let set_arg = set.to_str().ok_or("path")?;
    let name = "shop-config-missing";
    u.ok(&["new", name, "--fault", "configmap-missing", "--dir", set_arg])?;
    u.ok(&["validate", set_arg])?;
    let run = ["run", name, "--scenarios", set_arg, "--provider", "existing"];

    // First run: the gates, the fix and the recovery decide, and it passes; its snapshot is new, which
    // it says in one paragraph, and the events wait for review.
    let first = u.ok(&run)?;
    let pending: Vec<PathBuf> = std::fs::read_dir(set.join("expectations"))
        .map_err(|e| format!("no expectations/ beside the set: {e}\n{first}"))?
        .filter_map(|e| e.ok())
        .map(|e| e.path().join(format!("{name}.snap.new")))
        .filter(|p| p.is_file())
        .collect();
    let [new] = pending.as_slice() else {
        return Err(format!("expected one {name}.snap.new under {}, found {pending:?}\n{first}", set.join("expectations").display()).into());
    };
    let platform = new.parent().and_then(|p| p.file_name()).and_then(|p| p.to_str()).ok_or("platform")?.to_string();
    let paragraph = format!(
        "  new snapshot: no reviewed snapshot yet for {name} on {platform}: wrote {}; read it and accept it with `faultlab snapshots accept {name} --scenarios {}` (or review with `faultlab snapshots review --scenarios {}`)\n",
        new.display(),
        set.display(),
        set.display()
    );
    expect(first.contains(&format!("PASS {name} [{platform}]")) && first.contains(" snapshot=new\n"), || format!("the first run passes, its snapshot new:\n{first}"))?;
    expect(first.contains(&paragraph), || format!("the first run says, in one paragraph,\n{paragraph}\nbut printed:\n{first}"))?;
    expect(first.contains(&format!("notice: 1 scenario(s) with no reviewed snapshot yet (passed; --strict-snapshots would fail them): {name} on {platform}.")), || first.clone())?;
    for noise in ["panicked", "snapshot assertion", "insta", "error in recovery"] {
        expect(!first.contains(noise), || format!("the first run's output has {noise:?}:\n{first}"))?;
    }
    expect(!new.with_extension("").exists(), || "a run never writes the reviewed .snap".into())?;

    // Strict: the same run fails, naming the scenario and the platform.
    let strict = u.fails(&[&run[..], &["--strict-snapshots"]].concat())?;
    expect(strict.contains(&format!("FAIL {name} [{platform}]")), || format!("a strict run fails:\n{strict}"))?;
    expect(strict.contains(&format!("  error in recovery: no reviewed snapshot of {name} on {platform}, and --strict-snapshots fails a run without one\n")), || strict.clone())?;

    // Read as a reviewer would: the documented symptom is there.
    let events = faultlab::snapshot::stored_events(&std::fs::read_to_string(new).map_err(|e| e.to_string())?).ok_or("the .snap.new does not read as events")?;
    expect(events.iter().any(|e| e.reason == "FailedMount" && e.message.contains("configmap \"app-config\" not found")), || format!("the new snapshot lacks the documented FailedMount: {events:?}"))?;
    let listed = u.fails(&["snapshots", "review", "--scenarios", set_arg])?;
    expect(listed.contains(&format!("{name} on {platform}: new, no reviewed snapshot yet")) && listed.contains("FailedMount"), || listed.clone())?;

    let accepted = u.ok(&["snapshots", "accept", name, "--scenarios", set_arg])?;
    let snap = set.join("expectations").join(&platform).join(format!("{name}.snap"));
    expect(accepted.contains(&format!("accepted {name} on {platform}: {}", snap.display())), || accepted.clone())?;
    expect(snap.is_file() && !new.exists(), || "accept puts the .snap.new in the .snap's place".into())?;

    // Next run, strict: passes against the reviewed snapshot.
    let second = u.ok(&[&run[..], &["--strict-snapshots"]].concat())?;
    expect(second.contains(&format!("PASS {name} [{platform}]")) && second.contains(" snapshot=matched\n"), || format!("the next run passes, its snapshot matched:\n{second}"))?;
    expect(!new.exists(), || "a passing run leaves no .snap.new".into())?;
    untouched.check()
}

/// A CI run's artefact of pending snapshots (`<platform>/<scenario>.snap.new`), downloaded: `snapshots
/// review --from` lists it, `snapshots accept --platform P --from` takes it into the set, and bad input
/// is refused with the file named, before anything is written.
fn snapshots_from_elsewhere() -> Result<(), Failed> {
    let u = User::new(None)?;
    let untouched = Untouched::new();
    let set = u.path("my-scenarios");
    let set_arg = set.to_str().ok_or("path")?;
    u.ok(&["new", "shop-config-missing", "--fault", "configmap-missing", "--dir", set_arg])?;
    let platform = "kind-1.32-containerd-2.0-cgroup2-amd64";
    let from = u.path("snapshots-new-amd64-1");
    let from_arg = from.to_str().ok_or("path")?;
    let event = faultlab::events::Normalised { object: "Pod/web-<id>".into(), type_: "Warning".into(), reason: "FailedMount".into(), source: "kubelet".into(), message: "configmap \"app-config\" not found".into() };
    let text = faultlab::snapshot::file_text("shop-config-missing", platform, &[event]);
    std::fs::create_dir_all(from.join(platform)).map_err(|e| e.to_string())?;
    std::fs::write(from.join(platform).join("shop-config-missing.snap.new"), &text).map_err(|e| e.to_string())?;

    // Listed (no terminal: exit status 1, as anything waits), with how to accept it.
    let listed = u.fails(&["snapshots", "review", "--from", from_arg, "--scenarios", set_arg])?;
    expect(listed.contains(&format!("shop-config-missing on {platform}: new, no reviewed snapshot yet")) && listed.contains("FailedMount"), || listed.clone())?;
    expect(listed.contains("--platform PLATFORM --from"), || listed.clone())?;
    // --from without --platform is a usage error; a directory that is not there is named.
    let usage = u.fails(&["snapshots", "accept", "--from", from_arg, "--scenarios", set_arg])?;
    expect(usage.contains("--platform"), || usage.clone())?;
    let missing = u.fails(&["snapshots", "accept", "--platform", platform, "--from", u.path("nowhere").to_str().ok_or("path")?, "--scenarios", set_arg])?;
    expect(missing.contains(&format!("--from {}: no such directory", u.path("nowhere").display())), || missing.clone())?;
    // Another platform than the one it holds is refused, and nothing is written.
    let other = u.fails(&["snapshots", "accept", "--platform", "kind-1.32-containerd-2.0-cgroup2-arm64", "--from", from_arg, "--scenarios", set_arg])?;
    expect(other.contains(&format!("holds no snapshot waiting for platform kind-1.32-containerd-2.0-cgroup2-arm64, only for {platform}")), || other.clone())?;
    expect(!set.join("expectations").exists(), || "a refused accept wrote into the set".into())?;

    let accepted = u.ok(&["snapshots", "accept", "--platform", platform, "--from", from_arg, "--scenarios", set_arg])?;
    let snap = set.join("expectations").join(platform).join("shop-config-missing.snap");
    expect(accepted.contains(&format!("accepted shop-config-missing on {platform} from ")) && accepted.contains(&snap.display().to_string()), || accepted.clone())?;
    expect(std::fs::read_to_string(&snap).ok().as_deref() == Some(text.as_str()), || format!("{} is the artefact's file", snap.display()))?;
    expect(from.join(platform).join("shop-config-missing.snap.new").is_file(), || "the artefact is left as it is".into())?;
    untouched.check()
}

fn example_passes(description: &Path) -> Result<(), Failed> {
    let u = User::new(Some(description))?;
    let untouched = Untouched::new();
    let set = example_set();
    let before = tree(&set);
    let out = u.ok(&["run", "--all", "--scenarios", set.to_str().ok_or("path")?, "--provider", "existing"])?;
    let names: Vec<String> = faultlab::scenario::load_set(&set).map_err(|e| e.to_string())?.good.into_keys().collect();
    // The test bed's platform of the day (its runtime: containerd 1.6 or 2.1), each with its reviewed snapshot.
    let platform = faultlab::testbed::TestBed::read(description).map_err(|e| e.to_string())?.platform;
    for name in &names {
        expect(out.contains(&format!("PASS {name} [{platform}]")), || format!("{name} passes on the test bed:\n{out}"))?;
    }
    expect(tree(&set) == before, || "running the example set changed files in it (a .snap.new?)".into())?;
    untouched.check()
}
