#!/usr/bin/env bash
# The model converters of tools/marian (docs/convert-marian.md): the Python tests in tests/tools/marian, run against
# this build's lstrain, lstranslate and lsscore. They need python3 with numpy, sentencepiece and PyYAML (protobuf is
# optional); without them this says which is missing and exits 77, which ctest reports as skipped.
# Usage: bash marian_test.sh <dir of lstrain> <source dir>
set -uo pipefail
apps=$(cd "$1/.." && pwd)
source_dir=$(cd "$2" && pwd)
needs="import numpy, sentencepiece, yaml"
if ! missing=$(python3 -c "$needs" 2>&1); then
  echo "SKIPPED: the converter tests need python3 with numpy, sentencepiece and yaml" \
    "(Debian: python3-numpy python3-sentencepiece python3-protobuf python3-yaml): ${missing##*$'\n'}"
  exit 77
fi
export LSEQ_APPS_DIR="$apps" PYTHONDONTWRITEBYTECODE=1
cd "$source_dir/tests/tools/marian" && exec python3 -m unittest discover -v -p 'test_*.py'
