# shellcheck shell=bash
# shellcheck disable=SC2034  # variables are used by the scripts that source lib.sh
# ci/testbed/lib.sh, part: teardown: mounts, pods, shims, network namespaces and cgroups left behind.
# Sourced by ci/testbed/lib.sh only.

# ------------------------------------------------------------- teardown -----
# Mount points at or below the given directories, deepest first (from /proc/self/mountinfo).
fl_mounts_under() {
  local d
  for d in "$@"; do
    awk -v p="$d" '{ t = $5; gsub(/\\040/, " ", t); if (t == p || index(t, p "/") == 1) print t }' /proc/self/mountinfo
  done | awk '{ print length($0) "\t" $0 }' | sort -rn | cut -f2- | uniq
}

fl_umount_under() {
  local m pass
  for pass in 1 2 3; do
    local left=0
    while IFS= read -r m; do
      [ -n "$m" ] || continue
      left=1
      umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
    done < <(fl_mounts_under "$@")
    [ "$left" = 0 ] && return 0
  done
  [ -z "$(fl_mounts_under "$@")" ]
}

# PIDs of processes in the kubelets' pod cgroups (kubepods: node 1's at the top, nodes 2..N's under their
# cgroup roots /faultlab-node-K), in any v1 hierarchy or v2.
fl_pod_pids() {
  local f
  for f in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods /sys/fs/cgroup/unified/kubepods \
    /sys/fs/cgroup/*/faultlab-node-*/kubepods /sys/fs/cgroup/faultlab-node-*/kubepods; do
    if [ -d "$f" ]; then find "$f" -name cgroup.procs -exec cat {} + 2>/dev/null || true; fi
  done | sort -un
}

# Shims of our containerd (they outlive it).
fl_shim_pids() {
  pgrep -f -- "containerd-shim-runc-v2 .*-address $FL_CTRD_SOCK" || true
}

# Network namespaces the CRI made for our pods: read from the task bundles, plus any cni-*
# namespace holding an address of our pod range.
fl_pod_netns_paths() {
  local f n
  for f in "$FL_CTRD_STATE"/io.containerd.runtime.v2.task/k8s.io/*/config.json; do
    [ -f "$f" ] || continue
    { grep -o '"path":"/[^"]*netns/cni-[^"]*"' "$f" 2>/dev/null || true; } | sed -e 's/^"path":"//' -e 's/"$//'
  done
  for n in $(ip netns list 2>/dev/null | awk '$1 ~ /^cni-/ {print $1}'); do
    if ip -n "$n" -o -4 addr show 2>/dev/null | grep -q " ${FL_POD_CIDR%.*}\."; then
      printf '/run/netns/%s\n' "$n"
    fi
  done
}

# cni-* network namespaces that appeared since up and that no process uses: pod sandboxes whose
# network was never set up, or that a controller re-created while down was deleting the pods.
# Call it once the kubelet and containerd are stopped.
fl_new_idle_cni_netns() {
  local n
  [ -f "$FL_HOSTREC/cni-netns-before" ] || return 0
  for n in $(ip netns list 2>/dev/null | awk '$1 ~ /^cni-/ {print $1}'); do
    grep -qx "$n" "$FL_HOSTREC/cni-netns-before" && continue
    [ -z "$(ip netns pids "$n" 2>/dev/null)" ] && printf '/run/netns/%s\n' "$n"
  done
  return 0
}

# Remove the kubelets' cgroups (kubepods/..., and nodes 2..N's cgroup roots), deepest first.
fl_remove_cgroups() {
  local top
  for top in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods /sys/fs/cgroup/*/faultlab-node-* /sys/fs/cgroup/faultlab-node-*; do
    [ -d "$top" ] || continue
    find "$top" -depth -type d -exec rmdir {} \; 2>/dev/null || true
  done
}

# The number of nodes of the test bed here, also in a half state whose node-count file is gone: the
# highest K of node K's traces (recorded count, network namespace, state directories, PID files, or a
# process running with a node's files).
fl_known_node_count() {
  local n=1 k name
  if [ -s "$FL_NODE_COUNT_FILE" ]; then n=$(cat "$FL_NODE_COUNT_FILE"); fi
  while read -r name; do
    k=$(fl_node_index "$name") || continue
    [ "$k" -le "$FL_NODE_MAX" ] && [ "$k" -gt "$n" ] && n=$k
  done < <(fl_node_traces)
  echo "$n"
}

# Node names that something of the test bed's on this host names (one a line, repeats allowed).
fl_node_traces() {
  ip netns list 2>/dev/null | awk '{print $1}' | grep -E '^faultlab-node(-[0-9]+)?$' || true
  local d
  for d in "$FL_LIB/nodes" "$FL_TB/nodes" "$FL_RUN/nodes" "$FL_MNTNS_DIR"; do
    [ -d "$d" ] && ls -1 "$d"
  done
  if [ -d "$FL_PIDS" ]; then find "$FL_PIDS" -name '*@faultlab-node-*.pid' -printf '%f\n' | sed -e 's/^.*@//' -e 's/\.pid$//'; fi
  pgrep -af -- "/nodes/faultlab-node-[0-9]+/" 2>/dev/null | grep -oE '/nodes/faultlab-node-[0-9]+/' | cut -d/ -f3 || true
  return 0
}
