# shellcheck shell=bash
# shellcheck disable=SC2034  # variables are used by the scripts that source lib.sh
# ci/testbed/lib.sh, part: the node: its network namespace and link, containerd's disk, and what up records of the host.
# Sourced by ci/testbed/lib.sh only.

# -------------------------------------------------------------- node net ----
fl_netns_exists() { [ -e "/run/netns/$FL_NETNS" ] && ip netns list | awk '{print $1}' | grep -qx "$FL_NETNS"; }

fl_setup_netns() {
  if ! fl_netns_exists; then
    log "creating network namespace $FL_NETNS"
    ip netns add "$FL_NETNS"
  fi
  if ! ip link show "$FL_VETH_HOST" >/dev/null 2>&1; then
    # A node-side end left without its peer cannot be reused.
    fl_in_node ip link del "$FL_VETH_NODE" 2>/dev/null || true
    log "creating veth $FL_VETH_HOST (host, $FL_HOST_IP) <-> $FL_VETH_NODE ($FL_NETNS, $FL_NODE_IP)"
    ip link add "$FL_VETH_HOST" type veth peer name "$FL_VETH_NODE" netns "$FL_NETNS"
  fi
  ip addr replace "$FL_HOST_IP/$FL_LINK_PREFIX" dev "$FL_VETH_HOST"
  ip link set "$FL_VETH_HOST" up
  fl_in_node ip link set lo up
  fl_in_node ip addr replace "$FL_NODE_IP/$FL_LINK_PREFIX" dev "$FL_VETH_NODE"
  fl_in_node ip link set "$FL_VETH_NODE" up
  # The node's default route: what the default-route fault deletes. The host's routes are never touched.
  if ! fl_in_node ip route show default | grep -q "via $FL_HOST_IP"; then
    fl_in_node ip route replace default via "$FL_HOST_IP" dev "$FL_VETH_NODE"
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

# -------------------------------------------------------- host record -------
# Before it changes anything on the host, up records what was there, once per up/down cycle:
#   sysctl.<name>      the value of each sysctl the kubelet sets
#   created-dirs       fixed host directories that did not exist
#   run-netns-mount    present if /run/netns was not a mount point (ip netns add makes it one)
#   cni-netns-before   the cni-* network namespaces that existed before (none of them is ours)
fl_record_host() {
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
