# shellcheck shell=bash
# Shared definitions and functions of the faultlab test bed.
# Sourced by ci/testbed/{up,down,status,node,smoke,build,...}; never run directly.

set -euo pipefail
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

FL_PACKAGES=(golang-go etcd-server containerd runc containernetworking-plugins busybox-static
  gcc libc6-dev openssl iproute2 iptables e2fsprogs util-linux procps curl dpkg-dev
  ca-certificates kmod)

# Host-global sysctls the 1.20 kubelet sets when it starts (pkg/kubelet/cm setupKernelTunables).
# up records their values and down puts them back.
FL_KUBELET_SYSCTLS=(vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops
  kernel.keys.root_maxkeys kernel.keys.root_maxbytes)

# Directories at fixed host paths that Kubernetes 1.20 / containerd 1.6 write to whatever we
# configure. up records which of them it created; down removes exactly those.
FL_FIXED_HOST_DIRS=(/var/log/pods /var/log/containers /var/lib/cni /run/containerd)

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
  targets=$(apt-get indextargets --format '$(TARGET_OF) $(RELEASE)' 2>/dev/null || true)
  if grep -qx 'deb-src bookworm' <<<"$targets"; then
    return 0
  fi
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

fl_install_packages() {
  local missing
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
fl_k8s_cache_dir() { printf '%s/k8s/%s\n' "$FL_CACHE" "$1"; }

FL_K8S_BINARIES=(kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl)

# Sets FL_BIN to the directory holding the five binaries (after fl_build_k8s).
fl_k8s_bin_dir() {
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
  work=$(mktemp -d "$FL_CACHE/images/.build-$name.XXXXXX")
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
