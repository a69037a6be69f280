# shellcheck shell=bash
# shellcheck disable=SC2034  # variables are used by the scripts that source this file
# Shared definitions of faultlab's kind environment (ci/kind/): a Docker daemon of our own, kind 0.27.0
# from Debian trixie, and a kind node image built from Debian packages. Sourced by ci/kind/*; never run.
# It builds on the test bed's library (logging, apt, the Kubernetes build, the image builder).

# shellcheck source=ci/testbed/lib.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/testbed/lib.sh"

FK_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
FK_REPO=$(cd "$FK_DIR/../.." && pwd)

# ---------------------------------------------------------------- layout ----
FK_CACHE=$FL_CACHE/kind                 # kept: Docker's data root (the node image), image specs
FK_LIB=/var/lib/faultlab-kind           # runtime wrapper, host record; removed by down
FK_RUN=/run/faultlab-kind               # socket, exec root, PID file; removed by down
FK_LOG=/var/log/faultlab/kind           # dockerd.log
FK_DOCKER_ROOT=$FK_CACHE/docker
FK_DOCKER_EXEC=$FK_RUN/exec
FK_SOCK=$FK_RUN/docker.sock
FK_PIDFILE=$FK_RUN/dockerd.pid
FK_HOSTREC=$FK_LIB/host-record
[ "$FK_HOSTREC" = "${FL_HOST_RECORDS[1]}" ] || die "ci/testbed/lib.sh's FL_HOST_RECORDS does not name the kind environment's host record $FK_HOSTREC"
FK_WRAPPER=$FK_LIB/bin/faultlab-runc
FK_CGROUP_PARENT=faultlab-kind
# Everything reaches our daemon, never another Docker on the machine.
export DOCKER_HOST=unix://$FK_SOCK

# kind's network, made before kind runs so kind uses it as it is (kind creates one only when none of
# that name exists, and would pick a private IPv4 range and an IPv6 ULA). 198.18.0.0/15 is the RFC 2544
# benchmarking range: nothing of ours uses a private range.
FK_NET=kind
FK_NET_SUBNET=198.18.232.0/24
FK_NET_GATEWAY=198.18.232.1
FK_NET_BRIDGE=fl-kind0
# Any other network dockerd is asked to make comes from here too.
FK_ADDRESS_POOL=198.18.236.0/22

FK_KIND_VERSION=0.27.0
# A scenario's registry runs on this machine, on the kind network's gateway (harness/src/faults/registry.rs).
FK_PACKAGES=(docker.io mmdebstrap jq "${FL_REGISTRY_PACKAGES[@]}")
# Host paths that `docker run` of a kind node creates when they are missing (kind mounts /lib/modules
# read-only into every node), that dockerd writes whatever its flags say (its trust key; the directory
# itself belongs to the docker.io package), and that the containerd dockerd starts uses whatever its
# root and state say (containerd 1.6: shim sockets under /run/containerd/s, the `opt` plugin's
# /opt/containerd; seen on a fresh machine, where they did not exist before).
FK_FIXED_HOST_PATHS=(/lib/modules /etc/docker/key.json /run/containerd /opt/containerd)

# ------------------------------------------------------------ packages ----
# docker.io from bookworm (20.10), kind 0.27.0 from trixie (pinned: only `kind` comes from there).
# fl_apt_install's policy-rc.d keeps the package's init script from starting a system dockerd (default
# bridge on a private range) while it is installed.
fk_install_packages() { fl_locked apt fk_install_packages_locked; }
fk_install_packages_locked() {
  local p missing=()
  fl_ensure_suite trixie kind
  for p in "${FK_PACKAGES[@]}" kind; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  if [ "$(kind version 2>/dev/null | awk '{print $2}')" != "v$FK_KIND_VERSION" ]; then
    [[ " ${missing[*]} " == *" kind "* ]] || missing+=(kind)
  fi
  [ "${#missing[@]}" -gt 0 ] || return 0
  fl_apt_install "${missing[@]/#kind/kind=$FK_KIND_VERSION*}"
  [ "$(kind version | awk '{print $2}')" = "v$FK_KIND_VERSION" ] || die "kind is not v$FK_KIND_VERSION: $(kind version)"
}

# ------------------------------------------------------- capabilities ----
# Names of the capabilities, by number (linux/capability.h).
FK_CAP_NAMES=(CHOWN DAC_OVERRIDE DAC_READ_SEARCH FOWNER FSETID KILL SETGID SETUID SETPCAP LINUX_IMMUTABLE
  NET_BIND_SERVICE NET_BROADCAST NET_ADMIN NET_RAW IPC_LOCK IPC_OWNER SYS_MODULE SYS_RAWIO SYS_CHROOT SYS_PTRACE
  SYS_PACCT SYS_ADMIN SYS_BOOT SYS_NICE SYS_RESOURCE SYS_TIME SYS_TTY_CONFIG MKNOD LEASE AUDIT_WRITE AUDIT_CONTROL
  SETFCAP MAC_OVERRIDE MAC_ADMIN SYSLOG WAKE_ALARM BLOCK_SUSPEND AUDIT_READ PERFMON BPF CHECKPOINT_RESTORE)

# The capabilities a privileged container asks for that this process's bounding set lacks, as
# CAP_NAME lines. Usage: fk_missing_caps [CapBnd-hex] (default: this process's).
fk_missing_caps() {
  local hex=${1:-} i
  [ -n "$hex" ] || hex=$(awk '/^CapBnd:/ {print $2}' /proc/self/status)
  for i in "${!FK_CAP_NAMES[@]}"; do
    if (((16#$hex >> i & 1) == 0)); then printf 'CAP_%s\n' "${FK_CAP_NAMES[$i]}"; fi
  done
}

# Install the OCI runtime wrapper (ci/kind/faultlab-runc) with the list of capabilities it drops.
# Usage: fk_install_wrapper FILE CAP_NAME...
fk_install_wrapper() {
  local file=$1
  shift
  mkdir -p "$(dirname "$file")"
  jq -n '$ARGS.positional' --args "$@" >"$(dirname "$file")/dropped-caps.json"
  install -m 0755 "$FK_DIR/faultlab-runc" "$file"
}

# ------------------------------------------------------------- dockerd ----
# The daemon's argv: its own data root, exec root, socket and cgroup parent; no default bridge, no
# iptables rules, no ip_forward and no masquerading on the host; the wrapper as default runtime. Names the
# nodes' embedded DNS cannot answer itself (a registry's) go to the kind bridge's own address, where
# nothing listens: lookups fail at once and no query leaves the machine.
fk_dockerd_argv() {
  printf '%s\n' dockerd \
    "--data-root=$FK_DOCKER_ROOT" "--exec-root=$FK_DOCKER_EXEC" "--host=unix://$FK_SOCK" \
    "--pidfile=$FK_PIDFILE" "--bridge=none" "--iptables=false" "--ip-forward=false" "--ip-masq=false" \
    "--default-address-pool=base=$FK_ADDRESS_POOL,size=24" "--cgroup-parent=$FK_CGROUP_PARENT" \
    "--exec-opt=native.cgroupdriver=cgroupfs" "--add-runtime=faultlab=$FK_WRAPPER" \
    "--default-runtime=faultlab" "--dns=$FK_NET_GATEWAY" "--log-level=warn" "--config-file=$FK_LIB/daemon.json"
}

fk_docker_ping() { docker version --format '{{.Server.Version}}' >/dev/null 2>&1; }

fk_dockerd_pid() {
  local pid
  pid=$(cat "$FK_PIDFILE" 2>/dev/null || true)
  if [ -n "$pid" ] && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "--host=unix://$FK_SOCK"; then
    printf '%s\n' "$pid"
  fi
}

# Record which fixed host paths are missing before the first node runs, so down removes exactly those,
# and the host-global sysctls a kubelet sets, so down puts them back.
fk_record_host() { fl_locked host-record fk_record_host_locked; }
fk_record_host_locked() {
  local p
  [ -d "$FK_HOSTREC" ] && return 0
  mkdir -p "$FK_HOSTREC"
  for p in "${FK_FIXED_HOST_PATHS[@]}"; do
    [ -e "$p" ] || printf '%s\n' "$p" >>"$FK_HOSTREC/absent-paths"
  done
  touch "$FK_HOSTREC/absent-paths"
  # Every kind node's kubelet sets the host's kernel tunables (the node shares the host's kernel).
  fl_record_sysctls "$FK_HOSTREC"
}

fk_start_dockerd() {
  if [ -n "$(fk_dockerd_pid)" ] && fk_docker_ping; then
    return 0
  fi
  mkdir -p "$FK_RUN" "$FK_LOG" "$FK_DOCKER_ROOT" "$FK_LIB"
  fk_record_host
  local -a caps=()
  mapfile -t caps < <(fk_missing_caps "")
  log "runtime wrapper $FK_WRAPPER drops: ${caps[*]:-nothing}"
  fk_install_wrapper "$FK_WRAPPER" "${caps[@]}"
  printf '{}\n' >"$FK_LIB/daemon.json"
  local -a argv
  mapfile -t argv < <(fk_dockerd_argv)
  printf '==== %s starting dockerd: %s\n' "$(date -u +%FT%TZ)" "${argv[*]}" >>"$FK_LOG/dockerd.log"
  (
    fl_close_fds
    exec nohup setsid "${argv[@]}" >>"$FK_LOG/dockerd.log" 2>&1 </dev/null
  ) &
  fl_wait 60 "dockerd on $FK_SOCK" fk_docker_ping || { tail -n 30 "$FK_LOG/dockerd.log" >&2; die "dockerd did not start"; }
  log "dockerd $(docker version --format '{{.Server.Version}}') on $FK_SOCK (data root $FK_DOCKER_ROOT, log $FK_LOG/dockerd.log)"
}

fk_ensure_network() {
  if docker network inspect "$FK_NET" >/dev/null 2>&1; then
    local subnet
    subnet=$(docker network inspect "$FK_NET" --format '{{range .IPAM.Config}}{{.Subnet}} {{end}}')
    [ "${subnet% }" = "$FK_NET_SUBNET" ] || die "docker network $FK_NET has subnet '$subnet', not $FK_NET_SUBNET; run ci/kind/down"
    return 0
  fi
  docker network create --driver bridge --subnet "$FK_NET_SUBNET" --gateway "$FK_NET_GATEWAY" \
    -o "com.docker.network.bridge.name=$FK_NET_BRIDGE" -o com.docker.network.bridge.enable_ip_masquerade=false \
    "$FK_NET" >/dev/null
  log "docker network $FK_NET: $FK_NET_SUBNET on bridge $FK_NET_BRIDGE"
}

# Delete every kind cluster of our daemon, every container left, and kind's network.
fk_delete_all() {
  local c ids
  fk_docker_ping || return 0
  for c in $(kind get clusters 2>/dev/null); do
    log "kind delete cluster --name $c"
    kind delete cluster --name "$c" >/dev/null 2>&1 || log "warning: kind delete cluster --name $c failed"
  done
  ids=$(docker ps -aq)
  if [ -n "$ids" ]; then
    # shellcheck disable=SC2086
    docker rm -f -v $ids >/dev/null || true
  fi
  docker volume prune -f >/dev/null 2>&1 || true
  if docker network inspect "$FK_NET" >/dev/null 2>&1; then docker network rm "$FK_NET" >/dev/null || true; fi
}

fk_stop_dockerd() {
  local pid
  pid=$(fk_dockerd_pid)
  [ -n "$pid" ] || return 0
  fl_kill_pid "$pid" dockerd 30
}

# Processes of ours that outlive dockerd (its containerd and shims when it was killed).
fk_stray_pids() {
  local d cmd
  for d in /proc/[0-9]*; do
    cmd=$( { tr '\0' ' ' <"$d/cmdline"; } 2>/dev/null) || continue
    case $cmd in
      *"$FK_DOCKER_EXEC"* | *"$FK_DOCKER_ROOT"* | *"$FK_SOCK"*) printf '%s\n' "${d#/proc/}" ;;
    esac
  done
}

# Remove the cgroups our containers lived in (every controller), deepest first.
fk_remove_cgroups() {
  local d
  for d in /sys/fs/cgroup/*/"$FK_CGROUP_PARENT"; do
    [ -d "$d" ] || continue
    find "$d" -depth -type d -exec rmdir {} \; 2>/dev/null || log "warning: cgroup $d not removed"
  done
}
