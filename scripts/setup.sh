#!/bin/sh
# setup.sh: installs what the build needs (Debian/Ubuntu) where missing, then
# configures and builds into build/ (only the ninja targets given, if any).
# Safe to run again.
set -eu
cd "$(dirname "$0")/.."

packages="gcc g++ meson ninja-build pkg-config libunwind-dev uthash-dev check zlib1g-dev liblzma-dev python3
  valgrind"
# elfutils' libdw.so.1 names the source lines of native frames (opened at
# run time; the tests check the lines of tests/progs, built with -g).
packages="$packages libdw1"
# Headless Chromium renders `oomlens report --html` pages in the tests.
packages="$packages chromium"
missing=""
for p in $packages; do
  dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "setup: installing$missing"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq $missing >/dev/null
fi

cuda_headers=${CUDA_HEADERS:-/usr/local/cuda/include}
if [ ! -f "$cuda_headers/cuda.h" ]; then
  echo "setup: no cuda.h under $cuda_headers; install the CUDA toolkit headers" \
       "(apt-get install nvidia-cuda-toolkit-headers) or set CUDA_HEADERS" >&2
  exit 1
fi

if [ ! -f build/build.ninja ]; then
  meson setup build -Dcudaheaders="$cuda_headers" >/dev/null
fi
ninja -C build "$@" >/dev/null
echo "setup: built build/src/liboomlens.so and build/tools/oomlens"
