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
