#!/usr/bin/env bash
# README command (2): installs the dependencies, builds lseq with its tests, and runs them all.
# The CUDA code is compiled wherever nvcc is found (for this machine's GPU, or sm_90 when there is none);
# GPU tests skip cleanly without a GPU.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/install-deps.sh"
if [ -z "${LSEQ_CUDA_ARCHS:-}" ]; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    export LSEQ_CUDA_ARCHS=native
  else
    export LSEQ_CUDA_ARCHS=90
  fi
fi
# lsserve's and the BPE tokenizer's dependencies were installed above: a build without them here would be an error,
# not skipped tests.
LSEQ_SERVE=${LSEQ_SERVE:-ON} LSEQ_BPE=${LSEQ_BPE:-ON} bash "$root/scripts/build.sh"
build=${LSEQ_BUILD_DIR:-$root/build}
cd "$build"
ctest --output-on-failure -j "${LSEQ_TEST_JOBS:-$(nproc)}" --timeout 1200
