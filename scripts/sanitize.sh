#!/usr/bin/env bash
# Runs the whole test suite (ctest: every library's tests and the programs end to end) built with AddressSanitizer
# and UndefinedBehaviorSanitizer, in the clang tree it shares with scripts/fuzz.sh (scripts/sanitized-tree.sh). A
# memory error, a leak or undefined behaviour stops the process that hit it (-fno-sanitize-recover=all), so its test
# fails and so does this script. CI runs it after the tests (.ci/run).
#   bash scripts/sanitize.sh                   # into build-sanitize/ (or $LSEQ_SANITIZE_BUILD_DIR)
#   bash scripts/sanitize.sh -R Vocab          # extra arguments go to ctest
set -euo pipefail
source "$(dirname "$0")/sanitized-tree.sh"
start=$SECONDS
build_sanitized_tree
build=$sanitized_build
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
