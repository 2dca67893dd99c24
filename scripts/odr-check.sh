#!/usr/bin/env bash
# Builds lseq_odr_probe (cmake/LseqOdrProbe.cmake: every library linked whole with every program's and benchmark's
# sources, CPU only) with link-time optimisation and -Werror=odr, so that two different definitions of one C++ name
# (the same class name in two files, say) stop the build: GCC compares the definitions across translation units only
# at link time. CI runs it after the tests (.ci/run). The tests are left out: their helpers live in anonymous
# namespaces, and building them again under LTO took most of this check's time.
#   bash scripts/odr-check.sh        # into build-odr/ (or $LSEQ_ODR_BUILD_DIR)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${LSEQ_ODR_BUILD_DIR:-$root/build-odr}
generator=()
command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
# Unoptimised, compiling and linking: GCC compares the types while merging the translation units at link time,
# whatever the optimisation level (a planted violation fails at -O0 as at -O2). The build type OdrCheck adds no flags
# of its own (an empty one became Release, whose -O3 came after these).
flags="-O0 -Werror=odr -Werror=lto-type-mismatch"
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=OdrCheck -DLSEQ_CUDA=OFF \
    -DLSEQ_BUILD_TESTS=OFF -DLSEQ_ODR_PROBE=ON -DCMAKE_INTERPROCEDURAL_OPTIMIZATION=ON -DCMAKE_CXX_FLAGS="$flags" \
    -DCMAKE_EXE_LINKER_FLAGS=-O0 >/dev/null
fi
if cmake --build "$build" --target lseq_odr_probe -j "${LSEQ_JOBS:-$(nproc)}" >"$build/odr-check.log" 2>&1; then
  echo "odr-check: every library, program and benchmark links into one program with -Werror=odr under LTO"
else
  grep -E "violates the C\+\+ One Definition Rule|lto-type-mismatch|error" "$build/odr-check.log" | head -n 20 >&2
  echo "odr-check: FAILED (full log: $build/odr-check.log)" >&2
  exit 1
fi
