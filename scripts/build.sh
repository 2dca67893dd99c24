#!/usr/bin/env bash
# Configures and builds lseq into build/ (or $LSEQ_BUILD_DIR). The CUDA backend is built where nvcc is found,
# for $LSEQ_CUDA_ARCHS (default: CMake's 80;90). Extra arguments go to cmake's configure step.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${LSEQ_BUILD_DIR:-$root/build}
generator=()
command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
# Unity builds (CMake compiles each target's sources in batches of 8 as one file) parse the headers a batch shares
# once: the build takes about half the time on CI's two cores. The ODR check (scripts/odr-check.sh) still compiles
# every library and program source alone; the tests are compiled in batches only. LSEQ_UNITY_BUILD=OFF builds file
# by file here.
args=(-DCMAKE_BUILD_TYPE=${LSEQ_BUILD_TYPE:-Release} -DCMAKE_UNITY_BUILD=${LSEQ_UNITY_BUILD:-ON})
[ -n "${LSEQ_CUDA_ARCHS:-}" ] && args+=(-DCMAKE_CUDA_ARCHITECTURES="$LSEQ_CUDA_ARCHS")
[ -n "${LSEQ_CUDA:-}" ] && args+=(-DLSEQ_CUDA="$LSEQ_CUDA")
[ -n "${LSEQ_SERVE:-}" ] && args+=(-DLSEQ_SERVE="$LSEQ_SERVE")
[ -n "${LSEQ_BPE:-}" ] && args+=(-DLSEQ_BPE="$LSEQ_BPE")
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$root" -B "$build" "${generator[@]}" "${args[@]}" "$@" >/dev/null
else
  cmake -S "$root" -B "$build" "${args[@]}" "$@" >/dev/null
fi
cmake --build "$build" -j "${LSEQ_JOBS:-$(nproc)}"
