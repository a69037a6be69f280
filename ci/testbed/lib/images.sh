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
    # The builder (this file) and the tarball writer (faultlab image pack).
    sha256sum "$FL_TESTBED_DIR/lib/images.sh" "$FL_TESTBED_DIR/../../harness/src/image.rs" | cut -c1-64
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

  # The tarball: one deterministic layer, its config and manifest (harness/src/image.rs).
  local -a pack=(--rootfs "$rootfs" --ref "$ref" --arch "$(fl_go_arch)" --workdir "$workdir"
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
  # Drop older builds of this image.
  find "$FL_CACHE/images/$name" -mindepth 1 -maxdepth 1 -type d ! -name "$hash" -exec rm -rf {} +
  log "image $ref: $out/image.tar ($(du -k "$out/image.tar" | cut -f1) KiB)"
  printf '%s\n' "$out/image.tar"
}
# ---------------------------------------------------------- end images ------
