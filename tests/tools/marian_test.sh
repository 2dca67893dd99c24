#!/usr/bin/env bash
# The model converters of tools/marian (docs/convert-marian.md): the Python tests in tests/tools/marian, run against
# this build's lstrain, lstranslate and lsscore. They need python3 with numpy, sentencepiece and PyYAML (protobuf is
# optional); without them this says which is missing and exits 77, which ctest reports as skipped.
# Usage: bash marian_test.sh <dir of lstrain> <source dir>
set -uo pipefail
apps=$(cd "$1/.." && pwd)
source_dir=$(cd "$2" && pwd)
needs="import numpy, sentencepiece, yaml"
# The python3 on PATH (a virtual environment, pyenv) or the system's, where the Debian packages install.
python=""
for candidate in python3 /usr/bin/python3; do
  if missing=$("$candidate" -c "$needs" 2>&1); then python=$(command -v "$candidate"); break; fi
done
if [ -z "$python" ]; then
  echo "SKIPPED: the converter tests need python3 with numpy, sentencepiece and yaml" \
    "(Debian: python3-numpy python3-sentencepiece python3-protobuf python3-yaml): ${missing##*$'\n'}"
  exit 77
fi
export PATH="$(dirname "$python"):$PATH"  # the tools the tests start as python3 get the same interpreter
export LSEQ_APPS_DIR="$apps" PYTHONDONTWRITEBYTECODE=1
cd "$source_dir/tests/tools/marian" && exec "$python" -m unittest discover -v -p 'test_*.py'
