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

FL_NETNS=faultlab-node
FL_NODE=faultlab-node
# The host side of the node link lives in the host's own network namespace, so it uses
# the RFC 2544 benchmarking range instead of an RFC 1918 private range.
FL_VETH_HOST=fl-host0
FL_VETH_NODE=fl-node0
FL_HOST_IP=198.18.213.1
FL_NODE_IP=198.18.213.2
FL_LINK_PREFIX=30
# Pods live only inside the node's network namespace.
FL_POD_CIDR=10.244.0.0/24
FL_POD_GW=10.244.0.1
FL_SERVICE_CIDR=10.96.0.0/12
FL_SERVICE_IP=10.96.0.1
FL_APISERVER_PORT=6443

FL_ETCD_DATA=$FL_LIB/etcd
FL_CTRD_ROOT=$FL_LIB/containerd           # mountpoint of the loop disk
FL_CTRD_STATE=$FL_RUN/containerd
FL_CTRD_SOCK=$FL_CTRD_STATE/containerd.sock
FL_CTRD_CONF_DIR=$FL_TB/containerd
FL_CTRD_CONF=$FL_CTRD_CONF_DIR/config.toml
FL_CNI_CONF_DIR=$FL_TB/cni/net.d
FL_CNI_DATA=$FL_LIB/cni
FL_DISK_DIR=$FL_LIB/disk
FL_DISK_FILE=$FL_DISK_DIR/containerd.ext4
FL_DISK_MIB=1024
FL_KUBELET_ROOT=$FL_LIB/kubelet
FL_KUBELET_CONF=$FL_TB/kubelet/config.yaml
FL_KUBELET_EXTRA=$FL_TB/kubelet/extra-flags
FL_KUBECONFIG=$FL_TB/kubeconfig
FL_CONTEXT=faultlab-testbed
FL_DESCRIPTION=$FL_TB/testbed.yaml
FL_NODE_PACKAGE=/opt/cloud/cce/package/node-package/pause-3.1.tgz
FL_PAUSE_REF=faultlab.invalid/cce-pause:3.1
FL_BUSYBOX_REF=faultlab.invalid/busybox:1.35

FL_PACKAGES=(golang-1.15-go etcd-server containerd runc containernetworking-plugins busybox-static
  gcc libc6-dev openssl iproute2 iptables e2fsprogs util-linux procps curl dpkg-dev
  ca-certificates kmod)

# Host-global sysctls the 1.20 kubelet sets when it starts (pkg/kubelet/cm setupKernelTunables).
# up records their values and down puts them back.
FL_KUBELET_SYSCTLS=(vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops
  kernel.keys.root_maxkeys kernel.keys.root_maxbytes)

# Record the values of FL_KUBELET_SYSCTLS in DIR (sysctl.<name>), each once: the first record wins.
# Every kubelet that shares the host's kernel sets them (the test bed's, and a kind node's: /proc/sys
# is writable in a privileged container and these are not namespaced).
fl_record_sysctls() {
  local dir=$1 s
  mkdir -p "$dir"
  for s in "${FL_KUBELET_SYSCTLS[@]}"; do
    [ -f "$dir/sysctl.$s" ] || sysctl -n "$s" >"$dir/sysctl.$s"
  done
}

# Put back what fl_record_sysctls recorded in DIR.
fl_restore_sysctls() {
  local dir=$1 s f v
  for s in "${FL_KUBELET_SYSCTLS[@]}"; do
    f=$dir/sysctl.$s
    if [ -s "$f" ]; then
      v=$(cat "$f")
      [ "$(sysctl -n "$s")" = "$v" ] || sysctl -qw "$s=$v"
    fi
  done
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

# ---------------------------------------------------------- packages -------
fl_missing_packages() {
  local p missing=()
  for p in "${FL_PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
      missing+=("$p")
    fi
  done
  printf '%s\n' "${missing[@]}"
}

FL_APT_UPDATED=${FL_APT_UPDATED:-0}
fl_apt_update_once() {
  if [ "$FL_APT_UPDATED" = 0 ]; then
    log "apt-get update"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    FL_APT_UPDATED=1
    export FL_APT_UPDATED
  fi
}

# Make sure a deb-src entry for bookworm exists; add a deb822 one copied from the
# configured binary repository if there is none.
fl_ensure_deb_src() {
  local targets uri
  # shellcheck disable=SC2016  # apt's own $(FIELD) syntax
  targets=$(apt-get indextargets --format '$(TARGET_OF) $(RELEASE)' 2>/dev/null || true)
  if grep -qx 'deb-src bookworm' <<<"$targets"; then
    return 0
  fi
  # shellcheck disable=SC2016
  uri=$(apt-get indextargets --format '$(TARGET_OF) $(RELEASE) $(REPO_URI)' 2>/dev/null |
    awk '$1 == "deb" && $2 == "bookworm" {print $3}' | head -n 1 || true)
  [ -n "$uri" ] || die "no bookworm 'deb' repository configured in apt; cannot add a deb-src entry"
  log "adding deb-src entry /etc/apt/sources.list.d/faultlab-deb-src.sources ($uri)"
  cat >/etc/apt/sources.list.d/faultlab-deb-src.sources <<EOF
# Added by faultlab ci/testbed: sources of bookworm's kubernetes package.
Types: deb-src
URIs: ${uri%/}
Suites: bookworm
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  FL_APT_UPDATED=0
}

# Add another Debian suite from the configured bookworm mirror, pinned so that only the packages named
# here can come from it (Pin-Priority -1 for everything else): bullseye for Go 1.15 (the Go Kubernetes
# 1.20 was released with), trixie for kind. Usage: fl_ensure_suite SUITE PACKAGE...
fl_ensure_suite() {
  local suite=$1 uri src pref want
  shift
  src=/etc/apt/sources.list.d/faultlab-$suite.sources
  pref=/etc/apt/preferences.d/faultlab-$suite
  want=$(printf 'Package: *\nPin: release n=%s\nPin-Priority: -1\n\nPackage: %s\nPin: release n=%s\nPin-Priority: 500\n' \
    "$suite" "$*" "$suite")
  if [ -f "$src" ] && [ "$(cat "$pref" 2>/dev/null)" = "$want" ]; then
    return 0
  fi
  # shellcheck disable=SC2016
  uri=$(apt-get indextargets --format '$(TARGET_OF) $(RELEASE) $(REPO_URI)' 2>/dev/null |
    awk '$1 == "deb" && $2 == "bookworm" {print $3}' | head -n 1 || true)
  [ -n "$uri" ] || die "no bookworm 'deb' repository configured in apt; cannot add $suite"
  log "adding Debian $suite for: $* ($src, pinned in $pref)"
  printf '%s\n' "$want" >"$pref"
  cat >"$src" <<EOF
# Added by faultlab (ci/): only the packages pinned in $pref come from $suite.
Types: deb
URIs: ${uri%/}
Suites: $suite
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  FL_APT_UPDATED=0
}

fl_install_packages() {
  local missing
  fl_ensure_suite "$FL_GO_SUITE" golang-1.15-go golang-1.15-src
  missing=$(fl_missing_packages)
  if [ -n "$missing" ]; then
    fl_apt_update_once
    # shellcheck disable=SC2086
    log "apt-get install" $missing
    # shellcheck disable=SC2086
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >/dev/null
  fi
}

# ------------------------------------------------------- k8s sources -------
# Debian source version of kubernetes, e.g. 1.20.5+really1.20.2-1.
fl_k8s_src_version() {
  local v
  v=$(apt-cache showsrc kubernetes 2>/dev/null | awk '/^Version:/ {print $2}' | sort -V | tail -n 1 || true)
  if [ -z "$v" ]; then
    fl_ensure_deb_src
    fl_apt_update_once
    v=$(apt-cache showsrc kubernetes 2>/dev/null | awk '/^Version:/ {print $2}' | sort -V | tail -n 1 || true)
  fi
  [ -n "$v" ] || die "apt-cache showsrc kubernetes found nothing (deb-src for bookworm missing?)"
  printf '%s\n' "$v"
}

# Upstream version the Debian tree really is (1.20.5+really1.20.2 -> 1.20.2).
fl_k8s_upstream_version() {
  local v=${1%-*}
  v=${v##*really}
  printf '%s\n' "$v"
}

# Where the sources, binaries and GOPATH of one Debian source version live.
# The directory name carries the Go version: binaries of another Go are not reused.
fl_k8s_cache_dir() { printf '%s/k8s/%s-go1.15\n' "$FL_CACHE" "$1"; }

# kubeadm and kube-proxy are for the kind node image (ci/kind); the test bed runs the other five.
FL_K8S_BINARIES=(kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl kubeadm kube-proxy)
# Go 1.15 from bullseye, the Go Kubernetes 1.20 was released with: under Go >= 1.18 the vendored
# github.com/modern-go/reflect2 1.0.1 panics (seen in kubeadm's kubelet-start phase).
FL_GO_SUITE=bullseye
FL_GO=/usr/lib/go-1.15/bin/go

# Sets FL_BIN to the directory holding the five binaries (after fl_build_k8s).
# up records the directory in $FL_TB/bin-dir so node commands need no apt look-up.
fl_k8s_bin_dir() {
  if [ -s "$FL_TB/bin-dir" ]; then
    FL_BIN=$(cat "$FL_TB/bin-dir")
    [ -x "$FL_BIN/kubelet" ] && return 0
  fi
  local ver
  ver=$(fl_k8s_src_version)
  FL_BIN=$(fl_k8s_cache_dir "$ver")/bin
}

fl_k8s_binaries_present() {
  local b
  for b in "${FL_K8S_BINARIES[@]}"; do
    [ -x "$FL_BIN/$b" ] || return 1
  done
}

# ------------------------------------------------------------- images ------
# One directory per image under ci/testbed/images/<name>/ with an image.spec:
#   ref <name:tag>               required, the image reference
#   busybox                      /bin/busybox from busybox-static, its applet links, /tmp, /etc/passwd
#   static <dest> <a.c> [b.c..]  compile C sources (relative to the image dir) with gcc -static into <dest>
#   copy <src> <dest>            copy a file from the image dir
#   binary <host-path> <dest>    copy a host program and the shared libraries it loads (ldd), for
#                                Debian's programs (etcd, iptables) in images of the kind node (ci/kind)
#   link <target> <dest>         a symbolic link <dest> -> <target>
#   input <text>                 no effect on the image but part of its cache key (a source's checksum)
#   entrypoint <arg>...          ENTRYPOINT (words split on blanks)
#   cmd <arg>...                 CMD
#   env <NAME=value>             one Env entry (repeatable)
#   workdir <dir>                WorkingDir
# Output: a docker-save format tarball (manifest.json, <config-digest>.json, <layer-digest>/layer.tar),
# cached under /var/cache/faultlab/images/<name>/<input-hash>/image.tar.

fl_json_str() { # print $1 as a JSON string
  local s=$1
  s=${s//\\/\\\\}
  s=${s//\"/\\\"}
  s=${s//$'\t'/\\t}
  s=${s//$'\n'/\\n}
  printf '"%s"' "$s"
}

fl_json_array() { # print the arguments as a JSON array of strings
  local first=1 a
  printf '['
  for a in "$@"; do
    [ $first = 1 ] || printf ','
    first=0
    fl_json_str "$a"
  done
  printf ']'
}

fl_go_arch() {
  case $(uname -m) in
    x86_64) echo amd64 ;;
    aarch64) echo arm64 ;;
    armv7l) echo arm ;;
    *) uname -m ;;
  esac
}

# Hash of everything an image is built from: its directory, this builder, gcc and busybox.
fl_image_input_hash() {
  local dir=$1
  {
    (cd "$dir" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum)
    sed -n '/^# -* images -*$/,/^# -* end images -*$/p' "$FL_TESTBED_DIR/lib.sh"
    gcc -dumpfullversion 2>/dev/null || true
    dpkg-query -W -f='${Version}\n' busybox-static libc6-dev 2>/dev/null || true
    fl_go_arch
  } | sha256sum | cut -c1-64
}

# An image directory's name is the image's role, as scenario manifests name it (`${images.busybox}`).
fl_image_ref() { # ref of image dir $1
  awk '$1 == "ref" {print $2}' "$1/image.spec" | head -n 1
}

# Build (or reuse) the image in directory $1; prints the tarball path.
fl_image_build() {
  local dir=$1 name hash out ref
  name=$(basename "$dir")
  [ -f "$dir/image.spec" ] || die "$dir/image.spec: missing"
  ref=$(fl_image_ref "$dir")
  [ -n "$ref" ] || die "$dir/image.spec: no 'ref' line"
  hash=$(fl_image_input_hash "$dir")
  out=$FL_CACHE/images/$name/$hash
  if [ -s "$out/image.tar" ]; then
    printf '%s\n' "$out/image.tar"
    return 0
  fi
  log "building image $ref from $dir"
  local work
  mkdir -p "$FL_CACHE/images"
  work=$(mktemp -d "$FL_CACHE/images/.build-$name.XXXXXX")
  { [ -n "$work" ] && [ -d "$work" ]; } || die "cannot make a build directory under $FL_CACHE/images"
  local rootfs=$work/rootfs
  mkdir -p "$rootfs"
  local -a entrypoint=() cmd=() envs=()
  local workdir=/ lineno=0 line kw rest
  while IFS= read -r line || [ -n "$line" ]; do
    lineno=$((lineno + 1))
    line=${line%%#*}
    read -r kw rest <<<"$line" || true
    [ -n "${kw:-}" ] || continue
    local -a args=()
    read -r -a args <<<"$rest" || true
    case $kw in
      ref) ;;
      busybox)
        install -D -m 0755 /bin/busybox "$rootfs/bin/busybox"
        local applet
        while IFS= read -r applet; do
          [ "$applet" = bin/busybox ] && continue
          mkdir -p "$rootfs/$(dirname "$applet")"
          ln -sf /bin/busybox "$rootfs/$applet"
        done < <(/bin/busybox --list-full)
        mkdir -p "$rootfs/etc" "$rootfs/root" "$rootfs/tmp" "$rootfs/var/tmp" "$rootfs/proc" "$rootfs/sys" "$rootfs/dev"
        chmod 1777 "$rootfs/tmp" "$rootfs/var/tmp"
        printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$rootfs/etc/passwd"
        printf 'root:x:0:\nnogroup:x:65534:\n' >"$rootfs/etc/group"
        ;;
      static)
        [ "${#args[@]}" -ge 2 ] || die "$dir/image.spec:$lineno: static needs <dest> <source.c>..."
        local dest=${args[0]} srcs=() s
        for s in "${args[@]:1}"; do srcs+=("$dir/$s"); done
        mkdir -p "$rootfs/$(dirname "$dest")"
        gcc -static -O2 -Wall -s -o "$rootfs/$dest" "${srcs[@]}" >&2 ||
          die "$dir/image.spec:$lineno: gcc -static failed"
        ;;
      copy)
        [ "${#args[@]}" -eq 2 ] || die "$dir/image.spec:$lineno: copy needs <src> <dest>"
        install -D "$dir/${args[0]}" "$rootfs/${args[1]}"
        ;;
      binary)
        [ "${#args[@]}" -eq 2 ] || die "$dir/image.spec:$lineno: binary needs <host-path> <dest>"
        [ -x "${args[0]}" ] || die "$dir/image.spec:$lineno: ${args[0]} is not an executable file"
        install -D -m 0755 "${args[0]}" "$rootfs/${args[1]}"
        local lib
        while IFS= read -r lib; do
          [ -n "$lib" ] || continue
          install -D -m 0755 "$lib" "$rootfs$lib"
        done < <(ldd "${args[0]}" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}')
        ;;
      link)
        [ "${#args[@]}" -eq 2 ] || die "$dir/image.spec:$lineno: link needs <target> <dest>"
        mkdir -p "$rootfs/$(dirname "${args[1]}")"
        ln -sfn "${args[0]}" "$rootfs/${args[1]}"
        ;;
      input) ;;
      entrypoint) entrypoint=("${args[@]}") ;;
      cmd) cmd=("${args[@]}") ;;
      env) envs+=("$rest") ;;
      workdir) workdir=${args[0]} ;;
      *) die "$dir/image.spec:$lineno: unknown directive '$kw'" ;;
    esac
  done <"$dir/image.spec"

  # Layer: deterministic tar of the rootfs.
  local layer_tmp=$work/layer.tar
  (cd "$rootfs" && find . -mindepth 1 -printf '%P\n' | LC_ALL=C sort >"$work/files")
  tar --create --file "$layer_tmp" --directory "$rootfs" --no-recursion --numeric-owner \
    --owner=0 --group=0 --mtime=@0 --format=posix --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
    --verbatim-files-from --files-from "$work/files"
  local layer_sha
  layer_sha=$(sha256sum "$layer_tmp" | cut -c1-64)
  mkdir -p "$work/out/$layer_sha"
  mv "$layer_tmp" "$work/out/$layer_sha/layer.tar"
  printf '1.0' >"$work/out/$layer_sha/VERSION"

  local config
  config=$(printf '{"architecture":%s,"os":"linux","created":"1970-01-01T00:00:00Z","config":{' "$(fl_json_str "$(fl_go_arch)")"
    printf '"Env":%s' "$(fl_json_array "${envs[@]}")"
    if [ "${#entrypoint[@]}" -gt 0 ]; then printf ',"Entrypoint":%s' "$(fl_json_array "${entrypoint[@]}")"; fi
    if [ "${#cmd[@]}" -gt 0 ]; then printf ',"Cmd":%s' "$(fl_json_array "${cmd[@]}")"; fi
    printf ',"WorkingDir":%s' "$(fl_json_str "$workdir")"
    printf '},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]},' "$layer_sha"
    printf '"history":[{"created":"1970-01-01T00:00:00Z","created_by":%s}]}' "$(fl_json_str "faultlab ci/testbed/images/$name")")
  local config_sha
  config_sha=$(printf '%s' "$config" | sha256sum | cut -c1-64)
  printf '%s' "$config" >"$work/out/$config_sha.json"
  printf '[{"Config":"%s.json","RepoTags":[%s],"Layers":["%s/layer.tar"]}]' \
    "$config_sha" "$(fl_json_str "$ref")" "$layer_sha" >"$work/out/manifest.json"
  local repo=${ref%:*} tag=${ref##*:}
  printf '{%s:{%s:"%s"}}' "$(fl_json_str "$repo")" "$(fl_json_str "$tag")" "$layer_sha" >"$work/out/repositories"
  (cd "$work/out" && find . -mindepth 1 -printf '%P\n' | LC_ALL=C sort >"$work/outfiles")
  tar --create --file "$work/image.tar" --directory "$work/out" --no-recursion --numeric-owner \
    --owner=0 --group=0 --mtime=@0 --format=ustar --verbatim-files-from --files-from "$work/outfiles"
  mkdir -p "$out"
  mv "$work/image.tar" "$out/image.tar"
  printf '%s\n' "$ref" >"$out/ref"
  rm -rf "$work"
  # Drop older builds of this image.
  find "$FL_CACHE/images/$name" -mindepth 1 -maxdepth 1 -type d ! -name "$hash" -exec rm -rf {} +
  log "image $ref: $out/image.tar ($(du -k "$out/image.tar" | cut -f1) KiB)"
  printf '%s\n' "$out/image.tar"
}
# ---------------------------------------------------------- end images ------

# ---------------------------------------------------------- processes ------
# Ports on the host's loopback (etcd) and the host veth address (apiserver).
FL_ETCD_CLIENT=http://127.0.0.1:12379
FL_ETCD_PEER=http://127.0.0.1:12380
FL_APISERVER_URL=https://$FL_HOST_IP:$FL_APISERVER_PORT

FL_COMPONENTS=(etcd kube-apiserver kube-controller-manager kube-scheduler containerd kubelet)

# pgrep -f pattern that identifies each component's process (used to adopt or kill strays).
fl_comp_pattern() {
  case $1 in
    etcd) echo "^/usr/bin/etcd --name=faultlab " ;;
    kube-apiserver | kube-controller-manager | kube-scheduler | kubelet)
      echo "^$FL_CACHE/k8s/[^ ]*/bin/$1 " ;;
    containerd) echo "^/usr/bin/containerd --config $FL_CTRD_CONF" ;;
    *) die "unknown component $1" ;;
  esac
}

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

# Run a command in the node's network namespace (host mount namespace kept).
fl_in_node() { nsenter --net="/run/netns/$FL_NETNS" -- "$@"; }

fl_ctr() { ctr --address "$FL_CTRD_SOCK" --namespace k8s.io "$@"; }

fl_kubectl() { "$FL_BIN/kubectl" --kubeconfig "$FL_KUBECONFIG" "$@"; }

# ------------------------------------------------------------ health -------
fl_health_etcd() { curl -fsS --max-time 3 "$FL_ETCD_CLIENT/health" | grep -q '"health":"true"'; }
fl_health_apiserver() {
  curl -fsS --max-time 3 --cacert "$FL_PKI/ca.crt" --cert "$FL_PKI/admin.crt" --key "$FL_PKI/admin.key" \
    "$FL_APISERVER_URL/readyz" | grep -qx ok
}
fl_health_controller_manager() { curl -ksS --max-time 3 https://127.0.0.1:10257/healthz | grep -qx ok; }
fl_health_scheduler() { curl -ksS --max-time 3 https://127.0.0.1:10259/healthz | grep -qx ok; }
fl_health_containerd() { fl_in_node ctr --address "$FL_CTRD_SOCK" --timeout 3s version; }
fl_health_kubelet() { fl_in_node curl -fsS --max-time 3 http://127.0.0.1:10248/healthz | grep -qx ok; }
fl_node_ready() {
  [ "$(fl_kubectl get node "$FL_NODE" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]
}

fl_comp_health() {
  case $1 in
    etcd) fl_health_etcd ;;
    kube-apiserver) fl_health_apiserver ;;
    kube-controller-manager) fl_health_controller_manager ;;
    kube-scheduler) fl_health_scheduler ;;
    containerd) fl_health_containerd ;;
    kubelet) fl_health_kubelet ;;
  esac
}

# ------------------------------------------------------- certificates -------
# fl_cert <name> <subject> [serverAltNames]: an EC P-256 key and a certificate signed by the CA.
fl_cert() {
  local name=$1 subj=$2 sans=${3:-} ext
  [ -s "$FL_PKI/$name.crt" ] && [ -s "$FL_PKI/$name.key" ] && return 0
  ext=$(mktemp)
  if [ -n "$sans" ]; then
    printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\nsubjectAltName=%s\n' "$sans" >"$ext"
  else
    printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n' >"$ext"
  fi
  openssl ecparam -name prime256v1 -genkey -noout -out "$FL_PKI/$name.key" 2>/dev/null
  openssl req -new -key "$FL_PKI/$name.key" -subj "$subj" -out "$FL_PKI/$name.csr" 2>/dev/null
  openssl x509 -req -in "$FL_PKI/$name.csr" -CA "$FL_PKI/ca.crt" -CAkey "$FL_PKI/ca.key" \
    -CAcreateserial -days 3650 -sha256 -extfile "$ext" -out "$FL_PKI/$name.crt" 2>/dev/null
  rm -f "$ext" "$FL_PKI/$name.csr"
}

fl_make_pki() {
  mkdir -p "$FL_PKI"
  chmod 0700 "$FL_PKI"
  if [ ! -s "$FL_PKI/ca.crt" ]; then
    log "creating certificates in $FL_PKI"
    openssl ecparam -name prime256v1 -genkey -noout -out "$FL_PKI/ca.key" 2>/dev/null
    openssl req -x509 -new -key "$FL_PKI/ca.key" -subj "/CN=faultlab-testbed-ca" -days 3650 -sha256 \
      -addext 'basicConstraints=critical,CA:TRUE' -addext 'keyUsage=critical,keyCertSign,cRLSign,digitalSignature' \
      -out "$FL_PKI/ca.crt" 2>/dev/null
  fi
  fl_cert apiserver "/CN=kube-apiserver" \
    "IP:$FL_HOST_IP,IP:127.0.0.1,IP:$FL_SERVICE_IP,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,DNS:localhost"
  fl_cert admin "/O=system:masters/CN=faultlab-admin"
  fl_cert controller-manager "/CN=system:kube-controller-manager"
  fl_cert scheduler "/CN=system:kube-scheduler"
  fl_cert node "/O=system:nodes/CN=system:node:$FL_NODE"
  fl_cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client"
  # Front-proxy (request header) CA, so the controllers' delegated authentication finds one.
  if [ ! -s "$FL_PKI/front-proxy-ca.crt" ]; then
    openssl ecparam -name prime256v1 -genkey -noout -out "$FL_PKI/front-proxy-ca.key" 2>/dev/null
    openssl req -x509 -new -key "$FL_PKI/front-proxy-ca.key" -subj "/CN=faultlab-front-proxy-ca" -days 3650 -sha256 \
      -addext 'basicConstraints=critical,CA:TRUE' -addext 'keyUsage=critical,keyCertSign,cRLSign,digitalSignature' \
      -out "$FL_PKI/front-proxy-ca.crt" 2>/dev/null
  fi
  if [ ! -s "$FL_PKI/front-proxy-client.crt" ]; then
    local ext
    ext=$(mktemp)
    printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n' >"$ext"
    openssl ecparam -name prime256v1 -genkey -noout -out "$FL_PKI/front-proxy-client.key" 2>/dev/null
    openssl req -new -key "$FL_PKI/front-proxy-client.key" -subj /CN=front-proxy-client 2>/dev/null |
      openssl x509 -req -CA "$FL_PKI/front-proxy-ca.crt" -CAkey "$FL_PKI/front-proxy-ca.key" -CAcreateserial \
        -days 3650 -sha256 -extfile "$ext" -out "$FL_PKI/front-proxy-client.crt" 2>/dev/null
    rm -f "$ext"
  fi
  if [ ! -s "$FL_PKI/sa.key" ]; then
    openssl ecparam -name prime256v1 -genkey -noout -out "$FL_PKI/sa.key" 2>/dev/null
    openssl ec -in "$FL_PKI/sa.key" -pubout -out "$FL_PKI/sa.pub" 2>/dev/null
  fi
}

# fl_write_if_changed <file> <mode>: stdin -> file, only when the content differs.
# Returns 0 when the file was (re)written, 1 when it was already up to date.
fl_write_if_changed() {
  local f=$1 mode=${2:-0644} tmp
  mkdir -p "$(dirname "$f")"
  tmp=$(mktemp "$f.XXXXXX")
  cat >"$tmp"
  chmod "$mode" "$tmp"
  if [ -f "$f" ] && cmp -s "$tmp" "$f"; then
    rm -f "$tmp"
    return 1
  fi
  mv "$tmp" "$f"
  return 0
}

# fl_kubeconfig <file> <cert-name> <user> [context]
fl_kubeconfig() {
  local f=$1 cert=$2 user=$3 ctx=${4:-$FL_CONTEXT}
  fl_write_if_changed "$f" 0600 <<EOK || true
apiVersion: v1
kind: Config
clusters:
- name: faultlab
  cluster:
    server: $FL_APISERVER_URL
    certificate-authority-data: $(base64 -w0 <"$FL_PKI/ca.crt")
users:
- name: $user
  user:
    client-certificate-data: $(base64 -w0 <"$FL_PKI/$cert.crt")
    client-key-data: $(base64 -w0 <"$FL_PKI/$cert.key")
contexts:
- name: $ctx
  context:
    cluster: faultlab
    user: $user
current-context: $ctx
EOK
}

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

# ------------------------------------------------------------ configs -------
# Each writer returns 0 when the file changed (so the caller can restart the component).
fl_write_containerd_config() {
  fl_write_if_changed "$FL_CTRD_CONF" <<EOC
# faultlab test bed: containerd of the node $FL_NODE (runs in network namespace $FL_NETNS).
version = 2
root = "$FL_CTRD_ROOT"
state = "$FL_CTRD_STATE"
oom_score = 0
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

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
    path = "$FL_LIB/containerd-opt"
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
  fl_write_if_changed "$FL_KUBELET_CONF" <<EOC
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
clusterDNS: [10.96.0.10]
clusterDomain: cluster.local
volumePluginDir: $FL_KUBELET_ROOT/volume-plugins
serializeImagePulls: false
# containerd's disk is a 1 GiB loop mount: with the default thresholds a nearly full disk evicts
# every pod at once, and image GC removes the pause image. Keep both out of the faults' way.
evictionHard:
  imagefs.available: "0%"
  imagefs.inodesFree: "0%"
  nodefs.available: "5%"
  nodefs.inodesFree: "5%"
  memory.available: "100Mi"
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
EOC
}

fl_write_configs() {
  fl_make_pki
  fl_kubeconfig "$FL_KUBECONFIG" admin faultlab-admin
  fl_kubeconfig "$FL_TB/controller-manager.kubeconfig" controller-manager system:kube-controller-manager
  fl_kubeconfig "$FL_TB/scheduler.kubeconfig" scheduler system:kube-scheduler
  fl_kubeconfig "$FL_TB/kubelet/kubeconfig" node "system:node:$FL_NODE"
  FL_CHANGED_CONTAINERD=0
  FL_CHANGED_KUBELET=0
  if fl_write_containerd_config; then FL_CHANGED_CONTAINERD=1; fi
  if fl_write_cni_config; then FL_CHANGED_CONTAINERD=1; fi
  if fl_write_kubelet_config; then FL_CHANGED_KUBELET=1; fi
}

# ----------------------------------------------------- start components -----
fl_start_etcd() {
  mkdir -p "$FL_ETCD_DATA"
  chmod 0700 "$FL_ETCD_DATA"
  fl_start etcd - /usr/bin/etcd --name=faultlab --data-dir="$FL_ETCD_DATA" \
    --listen-client-urls="$FL_ETCD_CLIENT" --advertise-client-urls="$FL_ETCD_CLIENT" \
    --listen-peer-urls="$FL_ETCD_PEER" --initial-advertise-peer-urls="$FL_ETCD_PEER" \
    --initial-cluster="faultlab=$FL_ETCD_PEER" --initial-cluster-state=new \
    --snapshot-count=10000 --logger=zap --log-outputs=stderr
  fl_wait_comp etcd 60 fl_health_etcd
}

fl_start_apiserver() {
  fl_start kube-apiserver - "$FL_BIN/kube-apiserver" \
    --advertise-address="$FL_HOST_IP" --bind-address="$FL_HOST_IP" --secure-port="$FL_APISERVER_PORT" \
    --insecure-port=0 --etcd-servers="$FL_ETCD_CLIENT" \
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
  fl_start containerd "$FL_NETNS" /usr/bin/containerd --config "$FL_CTRD_CONF"
  fl_wait_comp containerd "${FL_CONTAINERD_TIMEOUT:-60}" fl_health_containerd
}

# Kubelet flags: the base set, then one flag per line of the extra-flags file (later flags win).
fl_kubelet_flags() {
  FL_KUBELET_ARGS=(
    --config="$FL_KUBELET_CONF"
    --kubeconfig="$FL_TB/kubelet/kubeconfig"
    --root-dir="$FL_KUBELET_ROOT"
    --cert-dir="$FL_KUBELET_ROOT/pki"
    --container-runtime=remote
    --container-runtime-endpoint="unix://$FL_CTRD_SOCK"
    --image-service-endpoint="unix://$FL_CTRD_SOCK"
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
  fl_start kubelet "$FL_NETNS" "$FL_BIN/kubelet" "${FL_KUBELET_ARGS[@]}"
  fl_wait_comp kubelet "${FL_KUBELET_TIMEOUT:-90}" fl_health_kubelet
}

fl_start_comp() {
  case $1 in
    etcd) fl_start_etcd ;;
    kube-apiserver) fl_start_apiserver ;;
    kube-controller-manager) fl_start_controller_manager ;;
    kube-scheduler) fl_start_scheduler ;;
    containerd) fl_start_containerd ;;
    kubelet) fl_start_kubelet ;;
  esac
}

# -------------------------------------------------- images on the node ------
# Import every image under ci/testbed/images/ into the node's containerd (namespace k8s.io),
# unless the same build is already there.
fl_import_images() {
  local dir tar ref marker
  mkdir -p "$FL_LIB/images"
  for dir in "$FL_TESTBED_DIR"/images/*/; do
    dir=${dir%/}
    tar=$(fl_image_build "$dir")
    ref=$(fl_image_ref "$dir")
    marker=$FL_LIB/images/$(basename "$dir").imported
    if [ -f "$marker" ] && [ "$(cat "$marker")" = "$tar" ] &&
      [ -n "$(fl_ctr images ls -q "name==$ref" 2>/dev/null)" ]; then
      continue
    fi
    log "importing $ref into the node's containerd"
    fl_ctr images import "$tar" >/dev/null
    printf '%s\n' "$tar" >"$marker"
  done
}

# fl_faultlab_bin <name>: the path of this repository's binary <name> (faultlab, faultlab-cri),
# built with cargo, or, where there is no cargo (for example under sudo), an existing build or
# $FAULTLAB_BIN_DIR/<name>.
fl_faultlab_bin() {
  local name=$1 repo src=""
  repo=$(cd "$FL_TESTBED_DIR/../.." && pwd)
  if [ -n "${FAULTLAB_BIN_DIR:-}" ]; then
    src=$FAULTLAB_BIN_DIR/$name
  elif command -v cargo >/dev/null 2>&1; then
    cargo build --quiet --manifest-path "$repo/Cargo.toml" -p faultlab --bin "$name" >&2 \
      || die "building $name failed (cargo build -p faultlab --bin $name in $repo)"
    src="${CARGO_TARGET_DIR:-$repo/target}/debug/$name"
  else
    for src in "$repo/target/debug/$name" "$repo/target/release/$name" ""; do
      [ -x "$src" ] && break
    done
  fi
  if [ -z "$src" ] || [ ! -x "$src" ]; then
    die "no $name: install cargo, or build it first (cargo build --bin $name) or set FAULTLAB_BIN_DIR"
  fi
  printf '%s\n' "$src"
}

# The node's CRI client: crictl is not packaged in Debian, so the node gets faultlab-cri (crictl's
# pod-sandbox commands, harness/src/bin/faultlab-cri.rs).
FL_CRI_BIN=$FL_TB/bin/faultlab-cri
fl_install_cri_client() {
  local src
  src=${FAULTLAB_CRI_BIN:-$(fl_faultlab_bin faultlab-cri)}
  mkdir -p "$(dirname "$FL_CRI_BIN")"
  if ! cmp -s "$src" "$FL_CRI_BIN"; then
    install -m 0755 "$src" "$FL_CRI_BIN.tmp" && mv -f "$FL_CRI_BIN.tmp" "$FL_CRI_BIN"
  fi
  "$FL_CRI_BIN" --runtime-endpoint "unix://$FL_CTRD_SOCK" version >/dev/null \
    || die "$FL_CRI_BIN cannot reach containerd's CRI at $FL_CTRD_SOCK"
}

# The "node package" the pause-missing fix unpacks: pause-3.1.tgz holding pause-3.1.tar.
fl_write_node_package() {
  local tar tmp
  tar=$(fl_image_build "$FL_TESTBED_DIR/images/pause")
  tmp=$(mktemp -d)
  cp "$tar" "$tmp/pause-3.1.tar"
  mkdir -p "$(dirname "$FL_NODE_PACKAGE")"
  tar --create --directory "$tmp" --owner=0 --group=0 --numeric-owner --mtime=@0 --format=ustar pause-3.1.tar |
    gzip -n -9 >"$tmp/pause-3.1.tgz"
  if fl_write_if_changed "$FL_NODE_PACKAGE" 0644 <"$tmp/pause-3.1.tgz"; then
    log "wrote node package $FL_NODE_PACKAGE"
  fi
  rm -rf "$tmp"
}

# -------------------------------------------------------- description -------
# The description is written by `faultlab testbed describe` from these values: its shape lives in the
# Rust types (harness/src/testbed.rs), the values here only.
fl_write_description() {
  local bin dir
  bin=$(fl_faultlab_bin faultlab)
  local -a images=()
  for dir in "$FL_TESTBED_DIR"/images/*/; do
    images+=(--image "$(basename "$dir")=$(fl_image_ref "$dir")")
  done
  mkdir -p "$(dirname "$FL_DESCRIPTION")"
  "$bin" testbed describe --out "$FL_DESCRIPTION" \
    --platform k8s-1.20-containerd-1.6 --kubeconfig "$FL_KUBECONFIG" --context "$FL_CONTEXT" \
    --node "$FL_NODE" --address "$FL_NODE_IP" --gateway "$FL_HOST_IP" --gateway-device "$FL_VETH_NODE" \
    --containerd-socket "$FL_CTRD_SOCK" --containerd-root "$FL_CTRD_ROOT" --containerd-config "$FL_CTRD_CONF" \
    --sandbox-image "$FL_PAUSE_REF" --kubelet-root "$FL_KUBELET_ROOT" --kubelet-config "$FL_KUBELET_CONF" \
    --kubelet-extra-flags "$FL_KUBELET_EXTRA" --node-script "$FL_TESTBED_DIR/node" --cri-client "$FL_CRI_BIN" \
    --disk-file "$FL_DISK_FILE" --disk-device "$(fl_disk_device)" --disk-mib "$FL_DISK_MIB" \
    --node-package "$FL_NODE_PACKAGE" "${images[@]}" \
    || die "writing the test bed description $FL_DESCRIPTION failed"
  chmod 0644 "$FL_DESCRIPTION"
}

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

# PIDs of processes in the kubelet's pod cgroups (kubepods), in any v1 hierarchy or v2.
fl_pod_pids() {
  local f
  for f in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods /sys/fs/cgroup/unified/kubepods; do
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

# Remove the kubelet's cgroups (kubepods/...), deepest first.
fl_remove_cgroups() {
  local top
  for top in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods; do
    [ -d "$top" ] || continue
    find "$top" -depth -type d -exec rmdir {} \; 2>/dev/null || true
  done
}
