#!/usr/bin/env bash
# Issue 24's device run on one machine with two GPUs (H100/H200, NCCL): data-parallel training measured and checked.
#   1. build (Release, sm_90, -j32) into build-gpu: lstrain, bench_train_throughput and the data-parallel tests;
#   2. the CPU stand-in tests again on this build (the dist/train/batcher suites and tests/apps/data_parallel_test.sh);
#   3. throughput, bf16, 16384 target tokens per GPU, transformer-base and -big: 1 GPU, --devices 0 1, and
#      --devices 0 1 --sharding global (bench_train_throughput: lstrain's update with gradient buckets exchanged
#      during backward), with the job's tokens/s, the 2-GPU/1-GPU ratio, peak memory per GPU, the share of the step
#      spent waiting for communication, and the all-reduce of the whole gradient alone;
#   4. the loss curve, fp32, 20 updates: lstrain --devices 0 1 (batch B per GPU) against lstrain on one GPU with
#      --optimizer-delay 2 (batch B), the largest relative difference of the logged cost per update (target 1e-5);
#   5. the torchrun way: two lstrain processes started with RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT
#      set by hand, against --devices 0 1 (the same costs and the same weights file);
#   6. predictions for 8 GPUs in one machine and for 2 machines from the 2-GPU numbers (the model is printed);
#   7. faults on the GPUs (bf16, NCCL): SIGTERM to rank 1 stops both ranks after one checkpoint (exit 130) and the run
#      resumes; kill -9 of rank 1 stops rank 0 within 30 s with a message naming rank 1.
# Every part runs under its own time limit and the whole under TOTAL_S (540 s); logs go under $OUT (/tmp/gpu-multi).
# NCCL_NVLS_ENABLE=0 is exported for every process (NVLink SHARP stays off on these machines).
#   bash scripts/gpu-multi.sh
#   SKIP_BUILD=1 bash scripts/gpu-multi.sh          # the binaries in build-gpu as they are
#   LONG=1 bash scripts/gpu-multi.sh                # also 1000 bf16 updates each way, validation perplexity compared
#                                                   # (and the one-GPU run with --seed 2: the noise)
#   INTERNODE_BUSBW_GBS=45 bash scripts/gpu-multi.sh # the bus bandwidth between machines the prediction assumes
#   CTAS="2,16 0,0" bash scripts/gpu-multi.sh       # also transformer-big on 2 GPUs with each --sync-ctas pair
#                                                   # (NCCL's blocks beside backward, and when the step waits;
#                                                   # 0: NCCL's own choice)
#   SYNC_AB=1 bash scripts/gpu-multi.sh             # also both models on 2 GPUs by --sync-precision (WIRES) and
#                                                   # --sync-bucket-mib (BUCKETS), beside the 1-GPU step
set -uo pipefail
export NCCL_NVLS_ENABLE=0
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-/tmp/gpu-multi}
build=${LSEQ_BUILD_DIR:-$root/build-gpu}
jobs=${JOBS:-32}
total=${TOTAL_S:-540}
internode=${INTERNODE_BUSBW_GBS:-45}
mkdir -p "$out"
start=$(date +%s)
left() { echo $((total - ($(date +%s) - start))); }
# limit <seconds>: a part's time limit, cut to what is left of the whole (at least 5 s)
limit() { local l; l=$(left); [ "$l" -lt "$1" ] && echo $((l > 5 ? l : 5)) || echo "$1"; }
declare -A status
note() { status[$1]=$2; echo "--- $1: $2"; }

{
  echo "date: $(date -u)"
  nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader
  nvidia-smi topo -m
  echo "NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE"
} >"$out/device.txt" 2>&1
cat "$out/device.txt"
gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
[ "$gpus" -ge 2 ] || { echo "gpu-multi.sh needs two GPUs; nvidia-smi sees $gpus"; exit 1; }

# ---- 1. build ----
lstrain=$build/apps/train/lstrain
bench=$build/bench/bench_train_throughput
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  if timeout "$(limit 330)" bash -c "cmake -S '$root' -B '$build' -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_CUDA_ARCHITECTURES=90 -DLSEQ_CUDA=ON >'$out/configure.log' 2>&1 &&
      cmake --build '$build' -j $jobs --target lstrain bench_train_throughput test_dist test_train test_data \
      >'$out/build.log' 2>&1"; then
    note build ok
  else
    note build "FAILED (see $out/build.log)"
    tail -n 30 "$out/build.log"
    exit 1
  fi
fi

# ---- 2. the CPU stand-in tests on this build ----
suites='LaunchEnv|Rendezvous|ProcessGroup|TcpCommunicator|Shards|GradientSync|ShardedOptimizer|Batcher'
timeout "$(limit 150)" ctest --test-dir "$build" -R "^($suites)\\.|^apps\\.data_parallel_test\$" -j 8 --timeout 120 \
  --output-on-failure >"$out/cpu-tests.log" 2>&1
rc=$?
summary=$(grep -E 'tests passed.*out of' "$out/cpu-tests.log" | tail -n 1)
if [ "$rc" = 0 ]; then
  note cpu-stand-in-tests "ok: $summary"
else
  note cpu-stand-in-tests "FAILED ($summary; $out/cpu-tests.log)"
fi

# ---- 3. throughput ----
: >"$out/throughput.txt"
for model in base big; do
  for mode in "0" "0 1" "0 1 --sharding global"; do
    name="$model ${mode// /_}"
    # shellcheck disable=SC2086
    if timeout "$(limit 75)" "$bench" --preset "$root/configs/transformer-$model.yaml" --tokens 16384 \
        --precision bf16 --warmup 4 --steps 32 --pool 16 --devices $mode >"$out/bench-${name// /-}.log" 2>&1; then
      grep '^RESULT' "$out/bench-${name// /-}.log" | tee -a "$out/throughput.txt"
    else
      note "throughput $name" "FAILED or timed out (see $out/bench-${name// /-}.log)"
    fi
  done
done

# NCCL's share of the SMs: the 2-GPU big step with each --sync-ctas pair (blocks beside backward, when alone).
for ctas in ${CTAS:-}; do
  if timeout "$(limit 75)" "$bench" --preset "$root/configs/transformer-big.yaml" --tokens 16384 \
      --precision bf16 --warmup 4 --steps 32 --pool 16 --devices 0 1 --sync-ctas ${ctas/,/ } \
      >"$out/bench-big-ctas$ctas.log" 2>&1; then
    grep '^RESULT bench=train' "$out/bench-big-ctas$ctas.log" | sed "s/^RESULT /RESULT sync_ctas=$ctas /" |
      tee -a "$out/ctas.txt"
  else
    note "throughput big ctas=$ctas" "FAILED or timed out (see $out/bench-big-ctas$ctas.log)"
  fi
done

# The gradient exchange on 2 GPUs by wire type and bucket size, each model's 1-GPU step beside them (SYNC_AB=1; WIRES
# and BUCKETS list --sync-precision and --sync-bucket-mib values: a bucket of 4096 MiB is the whole gradient,
# exchanged after backward, nothing overlapped; SYNC_EXTRA adds bench options to every 2-GPU case).
sync_case() {  # sync_case <name> <label> <bench arguments...>
  local name=$1 label=$2
  shift 2
  if timeout "$(limit 75)" "$bench" --tokens 16384 --precision bf16 --warmup 4 --steps 32 --pool 16 "$@" \
      >"$out/bench-$name.log" 2>&1; then
    grep '^RESULT bench=train' "$out/bench-$name.log" | sed "s/^RESULT /RESULT $label /" | tee -a "$out/sync.txt"
  else
    note "throughput $name" "FAILED or timed out (see $out/bench-$name.log)"
  fi
}
if [ "${SYNC_AB:-0}" = 1 ]; then
  for model in base big; do
    preset=(--preset "$root/configs/transformer-$model.yaml")
    sync_case "sync-$model-1gpu" "bucket_mib=-" "${preset[@]}" --devices 0
    for wire in ${WIRES:-fp32 bf16}; do
      for mib in ${BUCKETS:-25 100 4096}; do
        # shellcheck disable=SC2086
        sync_case "sync-$model-$wire-$mib" "bucket_mib=$mib" "${preset[@]}" --devices 0 1 --sync-precision "$wire" \
          --sync-bucket-mib "$mib" ${SYNC_EXTRA:-}
      done
    done
  done
fi

# ---- 4. and 5. the loss curve and the torchrun way (lstrain, fp32, on the sample corpus) ----
work=$out/work
rm -rf "$work" && mkdir -p "$work"
sample=$root/data/sample-de-en
common=(-c "$root/configs/transformer-base.yaml" -t "$sample/train.de" "$sample/train.en" --vocabs "$work/vocab.spm"
        --dim-vocabs 2000 --precision fp32 --mini-batch-words 2048 --after 20u --disp-freq 1u --lr-warmup 5u
        --valid-freq 0u --save-freq 0u --keep-best false --exponential-smoothing 0)
costs() { grep -o 'Up\. [0-9]* : Sen\. [0-9]* : Cost [0-9.]*' "$1" | awk '{print $2, $8}'; }
# The largest relative difference of two logs' costs, update by update ("n/a" unless both have 20 updates).
max_rel() {
  paste <(costs "$1") <(costs "$2") | awk 'NF == 4 && $1 == $3 { n++; d = ($2 - $4) / $2; if (d < 0) d = -d;
    if (d > m) m = d } END { if (n == 20) printf "%.2e", m; else printf "n/a (%d updates compared)", n }'
}
run_part() {  # run_part <name> <seconds> <command...>
  local name=$1 seconds=$2; shift 2
  timeout "$(limit "$seconds")" "$@" >"$out/$name.log" 2>&1 || note "$name" "FAILED or timed out (see $out/$name.log)"
}
run_part train-1gpu-delay2 150 "$lstrain" "${common[@]}" -m "$work/delay2" --devices 0 --optimizer-delay 2
run_part train-2gpu 120 "$lstrain" "${common[@]}" -m "$work/dp" --devices 0 1
# The floor: the same one-GPU run again (any difference is the GPU's run-to-run variation, not data parallelism).
run_part train-1gpu-delay2-again 150 "$lstrain" "${common[@]}" -m "$work/delay2-again" --devices 0 --optimizer-delay 2
run_part train-2gpu-sharded 120 "$lstrain" "${common[@]}" -m "$work/sharded" --devices 0 1 --sharding global
loss_dp=$(max_rel "$out/train-1gpu-delay2.log" "$out/train-2gpu.log")
loss_sharded=$(max_rel "$out/train-1gpu-delay2.log" "$out/train-2gpu-sharded.log")
loss_floor=$(max_rel "$out/train-1gpu-delay2.log" "$out/train-1gpu-delay2-again.log")
port=$((20000 + RANDOM % 20000))
for r in 0 1; do
  RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
    timeout "$(limit 120)" "$lstrain" "${common[@]}" -m "$work/torchrun" >"$out/train-torchrun.$r.log" 2>&1 &
  pids[r]=$!
done
wait "${pids[0]}"; rc0=$?
wait "${pids[1]}"; rc1=$?
loss_torchrun=$(max_rel "$out/train-2gpu.log" "$out/train-torchrun.0.log")
same_weights=no
cmp -s "$work/dp/model.safetensors" "$work/torchrun/model.safetensors" && same_weights=yes

# ---- 7. faults: a stop signal and a killed rank, on the GPUs ----
faults=(-c "$root/configs/transformer-base.yaml" -t "$sample/train.de" "$sample/train.en" --vocabs "$work/vocab.spm"
        --dim-vocabs 2000 --precision bf16 --mini-batch-words 2048 --disp-freq 1u --valid-freq 0u
        --save-freq 100000u --devices 0 1 --dist-timeout 60)
rank_of() { tr '\0' '\n' </proc/"$1"/environ 2>/dev/null | sed -n 's/^RANK=//p'; }
child_rank() { local c; for c in $(pgrep -P "$1"); do [ "$(rank_of "$c")" = "$2" ] && echo "$c" && return; done; }
wait_for() { local i; for i in $(seq 1 "$3"); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done; return 1; }
fault() {  # fault <name> <signal>: the job's exit code, seconds from the signal to its end, checkpoints, rank 0's words
  local name=$1 sig=$2 launcher rank1 t0 rc
  "$lstrain" "${faults[@]}" --after 100000u -m "$work/$name" >"$out/fault-$name.log" 2>&1 &
  launcher=$!
  if ! wait_for "$out/fault-$name.log" 'Up\. 5 ' "$(( $(limit 90) * 10 ))"; then
    pkill -9 -P "$launcher"; kill -9 "$launcher"; wait "$launcher" 2>/dev/null
    echo "did not reach update 5 (see $out/fault-$name.log)"; return
  fi
  rank1=$(child_rank "$launcher" 1)
  t0=$(date +%s.%N)
  kill "-$sig" "$rank1"
  # Bounded: a job still running 60 s after the signal is a failure of this check, not a hang of the script.
  for _ in $(seq 1 600); do kill -0 "$launcher" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$launcher" 2>/dev/null; then
    pkill -9 -P "$launcher"; kill -9 "$launcher"; wait "$launcher" 2>/dev/null
    echo "still running 60 s after signal $sig (see $out/fault-$name.log)"; return
  fi
  wait "$launcher"; rc=$?
  printf 'exit %s after %s s; checkpoints saved: %s; %s\n' "$rc" \
    "$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')" \
    "$(grep -c 'saved checkpoint' "$out/fault-$name.log")" \
    "$(grep -m1 '^error: .*rank 1\|\[rank 0\].*another rank' "$out/fault-$name.log" | head -c 200)"
}
fault_term=$(fault term TERM)
fault_resume=n/a
if [ -f "$work/term/model.safetensors" ]; then
  timeout "$(limit 90)" "$lstrain" "${faults[@]}" --after 7u -m "$work/term" >"$out/fault-resume.log" 2>&1
  fault_resume="exit $?, $(grep -c 'resumed from' "$out/fault-resume.log") 'resumed from' line(s)"
fi
fault_kill=$(fault kill 9)

if [ "${LONG:-0}" = 1 ]; then
  long=(-c "$root/configs/transformer-base.yaml" -t "$sample/train.de" "$sample/train.en" --vocabs "$work/vocab.spm"
        --valid-sets "$sample/valid.de" "$sample/valid.en" --valid-metrics perplexity --valid-freq 1000u
        --precision bf16 --mini-batch-words 2048 --after 1000u --lr-warmup 200u --disp-freq 100u --save-freq 0u)
  run_part long-1gpu-delay2 240 "$lstrain" "${long[@]}" -m "$work/long1" --devices 0 --optimizer-delay 2
  run_part long-2gpu 240 "$lstrain" "${long[@]}" -m "$work/long2" --devices 0 1
  # The noise: the one-GPU run with another seed (other initial weights, dropout masks and batch order).
  run_part long-1gpu-delay2-seed2 240 "$lstrain" "${long[@]}" -m "$work/long1s2" --devices 0 --optimizer-delay 2 \
    --seed 2
fi

# ---- the table ----
python3 - "$out/throughput.txt" "$internode" <<'PY' | tee "$out/summary.txt"
import sys
rows = {}
allreduce = {}
for line in open(sys.argv[1]):
    kv = dict(w.split("=", 1) for w in line.split()[1:] if "=" in w)
    if kv.get("status") != "ok":
        continue
    if kv["bench"] == "allreduce":
        allreduce[kv["model"]] = kv
    else:
        rows[(kv["model"], int(kv["ranks"]), kv["sharding"])] = kv
internode = float(sys.argv[2])
print(f"{'model':18} {'GPUs':>4} {'sharding':>8} {'tok/s':>9} {'ratio':>6} {'ms/step':>8} {'comm %':>7} "
      f"{'peak MiB/GPU':>12}")
for model in ("transformer-base", "transformer-big"):
    one = rows.get((model, 1, "none"))
    for key in ((model, 1, "none"), (model, 2, "none"), (model, 2, "global")):
        r = rows.get(key)
        if not r:
            print(f"{model:18} {key[1]:>4} {key[2]:>8} {'missing':>9}")
            continue
        ratio = float(r["tgt_tok_s"]) / float(one["tgt_tok_s"]) if one else float("nan")
        print(f"{model:18} {key[1]:>4} {key[2]:>8} {float(r['tgt_tok_s']):>9.0f} {ratio:>6.2f} "
              f"{float(r['ms_step']):>8.1f} {100 * float(r['comm_frac']):>7.2f} {r['peak_mem_mib']:>12}")
print()
print("all-reduce of the whole fp32 gradient alone, 2 GPUs:")
for model, a in allreduce.items():
    print(f"  {model}: {float(a['bytes']) / 2**20:.0f} MiB in {a['ms']} ms, bus bandwidth {a['busbw_gbs']} GB/s")
print()
print("predictions (bf16, 16384 tokens per GPU): T(n) = T_compute + max(0, A(n) - H), where T_compute is the 2-GPU")
print("step less its exposed communication, A(n) = 2 (n-1)/n x gradient bytes / bus bandwidth (NCCL's ring), and")
print("H = A(2) - exposed(2) the communication the 2-GPU run hid behind backward; efficiency = T(1) / T(n).")
print(f"8 GPUs: the 2-GPU bus bandwidth (NVSwitch keeps it per GPU); 2 machines: {internode:.0f} GB/s between them")
print("(INTERNODE_BUSBW_GBS; about one 400 Gb/s NIC per GPU), the slowest link setting the ring's pace.")
for model in ("transformer-base", "transformer-big"):
    one, two, a = rows.get((model, 1, "none")), rows.get((model, 2, "none")), allreduce.get(model)
    if not (one and two and a):
        print(f"  {model}: missing measurements")
        continue
    t1, t2 = float(one["ms_step"]), float(two["ms_step"])
    exposed2 = float(two["comm_frac"]) * t2
    compute = t2 - exposed2
    nbytes, busbw2 = float(a["bytes"]), float(a["busbw_gbs"])
    a_of = lambda n, bw: 2.0 * (n - 1) / n * nbytes / (bw * 1e9) * 1e3  # ms
    hidden = max(0.0, a_of(2, busbw2) - exposed2)
    parts = [f"2 GPUs measured {t1 / t2:.3f}"]
    for label, n, bw in (("8 GPUs, 1 machine", 8, busbw2), ("2 machines x 2 GPUs", 4, min(busbw2, internode)),
                         ("2 machines x 8 GPUs", 16, min(busbw2, internode))):
        t = compute + max(0.0, a_of(n, bw) - hidden)
        parts.append(f"{label} {t1 / t:.3f}")
    print(f"  {model}: efficiency " + "; ".join(parts))
PY

echo
echo "loss curve, fp32, 20 updates, largest relative difference of the cost per update:"
echo "  2 GPUs x batch B vs 1 GPU --optimizer-delay 2:           $loss_dp (target <= 1e-5)"
echo "  2 GPUs x batch B, --sharding global vs the same:         $loss_sharded"
echo "  1 GPU --optimizer-delay 2, run again (the floor):          $loss_floor"
echo "  torchrun-style launch vs --devices 0 1:                   $loss_torchrun"
echo "    (exit codes $rc0 $rc1; the same weights file: $same_weights)"
echo
echo "faults, 2 GPUs, bf16 (target: SIGTERM exits 130 after one checkpoint and resumes; kill -9: a non-zero exit"
echo "within 30 s, rank 0 naming rank 1):"
echo "  SIGTERM to rank 1: $fault_term"
echo "  ... resumed: $fault_resume"
echo "  kill -9 of rank 1: $fault_kill"
if [ "${LONG:-0}" = 1 ]; then
  for f in long-1gpu-delay2 long-2gpu long-1gpu-delay2-seed2; do
    echo "  $f: validation perplexity $(grep -o 'perplexity : [0-9.]*' "$out/$f.log" | tail -n 1 | awk '{ print $3 }')"
  done
fi
if [ -s "$out/ctas.txt" ]; then
  echo
  echo "transformer-big, 2 GPUs, --sync-ctas (the one-GPU step above is the ratio's base):"
  sed -E 's/.*sync_ctas=([0-9,]+) .* tgt_tok_s=([0-9.]+) ms_step=([0-9.]+) comm_frac=([0-9.]+).*/  --sync-ctas \1: \2 tok\/s, \3 ms a step, comm \4/' "$out/ctas.txt"
fi
if [ -s "$out/sync.txt" ]; then
  echo
  echo "pool 16, 32 steps, by --sync-precision and --sync-bucket-mib (bucket_mib=-: the 1-GPU step):"
  sed -E 's/^RESULT bucket_mib=([0-9-]+) .* model=([a-z-]+) .* ranks=([0-9]+) .* sync=([a-z0-9]+) .* tgt_tok_s=([0-9.]+) ms_step=([0-9.]+) comm_frac=([0-9.]+).*/  \2 ranks=\3 sync=\4 bucket_mib=\1: \5 tok\/s, \6 ms a step, comm \7/' "$out/sync.txt"
fi
echo
for k in "${!status[@]}"; do echo "$k: ${status[$k]}"; done
echo "total $(($(date +%s) - start)) s; logs in $out"
