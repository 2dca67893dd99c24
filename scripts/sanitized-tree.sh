# Sourced by scripts/sanitize.sh and scripts/fuzz.sh: the one build they share, so that CI compiles the libraries
# under the sanitizers once, not once for each (they were the larger part of both steps' time). The tree is built
# with clang, AddressSanitizer and UndefinedBehaviorSanitizer (any finding aborts) and libFuzzer's coverage
# instrumentation (-DLSEQ_FUZZ=ON, cmake/LseqFuzz.cmake), CPU only, with the tests and the fuzz targets.
#   build_sanitized_tree [TARGET...]   # installs clang, configures once, builds the targets (default: all)
# Sets $sanitized_build: build-sanitize/ under the root (or $LSEQ_SANITIZE_BUILD_DIR).
sanitized_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
sanitized_build=${LSEQ_SANITIZE_BUILD_DIR:-$sanitized_root/build-sanitize}
sanitized_clang=${LSEQ_CLANG_VERSION:-14}

build_sanitized_tree() {
  # clang-N, libclang-rt-N-dev (libFuzzer and clang's sanitizer runtimes), llvm-N (llvm-symbolizer: stack traces).
  bash "$sanitized_root/scripts/install-deps.sh" "clang-$sanitized_clang" "libclang-rt-$sanitized_clang-dev" \
    "llvm-$sanitized_clang"
  # Reports name functions and lines only where the sanitizers find a symbolizer.
  local symbolizer
  symbolizer=$(command -v "llvm-symbolizer-$sanitized_clang" || command -v llvm-symbolizer || true)
  [ -z "$symbolizer" ] || export ASAN_SYMBOLIZER_PATH=$symbolizer
  local generator=()
  command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
  # The code under test at -O1; the tests' own code at -O0 (tests/CMakeLists.txt, build type Sanitize). Unity
  # batches as in scripts/build.sh.
  local flags="-O1 -g1"
  if [ ! -f "$sanitized_build/CMakeCache.txt" ]; then
    mkdir -p "$sanitized_build"
    cmake -S "$sanitized_root" -B "$sanitized_build" "${generator[@]}" -DCMAKE_C_COMPILER="clang-$sanitized_clang" \
      -DCMAKE_CXX_COMPILER="clang++-$sanitized_clang" -DCMAKE_BUILD_TYPE=Sanitize -DCMAKE_CXX_FLAGS="$flags" \
      -DCMAKE_C_FLAGS="$flags" -DLSEQ_CUDA=OFF -DLSEQ_FUZZ=ON -DLSEQ_BUILD_TESTS=ON -DLSEQ_BUILD_BENCH=OFF \
      -DCMAKE_UNITY_BUILD=ON >/dev/null
  fi
  local targets=()
  [ $# -gt 0 ] && targets=(--target "$@")
  if ! cmake --build "$sanitized_build" "${targets[@]}" -j "${LSEQ_JOBS:-$(nproc)}" \
      >"$sanitized_build/build.log" 2>&1; then
    grep -E "error" "$sanitized_build/build.log" | head -n 20 >&2
    echo "$(basename "$0"): the sanitized build FAILED (full log: $sanitized_build/build.log)" >&2
    return 1
  fi
}
