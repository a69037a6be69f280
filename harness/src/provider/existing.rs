//! `existing`: a kubeconfig context plus a node-access description (the test bed writes one).
//!
//! The platform (the expectations directory) is what the described nodes report, as on kind but
//! named `k8s-...` ([`detect_platform`]); a description that names one must agree with it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;

use super::kind::{node_infos_known, platform_from_nodes};
use super::{Cluster, Ownership, Provider, ProviderError};
use crate::kube_ops::Kube;
use crate::node::{runtime, CgroupVersion, HostExecutor, Node, NodeProfile};
use crate::record::{Channel, Recorder};
use crate::testbed::{TestBed, TestBedKind};

/// The first word of an existing cluster's platform name (kind's is `kind`).
pub const PLATFORM_PREFIX: &str = "k8s";

pub struct Existing {
    pub description: PathBuf,
    /// `--kubeconfig` and `--context`, over the description's own.
    pub target: KubeTarget,
}

/// Which API server, as kubectl's `--kubeconfig` and `--context` say it. Either replaces what the
/// description names; a context other than the described one is a cluster faultlab was not told is
/// its to break (`--allow-existing CONTEXT` says so).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KubeTarget {
    pub kubeconfig: Option<PathBuf>,
    pub context: Option<String>,
}

impl KubeTarget {
    /// The kubeconfig and context to use, from `bed`'s and these, and how they were chosen.
    pub fn over(&self, bed: &TestBed) -> (PathBuf, String, Ownership) {
        let kubeconfig = self.kubeconfig.clone().unwrap_or_else(|| bed.kubeconfig.clone());
        let context = self.context.clone().unwrap_or_else(|| bed.context.clone());
        let ownership = match bed.kind {
            TestBedKind::TestBed if context == bed.context => Ownership::TestBed,
            TestBedKind::TestBed | TestBedKind::Cluster => Ownership::Foreign,
        };
        (kubeconfig, context, ownership)
    }
}

impl Existing {
    /// The test bed's description, if it is there.
    pub fn testbed() -> Result<Existing, ProviderError> {
        let path = crate::testbed::path();
        if !path.is_file() {
            return Err(ProviderError::NotConfigured {
                reason: format!("no test-bed description at {} (run ci/testbed/up, or set FAULTLAB_TESTBED)", path.display()),
            });
        }
        Ok(Existing { description: path, target: KubeTarget::default() })
    }

    pub fn read(&self) -> Result<TestBed, ProviderError> {
        Ok(TestBed::read(&self.description)?)
    }
}

#[async_trait]
impl Provider for Existing {
    fn name(&self) -> &'static str {
        "existing"
    }

    async fn provision(&self, rec: &Recorder) -> Result<Cluster, ProviderError> {
        let bed = self.read()?;
        let (kubeconfig, context, ownership) = self.target.over(&bed);
        let given = if self.target == KubeTarget::default() { String::new() } else { ", as --kubeconfig/--context say".to_string() };
        rec.push(Channel::Note, format!("use context {context} of {} (nodes from {}{given})", kubeconfig.display(), self.description.display()));
        Ok(Cluster { kubeconfig, context, platform: bed.platform.clone(), ownership, nodes: bed.nodes })
    }

    async fn nodes(&self, cluster: &Cluster, _rec: &Recorder) -> Result<Vec<NodeProfile>, ProviderError> {
        Ok(cluster.nodes.clone())
    }

    /// What the described nodes report ([`detect_platform`]), checked against the description.
    async fn platform(&self, cluster: &Cluster, kube: &Kube) -> Result<String, ProviderError> {
        let nodes: Vec<Node> = cluster.nodes.iter().filter_map(|p| Some(Node::new(p.clone(), p.access()?, Arc::new(HostExecutor)))).collect();
        detect_platform(&self.description, &cluster.platform, kube, &nodes).await
    }

    async fn collect_logs(&self, _cluster: &Cluster, dir: &Path, rec: &Recorder) -> Result<(), ProviderError> {
        rec.push(Channel::Note, format!("test-bed logs stay in /var/log/faultlab/testbed (not copied to {})", dir.display()));
        Ok(())
    }
}

/// The platform of the cluster's described `nodes`: `k8s-<kubelet>-<runtime>-<runtime minor>[-cgroup2]-<arch>`
/// from their `status.nodeInfo` (through the API; nodes the description does not name are left out)
/// and their cgroup version (a command on each, [`runtime::cgroup_command`]). The description's
/// `platform` (`described`, empty if it names none) must be the same: a different one is an error
/// naming both and what each node reports.
pub async fn detect_platform(description: &Path, described: &str, kube: &Kube, nodes: &[Node]) -> Result<String, ProviderError> {
    let names: Vec<String> = nodes.iter().map(|n| n.name().to_string()).collect();
    let infos = node_infos_known(kube, Some(&names)).await?;
    if infos.is_empty() {
        return Err(ProviderError::Platform { message: format!("the API lists none of the nodes {} describes ({})", description.display(), names.join(", ")) });
    }
    let rec = kube.recorder();
    let cmd = runtime::cgroup_command();
    let mut cgroups: Vec<(String, CgroupVersion)> = Vec::new();
    for node in nodes.iter().filter(|n| infos.iter().any(|(name, _)| name == n.name())) {
        rec.push(Channel::Node, crate::cmd::shell_join(&node.host_argv(&cmd)));
        let out = node.run(&cmd).await.map_err(|source| ProviderError::ReadCgroup { node: node.name().into(), source })?;
        let cgroup = runtime::parse_cgroup(&out.stdout).map_err(|source| ProviderError::CgroupVersion { node: node.name().into(), source })?;
        cgroups.push((node.name().into(), cgroup));
    }
    let cgroup = cgroups[0].1;
    if cgroups.iter().any(|(_, c)| *c != cgroup) {
        let each: Vec<String> = cgroups.iter().map(|(n, c)| format!("{n}: {c}")).collect();
        return Err(ProviderError::Platform { message: format!("the nodes differ in their cgroup version ({}): one snapshot directory per run", each.join("; ")) });
    }
    let platform = platform_from_nodes(PLATFORM_PREFIX, &infos, cgroup)?;
    if !described.is_empty() && described != platform {
        let each: Vec<String> = infos.iter().map(|(n, i)| format!("{n}: kubelet {}, {}, {}, {cgroup}", i.kubelet_version, i.container_runtime_version, i.architecture)).collect();
        return Err(ProviderError::PlatformMismatch { description: description.to_owned(), described: described.into(), detected: platform, nodes: each.join("; ") });
    }
    let said = if described.is_empty() { format!("{} names none", description.display()) } else { format!("as {} says", description.display()) };
    rec.push(
        Channel::Note,
        format!("platform {platform} (the nodes' kubelet, runtime and architecture, and their {cgroup}; {said}): events are compared with expectations/{platform}/<scenario>.snap"),
    );
    Ok(platform)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd::Output;
    use crate::node::FakeExecutor;
    use http::{Request, Response};
    use kube::client::Body;
    use serde_json::{json, Value};

    fn bed(kind: TestBedKind) -> TestBed {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/testbed/valid.yaml");
        let mut bed = TestBed::read(&path).unwrap();
        bed.kind = kind;
        bed
    }

    /// --kubeconfig and --context replace the description's; the test bed stays the test bed only in
    /// its own context.
    #[test]
    fn kubeconfig_and_context_over_the_description() {
        let tb = bed(TestBedKind::TestBed);
        let none = KubeTarget::default();
        assert_eq!(none.over(&tb), (tb.kubeconfig.clone(), tb.context.clone(), Ownership::TestBed));
        let file = KubeTarget { kubeconfig: Some("/home/me/.kube/testbed".into()), context: None };
        assert_eq!(file.over(&tb), (PathBuf::from("/home/me/.kube/testbed"), tb.context.clone(), Ownership::TestBed), "the same context through another file");
        let same = KubeTarget { kubeconfig: None, context: Some(tb.context.clone()) };
        assert_eq!(same.over(&tb).2, Ownership::TestBed);
        let other = KubeTarget { kubeconfig: None, context: Some("staging".into()) };
        assert_eq!(other.over(&tb), (tb.kubeconfig.clone(), "staging".to_string(), Ownership::Foreign), "another context is not the test bed");
        assert_eq!(none.over(&bed(TestBedKind::Cluster)).2, Ownership::Foreign, "a described cluster of one's own");
    }

    fn node_json(name: &str, runtime: &str, arch: &str) -> Value {
        json!({"metadata": {"name": name}, "status": {"nodeInfo": {"kubeletVersion": "v1.20.2", "containerRuntimeVersion": runtime, "architecture": arch,
            "machineID": "", "systemUUID": "", "bootID": "", "kernelVersion": "", "osImage": "", "kubeProxyVersion": "", "operatingSystem": "linux"}}})
    }

    /// The test bed's node (from the sample profile) on a mock API that lists `items`, its cgroup
    /// command answered with `cgroup`.
    async fn detect(described: &str, items: Vec<Value>, cgroup: &str) -> (Result<String, ProviderError>, Vec<String>, Vec<String>) {
        let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let rec = Recorder::default();
        let kube = Kube::new(kube::Client::new(service, "default"), rec.clone());
        let list = json!({"apiVersion": "v1", "kind": "NodeList", "metadata": {}, "items": items});
        let server = tokio::spawn(async move {
            let (req, send) = handle.next_request().await.unwrap();
            assert_eq!((req.method().as_str(), req.uri().path()), ("GET", "/api/v1/nodes"));
            send.send_response(Response::builder().status(200).body(Body::from(serde_json::to_vec(&list).unwrap())).unwrap());
        });
        let fake = FakeExecutor::new();
        fake.respond("proc-cgroup", Output::ok(cgroup));
        let profile = crate::testbed::tests::sample_profile();
        let node = Node::new(profile.clone(), profile.access().unwrap(), fake.clone());
        let platform = detect_platform(Path::new("/var/lib/faultlab/testbed/testbed.yaml"), described, &kube, &[node]).await;
        server.await.unwrap();
        (platform, fake.lines(), rec.entries().into_iter().map(|e| e.line).collect())
    }

    const V1: &str = "sysfs\n\n@@faultlab proc-cgroup\n12:pids:/\n1:name=systemd:/\n";

    #[tokio::test]
    async fn the_test_beds_platform_is_what_its_node_reports() {
        let (platform, lines, notes) = detect("k8s-1.20-containerd-1.6-amd64", vec![node_json("faultlab-node", "containerd://1.6.20~ds1", "amd64")], V1).await;
        assert_eq!(platform.unwrap(), "k8s-1.20-containerd-1.6-amd64");
        assert_eq!(lines.len(), 1);
        assert!(lines[0].starts_with("ip netns exec faultlab-node timeout -k 5 60 sh -c 'stat -fc %T /sys/fs/cgroup"), "{lines:?}");
        assert!(notes.iter().any(|n| n.starts_with("platform k8s-1.20-containerd-1.6-amd64 (") && n.contains("as /var/lib/faultlab/testbed/testbed.yaml says")), "{notes:?}");
        // A node the description does not name is not the run's: what it reports does not count.
        let other = vec![node_json("faultlab-node", "containerd://2.1.9+unknown", "amd64"), node_json("someone-elses", "cri-o://1.33.1", "arm64")];
        let (platform, _, _) = detect("", other, V1).await;
        assert_eq!(platform.unwrap(), "k8s-1.20-containerd-2.1-amd64", "a description without a platform: the node names it");
    }

    #[tokio::test]
    async fn a_description_that_names_another_platform_is_an_error_naming_both() {
        let (platform, _, _) = detect("k8s-1.20-containerd-1.6-amd64", vec![node_json("faultlab-node", "containerd://1.6.20~ds1", "amd64")], "cgroup2fs\n").await;
        assert_eq!(
            platform.unwrap_err().to_string(),
            "/var/lib/faultlab/testbed/testbed.yaml names platform k8s-1.20-containerd-1.6-amd64, but its nodes report k8s-1.20-containerd-1.6-cgroup2-amd64 \
             (faultlab-node: kubelet v1.20.2, containerd://1.6.20~ds1, amd64, cgroup v2): correct its `platform`, or remove it and the nodes name the platform"
        );
        let (platform, _, _) = detect("k8s-1.20-containerd-1.6-amd64", vec![node_json("faultlab-node", "containerd://2.1.9", "amd64")], V1).await;
        assert!(platform.unwrap_err().to_string().contains("but its nodes report k8s-1.20-containerd-2.1-amd64"));
        let (platform, _, _) = detect("k8s-1.20-containerd-1.6-amd64", vec![node_json("elsewhere", "containerd://1.6.20", "amd64")], V1).await;
        assert_eq!(
            platform.unwrap_err().to_string(),
            "cannot tell the cluster's platform: the API lists none of the nodes /var/lib/faultlab/testbed/testbed.yaml describes (faultlab-node)"
        );
        let (platform, _, _) = detect("", vec![node_json("faultlab-node", "containerd://1.6.20", "amd64")], "sysfs\n").await;
        let err = platform.unwrap_err().to_string();
        assert!(err.starts_with("cannot tell the cluster's platform: node faultlab-node: cannot tell the cgroup version: `stat -fc %T /sys/fs/cgroup` printed \"sysfs\""), "{err}");
    }
}
