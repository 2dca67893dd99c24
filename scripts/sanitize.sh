#!/usr/bin/env bash
# Builds lseq (CPU only, GCC) with AddressSanitizer and UndefinedBehaviorSanitizer and runs the whole test suite
# (ctest: every library's tests and the programs end to end) under them. A memory error, a leak or undefined
# behaviour stops the process that hit it (-fno-sanitize-recover=all), so its test fails and so does this script.
# CI runs it after the tests (.ci/run).
#   bash scripts/sanitize.sh                   # into build-asan/ (or $LSEQ_ASAN_BUILD_DIR)
#   bash scripts/sanitize.sh -R Vocab          # extra arguments go to ctest
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${LSEQ_ASAN_BUILD_DIR:-$root/build-asan}
bash "$root/scripts/install-deps.sh"  # GCC's sanitizer runtimes come with build-essential
generator=()
command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
flags="-O1 -g1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all"
start=$SECONDS
if [ ! -f "$build/CMakeCache.txt" ]; then
  mkdir -p "$build"
  cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Sanitize -DLSEQ_CUDA=OFF \
    -DLSEQ_BUILD_BENCH=OFF -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_C_FLAGS="$flags" \
    -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" >/dev/null
fi
if ! cmake --build "$build" -j "${LSEQ_JOBS:-$(nproc)}" >"$build/build.log" 2>&1; then
  grep -E "error" "$build/build.log" | head -n 20 >&2
  echo "sanitize: the build FAILED (full log: $build/build.log)" >&2
  exit 1
fi
built=$SECONDS
echo "sanitize: built with ASan and UBSan in $((built - start)) s"

# allocator_may_return_null=1: an impossible allocation returns null as glibc's malloc does, which the CPU backend
# turns into its lseq::Error (tests/kernels/backend_test.cpp asks for 4 EiB); by default ASan would abort instead.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1:strict_string_checks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
cd "$build"
if ! ctest --output-on-failure -j "${LSEQ_TEST_JOBS:-$(nproc)}" --timeout 1200 "$@" >"$build/ctest.log" 2>&1; then
  grep -E "ERROR: (Address|Leak)Sanitizer|runtime error:|SUMMARY: |\*\*\*Failed|\*\*\*Timeout|tests passed" \
    "$build/ctest.log" | head -n 40 >&2
  echo "sanitize: FAILED (full log: $build/ctest.log)" >&2
  exit 1
fi
grep -E "tests passed" "$build/ctest.log"
echo "sanitize: no sanitizer findings; tests took $((SECONDS - built)) s"
