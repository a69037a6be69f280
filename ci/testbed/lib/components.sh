# shellcheck shell=bash
# shellcheck disable=SC2034  # variables are used by the scripts that source lib.sh
# ci/testbed/lib.sh, part: starting each component with its flags.
# Sourced by ci/testbed/lib.sh only.

# ----------------------------------------------------- start components -----
# The network namespace the node's daemons start in ("-": the current one, inside the VM node).
fl_node_netns() { if [ "$FL_IN_VM" = 1 ]; then echo -; else echo "$FL_NETNS"; fi; }

# fl_node_start <base component> <argv...>: start the selected node's containerd or kubelet in the
# node's namespaces: node 1 in its network namespace (the host's mount namespace), nodes 2..N in their
# network and mount namespaces (fl_node_start_argv).
fl_node_start() {
  local comp
  comp=$(fl_node_comp "$1")
  shift
  if [ -n "$FL_NODE_MNTNS" ]; then
    fl_node_start_argv "$@"
    fl_start "$comp" - "${FL_NODE_START_ARGV[@]}"
  else
    fl_start "$comp" "$(fl_node_netns)" "$@"
  fi
}

# fl_node_start_argv <argv...>: into FL_NODE_START_ARGV, the argv that runs argv in the selected node's
# mount and network namespaces (nodes 2..N).
fl_node_start_argv() {
  FL_NODE_START_ARGV=(nsenter --mount="$FL_NODE_MNTNS" --net="/run/netns/$FL_NETNS" -- "$@")
}

fl_start_etcd() {
  mkdir -p "$FL_ETCD_DATA"
  chmod 0700 "$FL_ETCD_DATA"
  fl_start etcd - /usr/bin/etcd --name=faultlab --data-dir="$FL_ETCD_DATA" \
    --listen-client-urls="$FL_ETCD_CLIENT" --advertise-client-urls="$FL_ETCD_CLIENT" \
    --listen-peer-urls="$FL_ETCD_PEER" --initial-advertise-peer-urls="$FL_ETCD_PEER" \
    --initial-cluster="faultlab=$FL_ETCD_PEER" --initial-cluster-state=new \
    --cert-file="$FL_PKI/etcd-server.crt" --key-file="$FL_PKI/etcd-server.key" \
    --client-cert-auth --trusted-ca-file="$FL_PKI/etcd-ca.crt" \
    --peer-cert-file="$FL_PKI/etcd-peer.crt" --peer-key-file="$FL_PKI/etcd-peer.key" \
    --peer-client-cert-auth --peer-trusted-ca-file="$FL_PKI/etcd-ca.crt" \
    --snapshot-count=10000 --logger=zap --log-outputs=stderr
  fl_wait_comp etcd 60 fl_health_etcd
}

fl_start_apiserver() {
  fl_start kube-apiserver - "$FL_BIN/kube-apiserver" \
    --advertise-address="$FL_APISERVER_ADVERTISE" --bind-address="$FL_APISERVER_BIND" --secure-port="$FL_APISERVER_PORT" \
    --insecure-port=0 --etcd-servers="$FL_ETCD_CLIENT" --etcd-cafile="$FL_PKI/etcd-ca.crt" \
    --etcd-certfile="$FL_PKI/apiserver-etcd-client.crt" --etcd-keyfile="$FL_PKI/apiserver-etcd-client.key" \
    --service-cluster-ip-range="$FL_SERVICE_CIDR" \
    --tls-cert-file="$FL_PKI/apiserver.crt" --tls-private-key-file="$FL_PKI/apiserver.key" \
    --client-ca-file="$FL_PKI/ca.crt" \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="$FL_PKI/sa.pub" --service-account-signing-key-file="$FL_PKI/sa.key" \
    --authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction \
    --kubelet-client-certificate="$FL_PKI/apiserver-kubelet-client.crt" \
    --kubelet-client-key="$FL_PKI/apiserver-kubelet-client.key" \
    --kubelet-preferred-address-types=InternalIP \
    --requestheader-client-ca-file="$FL_PKI/front-proxy-ca.crt" --requestheader-allowed-names=front-proxy-client \
    --requestheader-username-headers=X-Remote-User --requestheader-group-headers=X-Remote-Group \
    --requestheader-extra-headers-prefix=X-Remote-Extra- \
    --proxy-client-cert-file="$FL_PKI/front-proxy-client.crt" --proxy-client-key-file="$FL_PKI/front-proxy-client.key" \
    --allow-privileged=true --profiling=false --event-ttl=1h
  fl_wait_comp kube-apiserver 120 fl_health_apiserver
}

fl_start_controller_manager() {
  local kc=$FL_TB/controller-manager.kubeconfig
  fl_start kube-controller-manager - "$FL_BIN/kube-controller-manager" \
    --kubeconfig="$kc" --authentication-kubeconfig="$kc" --authorization-kubeconfig="$kc" \
    --bind-address=127.0.0.1 --secure-port=10257 --port=0 --leader-elect=false \
    --service-account-private-key-file="$FL_PKI/sa.key" --root-ca-file="$FL_PKI/ca.crt" \
    --use-service-account-credentials=true \
    --cluster-signing-cert-file="$FL_PKI/ca.crt" --cluster-signing-key-file="$FL_PKI/ca.key" \
    --profiling=false
  fl_wait_comp kube-controller-manager 60 fl_health_controller_manager
}

fl_start_scheduler() {
  local kc=$FL_TB/scheduler.kubeconfig
  fl_start kube-scheduler - "$FL_BIN/kube-scheduler" \
    --kubeconfig="$kc" --authentication-kubeconfig="$kc" --authorization-kubeconfig="$kc" \
    --bind-address=127.0.0.1 --secure-port=10259 --port=0 --leader-elect=false --profiling=false
  fl_wait_comp kube-scheduler 60 fl_health_scheduler
}

fl_start_containerd() {
  mkdir -p "$FL_CTRD_STATE" "$FL_CNI_DATA"
  # containerd finds its shim (containerd-shim-runc-v2) on PATH: its own directory's first.
  fl_node_start containerd env PATH="$FL_CTRD_BIN_DIR:$PATH" "$FL_CTRD_BIN_DIR/containerd" --config "$FL_CTRD_CONF"
  fl_wait_comp "$(fl_node_comp containerd)" "${FL_CONTAINERD_TIMEOUT:-60}" fl_health_containerd
}

# Kubelet flags: the base set, then one flag per line of the extra-flags file (later flags win).
fl_kubelet_flags() {
  FL_KUBELET_ARGS=(
    --config="$FL_KUBELET_CONF"
    --kubeconfig="$FL_KUBELET_KUBECONFIG"
    --root-dir="$FL_KUBELET_ROOT"
    --cert-dir="$FL_KUBELET_ROOT/pki"
    --container-runtime=remote
    --container-runtime-endpoint="unix://$FL_KUBELET_CRI_SOCK"
    --image-service-endpoint="unix://$FL_KUBELET_CRI_SOCK"
    --runtime-request-timeout=2m
    --hostname-override="$FL_NODE"
    --node-ip="$FL_NODE_IP"
    --v=1
  )
  if [ -f "$FL_KUBELET_EXTRA" ]; then
    local line
    while IFS= read -r line || [ -n "$line" ]; do
      line=${line%%#*}
      line=$(printf '%s' "$line" | sed -e 's/^[[:space:]]*//' -e 's/[[:space:]]*$//')
      [ -n "$line" ] && FL_KUBELET_ARGS+=("$line")
    done <"$FL_KUBELET_EXTRA"
  fi
}

fl_start_kubelet() {
  mkdir -p "$FL_KUBELET_ROOT"
  fl_kubelet_flags
  fl_node_start kubelet "$FL_BIN/kubelet" "${FL_KUBELET_ARGS[@]}"
  fl_wait_comp "$(fl_node_comp kubelet)" "${FL_KUBELET_TIMEOUT:-90}" fl_health_kubelet
}

# containerd 2's CRI for the 1.20 kubelet: `faultlab-cri proxy` on the node's own socket (made 0600 by
# the proxy), runtime.v1alpha2 calls renamed to runtime.v1. It runs on the host's side of
# the node (a unix socket needs no network namespace) in the node's mount namespace (nodes 2..N), where
# the kubelet looks for the socket.
fl_start_cri_proxy() {
  mkdir -p "$(dirname "$FL_CRI_PROXY_SOCK")"
  fl_node_start cri-proxy "$FL_CRI_BIN" proxy --listen "$FL_CRI_PROXY_SOCK" --upstream "unix://$FL_CTRD_SOCK"
  fl_wait_comp "$(fl_node_comp cri-proxy)" 30 fl_health_cri_proxy
}

# The node half of faultlab's CSI driver (faultlab-cri csi-node: the kubelet's plugin registration, CSI's
# Identity and Node services; harness/cri/src/csi.rs): its sockets under the kubelet's root, its volumes
# directories of FL_CSI_DISKS, which every node on this machine shares (a disk on a network). It runs in
# the node's mount namespace itself, not through `ip netns exec` (which would give it a mount namespace of
# its own, where the bind mounts it makes for the kubelet would stay); it needs no network.
fl_start_csi_node() {
  # The volumes are the pods' data: root's alone.
  install -d -m 0700 "$FL_CSI_DISKS"
  local argv=("$FL_CRI_BIN" csi-node --node-id "$FL_NODE" --driver "$FL_CSI_DRIVER" --kubelet-root "$FL_KUBELET_ROOT" --disks "$FL_CSI_DISKS")
  if [ -n "$FL_NODE_MNTNS" ]; then argv=(nsenter --mount="$FL_NODE_MNTNS" -- "${argv[@]}"); fi
  fl_start "$(fl_node_comp csi-node)" - "${argv[@]}"
  fl_wait_comp "$(fl_node_comp csi-node)" 30 fl_health_csi_node
}

# Start a node's component, as its node (the caller's selected node stays).
fl_node_comp_start() {
  case $1 in
    containerd) fl_start_containerd ;;
    cri-proxy) fl_start_cri_proxy ;;
    kubelet) fl_start_kubelet ;;
    csi-node) fl_start_csi_node ;;
  esac
}

fl_start_comp() {
  case $1 in
    etcd) fl_start_etcd ;;
    kube-apiserver) fl_start_apiserver ;;
    kube-controller-manager) fl_start_controller_manager ;;
    kube-scheduler) fl_start_scheduler ;;
    containerd | cri-proxy | kubelet | csi-node | containerd@* | cri-proxy@* | kubelet@* | csi-node@*) fl_on_comp_node "$1" fl_node_comp_start ;;
    vm | vm@*) fl_on_comp_node "$1" fl_start_vm ;;
  esac
}
