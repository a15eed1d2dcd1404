#!/usr/bin/env bash
# Installs the Debian packages the toolkit needs, only those missing (make deps).
# Uses sudo only when not root. Safe to run repeatedly.
set -euo pipefail
packages=(
  g++ make pkg-config
  libhdf5-dev hdf5-tools libcli11-dev libsvm-dev libsvm-tools libopenblas-dev libarchive-dev libdeflate-dev libssl-dev
  libpng-dev libjpeg62-turbo-dev nlohmann-json3-dev
  libgtest-dev bats
  slurm-wlm munge
  dataset-fashion-mnist  # the real Fashion-MNIST (~30 MB): datasets.bats converts and classifies it
  python3-h5py python3-numpy python3-matplotlib python3-sklearn python3-torch
  chromium-headless-shell fonts-dejavu-core  # report_browser.bats renders the report page (runs as root: --no-sandbox)
  help2man man-db lmod  # make install: man pages from --help, install.bats reads them and loads the modulefile
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "install-deps: installing ${missing[*]}" >&2
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
