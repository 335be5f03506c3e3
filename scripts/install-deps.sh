#!/usr/bin/env bash
# Installs the Debian packages fleetsim builds with, and only those that are missing.
# Idempotent: a second run finds everything present and touches nothing.
set -euo pipefail

packages=(
  cmake g++ ninja-build pkg-config
  ccache               # rebuilds of unchanged sources (CI's clean clones) are lookups
  libboost-graph-dev   # workflow DAGs, topology graphs
  libeigen3-dev        # calibration fits, CPU backend GEMMs
  libcli11-dev         # the fleetsim command line
  nlohmann-json3-dev   # every input and output format
  catch2               # tests (Debian ships v2)
  libbenchmark-dev     # bench/
  libopenmpi-dev openmpi-bin  # fleetsim plan under mpirun (optional at build; installed so tests cover it)
  chromium             # tests: the HTML reports rendered headless
)

# --fuzz: also clang and its sanitizer runtime, for scripts/fuzz.sh.
if [ "${1:-}" = "--fuzz" ]; then
  packages+=(clang libclang-rt-14-dev)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing ${missing[*]}; run as root (or install them yourself)" >&2
  exit 1
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
