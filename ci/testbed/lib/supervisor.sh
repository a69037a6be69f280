# shellcheck shell=bash
# shellcheck disable=SC2034  # variables are used by the scripts that source lib.sh
# ci/testbed/lib.sh, part: the process supervisor: start, adopt, stop and wait for the components, and their health checks.
# Sourced by ci/testbed/lib.sh only.

# ---------------------------------------------------------- processes ------
# Ports on the host's loopback (etcd) and the host veth address (apiserver). etcd serves TLS and asks
# every client and peer for a certificate of its own CA (fl_make_etcd_pki): a local user without one
# reaches nothing.
FL_ETCD_CLIENT=https://127.0.0.1:12379
FL_ETCD_PEER=https://127.0.0.1:12380
FL_APISERVER_URL=https://$FL_APISERVER_BIND:$FL_APISERVER_PORT
# The URL the node's kubelet uses (in the VM, QEMU's alias of the host's loopback).
FL_NODE_APISERVER_URL=https://$FL_APISERVER_ADVERTISE:$FL_APISERVER_PORT

FL_CONTROL_PLANE=(etcd kube-apiserver kube-controller-manager kube-scheduler)
# csi-node: the node half of faultlab's CSI driver (faultlab-cri csi-node, fl_start_csi_node), once the
# kubelet runs.
FL_NODE_COMPONENTS=(containerd kubelet csi-node)
# containerd 2: the kubelet's CRI calls go through the node's cri-proxy (FL_RUNTIME, lib.sh).
[ "$FL_RUNTIME" != containerd2 ] || FL_NODE_COMPONENTS=(containerd cri-proxy kubelet csi-node)
# A node's components are named by the node: node 1's `containerd` and `kubelet` (their PID files and
# logs as they always were), node K's `containerd@faultlab-node-K` and `kubelet@faultlab-node-K`.
# fl_node_comp BASE: the selected node's BASE component.
fl_node_comp() { if [ "$FL_NODE_INDEX" = 1 ]; then echo "$1"; else echo "$1@$FL_NODE"; fi; }
# fl_comp_node_index COMPONENT: the K of the node a node component belongs to.
fl_comp_node_index() {
  case $1 in
    *@*) fl_node_index "${1#*@}" || die "unknown component $1" ;;
    *) echo 1 ;;
  esac
}
# fl_on_comp_node COMPONENT FUNCTION [ARGS...]: FUNCTION BASE [ARGS...] for the component's node, in
# a subshell (the caller's selected node stays).
fl_on_comp_node() {
  local comp=$1 fn=$2 k
  shift 2
  k=$(fl_comp_node_index "$comp")
  (
    fl_node_select "$k"
    "$fn" "${comp%%@*}" "$@"
  )
}

# fl_components_list: what runs on this machine, in start order, into FL_COMPONENTS. With the nodes in
# VMs, the host runs the control plane and each node's VM (node 1's `vm`, node K's `vm@faultlab-node-K`;
# containerd and the kubelet run in the VM, started over ssh); in a VM, the node's own; else the control
# plane, then each node's.
fl_components_list() {
  local k base
  if [ "$FL_IN_VM" = 1 ]; then
    FL_COMPONENTS=("${FL_NODE_COMPONENTS[@]}")
  elif [ "$FL_VM" = 1 ]; then
    FL_COMPONENTS=("${FL_CONTROL_PLANE[@]}" vm)
    for ((k = 2; k <= FL_NODE_COUNT; k++)); do FL_COMPONENTS+=("vm@$(fl_node_name "$k")"); done
  else
    FL_COMPONENTS=("${FL_CONTROL_PLANE[@]}")
    for ((k = 1; k <= FL_NODE_COUNT; k++)); do
      if [ "$k" = 1 ]; then
        FL_COMPONENTS+=("${FL_NODE_COMPONENTS[@]}")
      else
        for base in "${FL_NODE_COMPONENTS[@]}"; do FL_COMPONENTS+=("$base@$(fl_node_name "$k")"); done
      fi
    done
  fi
}
fl_components_list

# pgrep -f pattern that identifies each component's process (used to adopt or kill strays).
fl_comp_pattern() {
  case $1 in
    etcd) echo "^/usr/bin/etcd --name=faultlab " ;;
    kube-apiserver | kube-controller-manager | kube-scheduler)
      echo "^$FL_CACHE/k8s/[^ ]*/bin/$1 " ;;
    containerd | cri-proxy | kubelet | csi-node | vm | containerd@* | cri-proxy@* | kubelet@* | csi-node@* | vm@*) fl_on_comp_node "$1" fl_node_comp_pattern ;;
    *) die "unknown component $1" ;;
  esac
}

# The selected node's containerd and kubelet, told apart by their configuration files (the first
# argument of each, fl_start_containerd and fl_kubelet_flags).
fl_node_comp_pattern() {
  case $1 in
    containerd) echo "^$(fl_ere_quote "$FL_CTRD_BIN_DIR")/containerd --config $FL_CTRD_CONF( |\$)" ;;
    cri-proxy) echo "^$FL_CRI_BIN proxy --listen $FL_CRI_PROXY_SOCK " ;;
    kubelet) echo "^$FL_CACHE/k8s/[^ ]*/bin/kubelet --config=$FL_KUBELET_CONF " ;;
    csi-node) echo "^$FL_CRI_BIN csi-node --node-id $FL_NODE " ;;
    vm) echo "^$FL_VM_QEMU -name $FL_NODE " ;;
  esac
}

# fl_ere_quote TEXT: TEXT as a grep -E pattern that matches it literally (sid's containerd lives in
# a directory named by its Debian version, 2.1.9+ds1-5: the + is no repetition there).
# shellcheck disable=SC2001  # one sed class; ${v//} would need a pass per character
fl_ere_quote() { sed -e 's/[][\.^$*+?(){}|]/\\&/g' <<<"$1"; }

fl_pid_file() { printf '%s/%s.pid\n' "$FL_PIDS" "$1"; }
fl_log_file() { printf '%s/%s.log\n' "$FL_LOG" "$1"; }

# Print the PID of a running component, or nothing. A PID file whose process is gone or is
# something else is stale and removed; a matching process without PID file is adopted.
fl_comp_pid() {
  local comp=$1 pf pid="" pat
  pf=$(fl_pid_file "$comp")
  pat=$(fl_comp_pattern "$comp")
  if [ -f "$pf" ]; then
    pid=$(cat "$pf" 2>/dev/null || true)
    if [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] &&
      tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qE -- "$pat"; then
      printf '%s\n' "$pid"
      return 0
    fi
    rm -f "$pf"
  fi
  pid=$(pgrep -f -- "$pat" | head -n 1 || true)
  if [ -n "$pid" ]; then
    mkdir -p "$FL_PIDS"
    printf '%s\n' "$pid" >"$pf"
    printf '%s\n' "$pid"
  fi
}

fl_comp_alive() { [ -n "$(fl_comp_pid "$1")" ]; }

# Close every file descriptor above 2 of the current (sub)shell.
fl_close_fds() {
  local fd
  for fd in /proc/"$BASHPID"/fd/*; do
    fd=${fd##*/}
    [ "$fd" -gt 2 ] 2>/dev/null || continue
    eval "exec $fd>&-" 2>/dev/null || true
  done
}

# fl_start <component> <netns|-> <argv...>: start in the background in its own session,
# log to /var/log/faultlab/testbed/<component>.log, record the PID.
fl_start() {
  local comp=$1 ns=$2
  shift 2
  local logf pid
  logf=$(fl_log_file "$comp")
  mkdir -p "$FL_LOG" "$FL_PIDS"
  # Logs are appended across starts; keep one older generation once a log passes 50 MiB.
  if [ -f "$logf" ] && [ "$(stat -c %s "$logf")" -gt $((50 * 1024 * 1024)) ]; then
    mv -f "$logf" "$logf.1"
  fi
  printf '==== %s starting %s: %s\n' "$(date -u +%FT%TZ)" "$comp" "$*" >>"$logf"
  local -a pre=()
  [ "$ns" = - ] || pre=(nsenter --net="/run/netns/$ns" --)
  # The daemon must not inherit any descriptor beyond stdio: a lock held by whoever called us
  # (our own up/down and build locks, or a caller's flock) would otherwise be held by the daemon.
  (
    fl_close_fds
    exec nohup setsid "${pre[@]}" "$@" >>"$logf" 2>&1 </dev/null
  ) &
  pid=$!
  printf '%s\n' "$pid" >"$(fl_pid_file "$comp")"
  # Until the subshell has exec'ed the daemon its cmdline is bash's, and fl_comp_pid would take the
  # component for dead (and remove its PID file): wait for the exec, or for the process to end
  # (then the caller's readiness wait reports that it exited). Seen once in three suites under load:
  # "kubelet did not come up" in the very second a kubelet started that then ran normally.
  local pat tries=0
  pat=$(fl_comp_pattern "$comp")
  while [ -r "/proc/$pid/cmdline" ] && [ "$tries" -lt 300 ]; do
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qE -- "$pat" && break
    tries=$((tries + 1))
    sleep 0.1
  done
  log "started $comp (pid $pid, log $logf)"
}

# fl_stop <component> [timeout-seconds]: SIGTERM, then SIGKILL after the timeout.
fl_stop() {
  local comp=$1 timeout=${2:-15} pid
  pid=$(fl_comp_pid "$comp")
  if [ -z "$pid" ]; then
    rm -f "$(fl_pid_file "$comp")"
    return 0
  fi
  fl_kill_pid "$pid" "$comp" "$timeout"
  rm -f "$(fl_pid_file "$comp")"
}

# fl_kill_pid <pid> <name> <timeout-seconds>: SIGTERM, then SIGKILL after the timeout; returns once the
# process is gone.
fl_kill_pid() {
  local pid=$1 name=$2 timeout=$3 i
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < timeout * 10; i++)); do
    [ -d "/proc/$pid" ] || break
    sleep 0.1
  done
  if [ -d "/proc/$pid" ]; then
    log "$name (pid $pid) did not stop in ${timeout}s; SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    while [ -d "/proc/$pid" ]; do sleep 0.1; done
  fi
  log "stopped $name (pid $pid)"
}

# The tail of a component's log; with a second argument "errors", first the error and fatal
# lines (klog E/F, containerd/etcd level=error) of its last start, which a goroutine dump hides.
fl_log_tail() { # <component> [lines] [errors]
  local f n=${2:-40}
  f=$(fl_log_file "$1")
  [ -f "$f" ] || return 0
  if [ "${3:-}" = errors ]; then
    printf -- '---- errors of the last start of %s (%s) ----\n' "$1" "$f" >&2
    awk '/^==== /{n=0} /^[EF][0-9][0-9][0-9][0-9] |level=(error|fatal)|"level":"(error|fatal)"/{a[n++]=$0} END{s=(n>15?n-15:0); for(i=s;i<n;i++) print a[i]}' "$f" >&2
  fi
  printf -- '---- last %s lines of %s ----\n' "$n" "$f" >&2
  tail -n "$n" "$f" >&2
}

# fl_wait <seconds> <description> <command...>: poll until the command succeeds.
fl_wait() {
  local secs=$1 what=$2 deadline
  shift 2
  deadline=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    if [ "$SECONDS" -ge "$deadline" ]; then
      log "timed out after ${secs}s waiting for $what"
      return 1
    fi
    sleep 0.5
  done
}

# fl_wait_comp <component> <seconds> <check command...>: like fl_wait, but fails at once
# if the component's process dies, and prints its log tail on failure.
fl_wait_comp() {
  local comp=$1 secs=$2 deadline
  shift 2
  deadline=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    if ! fl_comp_alive "$comp"; then
      log "$comp exited while starting"
      fl_log_tail "$comp" 20 errors
      return 1
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
      log "$comp did not become healthy within ${secs}s"
      fl_log_tail "$comp" 20 errors
      return 1
    fi
    sleep 0.5
  done
}

# Run a command on the node: in its network namespace (host mount namespace kept), or in the VM
# (over ssh from the host; directly inside it).
fl_in_node() {
  if [ "$FL_IN_VM" = 1 ]; then
    "$@"
  elif [ "$FL_VM" = 1 ]; then
    fl_vm_ssh "$@"
  else
    nsenter --net="/run/netns/$FL_NETNS" -- "$@"
  fi
}

# ctr of the node's containerd (from the host of a VM node: over ssh, stdin passed on).
fl_ctr() {
  if [ "$FL_VM" = 1 ] && [ "$FL_IN_VM" = 0 ]; then
    fl_vm_ssh "$FL_CTRD_BIN_DIR/ctr" --address "$FL_CTRD_SOCK" --namespace k8s.io "$@"
  else
    "$FL_CTRD_BIN_DIR/ctr" --address "$FL_CTRD_SOCK" --namespace k8s.io "$@"
  fi
}

fl_kubectl() { "$FL_BIN/kubectl" --kubeconfig "$FL_KUBECONFIG" "$@"; }

# Whether the selected node's containerd holds no container at all (no pod's sandbox or container left):
# a VM node's smoke pod is only asked to go (ci/testbed/smoke), and the kubelet removes its sandbox
# at a later garbage collection, which frees blocks on containerd's disk.
fl_node_no_containers() {
  local out
  out=$(fl_ctr containers ls -q </dev/null) && [ -z "$out" ]
}

# ------------------------------------------------------------ health -------
fl_health_etcd() {
  curl -fsS --max-time 3 --cacert "$FL_PKI/etcd-ca.crt" --cert "$FL_PKI/apiserver-etcd-client.crt" \
    --key "$FL_PKI/apiserver-etcd-client.key" "$FL_ETCD_CLIENT/health" | grep -q '"health":"true"'
}
fl_health_apiserver() {
  curl -fsS --max-time 3 --cacert "$FL_PKI/ca.crt" --cert "$FL_PKI/admin.crt" --key "$FL_PKI/admin.key" \
    "$FL_APISERVER_URL/readyz" | grep -qx ok
}
fl_health_controller_manager() { curl -ksS --max-time 3 https://127.0.0.1:10257/healthz | grep -qx ok; }
fl_health_scheduler() { curl -ksS --max-time 3 https://127.0.0.1:10259/healthz | grep -qx ok; }
fl_health_containerd() { fl_in_node "$FL_CTRD_BIN_DIR/ctr" --address "$FL_CTRD_SOCK" --timeout 3s version; }
# The proxy answers the CRI and reaches containerd through it (faultlab-cri's calls are runtime.v1,
# which the proxy passes on unchanged; the kubelet's v1alpha2 are renamed).
fl_health_cri_proxy() {
  if [ "$FL_VM" = 1 ] && [ "$FL_IN_VM" = 0 ]; then
    fl_vm_ssh "$FL_CRI_BIN" --runtime-endpoint "unix://$FL_CRI_PROXY_SOCK" --timeout 3 version >/dev/null
  else
    "$FL_CRI_BIN" --runtime-endpoint "unix://$FL_CRI_PROXY_SOCK" --timeout 3 version >/dev/null
  fi
}
# The CSI node plugin's registration socket, where the node's kubelet looks for it.
fl_health_csi_node() { fl_in_node_mnt test -S "$FL_KUBELET_ROOT/plugins_registry/$FL_CSI_DRIVER-reg.sock"; }
fl_health_kubelet() { fl_in_node curl -fsS --max-time 3 http://127.0.0.1:10248/healthz | grep -qx ok; }
fl_node_ready() {
  [ "$(fl_kubectl get node "$FL_NODE" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]
}

fl_node_comp_health() {
  case $1 in
    containerd) fl_health_containerd ;;
    cri-proxy) fl_health_cri_proxy ;;
    kubelet) fl_health_kubelet ;;
    csi-node) fl_health_csi_node ;;
    vm) fl_health_vm ;;
  esac
}

fl_comp_health() {
  case $1 in
    etcd) fl_health_etcd ;;
    kube-apiserver) fl_health_apiserver ;;
    kube-controller-manager) fl_health_controller_manager ;;
    kube-scheduler) fl_health_scheduler ;;
    containerd | cri-proxy | kubelet | csi-node | vm | containerd@* | cri-proxy@* | kubelet@* | csi-node@* | vm@*) fl_on_comp_node "$1" fl_node_comp_health ;;
  esac
}
