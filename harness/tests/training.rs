//! The training sandbox on the test bed, driven as a person would drive it: through the `faultlab`
//! command. A scripted trainee who applies the documented fix by hand gets `check` passing with a time;
//! one who deletes the pod instead gets `check` failing with what is still wrong; `reset` after an
//! abandoned session restores the node. Without the test bed the trials are reported ignored.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Output};

use faultlab::suite;
use faultlab::testbed::TestBed;
use libtest_mimic::{Arguments, Failed, Trial};

#[path = "support/cdp.rs"]
mod cdp;

fn main() -> ExitCode {
    let mut args = Arguments::from_args();
    args.test_threads = Some(1);
    let bed = suite::require_testbed("training trials").map_err(|e| e.to_string());
    if let Err(reason) = &bed {
        eprintln!("training trials ignored: {reason}");
    }
    type TrialFn = fn(&Path) -> Result<(), Failed>;
    let trials: Vec<(&str, TrialFn)> = vec![
        ("trainee-applies-the-documented-fix", documented_fix),
        ("trainee-deletes-the-pod-instead", wrong_fix),
        ("trainee-hides-the-symptom", hidden_symptom),
        ("blind-challenge", blind_challenge),
        ("two-trainees-each-in-their-own-namespace", two_trainees),
        ("the-instructor-s-scoreboard-of-a-class", scoreboard),
        ("reset-after-an-abandoned-session", abandoned),
        ("three-blind-challenges-in-the-web-terminal", web_terminal),
    ];
    let mut trials: Vec<Trial> = trials
        .into_iter()
        .map(|(name, f)| {
            let bed = bed.clone();
            let ignored = bed.is_err();
            let t = Trial::test(name, move || f(&bed.map_err(Failed::from)?));
            if ignored {
                t.with_kind("no test bed").with_ignored_flag(true)
            } else if name.contains("web-terminal") && browser().is_none() {
                eprintln!("{name} ignored: no chromium on PATH (Debian: apt-get install chromium)");
                t.with_kind("no Chromium").with_ignored_flag(true)
            } else {
                t
            }
        })
        .collect();
    // A class on kind: the kind environment's Docker and node image (ci/kind-suite sets both).
    let image = std::env::var("FAULTLAB_KIND_NODE_IMAGE").ok().filter(|i| !i.is_empty());
    let kind_class = Trial::test("a-class-on-kind-each-trainee-a-cluster", {
        let image = image.clone();
        move || kind_class(image.as_deref().unwrap_or_default())
    });
    trials.push(match (&image, browser()) {
        (Some(_), Some(_)) => kind_class,
        (None, _) => kind_class.with_kind("no kind environment (FAULTLAB_KIND_NODE_IMAGE and DOCKER_HOST: ci/kind-suite sets them)").with_ignored_flag(true),
        (_, None) => kind_class.with_kind("no Chromium").with_ignored_flag(true),
    });
    libtest_mimic::run(&args, trials).exit_code()
}

struct Trainee {
    state: tempfile::TempDir,
    description: PathBuf,
}

impl Trainee {
    fn new(description: &Path) -> Result<Trainee, Failed> {
        Ok(Trainee { state: tempfile::tempdir().map_err(|e| e.to_string())?, description: description.to_owned() })
    }

    fn faultlab(&self, args: &[&str]) -> Result<Output, Failed> {
        Command::new(env!("CARGO_BIN_EXE_faultlab"))
            .env("FAULTLAB_STATE_DIR", self.state.path())
            .env("FAULTLAB_TESTBED", &self.description)
            .env("FAULTLAB_SCENARIOS", faultlab::scenario::default_dir())
            .args(args)
            .output()
            .map_err(|e| Failed::from(e.to_string()))
    }

    fn ok(&self, args: &[&str]) -> Result<String, Failed> {
        let out = self.faultlab(args)?;
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        if !out.status.success() {
            return Err(format!("faultlab {} failed ({}):\n{text}", args.join(" "), out.status).into());
        }
        Ok(text)
    }

    /// The debrief page a command's output names (`debrief: PATH`, in the session directory), and its text.
    fn debrief(&self, output: &str) -> Result<(PathBuf, String), Failed> {
        let path = output.lines().find_map(|l| l.strip_prefix("debrief: ")).map(PathBuf::from).ok_or_else(|| format!("no `debrief: PATH` line in:\n{output}"))?;
        if path.parent() != Some(self.state.path().join("training").as_path()) || path.extension().is_none_or(|e| e != "html") {
            return Err(format!("the debrief {} is not a page in the session directory", path.display()).into());
        }
        let page = std::fs::read_to_string(&path).map_err(|e| format!("reading the debrief {}: {e}", path.display()))?;
        Ok((path, page))
    }

    fn session(&self) -> Result<String, Failed> {
        let dir = self.state.path().join("training");
        let mut ids: Vec<String> = std::fs::read_dir(&dir)
            .map_err(|e| e.to_string())?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "json"))
            .filter_map(|p| p.file_stem()?.to_str().map(str::to_owned))
            .collect();
        ids.sort();
        ids.pop().ok_or_else(|| "no session file".into())
    }

    /// Session `id`'s variant as its file keeps it (`web=billing 8080=9090`), for the figures.
    fn variant(&self, id: &str) -> String {
        let path = self.state.path().join("training").join(format!("{id}.json"));
        let session: serde_json::Value = std::fs::read(&path).ok().and_then(|b| serde_json::from_slice(&b).ok()).unwrap_or_default();
        let pairs: Vec<String> = session["variant"].as_object().into_iter().flatten().map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default())).collect();
        pairs.join(" ")
    }
}

/// The workload a session broke, as the instructor's session file names it (a blind challenge's is
/// renamed at random).
fn workload(t: &Trainee, id: &str) -> Result<String, Failed> {
    let text = std::fs::read_to_string(t.state.path().join("training").join(format!("{id}.json"))).map_err(|e| e.to_string())?;
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    Ok(v["controllers"][0]["name"].as_str().ok_or("a session without its controllers")?.to_string())
}

/// Reset whatever a trial left, so one failure does not spoil the next trial.
fn reset_quietly(t: &Trainee) {
    let _ = t.faultlab(&["reset"]);
}

/// Run `trial` for trainee `t`, resetting the session quietly if it fails.
fn resetting(t: &Trainee, trial: impl FnOnce() -> Result<(), Failed>) -> Result<(), Failed> {
    let result = trial();
    if result.is_err() {
        reset_quietly(t);
    }
    result
}

fn node_state(bed: &TestBed, rt: &tokio::runtime::Runtime) -> Result<String, Failed> {
    rt.block_on(suite::node_state(&bed.nodes[0])).map_err(|e| Failed::from(e.to_string()))
}

fn runtime() -> Result<tokio::runtime::Runtime, Failed> {
    tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| Failed::from(e.to_string()))
}

fn documented_fix(description: &Path) -> Result<(), Failed> {
    let t = Trainee::new(description)?;
    let bed = TestBed::read(description).map_err(|e| e.to_string())?;
    resetting(&t, || {
        let shown = t.ok(&["train", "pause-missing", "--provider", "existing"])?;
        for want in ["kubectl", "get pods", "FailedCreatePodSandBox", "faultlab check"] {
            if !shown.contains(want) {
                return Err(Failed::from(format!("the on-call view lacks {want:?}:\n{shown}")));
            }
        }
        // The progress lines (stderr is not a terminal here) follow the run's phases; they once
        // watched a recorder nobody wrote to and never left "setup".
        for phase in ["(breaking the cluster): symptom"] {
            if !shown.contains(phase) {
                return Err(Failed::from(format!("train's progress lacks {phase:?}:\n{shown}")));
            }
        }
        if shown.contains("ctr -n k8s.io image import") || shown.contains("node-package") {
            return Err(Failed::from(format!("train must not print the fix:\n{shown}")));
        }
        // Not fixed yet.
        let early = t.faultlab(&["check"])?;
        if early.status.success() {
            return Err("check passed before anything was fixed".into());
        }
        let hint = t.ok(&["hint"])?;
        if !hint.starts_with("hint 1:") {
            return Err(format!("unexpected hint output: {hint}").into());
        }
        // The stages: a wrong detect (it costs), the right one, the fault named.
        if t.faultlab(&["answer", "detect", "coredns"])?.status.success() {
            return Err("a wrong answer was taken as right".into());
        }
        t.ok(&["answer", "detect", "Deployment/web"])?;
        t.ok(&["answer", "localise", "pause-missing"])?;
        let again = t.faultlab(&["answer", "localise", "pause-missing"])?;
        if again.status.code() != Some(2) || !String::from_utf8_lossy(&again.stderr).contains("the localise stage is answered already") {
            return Err(format!("a stage answered right took another answer: {again:?}").into());
        }
        // The trainee, logged in to the node, follows the document by hand.
        let node = &bed.nodes[0];
        let script = format!(
            "cd \"$(mktemp -d)\" && tar -xzvf {pkg} && for t in $(find . -name '*.tar'); do ctr --address {sock} -n k8s.io image import \"$t\"; done",
            pkg = node.node_package.clone().unwrap_or_default(),
            sock = node.containerd.address,
        );
        let netns = node.netns.clone().ok_or("the test bed node has no netns")?;
        let by_hand = Command::new("ip").args(["netns", "exec", &netns, "sh", "-c", &script]).output().map_err(|e| e.to_string())?;
        if !by_hand.status.success() {
            return Err(format!("the documented fix failed by hand: {}", String::from_utf8_lossy(&by_hand.stderr)).into());
        }
        let verdict = t.ok(&["check", "--wait", "3m"])?;
        if !(verdict.contains("FIXED: pause-missing recovered in") && verdict.contains("with 1 hint(s)")) {
            return Err(format!("check should pass with a time and the hint count:\n{verdict}").into());
        }
        // 20 + 30 + 50, less a hint (10) and a wrong answer (5).
        if !verdict.contains("score: 85 of 100") {
            return Err(format!("check should give the score and its breakdown:\n{verdict}").into());
        }
        // The fixed check wrote the debrief: the scenario, a check that found it fixed, the one hint.
        let (page_path, page) = t.debrief(&verdict)?;
        for want in ["Debrief: pause-missing", r#"<g class="check" data-fixed="true">"#, r#"<g class="check" data-fixed="false">"#, "<dt>score</dt><dd class=\"mono\">85 of 100</dd>"] {
            if !page.contains(want) {
                return Err(format!("the debrief {} lacks {want:?}:\n{page}", page_path.display()).into());
            }
        }
        let hints = page.matches(r#"<g class="hint">"#).count();
        if hints != 1 {
            return Err(format!("the debrief {} has {hints} hint mark(s), not 1", page_path.display()).into());
        }
        let reset = t.ok(&["reset"])?;
        if t.debrief(&reset)?.0 != page_path || !page_path.is_file() {
            return Err(format!("reset should rewrite the debrief {} and leave it:\n{reset}", page_path.display()).into());
        }
        Ok(())
    })
}

fn wrong_fix(description: &Path) -> Result<(), Failed> {
    let t = Trainee::new(description)?;
    let bed = TestBed::read(description).map_err(|e| e.to_string())?;
    let rt = runtime()?;
    resetting(&t, || {
        t.ok(&["train", "configmap-missing", "--provider", "existing"])?;
        let ns = t.session()?;
        // The wrong fix: delete the pod and hope.
        rt.block_on(async {
            let client = faultlab::kube_ops::connect(&bed.kubeconfig, &bed.context).await.map_err(|e| e.to_string())?;
            let pods: kube::Api<k8s_openapi::api::core::v1::Pod> = kube::Api::namespaced(client, &ns);
            pods.delete_collection(&Default::default(), &kube::api::ListParams::default().labels("app=web")).await.map_err(|e| e.to_string())?;
            Ok::<(), String>(())
        })?;
        let out = t.faultlab(&["check", "--wait", "20s"])?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        if out.status.success() {
            return Err(format!("check passed after a wrong fix:\n{text}").into());
        }
        for want in ["NOT FIXED", "ConfigMap app-config is still missing", "waiting(ContainerCreating)"] {
            if !text.contains(want) {
                return Err(format!("check should say what is still wrong ({want:?}):\n{text}").into());
            }
        }
        t.ok(&["reset"])?;
        Ok(())
    })
}

/// Three ways to make the gate read green without fixing anything, on container-args-wrong (whose
/// workload has a readiness probe): a pod of one's own with the workload's label, the probe removed,
/// the Deployment scaled to zero. `check` names each.
fn hidden_symptom(description: &Path) -> Result<(), Failed> {
    let t = Trainee::new(description)?;
    let bed = TestBed::read(description).map_err(|e| e.to_string())?;
    let rt = runtime()?;
    resetting(&t, || {
        t.ok(&["train", "container-args-wrong", "--provider", "existing"])?;
        let ns = t.session()?;
        rt.block_on(async {
            use kube::api::{Patch, PatchParams, PostParams};
            let client = faultlab::kube_ops::connect(&bed.kubeconfig, &bed.context).await.map_err(|e| e.to_string())?;
            let pods: kube::Api<k8s_openapi::api::core::v1::Pod> = kube::Api::namespaced(client.clone(), &ns);
            let impostor = serde_json::from_value(serde_json::json!({
                "metadata": {"name": "impostor", "labels": {"app": "web"}},
                "spec": {"terminationGracePeriodSeconds": 0, "containers": [{"name": "app", "image": bed.nodes[0].images.busybox, "imagePullPolicy": "IfNotPresent", "command": ["sleep", "3600"]}]}
            }))
            .map_err(|e| e.to_string())?;
            pods.create(&PostParams::default(), &impostor).await.map_err(|e| e.to_string())?;
            let deployments: kube::Api<k8s_openapi::api::apps::v1::Deployment> = kube::Api::namespaced(client, &ns);
            // A strategic merge patch: null removes the probe; containers merge by name.
            let hide = serde_json::json!({"spec": {"replicas": 0, "template": {"spec": {"containers": [{"name": "app", "readinessProbe": null}]}}}});
            deployments.patch("web", &PatchParams::default(), &Patch::Strategic(hide)).await.map_err(|e| e.to_string())?;
            Ok::<(), String>(())
        })?;
        let out = t.faultlab(&["check", "--wait", "10s"])?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        if out.status.success() {
            return Err(format!("check passed with the symptom only hidden:\n{text}").into());
        }
        for want in [
            "pod impostor matches the workload's selector (app=web) but is not the workload's",
            "container app's readinessProbe was removed",
            "Deployment web was scaled from 1 to 0 replicas",
        ] {
            if !text.contains(want) {
                return Err(format!("check should name the bypass ({want:?}):\n{text}").into());
            }
        }
        t.ok(&["reset"])?;
        Ok(())
    })
}

/// A blind challenge (of one candidate, so the trial knows the answer): nothing the trainee is shown
/// names it before it is fixed; the stages score; the fix names it.
fn blind_challenge(description: &Path) -> Result<(), Failed> {
    let t = Trainee::new(description)?;
    resetting(&t, || {
        let shown = t.ok(&["train", "--blind", "--from", "configmap-missing", "--provider", "existing", "--time-limit", "10m"])?;
        let ns = t.session()?;
        if !ns.starts_with("fl-challenge-") || shown.contains("configmap-missing") || !shown.contains("a blind challenge") {
            return Err(format!("the blind challenge's page names it, or its namespace does ({ns}):\n{shown}").into());
        }
        for args in [&["sessions"][..], &["sessions", "-o", "json"], &["check"], &["check", "-o", "json"]] {
            let out = t.faultlab(args)?;
            let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
            // The symptom may be in it (the pod's state, as kubectl shows it); the scenario's name not.
            if text.contains("configmap-missing") || text.contains("scenarioPath") {
                return Err(format!("faultlab {} names the blind challenge:\n{text}", args.join(" ")).into());
            }
        }
        // A blind challenge's workload has a name of its own, not the scenario's `web`.
        let name = workload(&t, &ns)?;
        if name == "web" {
            return Err("the blind challenge's workload kept the scenario's name `web`".into());
        }
        let wrong = t.faultlab(&["answer", "detect", "web"])?;
        if wrong.status.success() {
            return Err("`answer detect web` was right for a workload renamed".into());
        }
        t.ok(&["answer", "detect", &name])?;
        t.ok(&["answer", "localise", "configmap-missing"])?;
        t.ok(&["solution", "--apply"])?;
        let verdict = t.ok(&["check", "--wait", "2m"])?;
        // 20 - 5 (a wrong answer) + 30, and no mitigation with the documented fix shown.
        if !(verdict.contains("FIXED: the blind challenge, configmap-missing recovered") && verdict.contains("score: 45 of 100")) {
            return Err(format!("check should name the challenge once fixed, with its score:\n{verdict}").into());
        }
        t.ok(&["reset"])?;
        Ok(())
    })
}

/// Two sessions at once, each trainee with the kubeconfig `train` made: each may work in their own
/// namespace and read nodes; neither can see the other's namespace, nor anything else's; the file is
/// the trainee's alone; reset takes the access away with the session.
fn two_trainees(description: &Path) -> Result<(), Failed> {
    let (a, b) = (Trainee::new(description)?, Trainee::new(description)?);
    let bed = TestBed::read(description).map_err(|e| e.to_string())?;
    let rt = runtime()?;
    resetting(&a, || {
        a.ok(&["train", "configmap-missing", "--provider", "existing"])?;
        b.ok(&["train", "container-args-wrong", "--provider", "existing"])?;
        let (ns_a, ns_b) = (a.session()?, b.session()?);
        let kubeconfig = |t: &Trainee, ns: &str| -> Result<PathBuf, Failed> {
            let text = std::fs::read_to_string(t.state.path().join("training").join(format!("{ns}.json"))).map_err(|e| e.to_string())?;
            let session: serde_json::Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
            Ok(PathBuf::from(session["traineeKubeconfig"].as_str().ok_or("the session has no trainee kubeconfig")?))
        };
        let (kc_a, kc_b) = (kubeconfig(&a, &ns_a)?, kubeconfig(&b, &ns_b)?);
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&kc_a).map_err(|e| e.to_string())?.permissions().mode() & 0o777;
        if mode != 0o600 {
            return Err(format!("{} is mode {mode:o}, not 0600", kc_a.display()).into());
        }
        let context = format!("trainee@{}", bed.context);
        rt.block_on(async {
            use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod, Secret};
            use kube::api::{Api, DeleteParams, ListParams, PostParams};
            let lp = ListParams::default();
            for (kc, own, other) in [(&kc_a, &ns_a, &ns_b), (&kc_b, &ns_b, &ns_a)] {
                let client = faultlab::kube_ops::connect(kc, &context).await.map_err(|e| e.to_string())?;
                Api::<Pod>::namespaced(client.clone(), own).list(&lp).await.map_err(|e| format!("{own}: its own pods: {e}"))?;
                Api::<Node>::all(client.clone()).list(&lp).await.map_err(|e| format!("{own}: reading nodes: {e}"))?;
                let cms: Api<ConfigMap> = Api::namespaced(client.clone(), own);
                let cm = serde_json::from_value(serde_json::json!({"metadata": {"name": "trainee-wrote-this"}})).map_err(|e| e.to_string())?;
                cms.create(&PostParams::default(), &cm).await.map_err(|e| format!("{own}: writing in its own namespace: {e}"))?;
                cms.delete("trainee-wrote-this", &DeleteParams::default()).await.map_err(|e| e.to_string())?;
                for (what, denied) in [
                    (format!("pods of the other trainee's {other}"), Api::<Pod>::namespaced(client.clone(), other).list(&lp).await.is_err()),
                    ("pods of kube-system".to_string(), Api::<Pod>::namespaced(client.clone(), "kube-system").list(&lp).await.is_err()),
                    ("secrets of default".to_string(), Api::<Secret>::namespaced(client.clone(), "default").list(&lp).await.is_err()),
                    ("pods of every namespace".to_string(), Api::<Pod>::all(client.clone()).list(&lp).await.is_err()),
                ] {
                    if !denied {
                        return Err(format!("the trainee of {own} could list {what}"));
                    }
                }
            }
            Ok::<(), String>(())
        })?;
        a.ok(&["reset"])?;
        b.ok(&["reset"])?;
        if kc_a.exists() || kc_b.exists() {
            return Err("reset left a trainee's kubeconfig".into());
        }
        rt.block_on(async {
            let client = faultlab::kube_ops::connect(&bed.kubeconfig, &bed.context).await.map_err(|e| e.to_string())?;
            let roles: kube::Api<k8s_openapi::api::rbac::v1::ClusterRoleBinding> = kube::Api::all(client);
            for ns in [&ns_a, &ns_b] {
                if roles.get_opt(&format!("faultlab-trainee-{ns}")).await.map_err(|e| e.to_string())?.is_some() {
                    return Err(format!("reset left the ClusterRoleBinding of {ns}"));
                }
            }
            Ok::<(), String>(())
        })?;
        Ok(())
    })
    .inspect_err(|_| reset_quietly(&b))
}

/// The scoreboard page's trainee rows, `(session, state, score)`, in order: from the file as written,
/// and (where Chromium is installed) from the DOM a headless Chromium laid out of it.
fn board_rows(page: &Path) -> Result<Vec<(String, String, String)>, Failed> {
    let text = std::fs::read_to_string(page).map_err(|e| format!("reading the scoreboard {}: {e}", page.display()))?;
    let rows = |html: &str| -> Vec<(String, String, String)> {
        html.split(r#"<tr class="trainee" "#)
            .skip(1)
            .map(|row| {
                let attr = |name: &str| row.split(&format!(r#"{name}=""#)).nth(1).and_then(|v| v.split('"').next()).unwrap_or_default().to_string();
                (attr("data-session"), attr("data-state"), attr("data-score"))
            })
            .collect()
    };
    let written = rows(&text);
    if let Some(browser) = browser() {
        let out = Command::new("timeout")
            .args(["-k", "5", "90", browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--dump-dom"])
            .arg(format!("file://{}", page.display()))
            .output()
            .map_err(|e| e.to_string())?;
        let laid_out = rows(&String::from_utf8_lossy(&out.stdout));
        if laid_out != written {
            return Err(format!("{browser} shows the rows {laid_out:?}, the page holds {written:?}").into());
        }
    }
    Ok(written)
}

/// An instructor runs two sessions of a class from one state directory (a named challenge and a blind
/// one) and writes the scoreboard: a row each, the blind one not named; a trainee's right answer shows
/// on the next page, in the file and in the browser.
fn scoreboard(description: &Path) -> Result<(), Failed> {
    let class = Trainee::new(description)?;
    let reset_all = |t: &Trainee| {
        let ids: Vec<String> = std::fs::read_dir(t.state.path().join("training"))
            .into_iter()
            .flatten()
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "json"))
            .filter_map(|p| Some(p.file_stem()?.to_str()?.to_owned()))
            .collect();
        for id in ids {
            let _ = t.faultlab(&["reset", "--session", &id]);
        }
    };
    let result = (|| {
        class.ok(&["train", "configmap-missing", "--provider", "existing"])?;
        let named = class.session()?;
        class.ok(&["train", "--blind", "--from", "container-args-wrong", "--provider", "existing"])?;
        let blind = std::fs::read_dir(class.state.path().join("training"))
            .map_err(|e| e.to_string())?
            .filter_map(|e| e.ok()?.path().file_stem()?.to_str().map(str::to_owned))
            .find(|id| id != &named && id.starts_with("fl-challenge-"))
            .ok_or("no session file of the blind challenge")?;
        let page = class.state.path().join("scoreboard.html");
        let out = class.ok(&["scoreboard", "--out", page.to_str().ok_or("a state path that is not UTF-8")?])?;
        if !out.contains("wrote the scoreboard of 2 open session(s)") {
            return Err(format!("scoreboard said: {out}").into());
        }
        let text = std::fs::read_to_string(&page).map_err(|e| e.to_string())?;
        if text.contains("container-args-wrong") {
            return Err("the scoreboard names the blind challenge's scenario before it is fixed".into());
        }
        let before = board_rows(&page)?;
        let mut ids: Vec<&str> = before.iter().map(|r| r.0.as_str()).collect();
        ids.sort();
        let mut want = vec![named.as_str(), blind.as_str()];
        want.sort();
        if ids != want || before.iter().any(|r| r.1 != "working" || r.2 != "0") {
            return Err(format!("the first scoreboard's rows: {before:?} (sessions {named}, {blind}: both working, 0 points)").into());
        }
        class.ok(&["answer", "detect", &workload(&class, &blind)?, "--session", &blind])?;
        class.ok(&["scoreboard", "--out", page.to_str().unwrap_or_default()])?;
        let after = board_rows(&page)?;
        if after.first() != Some(&(blind.clone(), "working".to_string(), "20".to_string())) {
            return Err(format!("after the blind challenge's trainee named the workload, the scoreboard's rows are {after:?}: {blind} should lead with 20").into());
        }
        Ok(())
    })();
    reset_all(&class);
    result
}

fn abandoned(description: &Path) -> Result<(), Failed> {
    let t = Trainee::new(description)?;
    let bed = TestBed::read(description).map_err(|e| e.to_string())?;
    let rt = runtime()?;
    let before = node_state(&bed, &rt)?;
    let host_before = host_state(&rt)?;
    t.ok(&["train", "pause-missing", "--provider", "existing"])?;
    if node_state(&bed, &rt)? == before {
        reset_quietly(&t);
        return Err("the fault should be in place while the session is open".into());
    }
    // The trainee walks away; later, someone resets from another shell.
    let out = t.ok(&["reset"])?;
    if !out.contains("reset: everything it changed is restored") {
        return Err(format!("unexpected reset output: {out}").into());
    }
    let left: Vec<PathBuf> = t.state.path().join("training").read_dir().map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect()).unwrap_or_default();
    if left.iter().any(|p| p.extension().is_some_and(|e| e == "json")) {
        return Err(format!("the session file is still there after reset: {left:?}").into());
    }
    // The debrief stays, and says it was never fixed.
    let (page_path, page) = t.debrief(&out)?;
    if !page.contains("Debrief: pause-missing") || !page.contains("not fixed: reset after") {
        return Err(format!("the debrief {} of an abandoned session should say it was reset unfixed:\n{page}", page_path.display()).into());
    }
    let after = node_state(&bed, &rt)?;
    if after != before {
        return Err(format!("the node was not restored\n--- before\n{before}\n--- after\n{after}").into());
    }
    if host_state(&rt)? != host_before {
        return Err("the host's routes or inotify budget changed".into());
    }
    Ok(())
}

/// The host's side of what a fault could touch: its routes and the host-wide inotify budget.
/// The host's routes and inotify limit, read while holding the host shared (`faultlab::machine_lock`,
/// as `faultlab train` does): a host-wide fault of another faultlab process holds the host alone while
/// it is in place. CI's kind suite runs inotify-limit beside this test bed, and once lowered the limit
/// between this test's two reads (2026-11-29), a difference neither the session nor its reset made.
fn host_state(rt: &tokio::runtime::Runtime) -> Result<String, Failed> {
    let shared = faultlab::machine_lock::MachineClaim { shares_kernel: true, ..Default::default() };
    let _held = rt.block_on(faultlab::machine_lock::acquire(faultlab::machine_lock::dir(), shared)).map_err(|e| e.to_string())?;
    let routes = Command::new("ip").arg("route").output().map_err(|e| e.to_string())?;
    let inotify = std::fs::read_to_string("/proc/sys/fs/inotify/max_user_instances").map_err(|e| e.to_string())?;
    Ok(format!("{}{}", String::from_utf8_lossy(&routes.stdout), inotify))
}

/// The Chromium on PATH, if any.
fn browser() -> Option<&'static str> {
    ["chromium", "chromium-browser"].into_iter().find(|b| Command::new("sh").args(["-c", &format!("command -v {b}")]).output().is_ok_and(|o| o.status.success()))
}

/// `faultlab terminal` for one session, running; its address (with the token).
struct WebTerminal {
    child: std::process::Child,
    url: String,
}

impl WebTerminal {
    fn start(t: &Trainee, session: &str, extra: &[&str]) -> Result<WebTerminal, Failed> {
        use std::io::BufRead;
        let mut child = Command::new(env!("CARGO_BIN_EXE_faultlab"))
            .env("FAULTLAB_STATE_DIR", t.state.path())
            .env("FAULTLAB_TESTBED", &t.description)
            .env("FAULTLAB_SCENARIOS", faultlab::scenario::default_dir())
            .args(["terminal", "--session", session])
            .args(extra)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .map_err(|e| e.to_string())?;
        let mut first = String::new();
        std::io::BufReader::new(child.stdout.take().ok_or("no stdout")?).read_line(&mut first).map_err(|e| e.to_string())?;
        let Some(url) = first.trim().strip_prefix("terminal: ") else {
            let _ = child.kill();
            return Err(format!("faultlab terminal said {first:?}, not `terminal: URL`").into());
        };
        Ok(WebTerminal { url: url.to_string(), child })
    }

    /// Wait for it to end by itself (its session reset).
    fn ends_within(&mut self, within: std::time::Duration) -> Result<(), Failed> {
        let deadline = std::time::Instant::now() + within;
        while std::time::Instant::now() < deadline {
            if self.child.try_wait().map_err(|e| e.to_string())?.is_some() {
                return Ok(());
            }
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
        Err(format!("faultlab terminal still serves {within:?} after its session was reset").into())
    }
}

impl Drop for WebTerminal {
    /// SIGTERM first, as a person's Ctrl-C would: the terminal removes the trainee's directory as it
    /// stops; SIGKILL only if it has not stopped within 10 s.
    fn drop(&mut self) {
        // SAFETY: kill on our own child's pid.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        if self.ends_within(std::time::Duration::from_secs(10)).is_err() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

/// Everything the terminal page's xterm.js holds, line by line (what the trainee sees, scrollback
/// included).
const SCREEN: &str = "(() => { const b = faultlabTerminal.buffer.active; const out = []; for (let i = 0; i < b.length; i++) out.push(b.getLine(i).translateToString(true)); return out.join('\\n'); })()";

/// Type `line` in the page's terminal and wait until the screen, after what it held, shows `want`;
/// the screen's new text. `want` must be what only the command's output can show, not the command
/// line's own echo (a marker such as `echo done-$((1+1))`, which shows `done-2`).
fn run_in(b: &mut cdp::Browser, page: &cdp::Page, line: &str, want: &str, within: std::time::Duration) -> Result<String, Failed> {
    let before = b.eval(page, SCREEN)?.as_str().unwrap_or_default().trim_end().len();
    b.type_line(page, line)?;
    let deadline = std::time::Instant::now() + within;
    loop {
        let screen = b.eval(page, SCREEN)?.as_str().unwrap_or_default().to_string();
        let new = screen.get(before.min(screen.len())..).unwrap_or_default().to_string();
        if new.contains(want) {
            return Ok(new);
        }
        if std::time::Instant::now() > deadline {
            return Err(format!("after typing {line:?} the terminal did not show {want:?} within {within:?}; it shows:\n{new}").into());
        }
        std::thread::sleep(std::time::Duration::from_millis(300));
    }
}

/// Open a terminal's page and wait for its shell's prompt.
fn terminal_page(b: &mut cdp::Browser, term: &WebTerminal, prompt: &str) -> Result<cdp::Page, Failed> {
    let page = b.open(&term.url)?;
    b.wait_for(&page, "document.body && document.body.dataset.state === 'open'", std::time::Duration::from_secs(20))?;
    b.wait_for(&page, &format!("{SCREEN}.includes({prompt:?})"), std::time::Duration::from_secs(20))?;
    // The token is off the address bar once the page has it.
    let shown = b.eval(&page, "location.href")?;
    if shown.as_str().is_some_and(|u| u.contains('#')) {
        return Err(format!("the page's address still holds the token: {shown}").into());
    }
    Ok(page)
}

/// In a terminal of `--user nobody`: the shell is that user's; the session file cannot be read or
/// changed; faultlab runs only this session's training commands (through the broker), not the
/// instructor's, and not for another session.
fn locked_out(b: &mut cdp::Browser, page: &cdp::Page, t: &Trainee, id: &str, other: &str) -> Result<(), Failed> {
    use std::time::Duration;
    let prompt = format!("{id}$");
    let within = Duration::from_secs(30);
    run_in(b, page, "echo uid=$(id -u) groups=$(id -G)", "uid=65534 groups=65534", within)?;
    let session = t.state.path().join("training").join(format!("{id}.json"));
    let before = std::fs::read(&session).map_err(|e| e.to_string())?;
    let dir = session.parent().ok_or("no session directory")?.display().to_string();
    for (line, want) in [
        (format!("cat {}", session.display()), "Permission denied"),
        (format!("ls {dir}"), "Permission denied"),
        (format!("echo '{{}}' > {}", session.display()), "Permission denied"),
        ("faultlab sessions".to_string(), "`faultlab sessions` is the instructor's"),
        ("faultlab reset".to_string(), "`faultlab reset` is the instructor's"),
        (format!("faultlab hint --session {other}"), "the session is this terminal's"),
        ("faultlab node hostname".to_string(), "commands on the node are not allowed in this terminal"),
        ("faultlab list | grep -c configmap-missing".to_string(), "\n1"),
    ] {
        let out = run_in(b, page, &line, &prompt, within)?;
        if !out.contains(want) {
            return Err(format!("typing {line:?} as the trainee showed:\n{out}\n(expected {want:?})").into());
        }
    }
    if std::fs::read(&session).map_err(|e| e.to_string())? != before {
        return Err("the trainee's shell changed the session file".into());
    }
    Ok(())
}

/// The broken workload, as a trainee finds it: the namespace's one Deployment (a blind challenge's
/// has a name of its own); `faultlab answer detect` with it, right.
fn detect(b: &mut cdp::Browser, page: &cdp::Page) -> Result<String, Failed> {
    let listed = run_in(b, page, "kubectl get deployments -o name; echo deployments-$((1+1))-listed", "deployments-2-listed", std::time::Duration::from_secs(30))?;
    let name = listed.lines().find_map(|l| l.trim().strip_prefix("deployment.apps/")).ok_or_else(|| format!("no Deployment listed:\n{listed}"))?.to_string();
    run_in(b, page, &format!("faultlab answer detect {name}"), "right: detect", std::time::Duration::from_secs(30))?;
    Ok(name)
}

/// The cause, as a trainee finds it: the namespace's events, read ([`diagnose`]); `faultlab answer
/// localise` with it, right.
fn localise(b: &mut cdp::Browser, page: &cdp::Page) -> Result<&'static str, Failed> {
    let within = std::time::Duration::from_secs(30);
    let events = run_in(b, page, "kubectl get events -o custom-columns=REASON:.reason,MESSAGE:.message --no-headers; echo events-$((1+1))-listed", "events-2-listed", within)?;
    let cause = diagnose(&events).ok_or_else(|| format!("the scripted trainee cannot tell the cause from these events:\n{events}"))?;
    run_in(b, page, &format!("faultlab answer localise {cause}"), "right: localise", within)?;
    Ok(cause)
}

/// `faultlab check --wait` in the terminal: the blind challenge `cause` fixed, with every point.
fn checked_fixed(b: &mut cdp::Browser, page: &cdp::Page, cause: &str) -> Result<(), Failed> {
    let verdict = run_in(b, page, "faultlab check --wait 4m", "score: ", std::time::Duration::from_secs(300))?;
    if !verdict.contains(&format!("FIXED: the blind challenge, {cause} recovered")) || !verdict.contains("score: 100 of 100") {
        return Err(format!("{cause}: check in the terminal said:\n{verdict}").into());
    }
    Ok(())
}

/// The fix a trainee types for `cause`, on the workload `name`, with the values the challenge's
/// variant gave it read from the Deployment as a person reads them (the port httpd is given, the
/// number of the limit): the option httpd does not know becomes `-p`; the limit's `m` becomes `Mi`.
fn fix(cause: &str, name: &str) -> String {
    let container = "{.spec.template.spec.containers[0]";
    match cause {
        "configmap-missing" => format!("kubectl create configmap \"$(kubectl get deployment {name} -o jsonpath='{{.spec.template.spec.volumes[0].configMap.name}}')\" --from-literal=app.conf=mode=demo"),
        "container-args-wrong" => format!(
            r#"port=$(kubectl get deployment {name} -o jsonpath='{container}.args[2]}}'); kubectl patch deployment {name} --type=json -p '[{{"op":"replace","path":"/spec/template/spec/containers/0/args","value":["-f","-p","'"$port"'","-h","/etc"]}}]'"#
        ),
        _ => format!("kubectl set resources deployment {name} -c app --limits=memory=\"$(kubectl get deployment {name} -o jsonpath='{container}.resources.limits.memory}}' | sed 's/m$/Mi/')\""),
    }
}

/// What a trainee concludes from the namespace's events: the fault's name.
fn diagnose(events: &str) -> Option<&'static str> {
    if events.contains("FailedMount") && events.contains("not found") {
        Some("configmap-missing")
    } else if events.contains("Back-off restarting failed container") {
        Some("container-args-wrong")
    } else if events.contains("FailedCreatePodSandBox") {
        Some("memory-limit-unit")
    } else {
        None
    }
}

/// A class in the browser: a scripted trainee solves three blind challenges (one of each of three
/// scenarios, not told which) only by typing in `faultlab terminal`'s page in headless Chromium: find
/// the broken workload, read the events, name the cause, fix it with kubectl, `faultlab check`. A second
/// trainee's session runs all the while; the first trainee's shell cannot see its namespace, and its
/// page does not open the other's terminal. Prints, per challenge, the time to break, to detect, to fix
/// and to reset.
fn web_terminal(description: &Path) -> Result<(), Failed> {
    use std::time::{Duration, Instant};
    let (class, other) = (Trainee::new(description)?, Trainee::new(description)?);
    let mut b = cdp::Browser::launch(browser().ok_or("no Chromium")?)?;
    let result = (|| -> Result<(), Failed> {
        other.ok(&["train", "--blind", "--from", "configmap-missing", "--provider", "existing"])?;
        let other_ns = other.session()?;
        let other_term = WebTerminal::start(&other, &other_ns, &[])?;
        let mut solved = std::collections::BTreeSet::new();
        let mut figures = Vec::new();
        let mut pool = vec!["configmap-missing", "container-args-wrong", "memory-limit-unit"];
        while !pool.is_empty() {
            let from = pool.join(",");
            let t0 = Instant::now();
            class.ok(&["train", "--blind", "--from", &from, "--provider", "existing", "--time-limit", "10m"])?;
            let broke = t0.elapsed();
            let id = class.session()?;
            // The class's trainee is another user, who cannot read the session.
            let mut term = WebTerminal::start(&class, &id, &["--user", "nobody"])?;
            let page = terminal_page(&mut b, &term, &format!("{id}$"))?;
            if solved.is_empty() {
                locked_out(&mut b, &page, &class, &id, &other_ns)?;
            }
            let t1 = Instant::now();
            let name = detect(&mut b, &page)?;
            let detected = t1.elapsed();
            let cause = localise(&mut b, &page)?;
            run_in(&mut b, &page, &fix(cause, &name), &format!("{id}$"), Duration::from_secs(30))?;
            // The other trainee's namespace is not this shell's to see.
            run_in(&mut b, &page, &format!("kubectl get pods -n {other_ns}"), "Forbidden", Duration::from_secs(30))?;
            checked_fixed(&mut b, &page, cause)?;
            let fixed = t1.elapsed();
            let shots = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/html-browser");
            if std::fs::create_dir_all(&shots).is_ok() {
                let _ = b.screenshot(&page, &shots.join(format!("web-terminal-{cause}.png")));
            }
            b.close(page)?;
            let variant = class.variant(&id);
            let t2 = Instant::now();
            let out = class.ok(&["reset"])?;
            let reset = t2.elapsed();
            term.ends_within(Duration::from_secs(15))?;
            let (_, debrief) = class.debrief(&out)?;
            if !debrief.contains("<h2>Commands typed</h2>") || !debrief.contains(&format!("faultlab answer detect {name}")) || !debrief.contains("kubectl get events") {
                return Err(format!("{cause}: the debrief does not list what was typed in the terminal:\n{debrief}").into());
            }
            figures.push(format!("{cause} ({variant}): break {:.1} s, detect {:.1} s, fix {:.1} s, reset {:.1} s", broke.as_secs_f64(), detected.as_secs_f64(), fixed.as_secs_f64(), reset.as_secs_f64()));
            solved.insert(cause);
            pool.retain(|p| *p != cause);
        }
        // The other trainee's terminal, opened without its token, gives no shell.
        let (addr, _) = other_term.url.split_once('#').ok_or("no token in the address")?;
        let stranger = b.open(&format!("{addr}#{}", "0".repeat(64)))?;
        b.wait_for(&stranger, "document.body && document.body.dataset.state === 'closed'", Duration::from_secs(20))?;
        let status = b.eval(&stranger, "document.getElementById('status').textContent")?;
        if !status.as_str().is_some_and(|s| s.contains("not this terminal's token")) {
            return Err(format!("the other trainee's terminal, opened without its token, says {status}").into());
        }
        eprintln!("web terminal, per challenge:\n  {}", figures.join("\n  "));
        if solved.len() != 3 {
            return Err(format!("solved {solved:?}").into());
        }
        other.ok(&["reset"])?;
        Ok(())
    })();
    if result.is_err() {
        reset_quietly(&class);
    }
    reset_quietly(&other);
    result
}

/// A class on kind: two trainees at once, each on a kind cluster made for their blind challenge
/// (`faultlab-challenge-<random>`: the name tells nothing), each in a web terminal as `nobody`. Each
/// finds and fixes their challenge by typing in the page; `faultlab node` reaches their own node and
/// no other, Docker not at all; reset deletes each cluster.
fn kind_class(image: &str) -> Result<(), Failed> {
    use std::time::{Duration, Instant};
    let class = Trainee::new(Path::new("/nonexistent/testbed.yaml"))?;
    let mut b = cdp::Browser::launch(browser().ok_or("no Chromium")?)?;
    let kind_clusters = || -> Result<String, Failed> {
        let out = Command::new("kind").args(["get", "clusters"]).output().map_err(|e| e.to_string())?;
        Ok(format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
    };
    let result = (|| -> Result<(), Failed> {
        let t0 = Instant::now();
        let train = ["train", "--blind", "--from", "configmap-missing,container-args-wrong", "--provider", "kind", "--node-image", image, "--time-limit", "15m"];
        let started: Vec<Result<String, Failed>> = std::thread::scope(|s| {
            let a = s.spawn(|| class.ok(&train));
            let b = s.spawn(|| class.ok(&train));
            vec![a.join().unwrap_or_else(|_| Err("train panicked".into())), b.join().unwrap_or_else(|_| Err("train panicked".into()))]
        });
        for r in started {
            r?;
        }
        let broke = t0.elapsed();
        let dir = class.state.path().join("training");
        let mut sessions: Vec<(String, String)> = Vec::new();
        for entry in std::fs::read_dir(&dir).map_err(|e| e.to_string())? {
            let path = entry.map_err(|e| e.to_string())?.path();
            if path.extension().is_some_and(|e| e == "json") {
                let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).map_err(|e| e.to_string())?).map_err(|e| e.to_string())?;
                let cluster = v["cluster"]["kindCluster"].as_str().ok_or("a session on kind without its kind cluster")?.to_string();
                if !cluster.starts_with("faultlab-challenge-") {
                    return Err(format!("a blind challenge's cluster is named {cluster}").into());
                }
                sessions.push((v["id"].as_str().unwrap_or_default().to_string(), cluster));
            }
        }
        if sessions.len() != 2 || sessions[0].1 == sessions[1].1 {
            return Err(format!("two trainees should have a cluster each: {sessions:?}").into());
        }
        let mut figures = vec![format!("two clusters made and broken side by side in {:.1} s", broke.as_secs_f64())];
        for (i, (id, cluster)) in sessions.iter().enumerate() {
            let (other_id, other_cluster) = &sessions[1 - i];
            let mut term = WebTerminal::start(&class, id, &["--user", "nobody", "--node-commands"])?;
            let page = terminal_page(&mut b, &term, &format!("{id}$"))?;
            let prompt = format!("{id}$");
            let t1 = Instant::now();
            let name = detect(&mut b, &page)?;
            let cause = localise(&mut b, &page)?;
            // Their own node, through the broker; no other, and no Docker.
            let node = run_in(&mut b, &page, "faultlab node hostname", &prompt, Duration::from_secs(30))?;
            if !node.contains(&format!("{cluster}-control-plane")) || node.contains(other_cluster.as_str()) {
                return Err(format!("`faultlab node hostname` in {id}'s terminal showed:\n{node}").into());
            }
            let docker = run_in(&mut b, &page, "docker ps; echo docker-$((1+1))-done", "docker-2-done", Duration::from_secs(30))?;
            if docker.contains(other_cluster.as_str()) || docker.contains("CONTAINER ID") {
                return Err(format!("the trainee reached Docker:\n{docker}").into());
            }
            run_in(&mut b, &page, &format!("kubectl get pods -n {other_id}"), "Forbidden", Duration::from_secs(30))?;
            run_in(&mut b, &page, &fix(cause, &name), &prompt, Duration::from_secs(30))?;
            checked_fixed(&mut b, &page, cause)?;
            let fixed = t1.elapsed();
            b.close(page)?;
            let t2 = Instant::now();
            class.ok(&["reset", "--session", id])?;
            let reset = t2.elapsed();
            term.ends_within(Duration::from_secs(15))?;
            let left = kind_clusters()?;
            if left.contains(cluster.as_str()) || !left.contains(other_cluster.as_str()) && i == 0 {
                return Err(format!("after {id}'s reset, kind lists: {left}").into());
            }
            figures.push(format!("{cause} on {cluster}: detect to fixed {:.1} s, reset (the cluster deleted) {:.1} s", fixed.as_secs_f64(), reset.as_secs_f64()));
        }
        eprintln!("a class on kind:\n  {}", figures.join("\n  "));
        Ok(())
    })();
    if result.is_err() {
        for entry in std::fs::read_dir(class.state.path().join("training")).into_iter().flatten().flatten() {
            if let Some(id) = entry.path().file_stem().and_then(|s| s.to_str()).filter(|_| entry.path().extension().is_some_and(|e| e == "json")) {
                let _ = class.faultlab(&["reset", "--session", id]);
            }
        }
    }
    result
}
