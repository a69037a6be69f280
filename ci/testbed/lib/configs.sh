# shellcheck shell=bash
# shellcheck disable=SC2034  # variables are used by the scripts that source lib.sh
# ci/testbed/lib.sh, part: the components' configuration files.
# Sourced by ci/testbed/lib.sh only.

# ------------------------------------------------------------ configs -------
# Each writer returns 0 when the file changed (so the caller can restart the component).
fl_write_containerd_config() {
  if [ "$FL_RUNTIME" = containerd2 ]; then
    fl_write_containerd2_config
    return
  fi
  fl_write_containerd_config_v2
}

# containerd 1.6's configuration, `version = 2`.
fl_write_containerd_config_v2() {
  {
    fl_containerd_config_head 2 containerd '"io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"'
    cat <<EOC
  [plugins."io.containerd.grpc.v1.cri"]
    sandbox_image = "$FL_PAUSE_REF"
    restrict_oom_score_adj = true
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
    enable_selinux = false
    [plugins."io.containerd.grpc.v1.cri".containerd]
      snapshotter = "overlayfs"
      default_runtime_name = "runc"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
          SystemdCgroup = false
          Root = "$FL_CTRD_STATE/runc"
    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = "/usr/lib/cni"
      conf_dir = "$FL_CNI_CONF_DIR"
      max_conf_num = 1
    [plugins."io.containerd.grpc.v1.cri".registry]
      # Per-registry hosts.toml and CAs (a scenario's registry puts its own here).
      config_path = "$FL_CTRD_HOSTS_DIR"
EOC
  } | fl_write_if_changed "$FL_CTRD_CONF"
}

# containerd 2's configuration, `version = 3`: the same settings under the CRI plugin's 2.x names
# (images: sandbox image, snapshotter, registry hosts; runtime: runc, CNI, OOM score). NRI, on by
# default in 2.x, is off: it would make /var/run/nri on the host. runc is bookworm's (FL_RUNC).
fl_write_containerd2_config() {
  {
    fl_containerd_config_head 3 "containerd 2" '"io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.blockfile", "io.containerd.snapshotter.v1.erofs", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing", "io.containerd.nri.v1.nri"'
    cat <<EOC
  [plugins."io.containerd.cri.v1.images"]
    snapshotter = "overlayfs"
    [plugins."io.containerd.cri.v1.images".pinned_images]
      sandbox = "$FL_PAUSE_REF"
    [plugins."io.containerd.cri.v1.images".registry]
      # Per-registry hosts.toml and CAs (a scenario's registry puts its own here).
      config_path = "$FL_CTRD_HOSTS_DIR"
  [plugins."io.containerd.cri.v1.runtime"]
    restrict_oom_score_adj = true
    enable_selinux = false
    [plugins."io.containerd.cri.v1.runtime".containerd]
      default_runtime_name = "runc"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
          BinaryName = "$FL_RUNC"
          SystemdCgroup = false
          Root = "$FL_CTRD_STATE/runc"
    [plugins."io.containerd.cri.v1.runtime".cni]
      bin_dirs = ["/usr/lib/cni"]
      conf_dir = "$FL_CNI_CONF_DIR"
      max_conf_num = 1
  [plugins."io.containerd.grpc.v1.cri"]
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
EOC
  } | fl_write_if_changed "$FL_CTRD_CONF"
}

# fl_containerd_config_head VERSION NAME DISABLED: the part of the selected node's containerd config that
# both versions share (its paths, its socket, no other listener), up to [plugins] and the opt plugin;
# DISABLED is the list of plugins it does not load, as TOML strings.
fl_containerd_config_head() {
  cat <<EOC
# faultlab test bed: $2 of the node $FL_NODE (runs in network namespace $FL_NETNS).
version = $1
root = "$FL_CTRD_ROOT"
state = "$FL_CTRD_STATE"
oom_score = 0
disabled_plugins = [$3]

[grpc]
  address = "$FL_CTRD_SOCK"

[ttrpc]
  address = ""

[debug]
  address = ""

[metrics]
  address = ""

[plugins]
  [plugins."io.containerd.internal.v1.opt"]
    path = "$FL_CTRD_OPT"
EOC
}

fl_write_cni_config() {
  fl_write_if_changed "$FL_CNI_CONF_DIR/10-faultlab.conflist" <<EOC
{
  "cniVersion": "0.4.0",
  "name": "faultlab",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "ipMasq": true,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$FL_CNI_DATA/networks",
        "ranges": [[{"subnet": "$FL_POD_CIDR", "gateway": "$FL_POD_GW"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOC
}

fl_write_kubelet_config() {
  {
    cat <<EOC
# faultlab test bed: kubelet of node $FL_NODE. Command-line flags (see $FL_KUBELET_EXTRA) override this.
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $FL_NODE_IP
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: $FL_PKI/ca.crt
authorization:
  mode: Webhook
cgroupDriver: cgroupfs
failSwapOn: false
clusterDomain: cluster.local
resolvConf: /etc/resolv.conf
# No DNS add-on runs here and no pod resolves names, but without a cluster DNS address the kubelet
# warns MissingClusterDNS for every pod it starts, which would litter every scenario's events.
clusterDNS: [$FL_CLUSTER_DNS]
clusterDomain: cluster.local
volumePluginDir: $FL_KUBELET_ROOT/volume-plugins
serializeImagePulls: false
# containerd's disk is a 1 GiB loop mount: with the default thresholds a nearly full disk evicts
# every pod at once, and image GC removes the pause image. Keep both out of the faults' way.
# nodefs is the host's own disk (the kubelet's root directory): an amount, not a share of it, so that a
# large disk with a few per cent free (here 252 GiB, of which a build tree once left 20 GiB, 8%) does
# not come near putting every node under DiskPressure.
evictionHard:
  imagefs.available: "0%"
  imagefs.inodesFree: "0%"
  nodefs.available: "1Gi"
  nodefs.inodesFree: "5%"
  memory.available: "100Mi"
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
EOC
    fl_kubelet_config_node_lines
  } | fl_write_if_changed "$FL_KUBELET_CONF"
}

# What sets nodes 2..N's kubelets apart on the one host's cgroup tree: each its own cgroup root
# (fl_setup_cgroup_root), under which it makes its kubepods. Node 1's: nothing (the file as it was).
fl_kubelet_config_node_lines() {
  [ -z "$FL_CGROUP_ROOT" ] || printf '# Two kubelets on one cgroup tree: this one keeps to its own root.\ncgroupRoot: %s\n' "$FL_CGROUP_ROOT"
}

# The cluster's certificates and kubeconfigs, and every node's configuration. FL_CHANGED[<component>]
# is 1 for each node component whose configuration changed (so up restarts it); FL_CHANGED_CONTAINERD
# and FL_CHANGED_KUBELET are node 1's (the VM node's part of up reads those).
fl_write_configs() {
  fl_make_pki
  fl_kubeconfig "$FL_KUBECONFIG" admin faultlab-admin
  fl_kubeconfig "$FL_TB/controller-manager.kubeconfig" controller-manager system:kube-controller-manager
  fl_kubeconfig "$FL_TB/scheduler.kubeconfig" scheduler system:kube-scheduler
  declare -gA FL_CHANGED=()
  local k
  for ((k = 1; k <= FL_NODE_COUNT; k++)); do
    fl_node_select "$k"
    fl_write_node_configs
  done
  fl_node_select 1
  FL_CHANGED_CONTAINERD=${FL_CHANGED[containerd]}
  FL_CHANGED_KUBELET=${FL_CHANGED[kubelet]}
}

# The selected node's certificate, kubelet kubeconfig, containerd, CNI and kubelet configuration.
fl_write_node_configs() {
  local ctrd=0 kubelet=0
  fl_cert "$FL_NODE_CERT" "/O=system:nodes/CN=system:node:$FL_NODE"
  fl_kubeconfig "$FL_KUBELET_KUBECONFIG" "$FL_NODE_CERT" "system:node:$FL_NODE" "$FL_CONTEXT" "$FL_NODE_APISERVER_URL"
  if fl_write_containerd_config; then ctrd=1; fi
  if fl_write_cni_config; then ctrd=1; fi
  if fl_write_kubelet_config; then kubelet=1; fi
  FL_CHANGED[$(fl_node_comp containerd)]=$ctrd
  FL_CHANGED[$(fl_node_comp kubelet)]=$kubelet
}
