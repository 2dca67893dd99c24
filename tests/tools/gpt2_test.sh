#!/usr/bin/env bash
# The GPT-2 converter of tools/gpt2 (docs/convert-gpt2.md): the Python tests in tests/tools/gpt2, run against this
# build's lstranslate and lsscore. They need python3 with numpy; without it this says so and exits 77, which ctest
# reports as skipped.
# Usage: bash gpt2_test.sh <dir of lstrain> <source dir>
set -uo pipefail
apps=$(cd "$1/.." && pwd)
source_dir=$(cd "$2" && pwd)
# The python3 on PATH (a virtual environment, pyenv) or the system's, where the Debian packages install.
python=""
for candidate in python3 /usr/bin/python3; do
  if missing=$("$candidate" -c "import numpy" 2>&1); then python=$(command -v "$candidate"); break; fi
done
if [ -z "$python" ]; then
  echo "SKIPPED: the GPT-2 converter tests need python3 with numpy (Debian: python3-numpy): ${missing##*$'\n'}"
  exit 77
fi
export LSEQ_APPS_DIR="$apps" PYTHONDONTWRITEBYTECODE=1
cd "$source_dir/tests/tools/gpt2" && exec "$python" -m unittest -v test_gpt2_to_lseq
