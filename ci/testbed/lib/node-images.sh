# shellcheck shell=bash
# shellcheck disable=SC2034  # variables are used by the scripts that source lib.sh
# ci/testbed/lib.sh, part: what the node holds: imported images, the CRI client, the node package, and the description.
# Sourced by ci/testbed/lib.sh only.

# -------------------------------------------------- images on the node ------
# Import every image under ci/testbed/images/ into the selected node's containerd (namespace k8s.io),
# unless the same build is already there.
fl_import_images() {
  local dir tar ref marker
  mkdir -p "$FL_NODE_IMAGES"
  for dir in "$FL_TESTBED_DIR"/images/*/; do
    dir=${dir%/}
    tar=$(fl_image_build "$dir")
    ref=$(fl_image_ref "$dir")
    marker=$FL_NODE_IMAGES/$(basename "$dir").imported
    if [ -f "$marker" ] && [ "$(cat "$marker")" = "$tar" ] &&
      [ -n "$(fl_ctr images ls -q "name==$ref" 2>/dev/null)" ]; then
      continue
    fi
    log "importing $ref into the containerd of $FL_NODE"
    fl_ctr images import - <"$tar" >/dev/null || die "importing $tar into the containerd of $FL_NODE failed"
    printf '%s\n' "$tar" >"$marker"
  done
}

# fl_faultlab_bin <name>: the path of this repository's binary <name> (faultlab, faultlab-cri: each
# the binary of the package of that name, harness/ and harness/cri/), built with cargo, or, where
# there is no cargo (for example under sudo), an existing build or $FAULTLAB_BIN_DIR/<name>.
fl_faultlab_bin() {
  local name=$1 repo src=""
  repo=$(cd "$FL_TESTBED_DIR/../.." && pwd)
  if [ -n "${FAULTLAB_BIN_DIR:-}" ]; then
    src=$FAULTLAB_BIN_DIR/$name
  elif command -v cargo >/dev/null 2>&1; then
    cargo build --quiet --manifest-path "$repo/Cargo.toml" -p "$name" --bin "$name" >&2 \
      || die "building $name failed (cargo build -p $name --bin $name in $repo)"
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

# fl_faultlab_find: FL_FAULTLAB, the faultlab binary (fl_faultlab_bin), found or built once per script.
# Called before anything that runs it in a subshell (`$(fl_faultlab ...)`), where a value found there
# would be lost and found again.
fl_faultlab_find() {
  [ -z "${FL_FAULTLAB:-}" ] || return 0
  FL_FAULTLAB=$(fl_faultlab_bin faultlab) || exit 1
}

# fl_faultlab <args...>: run faultlab (the hidden `faultlab testbed ...` commands compute for the scripts).
fl_faultlab() {
  fl_faultlab_find
  "$FL_FAULTLAB" "$@"
}

# The node's CRI client: crictl is not packaged in Debian, so the node gets faultlab-cri (crictl's
# pod-sandbox commands, the faultlab-cri crate in harness/cri/).
FL_CRI_BIN=$FL_TB/bin/faultlab-cri
# faultlab's CSI driver on the nodes (fl_start_csi_node): its name, and where its volumes are.
FL_CSI_DRIVER=disk.faultlab.dev
FL_CSI_DISKS=$FL_LIB/csi-disks
fl_install_cri_client() {
  fl_install_cri_client_binary
  fl_check_cri_client
}

# faultlab-cri in place at $FL_CRI_BIN (replaced only when the build differs: a running cri-proxy keeps
# the file it started from).
fl_install_cri_client_binary() {
  local src
  src=${FAULTLAB_CRI_BIN:-$(fl_faultlab_bin faultlab-cri)}
  mkdir -p "$(dirname "$FL_CRI_BIN")"
  if ! cmp -s "$src" "$FL_CRI_BIN"; then
    install -m 0755 "$src" "$FL_CRI_BIN.tmp" && mv -f "$FL_CRI_BIN.tmp" "$FL_CRI_BIN"
  fi
}

# The CRI client reaches the selected node's containerd.
fl_check_cri_client() {
  "$FL_CRI_BIN" --runtime-endpoint "unix://$FL_CTRD_SOCK" version >/dev/null \
    || die "$FL_CRI_BIN cannot reach the CRI of $FL_NODE's containerd at $FL_CTRD_SOCK"
}

# fl_faultlab_cri_arm64: the path of faultlab-cri for an arm64 node (the VM, ci/testbed/lib/vm.sh):
# $FAULTLAB_CRI_BIN if set (it must be an aarch64 program), else cross-built with cargo for
# aarch64-unknown-linux-gnu, linked by Debian's aarch64-linux-gnu-gcc. Only the faultlab-cri crate
# (harness/cri/) is cross-built, not faultlab's library (kube, k8s-openapi, askama, ...).
fl_faultlab_cri_arm64() {
  if [ -n "${FAULTLAB_CRI_BIN:-}" ]; then
    [ -x "$FAULTLAB_CRI_BIN" ] || die "FAULTLAB_CRI_BIN=$FAULTLAB_CRI_BIN: not an executable file"
    fl_elf_is_aarch64 "$FAULTLAB_CRI_BIN" || die "FAULTLAB_CRI_BIN=$FAULTLAB_CRI_BIN: not an aarch64 program (the arm64 node needs one)"
    printf '%s\n' "$FAULTLAB_CRI_BIN"
    return 0
  fi
  local repo sysroot src target=aarch64-unknown-linux-gnu
  local linker=${CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER:-aarch64-linux-gnu-gcc}
  local cc=${CC_aarch64_unknown_linux_gnu:-aarch64-linux-gnu-gcc}
  repo=$(cd "$FL_TESTBED_DIR/../.." && pwd)
  command -v cargo >/dev/null 2>&1 ||
    die "no cargo to cross-build faultlab-cri for arm64: install Rust (rustup), or set FAULTLAB_CRI_BIN to an aarch64 faultlab-cri"
  # The repository's own toolchain and .cargo/config.toml: run from the repository.
  sysroot=$(cd "$repo" && rustc --print sysroot) || die "rustc --print sysroot failed in $repo"
  [ -d "$sysroot/lib/rustlib/$target/lib" ] ||
    die "the Rust standard library for $target is not installed ($sysroot): rustup target add $target"
  command -v "$linker" >/dev/null 2>&1 ||
    die "no linker $linker for $target: apt-get install gcc-aarch64-linux-gnu libc6-dev-arm64-cross"
  (cd "$repo" && CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=$linker CC_aarch64_unknown_linux_gnu=$cc \
    cargo build --quiet -p faultlab-cri --bin faultlab-cri --target "$target") >&2 ||
    die "cross-building faultlab-cri for arm64 failed (cargo build -p faultlab-cri --bin faultlab-cri --target $target in $repo)"
  src=${CARGO_TARGET_DIR:-$repo/target}/$target/debug/faultlab-cri
  fl_elf_is_aarch64 "$src" || die "$src: missing, or not an aarch64 program, after cargo build --target $target"
  printf '%s\n' "$src"
}

# The "node package" the pause-missing fix unpacks: pause-3.1.tgz holding pause-3.1.tar.
fl_write_node_package() {
  local tar tmp
  tar=$(fl_image_build "$FL_TESTBED_DIR/images/pause")
  tmp=$(mktemp -d)
  cp "$tar" "$tmp/pause-3.1.tar"
  # (No directory of the package's is made on the host here: with the node in a VM the package goes
  # there, and a host directory made anyway was left after down, which had not recorded it.)
  tar --create --directory "$tmp" --owner=0 --group=0 --numeric-owner --mtime=@0 --format=ustar pause-3.1.tar |
    gzip -n -9 >"$tmp/pause-3.1.tgz"
  if [ "$FL_VM" = 1 ] && [ "$FL_IN_VM" = 0 ]; then
    fl_vm_ssh sh -c "mkdir -p '$(dirname "$FL_NODE_PACKAGE")' && cat >'$FL_NODE_PACKAGE.tmp' && mv '$FL_NODE_PACKAGE.tmp' '$FL_NODE_PACKAGE'" \
      <"$tmp/pause-3.1.tgz" || die "writing the node package $FL_NODE_PACKAGE in the VM failed"
  elif fl_write_if_changed "$FL_NODE_PACKAGE" 0644 <"$tmp/pause-3.1.tgz"; then
    log "wrote node package $FL_NODE_PACKAGE"
  fi
  rm -rf "$tmp"
}

# -------------------------------------------------------- description -------
# The description is written by `faultlab testbed describe` from these values: its shape lives in the
# Rust types (harness/src/testbed.rs), the values here only. Each of nodes 2..N is described first into
# its own file (FL_NODE_DESCRIPTION), which node 1's description then lists after node 1
# (--add-nodes-from): nodes in order, each with its own complete profile.
fl_write_description() {
  local k
  fl_faultlab_find
  local -a more=()
  for ((k = 2; k <= FL_NODE_COUNT; k++)); do
    fl_node_select "$k"
    fl_describe_node_args "$FL_NODE_DESCRIPTION"
    fl_faultlab testbed describe "${FL_DESCRIBE_ARGS[@]}" || die "describing node $FL_NODE ($FL_NODE_DESCRIPTION) failed"
    more+=(--add-nodes-from "$FL_NODE_DESCRIPTION")
  done
  fl_node_select 1
  fl_describe_node_args "$FL_DESCRIPTION"
  mkdir -p "$(dirname "$FL_DESCRIPTION")"
  fl_faultlab testbed describe "${FL_DESCRIBE_ARGS[@]}" "${more[@]}" \
    || die "writing the test bed description $FL_DESCRIPTION failed"
  chmod 0644 "$FL_DESCRIPTION"
}

# The description's platform name (`faultlab testbed platform`: k8s-1.20-containerd-<major.minor>[-cgroup2]-<arch>)
# from what the node's `containerd --version` and `stat -fc %T /sys/fs/cgroup` print, read as faultlab
# reads them on the nodes (harness/src/node/runtime.rs). The host's nodes share the host's; a VM node's
# are read in the VM, but for bookworm's containerd 1.6, which its image carries.
fl_platform() {
  local version fs
  local -a containerd
  if [ "$FL_VM" = 1 ] && [ "$FL_IN_VM" = 0 ]; then
    if [ "$FL_RUNTIME" = containerd ]; then
      containerd=(--containerd-minor 1.6)
    else
      version=$(fl_vm_ssh "$FL_CTRD_BIN_DIR/containerd" --version </dev/null) || die "cannot run the VM's containerd --version"
      containerd=(--containerd-version "$version")
    fi
    fs=$(fl_vm_ssh stat -fc %T /sys/fs/cgroup </dev/null) || die "cannot read the VM's cgroup file system (stat -fc %T /sys/fs/cgroup over ssh)"
  else
    version=$("$FL_CTRD_BIN_DIR/containerd" --version) || die "cannot run $FL_CTRD_BIN_DIR/containerd --version"
    containerd=(--containerd-version "$version")
    fs=$(stat -fc %T /sys/fs/cgroup)
  fi
  fl_faultlab testbed platform "${containerd[@]}" --cgroup-fs "$fs" --arch "$FL_NODE_ARCH" || die "cannot tell the platform of $FL_NODE"
}

# fl_describe_node_args <out>: into FL_DESCRIBE_ARGS, the arguments of `faultlab testbed describe` that
# describe the selected node into <out>.
fl_describe_node_args() {
  local out=$1 dir
  local -a images=()
  for dir in "$FL_TESTBED_DIR"/images/*/; do
    images+=(--image "$(basename "$dir")=$(fl_image_ref "$dir")")
  done
  # How the harness reaches the node: its network namespace, or ssh into the VM (where the node's
  # script and disk are the VM's own).
  local -a access=()
  local node_script=$FL_TESTBED_DIR/node disk_device
  # A scenario's registry listens on the host's end of the node's link; for the VM, on the host's
  # loopback, whose registry ports QEMU forwards to the VM at $FL_VM_FORWARD (lib/vm.sh fl_vm_netdev).
  local -a registry=(--registry-listen "$FL_LINK_HOST_IP" --registry-address "$FL_LINK_HOST_IP" --registry-hosts-dir "$FL_CTRD_HOSTS_DIR")
  if [ "$FL_VM" = 1 ]; then
    registry=(--registry-listen 127.0.0.1 --registry-address "$FL_VM_FORWARD" --registry-hosts-dir "$FL_CTRD_HOSTS_DIR")
    access=(--arch "$FL_NODE_ARCH" --ssh-destination root@127.0.0.1 --ssh-port "$FL_VM_SSH_PORT"
      --ssh-identity "$FL_VM_KEY" --ssh-option=-o "--ssh-option=UserKnownHostsFile=$FL_VM_KNOWN_HOSTS"
      --ssh-option=-o --ssh-option=StrictHostKeyChecking=yes --ssh-option=-o --ssh-option=LogLevel=ERROR)
    node_script=$FL_VM_TESTBED_DIR/node
    disk_device=$(fl_vm_ssh losetup -j "$FL_DISK_FILE" -O NAME -n </dev/null | head -n 1 | tr -d ' ')
  else
    disk_device=$(fl_disk_device)
  fi
  # Node 1's restart commands are `node restart kubelet`, as they always were; node K's name the node.
  local -a node_arg=()
  [ "$FL_NODE_INDEX" = 1 ] || node_arg=(--node-script-arg "$FL_NODE")
  # containerd 2's nodes: its own ctr (bookworm's 1.6 stays on PATH).
  local -a ctr=()
  [ "$FL_RUNTIME" != containerd2 ] || ctr=(--ctr "$FL_CTRD_BIN_DIR/ctr")
  # sid's runc, where up put it (the same path in the VM).
  [ -z "${FL_FOREIGN_RUNC:-}" ] || ctr+=(--foreign-runc "$FL_FOREIGN_RUNC")
  local platform
  platform=$(fl_platform) || exit 1
  FL_DESCRIBE_ARGS=(--out "$out"
    --platform "$platform" --kubeconfig "$FL_KUBECONFIG" --context "$FL_CONTEXT"
    --node "$FL_NODE" "${access[@]}" --address "$FL_NODE_IP" --gateway "$FL_NODE_GATEWAY" --gateway-device "$FL_NODE_DEVICE"
    --containerd-socket "$FL_CTRD_SOCK" --containerd-root "$FL_CTRD_ROOT" --containerd-config "$FL_CTRD_CONF"
    --sandbox-image "$FL_PAUSE_REF" --kubelet-root "$FL_KUBELET_ROOT" --kubelet-config "$FL_KUBELET_CONF"
    --kubelet-extra-flags "$FL_KUBELET_EXTRA" --node-script "$node_script" "${node_arg[@]}" --cri-client "$FL_CRI_BIN" "${ctr[@]}"
    --csi-driver "$FL_CSI_DRIVER" --csi-disks "$FL_CSI_DISKS"
    --disk-file "$FL_DISK_FILE" --disk-device "$disk_device" --disk-mib "$FL_DISK_MIB"
    --node-package "$FL_NODE_PACKAGE" "${registry[@]}" --control-plane-script "$FL_TESTBED_DIR/control-plane" "${images[@]}")
}
