# shellcheck shell=bash
# shellcheck disable=SC2034  # variables are used by the scripts that source lib.sh
# ci/testbed/lib.sh, part: the node: its network namespace and link, containerd's disk, and what up records of the host.
# Sourced by ci/testbed/lib.sh only.

# The selected node's own parts of the host: its network namespace and link, containerd's disk, and
# (nodes 2..N) its cgroup root and mount namespace, which must come after the disk (it holds a copy).
fl_setup_node() {
  fl_setup_netns
  fl_setup_disk
  fl_setup_cgroup_root
  fl_setup_mntns
}

# -------------------------------------------------------------- node net ----
fl_netns_exists() { [ -e "/run/netns/$FL_NETNS" ] && ip netns list 2>/dev/null | awk '{print $1}' | grep -qx "$FL_NETNS"; }

fl_setup_netns() {
  if ! fl_netns_exists; then
    log "creating network namespace $FL_NETNS"
    ip netns add "$FL_NETNS"
  fi
  if ! ip link show "$FL_VETH_HOST" >/dev/null 2>&1; then
    # A node-side end left without its peer cannot be reused.
    fl_in_node ip link del "$FL_VETH_NODE" 2>/dev/null || true
    log "creating veth $FL_VETH_HOST (host, $FL_LINK_HOST_IP) <-> $FL_VETH_NODE ($FL_NETNS, $FL_NODE_IP)"
    ip link add "$FL_VETH_HOST" type veth peer name "$FL_VETH_NODE" netns "$FL_NETNS"
  fi
  ip addr replace "$FL_LINK_HOST_IP/$FL_LINK_PREFIX" dev "$FL_VETH_HOST"
  ip link set "$FL_VETH_HOST" up
  fl_in_node ip link set lo up
  fl_in_node ip addr replace "$FL_NODE_IP/$FL_LINK_PREFIX" dev "$FL_VETH_NODE"
  fl_in_node ip link set "$FL_VETH_NODE" up
  # The node's default route: what the default-route fault deletes. The host's routes are never touched.
  if ! fl_in_node ip route show default | grep -q "via $FL_LINK_HOST_IP"; then
    fl_in_node ip route replace default via "$FL_LINK_HOST_IP" dev "$FL_VETH_NODE"
  fi
  # Nodes 2..N reach the API server (on node 1's link) through their own link: a route of its own, so
  # that the node keeps the API server when the default-route fault takes the default route away, as
  # node 1 does (there the API server's address is on the link itself).
  if [ "$FL_NODE_INDEX" != 1 ]; then
    fl_in_node ip route replace "$FL_HOST_IP/32" via "$FL_LINK_HOST_IP" dev "$FL_VETH_NODE"
  fi
  # Cloud metadata probes (cAdvisor's GCE check, the in-tree AWS credential provider) would wait
  # for time-outs on every kubelet start (about 11 s); fail them at once instead.
  fl_in_node ip route replace unreachable 169.254.169.254/32
  # Likewise the host's name servers: containerd resolves through the host's resolv.conf, and no
  # name server is reachable from the node (the host does not forward). A lookup (such as a pull of
  # the local-only pause image) then fails at once instead of timing out, and no query leaves.
  local ns
  while read -r ns; do
    fl_in_node ip route replace unreachable "$ns/32"
  done < <(awk '$1 == "nameserver" && $2 ~ /^[0-9.]+$/ {print $2}' /etc/resolv.conf)
  # Forwarding for pods is a per-namespace setting: node namespace only.
  fl_in_node sysctl -qw net.ipv4.ip_forward=1
}

# ------------------------------------------------------------- the disk -----
# Loop device the containerd disk is attached to (empty if none).
fl_disk_device() {
  losetup -j "$FL_DISK_FILE" -O NAME -n 2>/dev/null | head -n 1 | tr -d ' '
}

fl_disk_mounted() { findmnt -rn -M "$FL_CTRD_ROOT" >/dev/null 2>&1; }

fl_setup_disk() {
  mkdir -p "$FL_DISK_DIR" "$FL_CTRD_ROOT"
  if fl_disk_mounted; then
    return 0
  fi
  if [ -f "$FL_DISK_FILE" ] && ! e2fsck -p "$FL_DISK_FILE" >/dev/null 2>&1; then
    log "containerd disk $FL_DISK_FILE damaged; recreating"
    losetup -j "$FL_DISK_FILE" -O NAME -n | while read -r d; do losetup -d "$d"; done
    rm -f "$FL_DISK_FILE"
  fi
  if [ ! -f "$FL_DISK_FILE" ]; then
    log "creating ${FL_DISK_MIB} MiB ext4 containerd disk $FL_DISK_FILE"
    truncate -s "${FL_DISK_MIB}M" "$FL_DISK_FILE.tmp"
    mkfs.ext4 -q -F -m 0 -L faultlab-ctrd -E lazy_itable_init=0,lazy_journal_init=0 "$FL_DISK_FILE.tmp"
    mv "$FL_DISK_FILE.tmp" "$FL_DISK_FILE"
  fi
  local dev
  dev=$(fl_disk_device)
  [ -n "$dev" ] || dev=$(losetup --find --show "$FL_DISK_FILE")
  mount -t ext4 "$dev" "$FL_CTRD_ROOT"
  log "mounted $dev on $FL_CTRD_ROOT"
}

# ------------------------------------------- nodes 2..N: cgroups, mounts ----
# The hierarchies a kubelet's cgroup root must exist in: every cgroup v1 hierarchy (and v2's).
fl_cgroup_hierarchies() {
  local d
  for d in /sys/fs/cgroup/*/; do
    d=${d%/}
    [ -f "$d/cgroup.procs" ] && printf '%s\n' "$d"
  done
  [ -f /sys/fs/cgroup/cgroup.procs ] && echo /sys/fs/cgroup
  return 0
}

# The selected node's cgroup root (nodes 2..N: /faultlab-node-K in every hierarchy), which its kubelet
# puts its kubepods under (--cgroup-root); node 1's kubelet keeps the default, /kubepods. The 1.20
# kubelet refuses a cgroup root that does not exist.
fl_setup_cgroup_root() {
  [ -n "$FL_CGROUP_ROOT" ] || return 0
  local h
  while read -r h; do
    [ -d "$h$FL_CGROUP_ROOT" ] && continue
    mkdir "$h$FL_CGROUP_ROOT"
    # A new cpuset cgroup has no CPUs and no memory nodes: those of its parent.
    if [ -f "$h/cpuset.cpus" ] && [ -f "$h$FL_CGROUP_ROOT/cpuset.cpus" ]; then
      cat "$h/cpuset.cpus" >"$h$FL_CGROUP_ROOT/cpuset.cpus"
      cat "$h/cpuset.mems" >"$h$FL_CGROUP_ROOT/cpuset.mems"
    fi
  done < <(fl_cgroup_hierarchies)
}

# Whether the selected node's mount namespace is there (nodes 2..N: a bind-mounted namespace file).
fl_mntns_exists() { [ -n "$FL_NODE_MNTNS" ] && findmnt -rn -M "$FL_NODE_MNTNS" >/dev/null 2>&1; }

# fl_in_node_mnt <command...>: run a command in the selected node's mount namespace (the host's for node 1).
fl_in_node_mnt() {
  if [ -n "$FL_NODE_MNTNS" ]; then nsenter --mount="$FL_NODE_MNTNS" -- "$@"; else "$@"; fi
}

# The selected node's mount namespace (nodes 2..N): a copy of the host's made once containerd's disk is
# mounted (so it holds the disk), in which the node's own directories cover FL_NODE_PRIVATE_PATHS. Its
# mounts propagate to the host's namespace only under /run/netns (the pods' network namespaces, which
# `ip netns` on the host then sees as on node 1; fl_mntns_isolate); nothing else mounted in it shows on
# the host. Its containerd and kubelet run in it (fl_node_start_argv), so they see each other's mounts.
# Kept by a bind mount of its file under $FL_MNTNS_DIR (a private mount, as unshare needs), so a
# restarted daemon joins the same namespace.
fl_setup_mntns() {
  [ -n "$FL_NODE_MNTNS" ] || return 0
  if fl_mntns_exists; then
    if fl_in_node_mnt findmnt -rn -M "$FL_CTRD_ROOT" >/dev/null 2>&1; then return 0; fi
    # Made before the disk was mounted (a killed up): made again, unless the node's daemons use it.
    if fl_comp_alive "containerd@$FL_NODE" || fl_comp_alive "kubelet@$FL_NODE"; then
      die "the mount namespace of $FL_NODE lacks containerd's disk while its daemons run: ci/testbed/down first"
    fi
    umount "$FL_NODE_MNTNS"
  fi
  mkdir -p "$FL_MNTNS_DIR"
  if ! findmnt -rn -M "$FL_MNTNS_DIR" >/dev/null 2>&1; then
    mount --bind "$FL_MNTNS_DIR" "$FL_MNTNS_DIR"
    mount --make-private "$FL_MNTNS_DIR"
  fi
  touch "$FL_NODE_MNTNS"
  log "creating mount namespace $FL_NODE_MNTNS"
  unshare --mount="$FL_NODE_MNTNS" --propagation unchanged true
  fl_mntns_isolate
  local p
  for p in "${FL_NODE_PRIVATE_PATHS[@]}"; do
    mkdir -p "$p" "$FL_NODE_LIB/host$p"
    fl_in_node_mnt mount --bind "$FL_NODE_LIB/host$p" "$p"
  done
}

# In the selected node's new mount namespace, every mount shared with the host's becomes a slave of it,
# but /run/netns (`ip netns` made it shared) and the network namespaces under it: those stay peers.
fl_mntns_isolate() {
  local target prop
  while read -r target prop; do
    target=$(printf '%b' "$target")
    case $target in /run/netns | /run/netns/*) continue ;; esac
    case $prop in shared*) fl_in_node_mnt mount --make-slave "$target" ;; esac
  done < <(fl_in_node_mnt findmnt -rn -o TARGET,PROPAGATION)
}

# -------------------------------------------------------- host record -------
# Before it changes anything on the host, up records what was there, once per up/down cycle:
#   sysctl.<name>      the value of each sysctl the kubelet sets
#   created-dirs       fixed host directories that did not exist
#   run-netns-mount    present if /run/netns was not a mount point (ip netns add makes it one)
#   cni-netns-before   the cni-* network namespaces that existed before (none of them is ours)
fl_record_host() { fl_locked host-record fl_record_host_locked; }
fl_record_host_locked() {
  mkdir -p "$FL_HOSTREC"
  local d
  [ -f "$FL_HOSTREC/cni-netns-before" ] ||
    { ip netns list 2>/dev/null | awk '$1 ~ /^cni-/ {print $1}' | sort >"$FL_HOSTREC/cni-netns-before"; }
  fl_record_sysctls "$FL_HOSTREC"
  touch "$FL_HOSTREC/created-dirs"
  for d in "${FL_FIXED_HOST_DIRS[@]}" /opt/cloud /opt/cloud/cce /opt/cloud/cce/package /opt/cloud/cce/package/node-package; do
    if [ ! -e "$d" ] && ! grep -qx "$d" "$FL_HOSTREC/created-dirs"; then
      printf '%s\n' "$d" >>"$FL_HOSTREC/created-dirs"
    fi
  done
  if [ ! -f "$FL_HOSTREC/run-netns.checked" ]; then
    if ! findmnt -rn -M /run/netns >/dev/null 2>&1; then
      touch "$FL_HOSTREC/run-netns-mount"
      [ -e /run/netns ] || touch "$FL_HOSTREC/run-netns-dir"
    fi
    touch "$FL_HOSTREC/run-netns.checked"
  fi
}
