#!/usr/bin/env bash
# Trains the WMT14 English->German model of wmt14.yaml (base) or wmt14-big.yaml (big), from recipes/wmt14.
#
#   bash train.sh base                        # one GPU (device 0)
#   DEVICES="0 1 2 3" bash train.sh base      # several GPUs of this machine: one process each (lstrain --devices)
#   bash train.sh big --after 20000u          # more lstrain options follow the model name and win
#   CPU=1 bash train.sh base ...              # the CPU backend (fp32; for tests: far too slow for WMT14)
#
# Several machines: start this script once per GPU under a launcher, which tells lstrain its rank and where rank 0
# is (docs/data-parallel.md); every machine needs the same data/ and model directory (a shared file system):
#   torchrun --nnodes 2 --nproc-per-node 4 --node-rank $NODE_RANK --master-addr node1 --master-port 29500 \
#       --no-python bash train.sh base
#   srun --nodes 2 --ntasks-per-node 4 --gpus-per-task 1 bash train.sh base
#   mpirun -np 8 -H node1:4,node2:4 -x MASTER_ADDR=node1 -x MASTER_PORT=29500 bash train.sh base
#
# An update sees 25k target tokens or more whatever the number of GPUs (the paper's batch): 16384 tokens per GPU
# and step, and optimizer-delay = round(25000 / (16384 * GPUs)), at least 1. Re-running the same command resumes.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here"
size=${1:-base}
[ $# -gt 0 ] && shift
case $size in
  base) config=wmt14.yaml ;;
  big) config=wmt14-big.yaml ;;
  *) echo "train.sh: the first argument is base or big, got '$size'" >&2; exit 2 ;;
esac
lstrain=${LSEQ_BIN:+$LSEQ_BIN/}lstrain
[ -f data/train.en ] || { echo "train.sh: data/train.en is missing; run prepare-data.sh first" >&2; exit 1; }

# GPUs in the whole job: a launcher's world size, else the --devices list.
read -r -a devices <<< "${DEVICES:-0}"
world=${WORLD_SIZE:-${SLURM_NTASKS:-${OMPI_COMM_WORLD_SIZE:-${#devices[@]}}}}
delay=$(( (25000 + 8192 * world) / (16384 * world) ))
[ "$delay" -ge 1 ] || delay=1

args=(--config "$config" --optimizer-delay "$delay")
if [ -n "${WORLD_SIZE:-}${SLURM_PROCID:-}${OMPI_COMM_WORLD_RANK:-}" ]; then
  : # under a launcher: one process per GPU, the launcher's environment says which
else
  args+=(--devices "${devices[@]}")
fi
[ -n "${CPU:-}" ] && args+=(--cpu --precision fp32)
echo "train.sh: $lstrain ${args[*]} $*  ($world GPU(s), optimizer-delay $delay)"
exec "$lstrain" "${args[@]}" "$@"
