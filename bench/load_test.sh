#!/usr/bin/env bash
# Load test of lstranslate and lsscore on the CPU: LINES input lines of mixed junk (empty lines, invalid UTF-8,
# binary bytes, CRLF, lines of 10 KB to 10 MB, bad token ids with --no-spm-encode, normal sentences) through a tiny
# model trained here with lstrain. Checks that lines in equal lines out, and reports resident memory (VmRSS sampled
# every second: start, peak, end, and the growth from the first tenth of the run to its end) and time.
# It reports; it is not a ctest (1,000,000 lines take about a quarter of an hour on 2 cores).
# Usage: LINES=1000000 bash bench/load_test.sh [BUILD]     (BUILD: the build dir with apps/, default build)
#   BEAM=1 THREADS=1: decoding options (greedy keeps the run short; the input path is the same for any beam)
#   SCORE_MAX_LENGTH=40: lsscore's --max-length, the model's own (lsscore's default, 1000, lets scoring the long
#   junk lines take most of the run)
#   SEED=1: the junk's generator seed; KEEP=1 keeps the work dir.
set -uo pipefail
source_dir=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-build}" && pwd)
lines=${LINES:-1000000} beam=${BEAM:-1} threads=${THREADS:-1} seed=${SEED:-1} score_max_length=${SCORE_MAX_LENGTH:-40}
lstrain="$build/apps/train/lstrain" lstranslate="$build/apps/translate/lstranslate" lsscore="$build/apps/score/lsscore"
for program in "$lstrain" "$lstranslate" "$lsscore"; do
  [ -x "$program" ] || { echo "error: $program not found; build lstrain, lstranslate and lsscore" >&2; exit 1; }
done
work=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT
echo "work: $work  lines: $lines  beam: $beam  threads: $threads  seed: $seed"
failures=0

sample="$source_dir/data/sample-de-en"
head -n 1500 "$sample/train.de" >"$work/train.de"
head -n 1500 "$sample/train.en" >"$work/train.en"
# 150 updates (seconds): enough that greedy search writes words; after 20 it ends every sentence at once.
"$lstrain" -c "$source_dir/tests/apps/train-small.yaml" -m "$work/model" -t "$work/train.de" "$work/train.en" \
  --after 150u >"$work/train.log" 2>&1 || { echo "error: training failed, see $work/train.log" >&2; KEEP=1; exit 1; }

# The junk: one generator, deterministic from SEED; the kind of each line is drawn with the weights below.
python3 - "$lines" "$seed" "$sample/train.de" "$work/junk.txt" "$work/junk.ids" <<'EOF'
import random, sys
lines, seed, corpus, text_path, ids_path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
rng = random.Random(seed)
sentences = [l.rstrip("\n").encode() for l in open(corpus, encoding="utf-8")]
words = b" ".join(sentences).split()

def long_text(size):  # sentence words up to `size` bytes
    out, n = [], 0
    while n < size:
        w = words[rng.randrange(len(words))]
        out.append(w)
        n += len(w) + 1
    return b" ".join(out)

def junk_bytes(n):  # anything but a line end
    return bytes(b for b in rng.randbytes(n) if b != 10)

text_kinds = [  # (weight, line)
    (30, lambda: rng.choice(sentences)),
    (12, lambda: b""),
    (8, lambda: rng.choice(sentences) + b"\r"),
    (8, lambda: rng.choice(sentences)[:5] + bytes([rng.choice([0xFF, 0xC0, 0xE2, 0xED])]) + rng.choice(sentences)),
    (8, lambda: junk_bytes(rng.randrange(1, 300))),
    (8, lambda: bytes(rng.choice(b" \t\r\x00\x01\x1b!#%&*+,-./0123456789:;<=>?@[]^_{|}~")
                      for _ in range(rng.randrange(1, 200)))),
    (8, lambda: " ".join(str(rng.randrange(0, 400)) for _ in range(rng.randrange(1, 30))).encode()),
    (6, lambda: " ".join(rng.choice(["Grüße", "日本語", "😀", "ñ", "Ω", "\u200b", "\ufeff"])
                         for _ in range(rng.randrange(1, 40))).encode()),
    (1, lambda: long_text(rng.randrange(2000, 20000))),
    (0.002, lambda: long_text(1 << 20)),
    (0.0003, lambda: long_text(10 << 20)),
]
id_kinds = [
    (30, lambda: " ".join(str(rng.randrange(4, 300)) for _ in range(rng.randrange(1, 40))).encode()),
    (10, lambda: b""),
    (8, lambda: b"5 12345678901 6"),
    (8, lambda: b"7 -%d 8" % rng.randrange(1, 10**12)),
    (8, lambda: b"%d %d" % (rng.randrange(4, 300), rng.randrange(300, 10**6))),
    (8, lambda: b"4 " + rng.choice(sentences)),
    (6, lambda: b"9 \xff 10" if rng.random() < 0.5 else b"11 \x00 12"),
    (8, lambda: "\t".join(str(rng.randrange(4, 300)) for _ in range(rng.randrange(1, 20))).encode() + b" \r"),
    (6, lambda: b"9" * rng.randrange(11, 40)),
    (1, lambda: " ".join(str(rng.randrange(4, 300)) for _ in range(rng.randrange(1000, 5000))).encode()),
    (0.002, lambda: " ".join(str(rng.randrange(4, 300)) for _ in range(300000)).encode()),
]

def write(path, kinds):
    weights = [w for w, _ in kinds]
    with open(path, "wb") as out:
        for _ in range(lines - 1):
            out.write(rng.choices(kinds, weights)[0][1]() + b"\n")
        out.write(kinds[0][1]())  # a last line without a line end (and not empty, or it would be no line)

write(text_path, text_kinds)
write(ids_path, id_kinds)
EOF
[ $? -eq 0 ] || { echo "error: generating the input failed" >&2; exit 1; }
# wc -l counts line ends; the last line has none.
in_lines=$(($(wc -l <"$work/junk.txt") + 1))
echo "input: $in_lines lines, text $(du -m "$work/junk.txt" | cut -f1) MB, ids $(du -m "$work/junk.ids" | cut -f1) MB"

# run <name> <command...>: runs it with stdout to $work/<name>.out, samples its VmRSS every second, and prints a line
# of results; the lines out must equal the lines in.
run() {
  local name=$1; shift
  local samples="$work/$name.rss"
  local start=$SECONDS
  "$@" >"$work/$name.out" 2>"$work/$name.err" &
  local pid=$!
  : >"$samples"
  while sleep 1 && kill -0 "$pid" 2>/dev/null; do  # the first sample after 1 s: the model is loaded by then
    awk '/^VmRSS:/ { print $2 }' "/proc/$pid/status" >>"$samples" 2>/dev/null
  done
  wait "$pid"
  local rc=$? seconds=$((SECONDS - start)) out_lines
  out_lines=$(wc -l <"$work/$name.out")
  local warnings errors nonempty
  warnings=$(grep -c '\[warning\]' "$work/$name.err")
  nonempty=$(grep -c . "$work/$name.out")
  errors=$(grep '^error: ' "$work/$name.err" | head -n 1)
  awk -v name="$name" -v rc="$rc" -v in_lines="$in_lines" -v out_lines="$out_lines" -v seconds="$seconds" \
    -v warnings="$warnings" -v nonempty="$nonempty" '
    { rss[NR] = $1; if ($1 > peak) peak = $1 }
    END {
      n = NR; tenth = n >= 10 ? int(n / 10) : 1
      memory = n == 0 ? "VmRSS: no sample (it ended within a second)" : \
        sprintf("VmRSS MB start=%.1f peak=%.1f end=%.1f (at 10%%: %.1f, samples %d)", rss[1] / 1024, peak / 1024,
                rss[n] / 1024, rss[tenth] / 1024, n)
      printf "%-16s rc=%d lines in=%d out=%d (not empty %d)  time=%ds  %s  warnings=%d\n", name, rc, in_lines,
        out_lines, nonempty, seconds, memory, warnings
    }' "$samples"
  [ -n "$errors" ] && echo "  $errors"
  if [ "$rc" -ne 0 ] || [ "$out_lines" -ne "$in_lines" ]; then
    echo "  FAIL: $name: exit $rc, $out_lines lines out for $in_lines in (see $work/$name.err)"
    failures=$((failures + 1)); KEEP=1
  fi
}

common=(-m "$work/model" --beam-size "$beam" --cpu-threads "$threads")
run lstranslate "$lstranslate" "${common[@]}" -i "$work/junk.txt"
run lstranslate-ids "$lstranslate" "${common[@]}" --no-spm-encode --no-spm-decode -i "$work/junk.ids"
scoring=(-m "$work/model" --cpu-threads "$threads" --max-length "$score_max_length")
run lsscore "$lsscore" "${scoring[@]}" -t "$work/junk.txt" "$work/junk.txt"
run lsscore-ids "$lsscore" "${scoring[@]}" --no-spm-encode -t "$work/junk.ids" "$work/junk.ids"
echo "$failures failed"
[ "$failures" -eq 0 ]
