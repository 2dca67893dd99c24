#!/usr/bin/env bash
# The Marian / MarianMT converters against transformers itself, on the GPU machine (torch, transformers 5,
# sentencepiece, numpy and PyYAML installed; nothing is downloaded). Builds small MarianMT models from a config,
# converts them both ways and compares log-probabilities, greedy and beam outputs, a Marian .npz import and the
# exported folder with MarianMTModel (tools/marian/device_check.py says what each check does). Prints a PASS/FAIL
# table last; exits 1 when a check fails. The log goes to $OUT/device-check.log when $OUT is set.
#
#   LSEQ_BUILD_DIR=build-gpu bash scripts/build.sh      # lseq with CUDA, if not built yet
#   bash tools/marian/device-check.sh build-gpu         # the build directory (or the folder of lstranslate/lsscore)
#   bash tools/marian/device-check.sh build-gpu --lseq-cpu --work /tmp/dc   # lseq on the CPU, keep the files
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [ $# -lt 1 ] || [ ! -d "$1" ]; then
  echo "usage: bash tools/marian/device-check.sh <lseq build dir> [--lseq-cpu] [--work DIR] [--hf-device DEV]" >&2
  exit 2
fi
if ! missing=$(python3 -c "import torch, transformers, sentencepiece, numpy, yaml" 2>&1); then
  echo "device-check: python3 lacks a module it needs: ${missing##*$'\n'}" >&2
  exit 2
fi
log=${OUT:+$OUT/device-check.log}
if [ -n "$log" ]; then
  python3 "$here/device_check.py" "$@" 2>&1 | tee "$log"
  exit "${PIPESTATUS[0]}"
fi
exec python3 "$here/device_check.py" "$@"
