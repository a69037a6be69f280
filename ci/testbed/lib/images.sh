# shellcheck shell=bash
# shellcheck disable=SC2034  # variables are used by the scripts that source lib.sh
# ci/testbed/lib.sh, part: images built from ci/testbed/images/*/image.spec (docker-save tarballs).
# Sourced by ci/testbed/lib.sh only.

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
# Output: a docker-save format tarball (manifest.json, <config-digest>.json, layer.tar; written by
# `faultlab image pack`, harness/src/image.rs),
# cached under /var/cache/faultlab/images/<name>/<input-hash>/image.tar.
#
# Target architecture (Go's names): FL_IMAGE_ARCH, by default the host's (fl_host_arch). For the host's
# arch, images are built as described above. The other arch supported is arm64 (on an amd64 host, for
# the arm64 VM node, ci/testbed/lib/vm.sh); then:
#   busybox   installs $FL_ARM64_BUSYBOX, a path the caller provides: /bin/busybox of Debian's arm64
#             busybox-static (for example the arm64 VM root file system's /bin/busybox). The applet
#             links come from the host's `/bin/busybox --list-full` (a foreign binary cannot be run), so
#             both must be the same busybox-static version (`dpkg-deb -f <deb> Version`, or the VM
#             root's dpkg status): checking that is the caller's job. Its sha256 is part of the key.
#   static    compiles with aarch64-linux-gnu-gcc -static (packages gcc-aarch64-linux-gnu,
#             libc6-dev-arm64-cross).
#   binary    is refused (it copies a host program); fl_image_supports_arch tells which images can be
#             built for an arch.
# and builds are cached under /var/cache/faultlab/images/<name>-<arch>/<input-hash>/image.tar, apart
# from the host arch's, so building one arch never drops the other's build.

FL_IMAGE_ARCH=${FL_IMAGE_ARCH:-$(fl_host_arch)}

# fl_elf_is_aarch64 <file>: whether <file> is an ELF file for aarch64 (e_machine 183, EM_AARCH64).
fl_elf_is_aarch64() {
  [ -f "$1" ] && [ "$(od -An -tx1 -N4 "$1" | tr -d ' \n')" = 7f454c46 ] &&
    [ "$(od -An -tx1 -j18 -N2 "$1" | tr -d ' \n')" = b700 ]
}

# fl_image_cross_check <arch>: die unless images can be built for <arch>, which is not the host's.
fl_image_cross_check() {
  [ "$1" = arm64 ] ||
    die "FL_IMAGE_ARCH=$1: images are built for the host's arch ($(fl_host_arch)) or for arm64 only"
}

# fl_image_cross_cc <arch>: the C compiler of the static directive for <arch> (not the host's).
fl_image_cross_cc() {
  fl_image_cross_check "$1"
  command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 ||
    die "no aarch64-linux-gnu-gcc to build images for arm64: apt-get install gcc-aarch64-linux-gnu libc6-dev-arm64-cross"
  echo aarch64-linux-gnu-gcc
}

# fl_image_cross_busybox <arch>: the busybox binary of the busybox directive for <arch> (not the host's).
fl_image_cross_busybox() {
  fl_image_cross_check "$1"
  [ -n "${FL_ARM64_BUSYBOX:-}" ] ||
    die "FL_ARM64_BUSYBOX is not set: building a busybox image for arm64 needs the path of Debian's arm64 busybox-static /bin/busybox (for example the arm64 VM root file system's)"
  [ -f "$FL_ARM64_BUSYBOX" ] || die "FL_ARM64_BUSYBOX=$FL_ARM64_BUSYBOX: no such file"
  fl_elf_is_aarch64 "$FL_ARM64_BUSYBOX" || die "FL_ARM64_BUSYBOX=$FL_ARM64_BUSYBOX: not an aarch64 ELF program"
  printf '%s\n' "$FL_ARM64_BUSYBOX"
}

# fl_image_directive_line <dir> <directive>: the line number of the first <directive> in <dir>/image.spec.
fl_image_directive_line() {
  awk -v kw="$2" '{ sub(/#.*/, "") } $1 == kw { print NR; exit }' "$1/image.spec"
}

# fl_image_supports_arch <dir> [arch]: status 1 when the image in <dir> cannot be built for [arch]
# (default FL_IMAGE_ARCH): its spec copies host programs (binary) and [arch] is not the host's.
fl_image_supports_arch() {
  local dir=$1 arch=${2:-${FL_IMAGE_ARCH:-$(fl_host_arch)}}
  [ "$arch" = "$(fl_host_arch)" ] && return 0
  [ -z "$(fl_image_directive_line "$dir" binary)" ]
}

# Hash of everything an image is built from: its directory, this builder, gcc and busybox, and the
# target arch (FL_IMAGE_ARCH). For another arch than the host's: the cross gcc and libc, and the
# foreign busybox binary instead of the host's gcc and libc (the host's busybox-static still gives the
# applet list).
fl_image_input_hash() {
  local dir=$1 arch bb=""
  arch=${FL_IMAGE_ARCH:-$(fl_host_arch)}
  if [ "$arch" != "$(fl_host_arch)" ]; then
    fl_image_cross_check "$arch"
    if [ -n "$(fl_image_directive_line "$dir" busybox)" ]; then
      bb=$(fl_image_cross_busybox "$arch")
    fi
  fi
  {
    (cd "$dir" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum)
    # The builder (this file) and the tarball writer (faultlab image pack).
    sha256sum "$FL_TESTBED_DIR/lib/images.sh" "$FL_TESTBED_DIR/../../harness/src/image.rs" | cut -c1-64
    if [ "$arch" = "$(fl_host_arch)" ]; then
      gcc -dumpfullversion 2>/dev/null || true
      dpkg-query -W -f='${Version}\n' busybox-static libc6-dev 2>/dev/null || true
    else
      aarch64-linux-gnu-gcc -dumpfullversion 2>/dev/null || true
      dpkg-query -W -f='${Version}\n' busybox-static libc6-dev-arm64-cross 2>/dev/null || true
      if [ -n "$bb" ]; then sha256sum <"$bb" | cut -c1-64; fi
    fi
    printf '%s\n' "$arch"
  } | sha256sum | cut -c1-64
}

# An image directory's name is the image's role, as scenario manifests name it (`${images.busybox}`).
fl_image_ref() { # ref of image dir $1
  awk '$1 == "ref" {print $2}' "$1/image.spec" | head -n 1
}

# Build (or reuse) the image in directory $1 for FL_IMAGE_ARCH; prints the tarball path.
fl_image_build() {
  local dir=$1 name hash out ref arch host store forarch=""
  name=$(basename "$dir")
  [ -f "$dir/image.spec" ] || die "$dir/image.spec: missing"
  ref=$(fl_image_ref "$dir")
  [ -n "$ref" ] || die "$dir/image.spec: no 'ref' line"
  arch=${FL_IMAGE_ARCH:-$(fl_host_arch)}
  host=$(fl_host_arch)
  # One directory of builds per image and arch: the host arch's is <name>, another's <name>-<arch>.
  store=$FL_CACHE/images/$name
  if [ "$arch" != "$host" ]; then
    fl_image_cross_check "$arch"
    local binline
    binline=$(fl_image_directive_line "$dir" binary)
    [ -z "$binline" ] || die "$dir/image.spec:$binline: binary copies a host program: not for $arch"
    store=$FL_CACHE/images/$name-$arch
    forarch=" for $arch"
  fi
  hash=$(fl_image_input_hash "$dir")
  out=$store/$hash
  if [ -s "$out/image.tar" ]; then
    printf '%s\n' "$out/image.tar"
    return 0
  fi
  log "building image $ref$forarch from $dir"
  local work
  mkdir -p "$FL_CACHE/images"
  work=$(mktemp -d "$FL_CACHE/images/.build-$(basename "$store").XXXXXX")
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
        local bbsrc=/bin/busybox
        if [ "$arch" != "$host" ]; then
          bbsrc=$(fl_image_cross_busybox "$arch")
          [ -x /bin/busybox ] || die "$dir/image.spec:$lineno: no /bin/busybox (busybox-static) on the host to list the applets"
          # The applet list is the host's: say so when the two busybox builds differ.
          [ "$(grep -ao -m 1 'BusyBox v[^)]*)' "$bbsrc")" = "$(grep -ao -m 1 'BusyBox v[^)]*)' /bin/busybox)" ] ||
            log "WARNING: $bbsrc and /bin/busybox are different busybox versions: the applet links may not match"
        fi
        install -D -m 0755 "$bbsrc" "$rootfs/bin/busybox"
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
        local cc=gcc
        [ "$arch" = "$host" ] || cc=$(fl_image_cross_cc "$arch")
        "$cc" -static -O2 -Wall -s -o "$rootfs/$dest" "${srcs[@]}" >&2 ||
          die "$dir/image.spec:$lineno: $cc -static failed"
        ;;
      copy)
        [ "${#args[@]}" -eq 2 ] || die "$dir/image.spec:$lineno: copy needs <src> <dest>"
        install -D "$dir/${args[0]}" "$rootfs/${args[1]}"
        ;;
      binary)
        [ "$arch" = "$host" ] || die "$dir/image.spec:$lineno: binary copies a host program: not for $arch"
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

  # The tarball: one deterministic layer, its config and manifest (harness/src/image.rs).
  local -a pack=(--rootfs "$rootfs" --ref "$ref" --arch "$arch" --workdir "$workdir"
    --created-by "faultlab ci/testbed/images/$name" --out "$work/image.tar")
  local word
  for word in "${envs[@]}"; do pack+=(--env "$word"); done
  for word in "${entrypoint[@]}"; do pack+=(--entrypoint "$word"); done
  for word in "${cmd[@]}"; do pack+=(--cmd "$word"); done
  "$(fl_faultlab_bin faultlab)" image pack "${pack[@]}" || die "packing image $ref from $dir failed"
  mkdir -p "$out"
  mv "$work/image.tar" "$out/image.tar"
  printf '%s\n' "$ref" >"$out/ref"
  rm -rf "$work"
  # Drop older builds of this image for this arch (only in this arch's directory).
  find "$store" -mindepth 1 -maxdepth 1 -type d ! -name "$hash" -exec rm -rf {} +
  log "image $ref: $out/image.tar ($(du -k "$out/image.tar" | cut -f1) KiB)"
  printf '%s\n' "$out/image.tar"
}
# ---------------------------------------------------------- end images ------
