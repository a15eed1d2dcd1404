#!/usr/bin/env bash
# make gpu-bundle: copies the shared libraries the built binaries need into $BUILD/lib, so
# that a build folder runs on a machine that has the NVIDIA driver and CUDA runtime but not
# HDF5, OpenBLAS, libsvm or libarchive (the binaries' rpath is $ORIGIN/../lib).
#
# Left out, because the target has them and a second copy would clash: the C runtime
# (glibc: libc, libm, libpthread, libdl, librt, libresolv, the loader), the C++ runtime
# (libstdc++, libgcc_s — a newer system's are backward compatible) and the CUDA
# libraries (driver, cudart, cuBLAS: they must match the target's driver).
#   tools/bundle-libs.sh BUILD
set -euo pipefail
BUILD="${1:-build}"
dest="$BUILD/lib"
mkdir -p "$dest"
skip='^(linux-vdso|linux-gate|ld-linux|libc\.so|libm\.so|libmvec|libpthread|libdl\.so|librt\.so|libresolv|libutil|libstdc\+\+|libgcc_s|libcuda|libcudart|libcublas|libnvidia|libnvrtc)'
declare -A wanted=()
for f in "$BUILD"/bin/* "$BUILD"/tests/*; do
  [ -f "$f" ] && [ -x "$f" ] || continue
  head -c 4 "$f" | grep -q 'ELF' || continue
  while read -r name path; do
    [[ "$name" =~ $skip ]] && continue
    [ -n "$path" ] && [ -f "$path" ] && wanted["$name"]="$path"
  done < <(ldd "$f" 2>/dev/null | awk '/=>/ && $3 ~ /^\// {print $1, $3}')
done
total=0
for name in "${!wanted[@]}"; do
  cp -L "${wanted[$name]}" "$dest/$name"
  chmod u+w "$dest/$name"
  strip --strip-unneeded "$dest/$name" 2>/dev/null || true
  total=$((total + $(stat -c %s "$dest/$name")))
done
echo "gpu-bundle: ${#wanted[@]} libraries, $((total / 1048576)) MiB, in $dest"
