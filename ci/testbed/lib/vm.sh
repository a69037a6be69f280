# shellcheck shell=bash
# shellcheck disable=SC2034  # variables are used by the scripts that source lib.sh
# ci/testbed/lib.sh, part: the node in a VM: an emulated one of another architecture (`up --arch arm64`), or
# one of the host's own architecture on another cgroup hierarchy than the host's (`up --cgroup 2`): its
# image, QEMU's command line, ssh to it, and bringing containerd and the kubelet up in it.
# Sourced by ci/testbed/lib.sh only.
#
# The control plane stays on the host; only the node (containerd, the kubelet, the pods) runs in the VM:
# under QEMU's full-system emulation (TCG) for arm64, a mixed-architecture cluster, as real clusters with
# arm64 workers are; for the host's own architecture under KVM where /dev/kvm is hardware virtualization,
# else TCG too (FL_VM_EMULATED, ci/testbed/lib.sh), booted on the cgroup hierarchy asked for (the host's own
# nodes share the host's, which the test bed does not change). The VM's disk is an overlay on a cached,
# read-only base image, thrown away by down.
#
# The image is made on the host without running any of the node's programs: mmdebstrap unpacks Debian's
# packages for the node's architecture (variant extract: no maintainer scripts, so no binfmt_misc
# registration for arm64), and the few things those scripts would have done are written here (users,
# alternatives' links, module index, keys). The VM boots Debian's kernel with a small busybox initramfs
# (ci/testbed/vm/initramfs-init) into busybox init (ci/testbed/vm/inittab, ci/testbed/vm/boot), which
# mounts the cgroup hierarchy the kernel command line names (faultlab.cgroup=2: cgroup2; else v1) and
# starts sshd. ci/testbed/up then copies the test bed's scripts and configuration in and starts
# containerd and the kubelet with the same functions as on the host's node (ci/testbed/node inside the VM).
# No systemd in the VM (busybox init): the kubelet and runc use the cgroupfs driver, on v2 as on v1 (the
# systemd driver needs systemd's D-Bus API, which busybox init does not have).

# ------------------------------------------------------------- settings -----
# Fixed machine, CPU model, count and memory per architecture, so that runs compare.
FL_VM_SMP=2
FL_VM_MEM_MIB=3072
FL_VM_DISK_GIB=6
FL_VM_SUITE=bookworm
# Common to both architectures: the node's packages (Debian bookworm, the node's architecture). No etcd:
# the control plane runs on the host.
FL_VM_PACKAGES_COMMON=(busybox-static containerd runc containernetworking-plugins iptables ca-certificates
  iproute2 kmod util-linux mount procps openssh-server bash coreutils e2fsprogs curl dash sed grep gawk
  findutils tar gzip diffutils libc-bin passwd login base-files base-passwd ncurses-base)
# Modules the initramfs loads to reach the root disk, in order (crc32c_generic is ext4's soft dependency),
# each after what modules.dep says it needs; one the kernel has built in (modules.builtin) is left out.
FL_VM_INITRD_MODULES=(virtio_pci_legacy_dev virtio_pci_modern_dev virtio_pci virtio_blk crc16 mbcache jbd2
  crc32c_generic ext4)
case $FL_NODE_ARCH in
  amd64)
    # The host's architecture: under KVM where it is hardware virtualization, else under TCG (FL_VM_EMULATED,
    # ci/testbed/lib.sh). The CPU model is QEMU's baseline qemu64: `-cpu host` and `-cpu max` abort under
    # these machines' KVM (QEMU cannot set MSR 0x10a, IA32_ARCH_CAPABILITIES). Neither the kubelet (Go
    # 1.15: no GOAMD64 levels yet), containerd, runc nor Debian's kernel needs more than the x86-64
    # baseline; the kernel's crc32c then is crc32c_generic (crc32c_intel needs SSE4.2).
    FL_VM_QEMU=/usr/bin/qemu-system-x86_64
    FL_VM_MACHINE=pc
    FL_VM_CPU=qemu64
    FL_VM_QEMU_ACCEL=kvm
    [ "$FL_VM_EMULATED" = 0 ] || FL_VM_QEMU_ACCEL=tcg,thread=multi
    FL_VM_CONSOLE=ttyS0
    FL_VM_KERNEL_FLAVOUR=amd64
    FL_VM_HOST_PACKAGES=(qemu-system-x86 qemu-utils mmdebstrap openssh-client cpio binutils socat)
    FL_VM_STRIP="strip"
    ;;
  *)
    # arm64 (the only other architecture the test bed builds for), emulated: QEMU TCG.
    FL_VM_QEMU=/usr/bin/qemu-system-aarch64
    FL_VM_MACHINE=virt
    FL_VM_CPU=cortex-a57
    FL_VM_QEMU_ACCEL=tcg,thread=multi
    FL_VM_CONSOLE=ttyAMA0
    FL_VM_KERNEL_FLAVOUR=arm64
    # What the host needs to build and run the VM, and to cross-build for arm64.
    FL_VM_HOST_PACKAGES=(qemu-system-arm qemu-utils mmdebstrap openssh-client cpio gcc-aarch64-linux-gnu
      libc6-dev-arm64-cross arch-test socat)
    FL_VM_STRIP=aarch64-linux-gnu-strip
    ;;
esac
FL_VM_PACKAGES=("linux-image-$FL_VM_KERNEL_FLAVOUR" "${FL_VM_PACKAGES_COMMON[@]}")

# Each node's own (lib.sh fl_node_select, from its line of ci/testbed/nodes): FL_VM_IP, FL_VM_SSH_PORT,
# FL_VM_STATE (the running VM's disk overlay, the image it boots) and FL_VM_KNOWN_HOSTS.
FL_VM_CACHE=$FL_CACHE/vm-$FL_NODE_ARCH  # base images by input hash (each with its host key), the ssh client key
FL_VM_KEY=$FL_VM_CACHE/id_ed25519
# The directory of faultlab's CSI volumes (FL_CSI_DISKS), shared by every VM node through 9p from the
# host's, as a disk on a network is reachable from every node (volume-multi-attach moves a pod with its
# volume from one node to another). mapped-xattr: what the guest makes is the host's root's, with the
# guest's owners and modes kept in extended attributes, so no guest file is a set-uid one on the host.
FL_VM_SHARED_TAG=faultlab-csi-disks
# Where the test bed's scripts live inside the VM (ci/testbed/node runs from there).
FL_VM_REPO=/opt/faultlab
FL_VM_TESTBED_DIR=$FL_VM_REPO/ci/testbed
# The test bed's own waits (node Ready, the smoke pod) take this many times longer on an emulated node;
# the kubelet's backoffs and the scenarios' documented deadlines are not scaled. Not under KVM.
FL_VM_TIME_FACTOR=4
FL_TIME_FACTOR=1
[ "$FL_VM_EMULATED" = 0 ] || FL_TIME_FACTOR=$FL_VM_TIME_FACTOR

# ------------------------------------------------------------------ ssh -----
# fl_vm_ssh_argv: the ssh command line (without the remote command) into FL_VM_SSH_ARGV.
fl_vm_ssh_argv() {
  FL_VM_SSH_ARGV=(ssh -T -o BatchMode=yes -o ConnectTimeout=15 -o ServerAliveInterval=15
    -o "UserKnownHostsFile=$FL_VM_KNOWN_HOSTS" -o StrictHostKeyChecking=yes -o LogLevel=ERROR
    -i "$FL_VM_KEY" -p "$FL_VM_SSH_PORT" root@127.0.0.1)
}

# fl_vm_ssh <argv...>: run argv in the VM (words quoted for the remote shell); stdin is passed on.
fl_vm_ssh() {
  fl_vm_ssh_argv
  local line
  line=$(printf '%q ' "$@")
  "${FL_VM_SSH_ARGV[@]}" -- "$line"
}

fl_health_vm() { fl_vm_ssh true </dev/null; }

# fl_vm_own_index (in the VM): the K of the node this VM is, from the kernel command line's
# faultlab.node=NAME (fl_vm_qemu_argv); 1 without it.
fl_vm_own_index() {
  local w name=""
  local -a words
  read -r -a words </proc/cmdline
  for w in "${words[@]}"; do
    case $w in faultlab.node=*) name=${w#faultlab.node=} ;; esac
  done
  if [ -z "$name" ]; then echo 1; return 0; fi
  fl_node_index "$name" || die "the kernel command line names node $name, which is no node of the test bed's"
}

# The node's CRI client built for ARCH (the host's own build, or a cross build).
fl_faultlab_cri_for() {
  if [ "$1" = "$(fl_host_arch)" ]; then
    fl_faultlab_bin faultlab-cri
  elif [ "$1" = arm64 ]; then
    fl_faultlab_cri_arm64
  else
    die "no cross build of faultlab-cri for $1"
  fi
}

# ---------------------------------------------------------------- image -----
# The Debian mirror apt uses for bookworm on this host.
fl_debian_mirror() {
  local uri
  # shellcheck disable=SC2016
  uri=$(apt-get indextargets --format '$(TARGET_OF) $(RELEASE) $(REPO_URI)' 2>/dev/null |
    awk '$1 == "deb" && $2 == "bookworm" {print $3}' | head -n 1 || true)
  [ -n "$uri" ] || die "no bookworm 'deb' repository configured in apt"
  printf '%s\n' "${uri%/}"
}

fl_vm_install_host_packages() {
  local p missing pass
  # Twice: installing one package may remove another that was there (a machine with a newer
  # qemu-utils from backports loses it when Debian's qemu-system-arm comes in, whose qemu-system-common
  # breaks it), and the second pass installs it again, from the same release as the rest.
  for pass in 1 2; do
    missing=()
    for p in "${FL_VM_HOST_PACKAGES[@]}"; do
      dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
    done
    [ "${#missing[@]}" -gt 0 ] || break
    log "pass $pass"
    fl_apt_install "${missing[@]}"
  done
  local -a tools=(qemu-img "$FL_VM_QEMU" mmdebstrap cpio ssh "$FL_VM_STRIP" socat)
  [ "$FL_NODE_ARCH" != arm64 ] || tools+=(aarch64-linux-gnu-gcc)
  for p in "${tools[@]}"; do
    command -v "$p" >/dev/null 2>&1 || die "$p is missing after installing ${FL_VM_HOST_PACKAGES[*]}"
  done
  if [ "$FL_VM_QEMU_ACCEL" = kvm ] && [ ! -w /dev/kvm ]; then
    die "no /dev/kvm to write to: the $FL_NODE_ARCH VM node runs under KVM here (FL_VM_ACCEL=tcg to emulate it)"
  fi
  if [ "$FL_NODE_ARCH" = arm64 ] && command -v rustup >/dev/null 2>&1 && ! rustup target list --installed 2>/dev/null | grep -qx aarch64-unknown-linux-gnu; then
    log "rustup target add aarch64-unknown-linux-gnu"
    rustup target add aarch64-unknown-linux-gnu >&2
  fi
}

# Hash of what the image is made of: packages, suite, the VM's files, this file and the initramfs's
# module order (harness/src/testbed/initrd.rs), the node's programs.
fl_vm_image_hash() { # <kubelet> <cri-client>
  {
    printf '%s\n' "$FL_VM_SUITE" "$FL_NODE_ARCH" "${FL_VM_PACKAGES[@]}" "$FL_VM_DISK_GIB"
    (cd "$FL_TESTBED_DIR/vm" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum)
    sha256sum "$FL_TESTBED_DIR/lib/vm.sh" "$FL_TESTBED_DIR/../../harness/src/testbed/initrd.rs" "$1" "$2" | cut -c1-64
  } | sha256sum | cut -c1-64
}

# fl_vm_configure_root <root> <kubelet> <cri-client>: what the packages' maintainer scripts, systemd and
# an installer would have done, done from the host on the unpacked tree.
fl_vm_configure_root() {
  local root=$1 kubelet=$2 cri=$3 kver
  kver=$(find "$root/lib/modules" -mindepth 1 -maxdepth 1 -printf '%f\n' | sort -V | tail -n 1)
  [ -n "$kver" ] || die "the VM's root file system has no kernel modules ($root/lib/modules)"
  # Users and groups (base-passwd's postinst), plus sshd's privilege separation user.
  cp "$root/usr/share/base-passwd/passwd.master" "$root/etc/passwd"
  cp "$root/usr/share/base-passwd/group.master" "$root/etc/group"
  printf 'sshd:x:100:65534::/run/sshd:/usr/sbin/nologin\n' >>"$root/etc/passwd"
  awk -F: '{print $1 ":*:19000:0:99999:7:::"}' "$root/etc/passwd" >"$root/etc/shadow"
  awk -F: '{print $1 ":*::"}' "$root/etc/group" >"$root/etc/gshadow"
  chmod 0640 "$root/etc/shadow" "$root/etc/gshadow"
  # Alternatives' links (update-alternatives in the postinsts): awk and the nft iptables.
  ln -sfn gawk "$root/usr/bin/awk"
  local t
  for t in iptables iptables-save iptables-restore ip6tables ip6tables-save ip6tables-restore; do
    ln -sfn xtables-nft-multi "$root/usr/sbin/$t"
  done
  # The CA store, as ca-certificates' postinst makes it: every certificate the package carries, listed in
  # /etc/ca-certificates.conf, a link to each in /etc/ssl/certs and the bundle of them in that order,
  # which is what update-ca-certificates writes in the VM (a fault's fix, its undo) when only the local
  # CAs change. The hash links come from the VM's first update-ca-certificates (openssl rehash there).
  mkdir -p "$root/usr/local/share/ca-certificates" "$root/etc/ssl/certs"
  (cd "$root/usr/share/ca-certificates" && find . -type f -name '*.crt' -printf '%P\n' | LC_ALL=C sort) >"$root/etc/ca-certificates.conf"
  [ -s "$root/etc/ca-certificates.conf" ] || die "the VM's ca-certificates package has no certificates ($root/usr/share/ca-certificates)"
  : >"$root/etc/ssl/certs/ca-certificates.crt"
  local crt
  while read -r crt; do
    ln -sfn "/usr/share/ca-certificates/$crt" "$root/etc/ssl/certs/$(basename "$crt" .crt | sed -e 's/ /_/g' -e 's/[()]/=/g' -e 's/,/_/g').pem"
    # With the newline a last line may lack, as update-ca-certificates adds each (sed '$a\').
    # shellcheck disable=SC1003
    sed -e '$a\' "$root/usr/share/ca-certificates/$crt" >>"$root/etc/ssl/certs/ca-certificates.crt"
  done <"$root/etc/ca-certificates.conf"
  # The kernel's module index (depmod reads the tree; it runs no arm64 code).
  depmod -b "$root" "$kver"
  # Keys: the VM's host key, and the key the host logs in with (kept in the cache, never in the image).
  mkdir -p "$root/etc/ssh" "$root/root/.ssh"
  rm -f "$root"/etc/ssh/ssh_host_*
  ssh-keygen -q -t ed25519 -N '' -C faultlab-vm -f "$root/etc/ssh/ssh_host_ed25519_key"
  if [ ! -s "$FL_VM_KEY" ]; then
    ssh-keygen -q -t ed25519 -N '' -C faultlab-testbed -f "$FL_VM_KEY"
  fi
  install -m 0600 "$FL_VM_KEY.pub" "$root/root/.ssh/authorized_keys"
  chmod 0700 "$root/root/.ssh"
  install -m 0644 "$FL_TESTBED_DIR/vm/sshd_config" "$root/etc/ssh/sshd_config"
  # Boot: busybox init runs the boot script.
  mkdir -p "$root/etc/faultlab"
  install -m 0644 "$FL_TESTBED_DIR/vm/inittab" "$root/etc/inittab"
  install -m 0755 "$FL_TESTBED_DIR/vm/boot" "$root/etc/faultlab/boot"
  # shellcheck disable=SC2153  # FL_VM_IP and the others are lib.sh's
  cat >"$root/etc/faultlab/vm.env" <<EOF
FL_VM_PREFIX=$FL_VM_PREFIX
FL_VM_GATEWAY=$FL_VM_HOST_ALIAS
FL_VM_DNS=$FL_VM_DNS
FL_VM_SHARED_TAG=$FL_VM_SHARED_TAG
FL_VM_SHARED_DIR=$FL_CSI_DISKS
EOF
  printf 'faultlab test bed node (ci/testbed/lib/vm.sh)\n' >"$root$FL_VM_MARKER"
  # (/etc/hostname and /etc/hosts: the boot script writes them for the node the VM is.)
  # QEMU's DNS address, which the boot script makes unreachable: lookups fail at once, as on the
  # host's node, whose resolv.conf names the host's name servers behind unreachable routes (the same
  # "connect: no route to host" in events; with no name server at all, Go's resolver asks [::1]:53).
  printf '# faultlab: unreachable on purpose (ci/testbed/vm/boot)\nnameserver %s\n' "$FL_VM_DNS" >"$root/etc/resolv.conf"
  # The node's programs at the paths the host's scripts use.
  install -D -m 0755 "$kubelet" "$root$FL_BIN/kubelet"
  install -D -m 0755 "$cri" "$root$FL_CRI_BIN"
  # A debug build carries about 200 MB of debug information the node does not need.
  "$FL_VM_STRIP" "$root$FL_CRI_BIN" || die "$FL_VM_STRIP $root$FL_CRI_BIN failed"
  # Directories the scripts expect.
  mkdir -p "$root/var/log" "$root/var/lib" "$root/run" "$root/tmp" "$root$FL_VM_REPO"
  chmod 1777 "$root/tmp"
}

# fl_vm_initrd <root> <out>: the initramfs: busybox, /init and the modules that reach the root disk, in
# the order `faultlab testbed initrd-modules` gives from the kernel's modules.dep (harness/src/testbed/initrd.rs).
fl_vm_initrd() {
  local root=$1 out=$2 kver work list path
  kver=$(find "$root/lib/modules" -mindepth 1 -maxdepth 1 -printf '%f\n' | sort -V | tail -n 1)
  list=$(fl_faultlab testbed initrd-modules --dir "$root/lib/modules/$kver" "${FL_VM_INITRD_MODULES[@]}") ||
    die "the VM's initramfs: no module list from $root/lib/modules/$kver"
  work=$(mktemp -d)
  mkdir -p "$work/bin" "$work/modules"
  install -m 0755 "$root/bin/busybox" "$work/bin/busybox"
  install -m 0755 "$FL_TESTBED_DIR/vm/initramfs-init" "$work/init"
  : >"$work/modules/order"
  while IFS= read -r path; do
    [ -n "$path" ] || continue
    cp "$root/lib/modules/$kver/$path" "$work/modules/"
    basename "$path" >>"$work/modules/order"
  done <<<"$list"
  (cd "$work" && find . -print0 | LC_ALL=C sort -z | cpio --quiet --null -o -H newc --owner 0:0) | gzip -n -1 >"$out"
  rm -rf "$work"
}

# fl_vm_image: build (or reuse) the VM's base image; sets FL_VM_IMAGE to its directory (rootfs.ext4,
# vmlinuz, initrd.gz). Needs the node's kubelet ($FL_BIN_NODE/kubelet) and CRI client built.
fl_vm_image() {
  local kubelet=$FL_BIN_NODE/kubelet cri hash dir
  [ -x "$kubelet" ] || die "no $FL_NODE_ARCH kubelet at $kubelet (ci/testbed/build --arch $FL_NODE_ARCH)"
  cri=$(fl_faultlab_cri_for "$FL_NODE_ARCH")
  mkdir -p "$FL_VM_CACHE"
  hash=$(fl_vm_image_hash "$kubelet" "$cri")
  dir=$FL_VM_CACHE/$hash
  FL_VM_IMAGE=$dir
  FL_ARM64_BUSYBOX=$dir/busybox
  export FL_ARM64_BUSYBOX
  if [ -s "$dir/rootfs.ext4" ] && [ -s "$dir/vmlinuz" ] && [ -s "$dir/initrd.gz" ] && [ -s "$dir/busybox" ] &&
    [ -s "$FL_VM_CACHE/known_hosts.$hash" ]; then
    return 0
  fi
  local t0=$SECONDS work mirror
  mirror=$(fl_debian_mirror)
  work=$(mktemp -d "$FL_VM_CACHE/.build.XXXXXX")
  log "building the $FL_NODE_ARCH VM image (Debian $FL_VM_SUITE from $mirror) in $work"
  mmdebstrap --quiet --variant=extract --architectures="$FL_NODE_ARCH" \
    --include="$(IFS=,; printf '%s' "${FL_VM_PACKAGES[*]}")" "$FL_VM_SUITE" "$work/root" "$mirror" \
    >"$work/mmdebstrap.log" 2>&1 || { tail -n 20 "$work/mmdebstrap.log" >&2; die "mmdebstrap of the VM's root file system failed (log: $work/mmdebstrap.log)"; }
  log "unpacked $(du -sm "$work/root" | cut -f1) MiB of packages in $((SECONDS - t0)) s"
  fl_vm_configure_root "$work/root" "$kubelet" "$cri"
  local vmlinuz
  vmlinuz=$(find "$work/root/boot" -maxdepth 1 -name 'vmlinuz-*' | sort -V | tail -n 1)
  [ -n "$vmlinuz" ] || die "no kernel in the VM's root file system ($work/root/boot)"
  cp "$vmlinuz" "$work/vmlinuz"
  fl_vm_initrd "$work/root" "$work/initrd.gz"
  # Debian's busybox for the node's architecture: the test bed's images are made of it (FL_ARM64_BUSYBOX).
  cp "$work/root/bin/busybox" "$work/busybox"
  printf '[127.0.0.1]:%s %s\n' "$FL_VM_SSH_PORT" "$(cut -d' ' -f1,2 "$work/root/etc/ssh/ssh_host_ed25519_key.pub")" >"$work/known_hosts"
  truncate -s "${FL_VM_DISK_GIB}G" "$work/rootfs.ext4"
  mkfs.ext4 -q -F -L faultlab-vm -d "$work/root" "$work/rootfs.ext4" || die "mkfs.ext4 -d of the VM's root file system failed"
  rm -rf "$work/root"
  mkdir -p "$dir"
  mv "$work/rootfs.ext4" "$work/vmlinuz" "$work/initrd.gz" "$work/busybox" "$dir/"
  mv "$work/known_hosts" "$FL_VM_CACHE/known_hosts.$hash"
  rm -rf "$work"
  # Drop older images.
  find "$FL_VM_CACHE" -mindepth 1 -maxdepth 1 -type d ! -name "$hash" ! -name '.build.*' -exec rm -rf {} +
  find "$FL_VM_CACHE" -maxdepth 1 -name 'known_hosts.*' ! -name "known_hosts.$hash" -delete
  log "VM image $dir built in $((SECONDS - t0)) s ($(du -sm "$dir" | cut -f1) MiB on disk)"
}

# ----------------------------------------------------------------- qemu -----
# fl_vm_qemu_argv: QEMU's command line into FL_VM_QEMU_ARGV (the disk is the running VM's overlay).
fl_vm_qemu_argv() {
  # The kernel command line names the cgroup hierarchy the boot script mounts (faultlab.cgroup=2: the
  # unified one; without it, v1's), so one image serves both.
  # The node's name and address, which the boot script gives the VM (one image serves every node).
  local append="console=$FL_VM_CONSOLE root=/dev/vda rw panic=-1"
  [ "$FL_NODE_CGROUP" != 2 ] || append+=" faultlab.cgroup=2"
  # shellcheck disable=SC2153  # FL_VM_IP: the node's line's (lib.sh fl_node_select)
  append+=" faultlab.node=$FL_NODE faultlab.ip=$FL_VM_IP"
  # shellcheck disable=SC2054  # QEMU option values hold commas
  FL_VM_QEMU_ARGV=("$FL_VM_QEMU" -name "$FL_NODE" -M "$FL_VM_MACHINE" -cpu "$FL_VM_CPU" -smp "$FL_VM_SMP"
    -accel "$FL_VM_QEMU_ACCEL" -m "$FL_VM_MEM_MIB" -nographic -no-reboot
    -kernel "$FL_VM_STATE/vmlinuz" -initrd "$FL_VM_STATE/initrd.gz"
    -append "$append"
    -drive "file=$FL_VM_STATE/disk.qcow2,format=qcow2,if=virtio"
    -netdev "$(fl_vm_netdev)"
    -device virtio-net-pci,netdev=n0,romfile=
    -fsdev "local,id=shared,path=$FL_CSI_DISKS,security_model=mapped-xattr"
    -device "virtio-9p-pci,fsdev=shared,mount_tag=$FL_VM_SHARED_TAG,romfile=")
}

# fl_vm_netdev: QEMU's user network for the VM, restricted: the guest reaches nothing of this host's
# (its loopback, where etcd and the control plane listen, included) but the ports forwarded to it,
# each at $FL_VM_FORWARD (a connection runs `socat` to the same port on the host's loopback): the API
# server and a scenario's two registries. The host reaches the guest's ssh on its loopback.
fl_vm_netdev() {
  # shellcheck disable=SC2153 # FL_VM_NET is lib.sh's
  local netdev="user,id=n0,net=$FL_VM_NET,host=$FL_VM_HOST_ALIAS,dns=$FL_VM_DNS,restrict=on"
  netdev+=",hostfwd=tcp:127.0.0.1:$FL_VM_SSH_PORT-$FL_VM_IP:22"
  local port
  for port in "${FL_VM_FORWARDED_PORTS[@]}"; do
    netdev+=",guestfwd=tcp:$FL_VM_FORWARD:$port-cmd:socat - TCP:127.0.0.1:$port"
  done
  printf '%s' "$netdev"
}

# The running VM's disk: a fresh overlay on the base image, and the image's kernel, initrd and host key.
fl_vm_prepare_state() {
  mkdir -p "$FL_VM_STATE"
  if [ ! -s "$FL_VM_STATE/disk.qcow2" ] || [ "$(cat "$FL_VM_STATE/image" 2>/dev/null)" != "$FL_VM_IMAGE" ]; then
    rm -f "$FL_VM_STATE/disk.qcow2"
    qemu-img create -q -f qcow2 -b "$FL_VM_IMAGE/rootfs.ext4" -F raw "$FL_VM_STATE/disk.qcow2" >/dev/null
    cp "$FL_VM_IMAGE/vmlinuz" "$FL_VM_IMAGE/initrd.gz" "$FL_VM_STATE/"
    printf '%s\n' "$FL_VM_IMAGE" >"$FL_VM_STATE/image"
  fi
  # The image's host key, at this node's forwarded port.
  sed -e "s/^\[127\.0\.0\.1\]:[0-9]* /[127.0.0.1]:$FL_VM_SSH_PORT /" \
    "$FL_VM_CACHE/known_hosts.$(basename "$FL_VM_IMAGE")" >"$FL_VM_KNOWN_HOSTS"
  # The shared CSI volumes' directory (fl_vm_qemu_argv), the host's root's only.
  install -d -m 0700 "$FL_CSI_DISKS"
}

# The selected node's VM (component `vm`, node K's `vm@faultlab-node-K`).
fl_start_vm() {
  fl_vm_prepare_state
  fl_vm_qemu_argv
  local t0=$SECONDS comp
  comp=$(fl_node_comp vm)
  fl_start "$comp" - "${FL_VM_QEMU_ARGV[@]}"
  fl_wait_comp "$comp" "${FL_VM_BOOT_TIMEOUT:-300}" fl_health_vm || return 1
  log "VM $FL_NODE ($FL_NODE_ARCH, $FL_VM_CPU x$FL_VM_SMP, ${FL_VM_QEMU_ACCEL%%,*}, cgroup v${FL_NODE_CGROUP:-1}) answers ssh $((SECONDS - t0)) s after start"
}

# ------------------------------------------------------- node in the VM -----
# fl_node_cert_of K: node K's kubelet certificate's name (its line's FL_NODE_CERT).
fl_node_cert_of() { (fl_node_select "$1" && printf '%s\n' "$FL_NODE_CERT"); }

# Copy the test bed's scripts and the node's configuration (certificates, kubeconfig, containerd,
# CNI and kubelet configuration) into the VM.
fl_vm_push_config() {
  local repo
  repo=$(cd "$FL_TESTBED_DIR/../.." && pwd)
  tar -C "$repo" -c ci/testbed | fl_vm_ssh sh -c "rm -rf $FL_VM_TESTBED_DIR && mkdir -p $FL_VM_REPO && tar -C $FL_VM_REPO -x"
  printf '%s\n' "$FL_BIN" >"$FL_TB/bin-dir"
  # The node's files of $FL_TB: everything but the control plane's kubeconfigs and the CA's key, and
  # (with several VM nodes) the other nodes' own files and kubelet keys.
  local -a others=()
  local k
  for ((k = 1; k <= FL_NODE_COUNT; k++)); do
    [ "$k" != "$FL_NODE_INDEX" ] || continue
    others+=(--exclude="${FL_TB#/}/pki/$(fl_node_cert_of "$k").*")
    if [ "$k" = 1 ]; then
      others+=(--exclude="${FL_TB#/}/kubelet/kubeconfig")
    else
      others+=(--exclude="${FL_TB#/}/nodes/$(fl_node_name "$k")")
    fi
  done
  tar -C / -c --exclude="${FL_TB#/}/pki/ca.key" --exclude="${FL_TB#/}/pki/sa.key" \
    --exclude="${FL_TB#/}/pki/front-proxy-ca.key" --exclude="${FL_TB#/}/*.kubeconfig" \
    --exclude="${FL_TB#/}/kubeconfig" --exclude="${FL_TB#/}/testbed.yaml" --exclude="${FL_TB#/}/bin" \
    "${others[@]}" "${FL_TB#/}" | fl_vm_ssh tar -C / -x
  # The node's runtime, as lib.sh in the VM reads it from the VM's own $FL_LIB: bookworm's containerd
  # 1.6 (in the image), or sid's containerd 2 (`up --runtime containerd2`; the host's VM only: the
  # binaries are the host's, unpacked by fl_install_containerd2), copied to the same path in the VM.
  if [ "$FL_RUNTIME" = containerd2 ]; then
    tar -C / -c "${FL_CTRD_BIN_DIR#/}" | fl_vm_ssh tar -C / -x
  fi
  # sid's runc of the VM's architecture (fl_sid_runc), at the same path: runtime-parts-mismatch's part.
  if [ -n "${FL_FOREIGN_RUNC:-}" ]; then
    tar -C / -c "${FL_FOREIGN_RUNC#/}" | fl_vm_ssh tar -C / -x
  fi
  printf '%s\n' "$FL_RUNTIME" | fl_vm_ssh sh -c "mkdir -p $FL_LIB && cat >$FL_LIB/node-runtime"
  printf '%s\n' "$FL_CTRD_BIN_DIR" | fl_vm_ssh sh -c "cat >$FL_LIB/containerd-bin-dir"
}

# The node's part of up, in the VM: containerd's disk, containerd (with containerd 2, its cri-proxy), the
# images, the node package, the kubelet. Restarts containerd or the kubelet when their configuration
# changed (FL_CHANGED_*).
fl_vm_node_up() {
  fl_vm_push_config
  fl_vm_ssh env FL_VM_DISK_MIB="$FL_DISK_MIB" "$FL_VM_TESTBED_DIR/node" prepare </dev/null || die "preparing the node in the VM failed"
  local comp
  for comp in "${FL_NODE_COMPONENTS[@]}"; do
    if { [ "$comp" = containerd ] && [ "$FL_CHANGED_CONTAINERD" = 1 ]; } ||
      { [ "$comp" = kubelet ] && [ "$FL_CHANGED_KUBELET" = 1 ]; }; then
      fl_vm_ssh "$FL_VM_TESTBED_DIR/node" stop "$comp" </dev/null || true
    fi
    if [ "$comp" = kubelet ]; then
      fl_import_images
      fl_write_node_package
    fi
    fl_vm_ssh env FL_KUBELET_TIMEOUT=240 FL_CONTAINERD_TIMEOUT=120 "$FL_VM_TESTBED_DIR/node" start "$comp" </dev/null ||
      die "$comp did not come up in the VM (log in the VM: $(fl_log_file "$comp"))"
  done
}

# The node's logs, from the VM to the same files on the host (for CI's artefacts and failures).
fl_vm_fetch_logs() {
  local comp
  mkdir -p "$FL_LOG"
  for comp in "${FL_NODE_COMPONENTS[@]}"; do
    # shellcheck disable=SC2094  # the same path, but the VM's file is read and the host's written
    fl_vm_ssh cat "$(fl_log_file "$comp")" </dev/null >"$(fl_log_file "$comp")" 2>/dev/null || true
  done
}
