# shellcheck shell=bash
# shellcheck disable=SC2034  # variables are used by the scripts that source lib.sh
# ci/testbed/lib.sh, part: Debian packages and the Kubernetes 1.20 sources and build.
# Sourced by ci/testbed/lib.sh only.

# ---------------------------------------------------------- packages -------
# What installs packages, adds apt sources or updates apt's lists holds apt.lock (fl_locked): the kind
# environment and the test bed may be set up at once, and one's policy-rc.d must not go while the other
# installs.
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
fl_apt_update_once() { fl_locked apt fl_apt_update_once_locked; }
fl_apt_update_once_locked() {
  if [ "$FL_APT_UPDATED" = 0 ]; then
    log "apt-get update"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    FL_APT_UPDATED=1
    export FL_APT_UPDATED
  fi
}

# Make sure a deb-src entry for bookworm exists; add a deb822 one copied from the
# configured binary repository if there is none.
fl_ensure_deb_src() { fl_locked apt fl_ensure_deb_src_locked; }
fl_ensure_deb_src_locked() {
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
fl_ensure_suite() { fl_locked apt fl_ensure_suite_locked "$@"; }
fl_ensure_suite_locked() {
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

# The packages faultlab's set-up installed (those missing before, with the dependencies apt brought
# in, never one that was there), one per line: what `ci/testbed/down --purge` removes again.
FL_SETUP_PACKAGES=${FL_SETUP_PACKAGES:-/var/cache/faultlab/setup-packages}

fl_installed_packages() {
  dpkg-query -W -f='${db:Status-Abbrev} ${binary:Package}\n' 2>/dev/null | awk '$1 ~ /^.i/ {print $2}' | LC_ALL=C sort -u
}

# apt-get install PACKAGE[=VERSION]..., with no service started while they install (the packages of
# etcd-server, nginx-light, docker-registry and docker.io start theirs: a policy-rc.d that refuses
# every start, unless the machine has one, removed again whatever happens). What it installed (the
# packages that were not there before) is added to $FL_SETUP_PACKAGES.
fl_apt_install() { fl_locked apt fl_apt_install_locked "$@"; }
fl_apt_install_locked() {
  local created=0 rc=0 before
  [ "$#" -gt 0 ] || return 0
  before=$(fl_installed_packages)
  fl_apt_update_once
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\n# faultlab: no service starts while faultlab installs packages\nexit 101\n' >/usr/sbin/policy-rc.d
    chmod 0755 /usr/sbin/policy-rc.d
    created=1
  fi
  log "apt-get install $*"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null || rc=$?
  if [ "$created" = 1 ]; then rm -f /usr/sbin/policy-rc.d; fi
  [ "$rc" = 0 ] || die "apt-get install $* failed"
  mkdir -p "$(dirname "$FL_SETUP_PACKAGES")"
  { LC_ALL=C comm -13 <(printf '%s\n' "$before") <(fl_installed_packages); cat "$FL_SETUP_PACKAGES" 2>/dev/null || true; } |
    sed '/^$/d' | LC_ALL=C sort -u >"$FL_SETUP_PACKAGES.tmp"
  mv "$FL_SETUP_PACKAGES.tmp" "$FL_SETUP_PACKAGES"
}

# `ci/testbed/down --purge`: the packages faultlab's set-up installed (nothing else: no autoremove), the apt
# sources and pins it added (/etc/apt/sources.list.d/faultlab-*.sources,
# /etc/apt/preferences.d/faultlab-*), and its caches (/var/cache/faultlab: the Kubernetes build, images,
# VM disks, containerd 2, kind's Docker data root). Run after the test bed and kind are down.
fl_purge_setup() { fl_locked apt fl_purge_setup_locked; }
fl_purge_setup_locked() {
  local -a pkgs=() installed=()
  local p
  if [ -f "$FL_SETUP_PACKAGES" ]; then mapfile -t pkgs <"$FL_SETUP_PACKAGES"; fi
  for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' && installed+=("$p")
  done
  if [ "${#installed[@]}" -gt 0 ]; then
    log "apt-get purge ${installed[*]} (installed by faultlab's set-up)"
    DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq "${installed[@]}" >/dev/null
  fi
  local added=("${FL_APT_SOURCES_DIR:-/etc/apt/sources.list.d}"/faultlab-*.sources "${FL_APT_PREFS_DIR:-/etc/apt/preferences.d}"/faultlab-*)
  for p in "${added[@]}"; do
    if [ -e "$p" ]; then log "removing $p"; rm -f "$p"; fi
  done
  if [ -d "$FL_CACHE" ]; then log "removing $FL_CACHE"; rm -rf "$FL_CACHE"; fi
}

fl_install_packages() {
  local -a missing=()
  fl_ensure_suite "$FL_GO_SUITE" golang-1.15-go golang-1.15-src
  mapfile -t missing < <(fl_missing_packages | sed '/^$/d')
  fl_apt_install "${missing[@]}"
}

# ------------------------------------------------------- Debian sid -------
# fl_sid_download APT-DIR ARCH PACKAGE: download Debian sid's PACKAGE for ARCH, from the mirror of the
# system's bookworm repository, with apt's sources, lists and cache under APT-DIR (the system's sources,
# pins and package state are left as they are); sets FL_SID_DEB to the .deb in APT-DIR/download.
fl_sid_download() {
  local apt=$1 arch=$2 pkg=$3 uri
  local -a opts
  # shellcheck disable=SC2016  # apt's own $(FIELD) syntax
  uri=$(apt-get indextargets --format '$(TARGET_OF) $(RELEASE) $(REPO_URI)' 2>/dev/null |
    awk '$1 == "deb" && $2 == "bookworm" {print $3}' | head -n 1 || true)
  [ -n "$uri" ] || die "no bookworm 'deb' repository configured in apt; cannot read Debian sid's $pkg from its mirror"
  mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$apt/download"
  # apt downloads as its unprivileged _apt user, as it does into the system's own lists and cache:
  # the directories it writes are that user's (root's where Debian's apt has no such user).
  if id _apt >/dev/null 2>&1; then chown _apt:root "$apt/lists/partial" "$apt/cache/archives/partial" "$apt/download"; fi
  printf 'deb [arch=%s signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] %s sid main\n' "$arch" "${uri%/}" >"$apt/sources.list"
  opts=(-o "Dir::Etc::SourceList=$apt/sources.list" -o Dir::Etc::SourceParts=/dev/null
    -o "Dir::State::Lists=$apt/lists" -o "Dir::Cache=$apt/cache" -o "APT::Architectures::=$arch")
  log "Debian sid's $pkg ($arch): reading sid's package lists (into $apt)"
  apt-get "${opts[@]}" update -qq || die "apt-get update of Debian sid's $arch lists (into $apt) failed"
  rm -f "$apt/download/${pkg}_"*.deb
  (cd "$apt/download" && apt-get "${opts[@]}" download -qq "$pkg:$arch") || die "apt-get download $pkg:$arch (Debian sid) failed"
  FL_SID_DEB=$(find "$apt/download" -maxdepth 1 -name "${pkg}_*_$arch.deb" | head -n 1)
  [ -n "$FL_SID_DEB" ] || die "apt-get download $pkg:$arch left no ${pkg}_*_$arch.deb in $apt/download"
}

# ------------------------------------------------------- containerd 2 -----
# Debian sid's containerd 2.x for `up --runtime containerd2`: its binaries only. apt reads sid through
# sources, lists and a cache of its own under $FL_CTRD2_HOME/apt (the system's sources, pins and
# package state are left as they are), downloads the containerd package and dpkg -x unpacks it into
# $FL_CTRD2_HOME/<version>. sid's runc needs a newer glibc than bookworm's, so the nodes keep
# bookworm's runc (FL_RUNC, the config's BinaryName). Sets FL_CTRD_BIN_DIR; up records it.
FL_RUNC=/usr/sbin/runc
fl_install_containerd2() {
  local apt=$FL_CTRD2_HOME/apt deb ver dir b
  if [ -n "$FL_CTRD_BIN_DIR" ] && [ -x "$FL_CTRD_BIN_DIR/containerd" ]; then return 0; fi
  # Once unpacked, a version is kept (as the Kubernetes build is): the newest one in the cache.
  mkdir -p "$FL_CTRD2_HOME"
  dir=$(find "$FL_CTRD2_HOME" -mindepth 1 -maxdepth 1 -type d -name '2.*' ! -name '*.tmp' 2>/dev/null | sort -V | tail -n 1)
  if [ -n "$dir" ] && [ -x "$dir/usr/bin/containerd" ]; then
    FL_CTRD_BIN_DIR=$dir/usr/bin
    return 0
  fi
  fl_sid_download "$apt" "$(fl_host_arch)" containerd
  deb=$FL_SID_DEB
  ver=$(dpkg-deb -f "$deb" Version)
  case $ver in 2.*) ;; *) die "Debian sid's containerd is $ver, not 2.x" ;; esac
  dir=$FL_CTRD2_HOME/$ver
  rm -rf "$dir.tmp"
  dpkg -x "$deb" "$dir.tmp"
  rm -f "$deb"
  for b in containerd containerd-shim-runc-v2 ctr; do
    [ -x "$dir.tmp/usr/bin/$b" ] || die "the containerd $ver package has no usr/bin/$b"
  done
  rm -rf "$dir"
  mv "$dir.tmp" "$dir"
  FL_CTRD_BIN_DIR=$dir/usr/bin
  log "containerd 2: $("$FL_CTRD_BIN_DIR/containerd" --version) in $FL_CTRD_BIN_DIR"
}

# ------------------------------------------------------- sid's runc -------
# The mismatched runtime part of runtime-parts-mismatch (harness/src/faults/runtime_parts_mismatch.rs):
# Debian sid's runc for one architecture, which needs a newer C library than bookworm's (GLIBC_2.38), so
# on a bookworm node it cannot run: what a reinstall from another release leaves. Its binary only, as
# fl_install_containerd2 takes sid's containerd: apt reads sid's lists for that architecture into
# $FL_SID_RUNC_HOME/apt-<arch> (the system's sources, pins and package state are left as they are),
# downloads the package and dpkg -x unpacks it into $FL_SID_RUNC_HOME/<version>-<arch>; kept once there.
# fl_sid_runc ARCH sets FL_FOREIGN_RUNC to its runc.
FL_SID_RUNC_HOME=/var/cache/faultlab/sid-runc
fl_sid_runc() {
  local arch=$1 apt dir deb ver
  case $arch in amd64 | arm64) ;; *) die "fl_sid_runc: no sid runc for architecture $arch (amd64, arm64)" ;; esac
  apt=$FL_SID_RUNC_HOME/apt-$arch
  mkdir -p "$FL_SID_RUNC_HOME"
  dir=$(find "$FL_SID_RUNC_HOME" -mindepth 1 -maxdepth 1 -type d -name "*-$arch" ! -name 'apt-*' ! -name '*.tmp' 2>/dev/null | sort -V | tail -n 1)
  if [ -n "$dir" ] && [ -f "$dir/usr/sbin/runc" ]; then
    FL_FOREIGN_RUNC=$dir/usr/sbin/runc
    return 0
  fi
  fl_sid_download "$apt" "$arch" runc
  deb=$FL_SID_DEB
  ver=$(dpkg-deb -f "$deb" Version)
  dir=$FL_SID_RUNC_HOME/$ver-$arch
  rm -rf "$dir.tmp"
  dpkg -x "$deb" "$dir.tmp"
  rm -f "$deb"
  [ -f "$dir.tmp/usr/sbin/runc" ] || die "the runc $ver ($arch) package has no usr/sbin/runc"
  rm -rf "$dir"
  mv "$dir.tmp" "$dir"
  FL_FOREIGN_RUNC=$dir/usr/sbin/runc
  log "sid's runc $ver ($arch) in $dir"
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

# Sets FL_BIN to the directory holding the host's binaries (after ci/testbed/build), and FL_BIN_NODE
# to the one holding the node's kubelet (the same, unless the node is a VM of another architecture:
# .../bin-<arch>; inside a VM the kubelet is at the host's path, $FL_BIN/kubelet).
# up records the directory in $FL_TB/bin-dir so node commands need no apt look-up.
fl_k8s_bin_dir() {
  FL_BIN=""
  if [ -s "$FL_TB/bin-dir" ]; then
    FL_BIN=$(cat "$FL_TB/bin-dir")
    [ -x "$FL_BIN/kubelet" ] || FL_BIN=""
  fi
  if [ -z "$FL_BIN" ]; then
    local ver
    ver=$(fl_k8s_src_version)
    FL_BIN=$(fl_k8s_cache_dir "$ver")/bin
  fi
  FL_BIN_NODE=$FL_BIN
  if [ "$FL_VM" = 1 ] && [ "$FL_IN_VM" = 0 ] && [ "$FL_NODE_ARCH" != "$(fl_host_arch)" ]; then
    FL_BIN_NODE=$(dirname "$FL_BIN")/bin-$FL_NODE_ARCH
  fi
}

fl_k8s_binaries_present() {
  local b
  for b in "${FL_K8S_BINARIES[@]}"; do
    [ -x "$FL_BIN/$b" ] || return 1
  done
}
