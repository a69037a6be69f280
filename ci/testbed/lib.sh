# shellcheck shell=bash
# shellcheck disable=SC2034  # variables are used by the scripts that source this file
# Shared definitions and functions of the faultlab test bed.
# Sourced by ci/testbed/{up,down,status,node,smoke,build,...}; never run directly.

set -euo pipefail
# Command substitutions fail like any other command (a failed mktemp inside $(...) must not
# leave an empty path behind).
shopt -s inherit_errexit
umask 022

FL_TESTBED_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# ---------------------------------------------------------------- layout ----
FL_CACHE=/var/cache/faultlab              # kept across down: binaries, GOCACHE, images
FL_LIB=/var/lib/faultlab                  # state of the running test bed
FL_RUN=/run/faultlab                      # sockets, PID files, runtime state
FL_LOG=/var/log/faultlab/testbed          # one log per component
FL_TB=$FL_LIB/testbed                     # kubeconfig, testbed.yaml, pki, configs
FL_PKI=$FL_TB/pki
FL_PIDS=$FL_RUN/pids
FL_HOSTREC=$FL_LIB/host-record            # what up created/changed on the host, for down

# The host side of each node's link lives in the host's own network namespace, so it uses the RFC 2544
# benchmarking range instead of an RFC 1918 private range. Node 1's host end is also where the API
# server listens (FL_HOST_IP); node K's link is ci/testbed/nodes' (fl_node_select).
FL_HOST_IP=198.18.213.1
FL_LINK_PREFIX=30

# ------------------------------------------------------- the nodes ------
# `up --nodes N` (default 1): node 1 is faultlab-node, with the names, paths and addresses the test bed
# always had; nodes 2..N are faultlab-node-K, each with its own network namespace, link, containerd (own
# loop disk, state, socket, CNI) and kubelet (own root dir, cgroup root, mount namespace for the paths
# the 1.20 kubelet hard-codes). up records N in $FL_LIB/node-count, so down, status, node and smoke
# follow it. fl_node_select K points the node variables (FL_NODE, FL_NETNS, FL_CTRD_*, FL_KUBELET_*,
# FL_POD_CIDR, ...) at node K.
# What sets node K apart (name, link, pods' range, places) is computed by harness/src/testbed/nodes.rs,
# which writes it into ci/testbed/nodes (`faultlab testbed nodes`; its tests check the file): one line a
# node, `K KEY=value...`, read here without running anything (down and the VM node have no faultlab).
FL_NODE_KEYS=" FL_NODE FL_VETH_HOST FL_VETH_NODE FL_LINK_HOST_IP FL_NODE_IP FL_POD_CIDR FL_POD_GW FL_NODE_SUBDIR FL_NODE_MNTNS_FILE FL_CGROUP_ROOT FL_NODE_CERT FL_VM_IP FL_VM_SSH_PORT "
FL_NODE_LINES=()  # [K]: node K's KEY=value words, each key one of FL_NODE_KEYS
FL_NODE_NAMES=()  # [K]: node K's name
# fl_read_nodes FILE: FL_NODE_LINES and FL_NODE_NAMES from ci/testbed/nodes (exit 2 on a line that is
# not `K KEY=value...` with the keys of FL_NODE_KEYS: no value is ever evaluated).
fl_read_nodes() {
  local k rest word
  local -a words
  while read -r k rest; do
    case $k in '' | '#'*) continue ;; [1-9] | [1-9][0-9]) ;; *) echo "$1: not a node's line: $k $rest" >&2; exit 2 ;; esac
    read -ra words <<<"$rest"
    for word in "${words[@]}"; do
      case $word in *=*) ;; *) echo "$1: node $k: not KEY=value: $word" >&2; exit 2 ;; esac
      case $FL_NODE_KEYS in *" ${word%%=*} "*) ;; *) echo "$1: node $k: unknown key in $word" >&2; exit 2 ;; esac
      [ "${word%%=*}" != FL_NODE ] || FL_NODE_NAMES[k]=${word#*=}
    done
    [ -n "${FL_NODE_NAMES[k]:-}" ] || { echo "$1: node $k: no FL_NODE" >&2; exit 2; }
    FL_NODE_LINES[k]=$rest
  done <"$1"
}
fl_read_nodes "$FL_TESTBED_DIR/nodes"
FL_NODE_MAX=${#FL_NODE_LINES[@]}
FL_NODE_COUNT_FILE=$FL_LIB/node-count
if [ -z "${FL_NODE_COUNT:-}" ]; then
  FL_NODE_COUNT=1
  if [ ! -f /etc/faultlab/vm ] && [ -s "$FL_NODE_COUNT_FILE" ]; then FL_NODE_COUNT=$(cat "$FL_NODE_COUNT_FILE"); fi
fi
case $FL_NODE_COUNT in
  [1-9] | [1-9][0-9]) [ "$FL_NODE_COUNT" -le "$FL_NODE_MAX" ] || { echo "FL_NODE_COUNT=$FL_NODE_COUNT: at most $FL_NODE_MAX nodes" >&2; exit 2; } ;;
  *) echo "FL_NODE_COUNT=$FL_NODE_COUNT: not a node count (1..$FL_NODE_MAX)" >&2; exit 2 ;;
esac

# ------------------------------------------------------ the node's arch ----
# The node runs natively (the host's architecture: a network namespace on the host) or, for another
# architecture, in an emulated VM (ci/testbed/lib/vm.sh): `up --arch arm64`. up records the choice in
# $FL_LIB/node-arch, so down, status, node and smoke follow it. Inside the VM, /etc/faultlab/vm marks
# the VM's own side.
# The host's architecture as Go and OCI name it.
fl_host_arch() {
  case $(uname -m) in
    x86_64) echo amd64 ;;
    aarch64) echo arm64 ;;
    armv7l) echo arm ;;
    *) uname -m ;;
  esac
}
FL_VM_MARKER=/etc/faultlab/vm
FL_IN_VM=0
[ -f "$FL_VM_MARKER" ] && FL_IN_VM=1
if [ -z "${FL_NODE_ARCH:-}" ]; then
  if [ "$FL_IN_VM" = 1 ]; then
    FL_NODE_ARCH=$(fl_host_arch)
  elif [ -s "$FL_LIB/node-arch" ]; then
    FL_NODE_ARCH=$(cat "$FL_LIB/node-arch")
  else
    FL_NODE_ARCH=$(fl_host_arch)
  fi
fi
# ------------------------------------------------------ the node's cgroups ----
# The cgroup hierarchy the node runs on: 1 (the legacy per-controller hierarchies) or 2 (the unified
# one). A node on this host shares the host's, which the test bed does not change; so a node asked for on
# the other one is a VM of the host's own architecture (under KVM), whose boot script mounts the one
# asked for (`up --cgroup 2` on this cgroup v1 host; ci/testbed/lib/vm.sh, ci/testbed/vm/boot). up
# records the choice in $FL_LIB/node-cgroup, so down, status, node and smoke follow it; empty: the
# node's own default (the host's for a node on the host, v1 for the emulated node).
# The host's hierarchy: cgroup2fs at /sys/fs/cgroup, or (under `ip netns exec`, whose /sys is a sysfs of
# its own) a /proc/self/cgroup of `0::` lines only.
fl_host_cgroup() {
  if [ "$(stat -fc %T /sys/fs/cgroup 2>/dev/null)" = cgroup2fs ] || ! grep -qv '^0::' /proc/self/cgroup 2>/dev/null; then
    echo 2
  else
    echo 1
  fi
}
if [ -z "${FL_NODE_CGROUP:-}" ] && [ "$FL_IN_VM" = 0 ] && [ -s "$FL_LIB/node-cgroup" ]; then
  FL_NODE_CGROUP=$(cat "$FL_LIB/node-cgroup")
fi
FL_NODE_CGROUP=${FL_NODE_CGROUP:-}
case $FL_NODE_CGROUP in
  "" | 1 | 2) ;;
  *) echo "FL_NODE_CGROUP=$FL_NODE_CGROUP: not a cgroup version of the test bed's (1, 2)" >&2; exit 2 ;;
esac
# FL_VM=1: the node is the VM (on the host: the VM's control side; in the VM: FL_IN_VM=1 too): a node of
# another architecture (emulated), or on another cgroup hierarchy than the host's (KVM).
FL_VM=0
if [ "$FL_IN_VM" = 1 ] || [ "$FL_NODE_ARCH" != "$(fl_host_arch)" ]; then FL_VM=1; fi
if [ "$FL_IN_VM" = 0 ] && [ -n "$FL_NODE_CGROUP" ] && [ "$FL_NODE_CGROUP" != "$(fl_host_cgroup)" ]; then FL_VM=1; fi
# FL_VM_EMULATED=1 (on the host): the VM runs under QEMU's TCG, full emulation (slow: the test bed's own
# waits scale, the VM's containerd disk is smaller): a VM of another architecture, or of the host's where
# KVM cannot run it (fl_vm_kvm_usable); 0: under KVM. FL_VM_ACCEL=kvm|tcg overrides the choice.
# KVM that is hardware virtualization (kvm_intel, kvm_amd). These project machines are themselves VMs
# whose /dev/kvm is kvm_pvm (a KVM without hardware virtualization, for guest kernels built for it): a
# stock Debian kernel there crawls through its decompressor (seen: still decompressing after 60 s, where
# TCG boots it in under 20 s), so the host's-architecture VM is emulated there too.
fl_vm_kvm_usable() {
  [ -w /dev/kvm ] && { [ -d /sys/module/kvm_intel ] || [ -d /sys/module/kvm_amd ]; }
}
FL_VM_EMULATED=0
if [ "$FL_IN_VM" = 0 ] && [ "$FL_VM" = 1 ]; then
  case ${FL_VM_ACCEL:-} in
    kvm) ;;
    tcg) FL_VM_EMULATED=1 ;;
    "") if [ "$FL_NODE_ARCH" != "$(fl_host_arch)" ] || ! fl_vm_kvm_usable; then FL_VM_EMULATED=1; fi ;;
    *) echo "FL_VM_ACCEL=$FL_VM_ACCEL: not kvm or tcg" >&2; exit 2 ;;
  esac
  if [ "$FL_VM_EMULATED" = 0 ] && [ "$FL_NODE_ARCH" != "$(fl_host_arch)" ]; then
    echo "FL_VM_ACCEL=kvm: KVM runs the host's architecture only, not $FL_NODE_ARCH" >&2
    exit 2
  fi
fi
# ------------------------------------------------------ the node's runtime ----
# containerd (Debian bookworm's 1.6, a `version = 2` config; the default) or containerd2 (Debian sid's
# 2.x: its binaries only, unpacked into $FL_CACHE/containerd2 without touching the system's apt state,
# with a `version = 3` config). The 1.20 kubelet speaks CRI runtime.v1alpha2 only and containerd 2 serves
# runtime.v1 only: each node's kubelet reaches it through `faultlab-cri proxy` (the component
# cri-proxy), which renames the calls and passes their bytes on. `up --runtime containerd2` records the
# choice in $FL_LIB/node-runtime, so down, status, node and smoke follow it (FL_RUNTIME overrides).
if [ -z "${FL_RUNTIME:-}" ]; then
  FL_RUNTIME=containerd
  if [ -s "$FL_LIB/node-runtime" ]; then FL_RUNTIME=$(cat "$FL_LIB/node-runtime"); fi
fi
case $FL_RUNTIME in
  containerd | containerd2) ;;
  *) echo "FL_RUNTIME=$FL_RUNTIME: not a runtime of the test bed's (containerd, containerd2)" >&2; exit 2 ;;
esac
# containerd's binaries (containerd, ctr, containerd-shim-runc-v2): Debian's in /usr/bin, or sid's 2.x
# unpacked under $FL_CTRD2_HOME/<version>/usr/bin (fl_install_containerd2; up records the directory in
# $FL_LIB/containerd-bin-dir).
FL_CTRD2_HOME=/var/cache/faultlab/containerd2
FL_CTRD_BIN_DIR=/usr/bin
if [ "$FL_RUNTIME" = containerd2 ]; then
  FL_CTRD_BIN_DIR=""
  if [ -s "$FL_LIB/containerd-bin-dir" ]; then FL_CTRD_BIN_DIR=$(cat "$FL_LIB/containerd-bin-dir"); fi
fi
# Where the nodes reach the API server.
FL_APISERVER_BIND=$FL_HOST_IP
FL_APISERVER_ADVERTISE=$FL_HOST_IP
# QEMU user-mode networking (slirp), restricted (lib/vm.sh fl_vm_netdev): each VM has a network of its
# own, where it is FL_VM_IP on eth0 (node K's line of ci/testbed/nodes: 198.18.214.(14+K)), its gateway
# QEMU's 198.18.214.2, which reaches nothing; 198.18.214.4 is where QEMU forwards the API server's port
# and a scenario's registry ports to this host's loopback, where they listen. Nothing is added to the
# host's links or routes.
FL_VM_NET=198.18.214.0/24
FL_VM_HOST_ALIAS=198.18.214.2
FL_VM_DNS=198.18.214.3
FL_VM_FORWARD=198.18.214.4
FL_VM_PREFIX=24
# The API server; a scenario's registry and private registry (RegistryProfile::PORT, PRIVATE_PORT).
FL_VM_FORWARDED_PORTS=(6443 5443 5444)
if [ "$FL_VM" = 1 ]; then
  FL_APISERVER_BIND=127.0.0.1
  FL_APISERVER_ADVERTISE=$FL_VM_FORWARD
fi
# Pods live only inside their node's network namespace. Like every address the test bed makes, the pod
# and service ranges are in 198.18.0.0/15 (benchmarking, never a private range): the pods' bridge is
# the node's (ci/testbed/nodes), the service range only an apiserver setting (kind's clusters take
# 198.19.0.0/17 and 198.19.128.0/20).
FL_SERVICE_CIDR=198.19.176.0/20
FL_SERVICE_IP=198.19.176.1
FL_CLUSTER_DNS=198.19.176.10
FL_APISERVER_PORT=6443
FL_ETCD_DATA=$FL_LIB/etcd
# containerd's own disk: 1 GiB (also in a VM under KVM); 192 MiB on an emulated node. disk-full fills 80 % of
# its free space with images streamed over ssh, which the emulated CPU takes at about 1 MB/s (1 GiB: 521 s
# of a CI run; 384 MiB: 241 s); the node's own images and the scenarios' take about 15 MiB.
# (In the VM, the size the host's up passes to `node prepare`.)
FL_DISK_MIB=1024
[ "$FL_VM_EMULATED" = 0 ] || FL_DISK_MIB=192
[ "$FL_IN_VM" = 0 ] || FL_DISK_MIB=${FL_VM_DISK_MIB:-192}
# Persistent mount namespaces of nodes 2..N (bind-mounted files, as `ip netns` keeps network ones).
FL_MNTNS_DIR=$FL_RUN/mntns
# Paths the 1.20 kubelet and containerd use whatever one configures, which two kubelets on one host
# would share: pod logs (a kubelet's log GC removes every pod log directory of a pod it does not know,
# so node 1's kubelet would delete node 2's logs and the other way round) and the device plugins'
# socket directory (each kubelet empties it when it starts). Nodes 2..N see their own copy of each
# (bind mounts in the node's mount namespace); node 1 keeps the host's.
FL_NODE_PRIVATE_PATHS=(/var/log/pods /var/log/containers /var/lib/kubelet/device-plugins)

# fl_node_name K: node K's name, which is also its network namespace's (status 1 if there is no node K).
fl_node_name() {
  case $1 in [1-9] | [1-9][0-9]) [ -n "${FL_NODE_NAMES[$1]:-}" ] && echo "${FL_NODE_NAMES[$1]}" ;; *) return 1 ;; esac
}

# fl_node_index NAME: the K of node NAME (status 1 if NAME is no node name of the test bed's).
fl_node_index() {
  local k
  for k in "${!FL_NODE_NAMES[@]}"; do
    if [ "${FL_NODE_NAMES[k]}" = "$1" ]; then echo "$k"; return 0; fi
  done
  return 1
}

# fl_node_select K: the node variables for node K (1 <= K <= FL_NODE_MAX), from its line of
# ci/testbed/nodes. Node 1's are the test bed's single node's, exactly as they always were: its files
# directly under $FL_LIB, $FL_TB and $FL_RUN; node K's under nodes/faultlab-node-K/ of each.
fl_node_select() {
  local k=$1 word
  local -a words
  case $k in [1-9] | [1-9][0-9]) ;; *) die "fl_node_select: no node $k" ;; esac
  [ -n "${FL_NODE_LINES[k]:-}" ] || die "fl_node_select: no node $k (at most $FL_NODE_MAX)"
  read -ra words <<<"${FL_NODE_LINES[k]}"
  for word in "${words[@]}"; do printf -v "${word%%=*}" '%s' "${word#*=}"; done
  FL_NODE_INDEX=$k
  FL_NETNS=$FL_NODE
  # The node's gateway and the device of its default route (what the default-route fault takes away).
  FL_NODE_GATEWAY=$FL_LINK_HOST_IP
  FL_NODE_DEVICE=$FL_VETH_NODE
  if [ "$FL_VM" = 1 ]; then
    # Each node a VM of its own (FL_VM_IP, FL_VM_SSH_PORT: its line's): a machine of its own, so no
    # mount namespace and the kubelet's default cgroup root; its files keep node K's paths, the same in
    # the VM as on the host.
    # shellcheck disable=SC2153  # FL_VM_IP: the node's line's (fl_read_nodes)
    FL_NODE_IP=$FL_VM_IP
    FL_NODE_GATEWAY=$FL_VM_HOST_ALIAS
    FL_NODE_DEVICE=eth0
    FL_NODE_MNTNS_FILE=""
    FL_CGROUP_ROOT=""
  fi
  FL_NODE_LIB=$FL_LIB$FL_NODE_SUBDIR
  FL_VM_STATE=$FL_NODE_LIB/vm  # the running VM's disk overlay, the image it boots (lib/vm.sh)
  FL_VM_KNOWN_HOSTS=$FL_VM_STATE/known_hosts  # its host key at its forwarded port
  FL_NODE_TB=$FL_TB$FL_NODE_SUBDIR
  FL_NODE_RUN=$FL_RUN$FL_NODE_SUBDIR
  FL_NODE_MNTNS=${FL_NODE_MNTNS_FILE:+$FL_MNTNS_DIR/$FL_NODE_MNTNS_FILE}  # empty: the host's mount namespace
  FL_CTRD_ROOT=$FL_NODE_LIB/containerd    # mountpoint of the loop disk
  FL_CTRD_OPT=$FL_NODE_LIB/containerd-opt
  FL_CTRD_STATE=$FL_NODE_RUN/containerd
  FL_CTRD_SOCK=$FL_CTRD_STATE/containerd.sock
  # Where the kubelet reaches the CRI: containerd's socket, or (containerd2) the node's cri-proxy.
  FL_CRI_PROXY_SOCK=$FL_NODE_RUN/cri-proxy.sock
  FL_KUBELET_CRI_SOCK=$FL_CTRD_SOCK
  [ "$FL_RUNTIME" != containerd2 ] || FL_KUBELET_CRI_SOCK=$FL_CRI_PROXY_SOCK
  FL_CTRD_CONF_DIR=$FL_NODE_TB/containerd
  FL_CTRD_CONF=$FL_CTRD_CONF_DIR/config.toml
  FL_CTRD_HOSTS_DIR=$FL_CTRD_CONF_DIR/certs.d
  FL_CNI_CONF_DIR=$FL_NODE_TB/cni/net.d
  FL_CNI_BIN_DIR=$FL_NODE_TB/cni/bin       # links to /usr/lib/cni's plugins: the node's own
  FL_NODE_RUNC=$FL_NODE_TB/runtime/runc    # a link to $FL_RUNC: the node's own
  FL_CNI_DATA=$FL_NODE_LIB/cni
  FL_DISK_DIR=$FL_NODE_LIB/disk
  FL_DISK_FILE=$FL_DISK_DIR/containerd.ext4
  FL_KUBELET_ROOT=$FL_NODE_LIB/kubelet
  FL_KUBELET_CONF=$FL_NODE_TB/kubelet/config.yaml
  FL_KUBELET_EXTRA=$FL_NODE_TB/kubelet/extra-flags
  FL_KUBELET_KUBECONFIG=$FL_NODE_TB/kubelet/kubeconfig
  FL_NODE_IMAGES=$FL_NODE_LIB/images       # which image builds were imported
  FL_NODE_DESCRIPTION=$FL_NODE_TB/node.yaml  # nodes 2..N: the node's part of the description
}

FL_KUBECONFIG=$FL_TB/kubeconfig
FL_CONTEXT=faultlab-testbed
FL_DESCRIPTION=$FL_TB/testbed.yaml
FL_NODE_PACKAGE=/opt/cloud/cce/package/node-package/pause-3.1.tgz
FL_PAUSE_REF=faultlab.invalid/cce-pause:3.1
FL_BUSYBOX_REF=faultlab.invalid/busybox:1.35

# What a scenario's image registry runs on this machine (faultlab starts them: harness/src/faults/
# registry.rs): Debian's distribution registry, nginx in front of it, htpasswd for its logins.
FL_REGISTRY_PACKAGES=(docker-registry nginx-light apache2-utils)
FL_PACKAGES=(golang-1.15-go etcd-server containerd runc containernetworking-plugins busybox-static
  gcc libc6-dev openssl iproute2 iptables e2fsprogs util-linux procps curl dpkg-dev
  ca-certificates kmod "${FL_REGISTRY_PACKAGES[@]}")

# Host-global sysctls the 1.20 kubelet sets when it starts (pkg/kubelet/cm setupKernelTunables).
# up records their values and down puts them back.
FL_KUBELET_SYSCTLS=(vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops
  kernel.keys.root_maxkeys kernel.keys.root_maxbytes)

# faultlab's machine-wide locks (harness/src/machine_lock.rs: ROOT_DIR): root's own directory, mode 0700.
# A run holds host.lock (shared; alone for a fault that reaches past its node into the host) and its
# ports of 127.0.0.1; these scripts hold apt.lock while they install packages and host-record.lock while
# they record or put back what the host had. The empty files stay, as in /run/lock.
FL_LOCK_DIR=/run/faultlab-locks

fl_lock_dir() {
  mkdir -m 0700 "$FL_LOCK_DIR" 2>/dev/null || true
  if [ -L "$FL_LOCK_DIR" ] || [ "$(stat -c '%u %a' "$FL_LOCK_DIR")" != "0 700" ]; then
    die "$FL_LOCK_DIR is not root's own directory of mode 0700 ($(stat -c '%U %a' "$FL_LOCK_DIR")): faultlab keeps its machine-wide locks there; remove it"
  fi
}

# fl_locked NAME COMMAND...: run COMMAND (a function too) holding FL_LOCK_DIR/NAME.lock (flock), which other
# processes of ours take before the same work. Reentrant within this shell; a failure that ends the shell
# gives the lock back with it.
fl_locked() {
  local name=$1 var fd
  var=FL_LOCKED_${1//-/_}
  shift
  if [ -n "${!var:-}" ]; then "$@"; return; fi
  fl_lock_dir
  exec {fd}>>"$FL_LOCK_DIR/$name.lock"
  flock "$fd"
  printf -v "$var" '%s' "$fd"
  "$@"
  unset "$var"
  exec {fd}>&-
}

# fl_host_shared COMMAND...: run COMMAND (a program, not a function) holding FL_LOCK_DIR/host.lock shared, as a
# faultlab run whose nodes share this kernel does (harness/src/machine_lock.rs), so that no host-wide fault of
# a faultlab process beside it (inotify-limit on kind) lowers a kernel limit while COMMAND starts kubelets.
# flock(1) holds the lock itself (-o): the daemons COMMAND starts do not inherit it. Never around faultlab's
# own runs on this test bed: a host-wide one would wait for it for ever.
fl_host_shared() {
  fl_lock_dir
  flock -o -s "$FL_LOCK_DIR/host.lock" "$@"
}

# fl_host_shared_self "$0" ARGS...: at the top of a script that starts or stops what shares this kernel
# (ci/testbed/up and down, ci/kind/up and down: kubelets, containerd, Docker and its kind nodes), before it
# opens any lock of its own: run the script again at once under fl_host_shared, so that it holds host.lock
# shared until it ends. A host-wide fault of a faultlab process beside it (inotify-limit) counted the
# inotify instances root holds and set the limit just above them: a daemon started meanwhile fails, and
# one stopped gives instances back, so that the fault's workload starts after all (CI at stop 44: the test
# bed's inotify-limit while the kind suite beside it went down). The copy run under flock(1) is its child
# (FL_HOST_SHARED_HOLDER, the flock's PID), which goes on; a script of these that another runs holds the
# lock again, shared beside its caller's.
fl_host_shared_self() {
  if [ "${FL_HOST_SHARED_HOLDER:-}" = "$PPID" ]; then return 0; fi
  export FL_HOST_SHARED_HOLDER=$$
  fl_lock_dir
  exec flock -o -s "$FL_LOCK_DIR/host.lock" "$@"
}

# The host records of our environments that share this host's kernel and fixed paths: the test bed's
# (FL_HOSTREC) and the kind environment's (ci/kind/lib.sh: FK_HOSTREC). Both may be up at once (.ci/run runs
# the kind suite beside the test bed's), so the first one up records the host as it was, the next one
# copies that, and the last one down puts it back (the work under host-record.lock).
FL_HOST_RECORDS=("$FL_HOSTREC" /var/lib/faultlab-kind/host-record)

# The host records of the environments other than DIR's that are up, one a line.
fl_peer_records() {
  local d
  for d in "${FL_HOST_RECORDS[@]}"; do
    if [ "$d" != "$1" ] && [ -d "$d" ]; then printf '%s\n' "$d"; fi
  done
  return 0
}

# Record the values of FL_KUBELET_SYSCTLS in DIR (sysctl.<name>), each once: the first record wins.
# Every kubelet that shares the host's kernel sets them (the test bed's, and a kind node's: /proc/sys
# is writable in a privileged container and these are not namespaced), so with another environment of
# ours up, its record is the host's value, not what the kernel says now. Call it under host-record.lock.
fl_record_sysctls() {
  local dir=$1 s peer from
  mkdir -p "$dir"
  for s in "${FL_KUBELET_SYSCTLS[@]}"; do
    [ ! -f "$dir/sysctl.$s" ] || continue
    from=""
    for peer in $(fl_peer_records "$dir"); do
      if [ -s "$peer/sysctl.$s" ]; then from=$peer/sysctl.$s; break; fi
    done
    if [ -n "$from" ]; then cp "$from" "$dir/sysctl.$s"; else sysctl -n "$s" >"$dir/sysctl.$s"; fi
  done
}

# Put back what fl_record_sysctls recorded in DIR, unless another environment of ours is up: its record
# holds the same values, and it puts them back when it goes down. Call it under host-record.lock.
fl_restore_sysctls() {
  local dir=$1 s f v peer
  peer=$(fl_peer_records "$dir" | head -n 1)
  if [ -n "$peer" ]; then
    log "the host's kubelet sysctls stay as they are: $(dirname "$peer") is up and puts them back when it goes down"
    return 0
  fi
  for s in "${FL_KUBELET_SYSCTLS[@]}"; do
    f=$dir/sysctl.$s
    if [ -s "$f" ]; then
      v=$(cat "$f")
      [ "$(sysctl -n "$s")" = "$v" ] || sysctl -qw "$s=$v"
    fi
  done
}

# Remove a fixed host path that an environment's up found missing and made (or had made), as listed in its
# host record: the directories kubelets and containerd write to, the files Docker makes, the empty
# /lib/modules kind nodes mount.
fl_remove_created_path() {
  case $1 in
    /lib/modules) rmdir "$1" 2>/dev/null || log "warning: $1 is not empty; left" ;;
    /var/log/pods | /var/log/containers | /var/lib/kubelet | /var/lib/cni | /run/containerd | /opt/containerd | /opt/cloud* | /etc/docker/key.json)
      rm -rf "$1" ;;
    *) log "warning: $1 is not a path faultlab's set-up makes; left" ;;
  esac
}

# Remove the paths listed in DIR's files FILE... (last made, first removed), and those another
# environment handed over (DIR/handed-paths); with another environment of ours up, hand them all to it
# instead (it may use them: /run/containerd is both's). Call it under host-record.lock.
fl_remove_created_paths() {
  local dir=$1 peer f p
  shift
  peer=$(fl_peer_records "$dir" | head -n 1)
  for f in "$@" handed-paths; do
    [ -f "$dir/$f" ] || continue
    if [ -n "$peer" ]; then
      cat "$dir/$f" >>"$peer/handed-paths"
      continue
    fi
    tac "$dir/$f" | while read -r p; do
      if [ -n "$p" ]; then fl_remove_created_path "$p"; fi
    done
  done
  if [ -n "$peer" ] && [ -s "$peer/handed-paths" ]; then
    log "paths made on the host handed to $(dirname "$peer"), which is up: $(sort -u "$peer/handed-paths" | tr '\n' ' ')"
  fi
  return 0
}

# Directories at fixed host paths that Kubernetes 1.20 / containerd 1.6 write to whatever we
# configure: pod logs (kubelet), device-plugin socket dir (kubelet, hard-coded), CNI result cache
# (containerd's go-cni), shim sockets /run/containerd/s (containerd 1.6, hard-coded).
# up records which of them it created; down removes exactly those.
FL_FIXED_HOST_DIRS=(/var/log/pods /var/log/containers /var/lib/kubelet /var/lib/cni /run/containerd)

# ------------------------------------------------------------------- log ----
fl_ts() { date +%H:%M:%S; }
log() { printf '[%s] %s\n' "$(fl_ts)" "$*" >&2; }
die() { printf '[%s] ERROR: %s\n' "$(fl_ts)" "$*" >&2; exit 1; }

fl_require_root() {
  [ "$(id -u)" -eq 0 ] || die "the test bed needs root (it creates a network namespace, a loop mount, cgroups)"
}

# The node variables start as node 1's; in a VM node, as the node's the kernel command line names
# (faultlab.node=NAME, lib/vm.sh fl_vm_qemu_argv).
fl_node_select 1

# ------------------------------------------------------------- parts ------
# The rest, by concern, in ci/testbed/lib/ (sourced in this order: later parts use earlier ones).
# shellcheck source=ci/testbed/lib/packages.sh
source "$FL_TESTBED_DIR/lib/packages.sh"
# shellcheck source=ci/testbed/lib/images.sh
source "$FL_TESTBED_DIR/lib/images.sh"
# shellcheck source=ci/testbed/lib/supervisor.sh
source "$FL_TESTBED_DIR/lib/supervisor.sh"
# shellcheck source=ci/testbed/lib/certs.sh
source "$FL_TESTBED_DIR/lib/certs.sh"
# shellcheck source=ci/testbed/lib/node.sh
source "$FL_TESTBED_DIR/lib/node.sh"
# shellcheck source=ci/testbed/lib/configs.sh
source "$FL_TESTBED_DIR/lib/configs.sh"
# shellcheck source=ci/testbed/lib/components.sh
source "$FL_TESTBED_DIR/lib/components.sh"
# shellcheck source=ci/testbed/lib/node-images.sh
source "$FL_TESTBED_DIR/lib/node-images.sh"
# shellcheck source=ci/testbed/lib/teardown.sh
source "$FL_TESTBED_DIR/lib/teardown.sh"
# shellcheck source=ci/testbed/lib/vm.sh
source "$FL_TESTBED_DIR/lib/vm.sh"
[ "$FL_IN_VM" = 0 ] || fl_node_select "$(fl_vm_own_index)"
