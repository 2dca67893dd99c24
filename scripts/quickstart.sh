#!/usr/bin/env bash
# README command (1): installs the dependencies, builds lseq, and runs the main job on the embedded default.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/install-deps.sh"
bash "$root/scripts/build.sh"
bin=${LSEQ_BUILD_DIR:-$root/build}/apps
"$bin/train/lstrain" --help
