//! `kind`: one cluster per run, from `kind-configs/<arch>.yaml` plus the scenario's patches.
//!
//! The kubeconfig goes to the run's own directory (never `~/.kube/config`); nodes are found by kind's
//! cluster label; when a run fails (kind's own create included) the logs are exported, and the cluster
//! is deleted whatever happened, unless `--keep`. Node commands go through `docker exec`, each with a
//! `timeout` inside the node. The run's directory holds an `owner` file with faultlab's pid, so that
//! `faultlab cleanup` leaves the clusters of live runs alone.

use std::path::{Path, PathBuf};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{json, Value};

use super::{Cluster, Ownership, Provider, ProviderError};
use crate::cmd::{self, Cmd};
use crate::node::{ContainerdProfile, ImageSet, KubeletProfile, NodeProfile};
use crate::record::{Channel, Recorder};

/// kind's label on node containers.
pub const CLUSTER_LABEL: &str = "io.x-k8s.kind.cluster";
/// Every cluster faultlab creates is named with this prefix.
pub const NAME_PREFIX: &str = "faultlab-";
/// The container runtime of the pinned node image (kindest/node v1.31.2 for kind v0.25.0 ships
/// containerd 1.7); part of the platform name that picks the snapshot directory.
pub const RUNTIME: &str = "containerd-1.7";

/// CPU architectures kind nodes come in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Arch {
    Amd64,
    Arm64,
}

impl Arch {
    pub fn host() -> Option<Arch> {
        match std::env::consts::ARCH {
            "x86_64" => Some(Arch::Amd64),
            "aarch64" => Some(Arch::Arm64),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Arch::Amd64 => "amd64",
            Arch::Arm64 => "arm64",
        }
    }

    /// Whether kind can run nodes of this architecture here: only the host's own (no emulation).
    pub fn check_runnable(self) -> Result<(), ProviderError> {
        match Arch::host() {
            Some(host) if host == self => Ok(()),
            host => Err(ProviderError::KindConfig {
                message: format!(
                    "this host is {} and kind cannot run {} nodes on it (kind does not emulate another architecture); {}",
                    std::env::consts::ARCH,
                    self.as_str(),
                    match host {
                        Some(h) => format!("run with --arch {} here, or on an {} host", h.as_str(), self.as_str()),
                        None => format!("run on an {} host", self.as_str()),
                    }
                ),
            }),
        }
    }
}

/// What a scenario needs from a kind cluster. Faults declare it; the provider composes the config.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct KindNeeds {
    /// TOML fragments for containerd's config.
    pub containerd_config_patches: Vec<String>,
    /// KubeletConfiguration fields merged into the kubelet's config.
    pub kubelet_config: Option<Value>,
    /// Disable kindnet (the scenario brings its own CNI).
    pub disable_default_cni: bool,
    /// Commands to run on each node as soon as its container exists, while kind is still creating it.
    pub node_bootstrap: Vec<Cmd>,
    /// The sandbox image the node will be configured with, if the scenario changes it.
    pub sandbox_image: Option<String>,
}

pub struct Kind {
    pub name: String,
    pub arch: Arch,
    pub configs_dir: PathBuf,
    /// The run's directory: composed config, kubeconfig, `owner` (removed when the cluster is deleted).
    pub workdir: PathBuf,
    /// Where `kind export logs` writes when a run fails.
    pub logs_dir: PathBuf,
    pub keep: bool,
    pub needs: KindNeeds,
}

impl Kind {
    /// A new cluster name: `faultlab-<scenario>-<random>`, within kind's length limit.
    pub fn new_name(scenario: &str) -> String {
        let mut short: String = scenario.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '-').take(20).collect();
        short = short.trim_end_matches('-').to_string();
        format!("{NAME_PREFIX}{short}-{}", crate::runner::random_suffix(5))
    }

    pub fn kubeconfig(&self) -> PathBuf {
        self.workdir.join("kubeconfig")
    }

    pub fn context(&self) -> String {
        format!("kind-{}", self.name)
    }

    /// The cluster this provider creates, before its nodes are known (what teardown needs).
    pub fn cluster(&self) -> Cluster {
        Cluster {
            kubeconfig: self.kubeconfig(),
            context: self.context(),
            platform: String::new(),
            nodes: vec![],
            ownership: Ownership::Created { kind_cluster: self.name.clone() },
        }
    }

    /// `kind-<minor>-containerd-1.7-<arch>`: the directory under `expectations/` for this cluster.
    pub fn platform(&self) -> Result<String, ProviderError> {
        Ok(format!("kind-{}-{RUNTIME}-{}", self.kubernetes_version()?, self.arch.as_str()))
    }

    /// What `--keep` tells the user.
    pub fn keep_message(&self) -> String {
        format!(
            "--keep: kind cluster {name} is kept (kubeconfig {kc}, context {ctx}); delete it with `kind delete cluster --name {name}` or `faultlab cleanup`",
            name = self.name,
            kc = self.kubeconfig().display(),
            ctx = self.context()
        )
    }

    /// The pinned config for this architecture; asking for another architecture than the host's is an
    /// error, because kind cannot emulate one (plans may still show it).
    pub fn base_config(&self) -> Result<(PathBuf, Value), ProviderError> {
        let path = self.configs_dir.join(format!("{}.yaml", self.arch.as_str()));
        let text = std::fs::read_to_string(&path)
            .map_err(|e| ProviderError::KindConfig { message: format!("cannot read {}: {e}", path.display()) })?;
        let value: Value = serde_saphyr::from_str(&text)
            .map_err(|e| ProviderError::KindConfig { message: format!("{}: {e}", path.display()) })?;
        Ok((path, value))
    }

    /// The base config with the scenario's needs composed in.
    pub fn compose(&self) -> Result<String, ProviderError> {
        let (_, mut config) = self.base_config()?;
        compose(&mut config, &self.needs);
        serde_saphyr::to_string(&config).map_err(|e| ProviderError::KindConfig { message: e.to_string() })
    }

    /// Where a kind node keeps things, as faults need to know.
    pub fn node_profile(&self, container: &str) -> NodeProfile {
        NodeProfile {
            name: container.to_string(),
            netns: None,
            container: Some(container.to_string()),
            address: None,
            gateway: None,
            gateway_device: Some("eth0".into()),
            containerd: ContainerdProfile {
                address: "/run/containerd/containerd.sock".into(),
                namespace: "k8s.io".into(),
                root: "/var/lib/containerd".into(),
                config: "/etc/containerd/config.toml".into(),
                sandbox_image: self.needs.sandbox_image.clone().unwrap_or_else(|| "registry.k8s.io/pause:3.10".into()),
                restart: vec!["systemctl".into(), "restart".into(), "containerd".into()],
            },
            kubelet: KubeletProfile {
                root_dir: "/var/lib/kubelet".into(),
                config: "/var/lib/kubelet/config.yaml".into(),
                extra_flags_file: None,
                restart: vec!["systemctl".into(), "restart".into(), "kubelet".into()],
            },
            // kindest/node carries crictl, configured by /etc/crictl.yaml.
            crictl: None,
            disk: None,
            node_package: Some("/opt/cloud/cce/package/node-package/pause-3.1.tgz".into()),
            images: ImageSet {
                pause: self.needs.sandbox_image.clone().unwrap_or_else(|| "registry.k8s.io/pause:3.10".into()),
                busybox: "docker.io/library/busybox:1.36".into(),
                // Upstream busybox has the inotifyd applet (the test bed's Debian build has not).
                more: [("inotify".to_string(), "docker.io/library/busybox:1.36".to_string())].into(),
            },
        }
    }

    async fn host(&self, rec: &Recorder, dry_run: bool, argv: Vec<String>, timeout: Duration) -> Result<cmd::Output, cmd::CmdError> {
        rec.push(Channel::Host, cmd::shell_join(&argv));
        if dry_run {
            return Ok(cmd::Output::default());
        }
        cmd::run_host(&argv, None, timeout, false).await
    }

    fn require(program: &str, what: &'static str, hint: &'static str) -> Result<(), ProviderError> {
        let found = std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).any(|d| d.join(program).is_file()))
            .unwrap_or(false);
        if found {
            Ok(())
        } else {
            Err(ProviderError::MissingBinary { what, program: program.into(), hint })
        }
    }

    fn node_list_argv(&self) -> Vec<String> {
        vec![
            "docker".into(),
            "ps".into(),
            "--filter".into(),
            format!("label={CLUSTER_LABEL}={}", self.name),
            "--format".into(),
            "{{.Names}}".into(),
        ]
    }

    /// Run the bootstrap commands on every node as soon as the node containers exist.
    async fn bootstrap_nodes(&self, rec: &Recorder, dry_run: bool) -> Result<(), ProviderError> {
        if self.needs.node_bootstrap.is_empty() {
            return Ok(());
        }
        let deadline = tokio::time::Instant::now() + Duration::from_secs(180);
        let nodes = loop {
            let out = self.host(rec, dry_run, self.node_list_argv(), Duration::from_secs(30)).await;
            let names: Vec<String> = out.map(|o| o.stdout.lines().map(str::to_owned).filter(|l| !l.is_empty()).collect()).unwrap_or_default();
            if dry_run {
                break vec![format!("{}-control-plane", self.name)];
            }
            if !names.is_empty() {
                break names;
            }
            if tokio::time::Instant::now() > deadline {
                return Err(ProviderError::NoNodes { name: self.name.clone(), label: format!("{CLUSTER_LABEL}={}", self.name) });
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        };
        for node in nodes {
            let access = crate::node::NodeAccess::Docker { container: node.clone() };
            for c in &self.needs.node_bootstrap {
                let argv = access.wrap(c);
                self.host(rec, dry_run, argv, c.timeout + Duration::from_secs(15))
                    .await
                    .map_err(|source| ProviderError::Create { name: self.name.clone(), source })?;
            }
        }
        Ok(())
    }
}

/// Compose a scenario's needs into a kind config.
pub fn compose(config: &mut Value, needs: &KindNeeds) {
    let obj = config.as_object_mut().expect("a kind config is a mapping");
    if !needs.containerd_config_patches.is_empty() {
        let patches = obj.entry("containerdConfigPatches").or_insert_with(|| json!([]));
        if let Some(list) = patches.as_array_mut() {
            list.extend(needs.containerd_config_patches.iter().map(|p| Value::String(p.clone())));
        }
    }
    if let Some(kubelet) = &needs.kubelet_config {
        let mut doc = json!({"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration"});
        if let (Some(d), Some(k)) = (doc.as_object_mut(), kubelet.as_object()) {
            d.extend(k.clone());
        }
        let text = serde_saphyr::to_string(&doc).unwrap_or_default();
        let patches = obj.entry("kubeadmConfigPatches").or_insert_with(|| json!([]));
        if let Some(list) = patches.as_array_mut() {
            list.push(Value::String(text));
        }
    }
    if needs.disable_default_cni {
        let networking = obj.entry("networking").or_insert_with(|| json!({}));
        if let Some(n) = networking.as_object_mut() {
            n.insert("disableDefaultCNI".into(), Value::Bool(true));
        }
    }
}

#[async_trait]
impl Provider for Kind {
    fn name(&self) -> &'static str {
        "kind"
    }

    async fn create(&self, rec: &Recorder, dry_run: bool) -> Result<Cluster, ProviderError> {
        if !dry_run {
            Self::require("kind", "kind", "install kind v0.25.0 (https://kind.sigs.k8s.io) or use --provider existing")?;
            Self::require("docker", "docker", "kind needs Docker")?;
            self.arch.check_runnable()?;
        }
        let config = self.compose()?;
        let platform = self.platform()?;
        let config_path = self.workdir.join("kind-config.yaml");
        rec.push(Channel::Note, format!("kind config {} (from kind-configs/{}.yaml):\n{}", config_path.display(), self.arch.as_str(), indent(&config)));
        rec.push(Channel::Note, format!("platform {platform}: events are compared with expectations/{platform}/<scenario>.snap"));
        if dry_run {
            if let Err(e) = self.arch.check_runnable() {
                rec.push(Channel::Note, format!("plan only: {}", e.to_string().trim_start_matches("kind config: ")));
            }
        } else {
            std::fs::create_dir_all(&self.workdir).map_err(|source| ProviderError::Write { path: self.workdir.clone(), source })?;
            std::fs::write(&config_path, &config).map_err(|source| ProviderError::Write { path: config_path.clone(), source })?;
            let owner = self.workdir.join("owner");
            std::fs::write(&owner, format!("{}\n", std::process::id())).map_err(|source| ProviderError::Write { path: owner, source })?;
        }
        let mut argv: Vec<String> = vec![
            "kind".into(),
            "create".into(),
            "cluster".into(),
            "--name".into(),
            self.name.clone(),
            "--config".into(),
            config_path.display().to_string(),
            "--kubeconfig".into(),
            self.kubeconfig().display().to_string(),
        ];
        if self.needs.disable_default_cni {
            // Without a CNI the node stays NotReady until the scenario installs its own, and kind's
            // --wait would only time out (it warns and goes on): the scenario's setup gate waits instead.
            rec.push(Channel::Note, "no default CNI: kind does not wait for the node to be Ready; the scenario's setup brings its CNI".to_string());
        } else {
            argv.extend(["--wait".into(), "180s".into()]);
        }
        // --retain: a failed create keeps its nodes so that their logs can be exported; faultlab then
        // deletes them.
        argv.push("--retain".into());
        // kind creates; meanwhile the bootstrap readies each node (for example a local-only sandbox tag).
        // Whichever fails first ends the other (its processes are killed with their process group).
        let create = self.host(rec, dry_run, argv, Duration::from_secs(600));
        let boot = self.bootstrap_nodes(rec, dry_run);
        tokio::pin!(create, boot);
        let outcome: Result<(), ProviderError> = tokio::select! {
            biased;
            created = &mut create => match created {
                Ok(_) => (&mut boot).await,
                Err(source) => Err(ProviderError::Create { name: self.name.clone(), source }),
            },
            booted = &mut boot => match booted {
                Ok(()) => (&mut create).await.map(|_| ()).map_err(|source| ProviderError::Create { name: self.name.clone(), source }),
                Err(e) => Err(e),
            },
        };
        let mut cluster = self.cluster();
        if let Err(err) = outcome {
            // The nodes are still there (--retain): export their logs, then delete them (with --keep,
            // delete only says how to do it later).
            let mut cleanup = Vec::new();
            if let Err(e) = self.export_logs(&cluster, &self.logs_dir, rec, dry_run).await {
                cleanup.push(e.to_string());
            }
            if let Err(e) = self.delete(&cluster, rec, dry_run).await {
                cleanup.push(e.to_string());
            }
            return Err(if cleanup.is_empty() { err } else { ProviderError::CleanupAfterCreate { source: Box::new(err), errors: cleanup } });
        }
        cluster.platform = platform;
        cluster.nodes = self.nodes(&cluster, rec, dry_run).await?;
        Ok(cluster)
    }

    async fn nodes(&self, _cluster: &Cluster, rec: &Recorder, dry_run: bool) -> Result<Vec<NodeProfile>, ProviderError> {
        let out = self
            .host(rec, dry_run, self.node_list_argv(), Duration::from_secs(30))
            .await
            .map_err(|source| ProviderError::ListNodes { name: self.name.clone(), source })?;
        let mut names: Vec<String> = out.stdout.lines().map(str::trim).filter(|l| !l.is_empty()).map(str::to_owned).collect();
        if dry_run && names.is_empty() {
            names.push(format!("{}-control-plane", self.name));
        }
        names.sort();
        if names.is_empty() {
            return Err(ProviderError::NoNodes { name: self.name.clone(), label: format!("{CLUSTER_LABEL}={}", self.name) });
        }
        Ok(names.iter().map(|n| self.node_profile(n)).collect())
    }

    async fn export_logs(&self, _cluster: &Cluster, dir: &Path, rec: &Recorder, dry_run: bool) -> Result<(), ProviderError> {
        let argv = vec!["kind".into(), "export".into(), "logs".into(), dir.display().to_string(), "--name".into(), self.name.clone()];
        self.host(rec, dry_run, argv, Duration::from_secs(300))
            .await
            .map(|_| ())
            .map_err(|source| ProviderError::ExportLogs { name: self.name.clone(), source })
    }

    async fn delete(&self, _cluster: &Cluster, rec: &Recorder, dry_run: bool) -> Result<(), ProviderError> {
        if self.keep {
            rec.push(Channel::Note, self.keep_message());
            return Ok(());
        }
        let argv = delete_argv(&self.name, Some(&self.kubeconfig()));
        self.host(rec, dry_run, argv, Duration::from_secs(300))
            .await
            .map_err(|source| ProviderError::Delete { name: self.name.clone(), source })?;
        if !dry_run {
            // The composed config, the kubeconfig and the owner file go with the cluster.
            let _ = std::fs::remove_dir_all(&self.workdir);
        }
        Ok(())
    }
}

impl Kind {
    /// The Kubernetes minor of the pinned node image (`kindest/node:v1.31.2@sha256:...` gives `1.31`).
    pub fn kubernetes_version(&self) -> Result<String, ProviderError> {
        let (path, config) = self.base_config()?;
        let image = config
            .get("nodes")
            .and_then(|n| n.as_array())
            .and_then(|n| n.iter().find_map(|node| node.get("image").and_then(|i| i.as_str())))
            .ok_or_else(|| ProviderError::KindConfig { message: format!("{}: no nodes[].image pinned", path.display()) })?;
        let re = regex::Regex::new(r"kindest/node:v(\d+)\.(\d+)\.\d+@sha256:[0-9a-f]{64}$").expect("valid");
        let caps = re.captures(image).ok_or_else(|| ProviderError::KindConfig {
            message: format!("{}: node image {image:?} is not pinned as kindest/node:vX.Y.Z@sha256:<digest>", path.display()),
        })?;
        Ok(format!("{}.{}", &caps[1], &caps[2]))
    }
}

/// `kind delete cluster --name NAME [--kubeconfig PATH]`.
pub fn delete_argv(name: &str, kubeconfig: Option<&Path>) -> Vec<String> {
    let mut argv: Vec<String> = vec!["kind".into(), "delete".into(), "cluster".into(), "--name".into(), name.into()];
    if let Some(k) = kubeconfig {
        argv.push("--kubeconfig".into());
        argv.push(k.display().to_string());
    }
    argv
}

fn indent(text: &str) -> String {
    text.lines().map(|l| format!("      {l}")).collect::<Vec<_>>().join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn composes_patches_into_the_base_config() {
        let mut config: Value = serde_saphyr::from_str("kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\nnodes:\n- role: control-plane\n").unwrap();
        let needs = KindNeeds {
            containerd_config_patches: vec!["[plugins.\"io.containerd.grpc.v1.cri\"]\n  sandbox_image = \"faultlab.invalid/cce-pause:3.1\"\n".into()],
            kubelet_config: Some(json!({"cpuManagerPolicy": "static"})),
            disable_default_cni: true,
            ..Default::default()
        };
        compose(&mut config, &needs);
        assert_eq!(config["networking"]["disableDefaultCNI"], json!(true));
        assert!(config["containerdConfigPatches"][0].as_str().unwrap().contains("sandbox_image"));
        let kubelet = config["kubeadmConfigPatches"][0].as_str().unwrap();
        assert!(kubelet.contains("kind: KubeletConfiguration") && kubelet.contains("cpuManagerPolicy: static"), "{kubelet}");
    }

    fn kind(arch: Arch, needs: KindNeeds) -> Kind {
        Kind {
            name: "faultlab-t-abcde".into(),
            arch,
            configs_dir: crate::scenario::workspace_root().join("kind-configs"),
            workdir: "/nonexistent/kind/faultlab-t-abcde".into(),
            logs_dir: "/nonexistent/logs/faultlab-t-abcde".into(),
            keep: false,
            needs,
        }
    }

    #[test]
    fn compose_adds_to_what_the_base_has_and_changes_nothing_else() {
        let base = "kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\ncontainerdConfigPatches:\n- '# base'\nkubeadmConfigPatches:\n- '# base'\nnetworking:\n  podSubnet: 10.244.0.0/16\nnodes:\n- role: control-plane\n";
        let mut config: Value = serde_saphyr::from_str(base).unwrap();
        let untouched = config.clone();
        compose(&mut config, &KindNeeds::default());
        assert_eq!(config, untouched, "no needs, no change");
        let needs = KindNeeds {
            containerd_config_patches: vec!["# scenario".into()],
            kubelet_config: Some(json!({"cpuManagerPolicy": "static", "reservedSystemCPUs": "0"})),
            disable_default_cni: true,
            ..Default::default()
        };
        compose(&mut config, &needs);
        assert_eq!(config["containerdConfigPatches"], json!(["# base", "# scenario"]));
        assert_eq!(config["kubeadmConfigPatches"][0], "# base");
        let kubelet: Value = serde_saphyr::from_str(config["kubeadmConfigPatches"][1].as_str().unwrap()).unwrap();
        assert_eq!(
            kubelet,
            json!({"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration", "cpuManagerPolicy": "static", "reservedSystemCPUs": "0"})
        );
        assert_eq!(config["networking"], json!({"podSubnet": "10.244.0.0/16", "disableDefaultCNI": true}));
        assert_eq!(config["nodes"], untouched["nodes"]);
    }

    #[test]
    fn the_pinned_configs_give_the_platform_and_compose_per_architecture() {
        for arch in [Arch::Amd64, Arch::Arm64] {
            let k = kind(arch, KindNeeds { containerd_config_patches: vec!["# patch".into()], ..Default::default() });
            assert_eq!(k.kubernetes_version().unwrap(), "1.31");
            assert_eq!(k.platform().unwrap(), format!("kind-1.31-containerd-1.7-{}", arch.as_str()));
            let composed: Value = serde_saphyr::from_str(&k.compose().unwrap()).unwrap();
            let (_, base) = k.base_config().unwrap();
            assert_eq!(composed["nodes"], base["nodes"]);
            assert_eq!(composed["containerdConfigPatches"], json!(["# patch"]));
            assert!(base.get("containerdConfigPatches").is_none(), "patches are composed, not in kind-configs/{}.yaml", arch.as_str());
        }
    }

    #[test]
    fn an_unpinned_node_image_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("amd64.yaml"), "kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\nnodes:\n- role: control-plane\n  image: kindest/node:v1.31.2\n").unwrap();
        let mut k = kind(Arch::Amd64, KindNeeds::default());
        k.configs_dir = dir.path().into();
        let err = k.platform().unwrap_err().to_string();
        assert!(err.contains("amd64.yaml") && err.contains("is not pinned as kindest/node:vX.Y.Z@sha256:<digest>"), "{err}");
        std::fs::remove_file(dir.path().join("amd64.yaml")).unwrap();
        assert!(k.platform().unwrap_err().to_string().contains("cannot read"));
    }

    #[test]
    fn only_the_host_architecture_runs() {
        let host = Arch::host().expect("amd64 or arm64 host");
        assert!(host.check_runnable().is_ok());
        let other = if host == Arch::Amd64 { Arch::Arm64 } else { Arch::Amd64 };
        let err = other.check_runnable().unwrap_err().to_string();
        assert!(err.contains(&format!("kind cannot run {} nodes", other.as_str())) && err.contains(&format!("--arch {}", host.as_str())), "{err}");
    }

    #[tokio::test]
    async fn a_dry_create_plans_without_running_and_notes_what_a_run_would_refuse() {
        let host = Arch::host().unwrap();
        let other = if host == Arch::Amd64 { Arch::Arm64 } else { Arch::Amd64 };
        let rec = Recorder::default();
        let k = kind(other, KindNeeds { disable_default_cni: true, ..Default::default() });
        let cluster = k.create(&rec, true).await.unwrap();
        assert_eq!(cluster.platform, format!("kind-1.31-containerd-1.7-{}", other.as_str()));
        assert_eq!(cluster.nodes[0].name, "faultlab-t-abcde-control-plane");
        let plan = rec.render();
        assert!(plan.contains(&format!("plan only: this host is {}", std::env::consts::ARCH)), "{plan}");
        assert!(plan.contains("disableDefaultCNI: true") && !plan.contains("--wait"), "{plan}");
        assert!(!k.workdir.exists());
    }

    #[test]
    fn names_are_prefixed_and_short() {
        let n = Kind::new_name("storageclass-missing-and-more");
        assert!(n.starts_with("faultlab-storageclass-missing-"), "{n}");
        assert!(n.len() <= 40);
    }
}
