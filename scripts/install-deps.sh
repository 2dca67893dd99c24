#!/usr/bin/env bash
# Installs what lseq needs to build and test, from the system's packages (Debian 12 or Ubuntu 24.04).
# Idempotent and quiet; run as root (or with sudo available). The CUDA toolkit is optional and not installed here.
# Arguments name more packages to install with them (scripts/fuzz.sh: clang and libFuzzer).
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  libyaml-cpp-dev libspdlog-dev libfmt-dev
  libsentencepiece-dev libgtest-dev libgmock-dev
  libopenblas-dev nlohmann-json3-dev zlib1g-dev libcli11-dev
  libpcre2-dev  # GPT-2's byte-level BPE pre-tokenizer (Unicode classes)
  libcpp-httplib-dev curl  # lsserve's HTTP server; curl for its test (tests/apps/serve_test.sh)
  python3-numpy python3-sentencepiece python3-protobuf python3-yaml  # tools/marian and its tests
  "$@"
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages already installed"
  exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
  echo "install-deps: apt-get not found; install these packages with your system's package manager: ${missing[*]}" >&2
  exit 1
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then sudo="sudo"; else
    echo "install-deps: not root and no sudo; run as root to install: ${missing[*]}" >&2
    exit 1
  fi
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
if ! $sudo apt-get update -qq >/tmp/lseq-apt.log 2>&1 ||
   ! $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >>/tmp/lseq-apt.log 2>&1; then
  echo "install-deps: apt-get failed (log: /tmp/lseq-apt.log); last lines:" >&2
  tail -n 5 /tmp/lseq-apt.log >&2
  exit 1
fi
echo "install-deps: done"
