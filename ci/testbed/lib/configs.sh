# shellcheck shell=bash
# shellcheck disable=SC2034  # variables are used by the scripts that source lib.sh
# ci/testbed/lib.sh, part: the components' configuration files.
# Sourced by ci/testbed/lib.sh only.

# ------------------------------------------------------------ configs -------
# The selected node's containerd, CNI and kubelet configuration, as `faultlab testbed config` prints them
# (their shape: harness/src/testbed/configs.rs; the values: lib.sh's). Each writer returns 0 when the file
# changed (so the caller can restart the component).
fl_write_containerd_config() { fl_write_node_config containerd "$FL_CTRD_CONF"; }

# The selected node's own runc, which its containerd config names (BinaryName): a link to the host's
# $FL_RUNC (so a fault that replaces runc, runtime-parts-mismatch, replaces this node's only). Made when
# missing (status 0: containerd must start again); anything else in its place is fatal.
fl_node_runc_link() {
  mkdir -p "${FL_NODE_RUNC%/*}"
  if [ -L "$FL_NODE_RUNC" ] && [ "$(readlink -- "$FL_NODE_RUNC")" = "$FL_RUNC" ]; then return 1; fi
  if [ -e "$FL_NODE_RUNC" ] || [ -L "$FL_NODE_RUNC" ]; then
    die "$FL_NODE_RUNC is not a link to $FL_RUNC (a fault left in place? faultlab cleanup puts the node's runc back); remove it and run up again"
  fi
  ln -s -- "$FL_RUNC" "$FL_NODE_RUNC"
}
fl_write_cni_config() {
  local changed=1
  if fl_cni_bin_links; then changed=0; fi
  if fl_write_node_config cni "$FL_CNI_CONF_DIR/10-faultlab.conflist"; then changed=0; fi
  return "$changed"
}

# The selected node's own CNI plugin directory: a link to each plugin of the host's /usr/lib/cni (so a
# fault that takes a plugin away, cni-plugin-missing, takes it from this node only). A missing link is
# made again (status 0: containerd's CNI changed); a file of another kind there is fatal.
# FL_CNI_PLUGINS: where the host's plugins are (Debian's containernetworking-plugins; test-lib's own).
FL_CNI_PLUGINS=${FL_CNI_PLUGINS:-/usr/lib/cni}
fl_cni_bin_links() {
  local made=1 plugin name
  mkdir -p "$FL_CNI_BIN_DIR"
  for plugin in "$FL_CNI_PLUGINS"/*; do
    [ -f "$plugin" ] || continue
    name=$FL_CNI_BIN_DIR/${plugin##*/}
    if [ -L "$name" ] && [ "$(readlink -- "$name")" = "$plugin" ]; then continue; fi
    if [ -e "$name" ] || [ -L "$name" ]; then die "$name is not a link to $plugin; remove it and run up again"; fi
    ln -s -- "$plugin" "$name"
    made=0
  done
  return "$made"
}
fl_write_kubelet_config() { fl_write_node_config kubelet "$FL_KUBELET_CONF"; }

# fl_write_node_config containerd|cni|kubelet <file>: the selected node's file, written when it changed
# (status 0, as fl_write_if_changed); faultlab failing is fatal, so no half-written file is left.
fl_write_node_config() {
  local text
  text=$(fl_faultlab testbed config "$1" --node "$FL_NODE" --netns "$FL_NETNS" --runtime "$FL_RUNTIME" \
    --containerd-root "$FL_CTRD_ROOT" --containerd-state "$FL_CTRD_STATE" --containerd-socket "$FL_CTRD_SOCK" \
    --containerd-opt "$FL_CTRD_OPT" --sandbox-image "$FL_PAUSE_REF" --registry-hosts-dir "$FL_CTRD_HOSTS_DIR" --runc "$FL_NODE_RUNC" \
    --cni-conf-dir "$FL_CNI_CONF_DIR" --cni-bin-dir "$FL_CNI_BIN_DIR" --cni-data "$FL_CNI_DATA" --pod-cidr "$FL_POD_CIDR" --pod-gateway "$FL_POD_GW" \
    --address "$FL_NODE_IP" --client-ca "$FL_PKI/ca.crt" --cluster-dns "$FL_CLUSTER_DNS" --kubelet-root "$FL_KUBELET_ROOT" \
    --kubelet-extra-flags "$FL_KUBELET_EXTRA" --cgroup-root "$FL_CGROUP_ROOT") || die "faultlab testbed config $1 of $FL_NODE failed"
  printf '%s\n' "$text" | fl_write_if_changed "$2"
}

# The cluster's certificates and kubeconfigs, and every node's configuration. FL_CHANGED[<component>]
# is 1 for each node component whose configuration changed (so up restarts it); FL_CHANGED_CONTAINERD
# and FL_CHANGED_KUBELET are node 1's (the VM node's part of up reads those).
fl_write_configs() {
  fl_faultlab_find
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
  if fl_node_runc_link; then ctrd=1; fi
  if fl_write_containerd_config; then ctrd=1; fi
  if fl_write_cni_config; then ctrd=1; fi
  if fl_write_kubelet_config; then kubelet=1; fi
  FL_CHANGED[$(fl_node_comp containerd)]=$ctrd
  FL_CHANGED[$(fl_node_comp kubelet)]=$kubelet
}
