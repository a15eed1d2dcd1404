#!/usr/bin/env bash
# make gpu-bundle: copies the shared libraries the built binaries need, and the target
# machine lacks, into $BUILD/lib, so that the build folder runs on the lent GPU machines
# (the binaries' rpath is $ORIGIN/../lib). The folder then travels whole (64 MiB limit).
#
# Walks the DT_NEEDED graph from every binary in $BUILD/bin and $BUILD/tests. Never
# copied: the C runtime (glibc: libc, libm, libpthread, libdl, librt, libresolv, the
# loader), the C++ runtime (libstdc++, libgcc_s: the target's are newer and backward
# compatible) and the CUDA libraries (they must match the target's driver). Also not
# copied, nor followed: the sonames listed in tools/gpu-host-libs.txt (what the GPU image
# has; BUNDLE_ALL=1 ignores the list, for another target).
#   tools/bundle-libs.sh BUILD
set -euo pipefail
BUILD="${1:-build}"
dest="$BUILD/lib"
here="$(cd "$(dirname "$0")" && pwd)"
mkdir -p "$dest"
skip='^(linux-vdso|linux-gate|ld-linux|libc\.so|libm\.so|libmvec|libpthread|libdl\.so|librt\.so|libresolv|libutil|libstdc\+\+|libgcc_s|libcuda|libcudart|libcublas|libnvidia|libnvrtc)'
declare -A present=()
if [ "${BUNDLE_ALL:-0}" != 1 ] && [ -f "$here/gpu-host-libs.txt" ]; then
  while read -r so; do [ -n "$so" ] && [ "${so:0:1}" != "#" ] && present["$so"]=1; done < "$here/gpu-host-libs.txt"
fi

# soname → path on this machine, from the loader's view of every binary
declare -A where=()
bins=()
for f in "$BUILD"/bin/* "$BUILD"/tests/*; do
  [ -f "$f" ] && [ -x "$f" ] && head -c 4 "$f" | grep -q ELF || continue
  bins+=("$f")
  while read -r name path; do where["$name"]="$path"; done < <(ldd "$f" 2>/dev/null | awk '/=>/ && $3 ~ /^\// {print $1, $3}')
done
needed() { readelf -d "$1" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; }

declare -A wanted=()
queue=()
for b in "${bins[@]}"; do queue+=($(needed "$b")); done
while [ ${#queue[@]} -gt 0 ]; do
  so="${queue[0]}"
  queue=("${queue[@]:1}")
  [[ "$so" =~ $skip ]] && continue
  [ -n "${present[$so]:-}" ] && continue
  [ -n "${wanted[$so]:-}" ] && continue
  path="${where[$so]:-}"
  [ -z "$path" ] && path=$(ldconfig -p | awk -v s="$so" '$1 == s {print $NF; exit}')
  [ -z "$path" ] && { echo "gpu-bundle: $so not found on this machine" >&2; continue; }
  wanted["$so"]="$path"
  queue+=($(needed "$path"))
done

total=0
for so in "${!wanted[@]}"; do
  # (a second run finds the copies already bundled through the rpath)
  [ "$(realpath "${wanted[$so]}")" = "$(realpath -m "$dest/$so")" ] || cp -L "${wanted[$so]}" "$dest/$so"
  chmod u+w "$dest/$so"
  strip --strip-unneeded "$dest/$so" 2>/dev/null || true
  total=$((total + $(stat -c %s "$dest/$so")))
done
echo "gpu-bundle: ${#wanted[@]} libraries ($((total / 1024)) KiB) in $dest: ${!wanted[*]}"
