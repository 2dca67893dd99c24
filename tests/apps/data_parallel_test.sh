#!/usr/bin/env bash
# Data-parallel training end to end on the CPU stand-in for NCCL (processes over loopback TCP), on a tiny model:
# 2 ranks with batch B train as 1 process with --optimizer-delay 2 (the same losses and weights, bit for bit); a
# torchrun-style launch (the variables set by hand) equals --devices 0 1; sharded optimizer state gives the same
# losses and a checkpoint that 1 process resumes; resuming on another number of ranks continues the same run;
# SIGTERM to one rank stops both after one save; a rank killed with -9 stops the other within seconds, naming it;
# a rank that cannot start (port in use, unreachable master, bad --devices) fails with one line; an error on one
# rank is reported by the others and the launcher names that rank.
# Usage: bash data_parallel_test.sh <dir of lstrain> <source dir>
set -uo pipefail
lstrain="$(cd "$1" && pwd)/lstrain"
source_dir=$(cd "$2" && pwd)
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$work"; }
trap cleanup EXIT
failures=0
check() {  # check <description> <command...>
  local what=$1; shift
  if "$@"; then echo "ok: $what"; else echo "FAIL: $what"; failures=$((failures + 1)); fi
}

head -n 1200 "$source_dir/data/sample-de-en/train.de" >"$work/train.de"
head -n 1200 "$source_dir/data/sample-de-en/train.en" >"$work/train.en"
head -n 40 "$source_dir/data/sample-de-en/valid.de" >"$work/valid.de"
head -n 40 "$source_dir/data/sample-de-en/valid.en" >"$work/valid.en"
common=(-c "$source_dir/tests/apps/train-small.yaml" -t "$work/train.de" "$work/train.en"
        --valid-sets "$work/valid.de" "$work/valid.en" --vocabs "$work/vocab.spm" --cpu --cpu-threads 1
        --dist-timeout 30 --save-freq 10u --valid-freq 10u)
# The per-update cost of a log (rank 0's lines, or a single process's).
costs() { grep -o 'Up\. [0-9]* : Sen\. [0-9]* : Cost [0-9.]*' "$1" | awk '{print $2, $8}'; }
# Same update numbers, costs within a relative tolerance.
same_costs() {  # same_costs <log a> <log b> <tolerance> <expected updates>
  local a b
  a=$(costs "$1"); b=$(costs "$2")
  [ "$(echo "$a" | wc -l)" -eq "$4" ] && [ "$(echo "$b" | wc -l)" -eq "$4" ] &&
    paste <(echo "$a") <(echo "$b") | awk -v tol="$3" '
      { if ($1 != $3) bad = 1; d = $2 - $4; if (d < 0) d = -d }
      d > tol * $2 { bad = 1; print "update " $1 ": " $2 " vs " $4 }
      END { exit bad }'
}
# A port below the kernel's ephemeral range, drawn at random and checked free: a port from a bind to 0 may go to
# another test's outgoing connection before the master binds it (tests/core/dist/dist_test_util.h says more).
free_port() {
  python3 -c '
import random, socket
try:
    floor = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
except (OSError, ValueError, IndexError):
    floor = 32768
for _ in range(100 if floor > 11000 else 0):
    port = random.randrange(10000, floor)
    s = socket.socket()
    try:
        s.bind(("", port))
    except OSError:
        continue
    finally:
        s.close()
    print(port)
    break
else:
    s = socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])
'
}
rank_of() { tr '\0' '\n' </proc/"$1"/environ 2>/dev/null | sed -n 's/^RANK=//p'; }
# The child of launcher $1 that runs rank $2.
child_rank() {
  local c
  for c in $(pgrep -P "$1"); do [ "$(rank_of "$c")" = "$2" ] && echo "$c" && return; done
}
wait_for() {  # wait_for <file> <pattern> <tenths of a second>
  for _ in $(seq 1 "$3"); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
  return 1
}

# 1. Two ranks with batch B = one process with --optimizer-delay 2.
"$lstrain" "${common[@]}" -m "$work/delay2" --after 20u --optimizer-delay 2 >"$work/delay2.log" 2>&1
check "1 process, --optimizer-delay 2: exits 0" test $? -eq 0
"$lstrain" "${common[@]}" -m "$work/dp" --after 20u --devices 0 1 >"$work/dp.log" 2>&1
check "--cpu --devices 0 1: exits 0" test $? -eq 0
check "two ranks said so" grep -q 'data parallelism: 2 ranks over tcp' "$work/dp.log"
# The ranks' gradients are summed as one process sums its delayed batches' (g1 + g2), so the runs are the same bit
# for bit: the same costs and the same weights.
check "2 ranks x batch B: the costs of 1 process with --optimizer-delay 2 over 20 updates" \
  same_costs "$work/delay2.log" "$work/dp.log" 0 20
check "2 ranks x batch B: the weights of 1 process with --optimizer-delay 2, bit for bit" \
  cmp -s "$work/delay2/model.safetensors" "$work/dp/model.safetensors"
check "only rank 0 logs progress" test "$(grep -c '\[rank 1\] \[info\] Ep\.' "$work/dp.log")" -eq 0
check "rank 0 alone wrote one checkpoint per save" test "$(grep -c 'saved checkpoint' "$work/dp.log")" -eq 2
check "the throughput line carries the communication share" grep -q 'words/s : .* : Comm [0-9.]*%' "$work/dp.log"

# 2. The torchrun way: two processes started with the launchers' variables give the same model as --devices.
port=$(free_port)
for r in 0 1; do
  RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
    "$lstrain" "${common[@]}" -m "$work/torchrun" --after 20u >"$work/torchrun.$r.log" 2>&1 &
  pids+=($!)
done
wait "${pids[0]}"; rc0=$?
wait "${pids[1]}"; rc1=$?
pids=()
check "torchrun-style ranks exit 0 ($rc0, $rc1)" test "$rc0" -eq 0 -a "$rc1" -eq 0
check "torchrun-style launch: the same weights as --devices 0 1" \
  cmp -s "$work/torchrun/model.safetensors" "$work/dp/model.safetensors"

# 3. Sharded optimizer state: the same costs, and its checkpoint resumes on one process.
"$lstrain" "${common[@]}" -m "$work/sharded" --after 20u --devices 0 1 --sharding global >"$work/sharded.log" 2>&1
check "--sharding global: exits 0" test $? -eq 0
check "--sharding global said so" grep -q 'optimizer state sharded' "$work/sharded.log"
check "--sharding global: the costs of the unsharded run within 1e-5" \
  same_costs "$work/dp.log" "$work/sharded.log" 1e-5 20
"$lstrain" "${common[@]}" -m "$work/sharded" --after 30u --optimizer-delay 2 >"$work/sharded-resume.log" 2>&1
check "a sharded 2-rank checkpoint resumes on 1 process" \
  grep -q 'resumed from .* at update 20 ' "$work/sharded-resume.log"
check "... and trains on to update 30" grep -q 'training finished after 30 updates' "$work/sharded-resume.log"

# 4. Resuming on another number of ranks continues the same run: 2 ranks to update 10, then 1 process with
# --optimizer-delay 2 to 20 has the costs of the straight run (the same global batches and dropout masks).
"$lstrain" "${common[@]}" -m "$work/switch" --after 10u --devices 0 1 >"$work/switch1.log" 2>&1
"$lstrain" "${common[@]}" -m "$work/switch" --after 20u --optimizer-delay 2 >"$work/switch2.log" 2>&1
check "2 ranks then 1 process: exits 0" test $? -eq 0
cat "$work/switch1.log" "$work/switch2.log" >"$work/switch.log"
check "2 ranks then 1 process: the costs of the straight run within 1e-4" \
  same_costs "$work/delay2.log" "$work/switch.log" 1e-4 20

# 5. SIGTERM to rank 1 alone: both ranks stop after the same update, one checkpoint, exit code 130; it resumes.
"$lstrain" "${common[@]}" -m "$work/term" --after 100000u --devices 0 1 --save-freq 100000u --valid-freq 100000u \
  --disp-freq 1u >"$work/term.log" 2>&1 &
launcher=$!
pids+=($launcher)
wait_for "$work/term.log" 'Up\. 5 ' 600
rank1=$(child_rank "$launcher" 1)
check "found rank 1's process" test -n "$rank1"
[ -n "$rank1" ] && kill -TERM "$rank1"
wait "$launcher"; rc=$?
pids=()
check "SIGTERM to rank 1: the job exits 130 (got $rc)" test "$rc" -eq 130
check "... rank 0 stopped because another rank got the signal" \
  grep -q 'rank 0.*another rank got a stop signal' "$work/term.log"
check "... one checkpoint saved" test "$(grep -c 'saved checkpoint' "$work/term.log")" -eq 1
"$lstrain" "${common[@]}" -m "$work/term" --after 3u --devices 0 1 >"$work/term2.log" 2>&1
check "... and the run resumes from it" grep -q 'resumed from' "$work/term2.log"

# 6. kill -9 of rank 1: rank 0 stops within seconds, naming rank 1; the launcher exits non-zero.
"$lstrain" "${common[@]}" -m "$work/kill" --after 100000u --devices 0 1 --save-freq 100000u --valid-freq 100000u \
  --disp-freq 1u >"$work/kill.log" 2>&1 &
launcher=$!
pids+=($launcher)
wait_for "$work/kill.log" 'Up\. 5 ' 600
rank1=$(child_rank "$launcher" 1)
[ -n "$rank1" ] && kill -9 "$rank1"
start=$(date +%s)
wait "$launcher"; rc=$?
pids=()
elapsed=$(($(date +%s) - start))
check "kill -9 of rank 1: the job exits non-zero (got $rc)" test "$rc" -ne 0
check "... within 15 s (took $elapsed s)" test "$elapsed" -le 15
check "... rank 0 names rank 1" grep -q 'rank 1 .*stopped unexpectedly\|rank 1 closed its connection' "$work/kill.log"
check "... the launcher names rank 1" grep -q '^error: rank 1 (CPU process 1) was killed by signal 9' "$work/kill.log"

# 7. Ranks that cannot start fail with one line.
python3 -c 'import socket, time
s = socket.socket(); s.bind(("", 0)); s.listen(); print(s.getsockname()[1], flush=True); time.sleep(60)' \
  >"$work/taken-port" &
holder=$!
pids+=($holder)
wait_for "$work/taken-port" '[0-9]' 50
taken=$(cat "$work/taken-port")
RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$taken "$lstrain" "${common[@]}" -m "$work/port" --after 1u \
  >"$work/port.log" 2>&1
check "port in use: rank 0 fails" test $? -ne 0
check "... with one line naming MASTER_PORT" \
  test "$(grep -c "^error: .*MASTER_PORT=$taken.*in use" "$work/port.log")" -eq 1
kill "$holder" 2>/dev/null
start=$(date +%s)
RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$(free_port) "$lstrain" "${common[@]}" -m "$work/nomaster" \
  --after 1u --dist-timeout 2 >"$work/nomaster.log" 2>&1
check "unreachable master: rank 1 fails" test $? -ne 0
check "... within 10 s" test $(($(date +%s) - start)) -le 10
check "... with one line naming MASTER_ADDR" \
  test "$(grep -c '^error: .*(MASTER_ADDR, MASTER_PORT) within 2 s' "$work/nomaster.log")" -eq 1
# An error on rank 0 during set-up (a corpus file that does not exist): rank 1 reports it, the launcher names rank 0.
"$lstrain" "${common[@]}" -m "$work/nocorpus" -t "$work/missing.de" "$work/train.en" --devices 0 1 \
  >"$work/nocorpus.log" 2>&1
check "an error on rank 0: the job fails" test $? -ne 0
check "... rank 1 reports rank 0's error" grep -q "^error: rank 0 failed: cannot open corpus file .*missing.de" \
  "$work/nocorpus.log"
check "... the launcher names rank 0" grep -q '^error: rank 0 (CPU process 0) exited with code 1' "$work/nocorpus.log"
"$lstrain" "${common[@]}" -m "$work/twice" --devices 0 0 >"$work/twice.log" 2>&1
check "--devices 0 0 is refused in one line" grep -q '^error: --devices names device 0 twice' "$work/twice.log"
if "$lstrain" --version | grep -q 'CUDA backend: not built'; then
  "${lstrain}" -c "$source_dir/tests/apps/train-small.yaml" -t "$work/train.de" "$work/train.en" \
    --vocabs "$work/vocab.spm" -m "$work/nogpu" --devices 0 1 >"$work/nogpu.log" 2>&1
  check "--devices 0 1 without GPUs is refused, suggesting --cpu" \
    grep -q '^error: --devices lists 2 GPUs.*--cpu' "$work/nogpu.log"
fi

echo "$failures failed"
[ "$failures" -eq 0 ]
