#!/usr/bin/env bash
# Gathers the Debian packages the build needs beyond CUDA, NCCL and CMake (all header-only or
# headers plus CMake package files) into .deps/ (git-ignored), for a GPU machine that has neither
# these libraries nor a package registry. Run it here, on a Debian 12 machine with apt; take the
# tree with .deps/debs/ to the GPU machine; there, `bash scripts/gpu-build.sh` builds and tests.
#   .deps/debs/  the downloaded .deb files (small; what travels)
#   .deps/root/  their contents, unpacked (scripts/gpu-build.sh unpacks the .debs when it is missing)
# Usage: bash scripts/gpu-deps.sh
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  libboost1.74-dev    # Boost.Graph headers (sim/); the whole Boost header set is one package
  libeigen3-dev       # realexec (CPU backend), calibrate
  libcli11-dev        # cli/
  nlohmann-json3-dev  # every input and output format
  catch2              # tests (v2)
)
command -v apt-get >/dev/null || { echo "gpu-deps: needs apt-get (a Debian machine)" >&2; exit 1; }

rm -rf .deps/debs .deps/root
mkdir -p .deps/debs .deps/root
(cd .deps/debs && apt-get download "${packages[@]}") || {
  echo "gpu-deps: apt-get download failed; run apt-get update first (as root) and try again" >&2
  exit 1
}
for deb in .deps/debs/*.deb; do dpkg-deb -x "$deb" .deps/root; done
echo "gpu-deps: $(ls .deps/debs | wc -l) packages in .deps/debs ($(du -sh .deps/debs | cut -f1)), unpacked in .deps/root ($(du -sh .deps/root | cut -f1))"
