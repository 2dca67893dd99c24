#!/usr/bin/env bash
# One call on the GPU machine: build lseq for sm_90 (Release, Ninja, -j16) into build-gpu, run the GPU tests
# (ctest names starting with Gpu), then every other test, then the GPU benchmarks (bench_*gpu*/bench_*cuda*, if any),
# writing each step's log under ${OUT:-/tmp/gpu-check} and printing a summary table last. Exits non-zero when the
# build or any test fails.
#
#   bash scripts/gpu-check.sh                       # everything
#   GPU_CHECK_SKIP_ALL=1 bash scripts/gpu-check.sh  # GPU tests and benchmarks only
#   GPU_CHECK_CTEST_ARGS="-LE cli" ...              # extra ctest arguments for the all-tests step
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-/tmp/gpu-check}
build=${LSEQ_BUILD_DIR:-$root/build-gpu}
jobs=${GPU_CHECK_JOBS:-16}
mkdir -p "$out"

status_build=skipped status_gpu=skipped status_all=skipped status_bench=skipped
gpu_summary="-" all_summary="-" bench_summary="-"
failed=0

device=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -n 1)
[ -n "$device" ] || device="no GPU visible (nvidia-smi failed)"
echo "device: $device" | tee "$out/device.txt"
nvidia-smi >>"$out/device.txt" 2>&1 || true

# ctest's "N% tests passed, F tests failed out of T" plus the number of skipped tests, from a log.
ctest_counts() {
  local log=$1 line total failed_n skipped
  line=$(grep -E "tests passed.* out of [0-9]+" "$log" | tail -n 1)
  if [ -z "$line" ]; then
    echo "no ctest summary"
    return
  fi
  total=$(sed -E 's/.*out of ([0-9]+).*/\1/' <<<"$line")
  failed_n=0
  grep -qE "[0-9]+ tests? failed" <<<"$line" && failed_n=$(sed -E 's/.* ([0-9]+) tests? failed.*/\1/' <<<"$line")
  skipped=$(grep -cE "\*\*\*Skipped|Not Run.*Disabled" "$log" || true)
  echo "$((total - failed_n - skipped)) passed, $failed_n failed, $skipped skipped of $total"
}

step() {  # step NAME LOGFILE COMMAND...: runs the command with its output in the log and on stdout
  local name=$1 log=$2
  shift 2
  echo "=== $name: $*" | tee "$log"
  "$@" 2>&1 | tee -a "$log"
}

# ---- build ----
configure=(cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90
  -DLSEQ_CUDA=ON)
if step configure "$out/configure.log" "${configure[@]}" &&
  step build "$out/build.log" cmake --build "$build" -j "$jobs"; then
  status_build=ok
else
  status_build=FAILED
  failed=1
fi

if [ "$status_build" = ok ]; then
  # ---- GPU tests ----
  if step gpu-tests "$out/gpu-tests.log" ctest --test-dir "$build" -R '^Gpu' --output-on-failure -j 4 \
    --timeout 600; then
    status_gpu=ok
  else
    status_gpu=FAILED
    failed=1
  fi
  gpu_summary=$(ctest_counts "$out/gpu-tests.log")
  if grep -qE "\*\*\*Skipped" "$out/gpu-tests.log" && nvidia-smi -L >/dev/null 2>&1; then
    status_gpu="$status_gpu (GPU tests skipped on a GPU machine!)"
    failed=1
  fi

  # ---- all other tests (the GPU ones ran above) ----
  if [ "${GPU_CHECK_SKIP_ALL:-0}" != 1 ]; then
    # shellcheck disable=SC2086
    if step all-tests "$out/all-tests.log" ctest --test-dir "$build" -E '^Gpu' --output-on-failure -j "$jobs" \
      --timeout 900 ${GPU_CHECK_CTEST_ARGS:-}; then
      status_all=ok
    else
      status_all=FAILED
      failed=1
    fi
    all_summary=$(ctest_counts "$out/all-tests.log")
  fi

  # ---- GPU benchmarks (they report, never assert) ----
  mapfile -t benches < <(find "$build/bench" -maxdepth 1 -type f -executable \( -name 'bench_*gpu*' -o \
    -name 'bench_*cuda*' \) 2>/dev/null | sort)
  if [ "${#benches[@]}" -eq 0 ]; then
    bench_summary="none built"
  else
    status_bench=ok
    ran=0
    for bench in "${benches[@]}"; do
      name=$(basename "$bench")
      if step "$name" "$out/$name.log" timeout 600 "$bench"; then
        ran=$((ran + 1))
      else
        status_bench="FAILED ($name)"
        failed=1
      fi
    done
    bench_summary="$ran of ${#benches[@]} ran"
  fi
fi

# A copied working tree may carry an older .git than its files (the device tool's copy does): say how many tracked
# files differ from the commit named, so a stale name cannot pass for the code that ran.
head_commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
changed=$(git -C "$root" status --porcelain --untracked-files=no 2>/dev/null | wc -l)
{
  echo
  echo "==================== gpu-check summary ===================="
  printf '%-12s %s\n' "device" "$device"
  printf '%-12s %s\n' "commit" "$head_commit ($changed tracked files differ from it)"
  printf '%-12s %-10s %s\n' "build" "$status_build" "sm_90 Release, $build"
  printf '%-12s %-10s %s\n' "gpu tests" "$status_gpu" "$gpu_summary"
  printf '%-12s %-10s %s\n' "other tests" "$status_all" "$all_summary"
  printf '%-12s %-10s %s\n' "benchmarks" "$status_bench" "$bench_summary"
  printf '%-12s %s\n' "logs" "$out"
  echo "==========================================================="
} | tee "$out/summary.txt"
exit "$failed"
