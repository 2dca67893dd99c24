#!/usr/bin/env bash
# End-to-end checks of a decoder-only language model (--type lm) on the CPU: lstrain on the English side of the
# sample (one line per sequence, then packed blocks with document masks and learned positions), lsscore's per-line
# log-probabilities and perplexity (equal to the validation's), lstranslate's continuations of prompts (one output
# line per prompt line, --max-length new tokens, greedy, beam and seeded sampling), and the one-line refusals
# (wrong options; Hugging Face checkpoints, which tools/gpt2 converts), GPT-2's byte-level BPE tokenizer
# (vocab.json + merges.txt) under a language model, and lsserve answering prompts as lstranslate does.
# Usage: bash lm_test.sh <dir of lstrain> <source dir>
set -uo pipefail
apps=$(cd "$1/.." && pwd)
lstrain="$apps/train/lstrain" lstranslate="$apps/translate/lstranslate" lsscore="$apps/score/lsscore"
source_dir=$(cd "$2" && pwd)
work=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT; echo "work: $work"
failures=0
check() {  # check <description> <command...>
  local what=$1; shift
  if "$@"; then echo "ok: $what"; else echo "FAIL: $what"; failures=$((failures + 1)); fi
}

sample="$source_dir/data/sample-de-en"
head -n 60 "$sample/valid.en" >"$work/valid.en"
cat >"$work/lm.yaml" <<'EOF'
type: lm
dec-depth: 2
dim-emb: 32
transformer-heads: 2
transformer-dim-ffn: 64
transformer-dropout: 0.1
transformer-prenorm: true
dim-vocabs: [300]
max-length: 48
mini-batch-words: 600
learn-rate: 0.003
lr-warmup: 20u
disp-freq: 20u
save-freq: 100u
valid-freq: 50u
valid-metrics: [perplexity, cross-entropy]
sentencepiece-max-lines: 3000
cpu-threads: 2
EOF
common=(-c "$work/lm.yaml" --vocabs "$work/vocab.spm" --valid-sets "$work/valid.en" --cpu)

# 1. One line per sequence on the whole English side: trains, validates, and the perplexity falls.
"$lstrain" "${common[@]}" -t "$sample/train.en" -m "$work/lines" --after 200u >"$work/lines.log" 2>&1
check "lstrain --type lm exits 0" test $? -eq 0
check "vocabulary created from the one corpus file" test -s "$work/vocab.spm"
check "weights written" test -s "$work/lines/model.safetensors"
check "the model directory has one vocabulary" test -s "$work/lines/vocab.spm"
check "the weights say it is a language model" grep -qa 'type: lm' "$work/lines/model.safetensors"
check "decoder.yml: greedy continuations" grep -q '^beam-size: 1$' "$work/lines/decoder.yml"
ppl=($(grep -o 'perplexity : [0-9.]*' "$work/lines.log" | awk '{print $3}'))
check "validated 4 times" test "${#ppl[@]}" -eq 4
check "validation perplexity falls (${ppl[*]})" awk -v a="${ppl[0]}" -v b="${ppl[3]}" 'BEGIN { exit !(b < 0.8 * a) }'

# 2. lsscore: one log-probability per line, and the summary's perplexity is the last validation's.
"$lsscore" -m "$work/lines" --cpu -t "$work/valid.en" -o "$work/scores" 2>"$work/score.err"
check "lsscore exits 0" test $? -eq 0
check "one score per line (60)" test "$(wc -l <"$work/scores")" -eq 60
check "scores are log-probabilities (negative)" awk '!($1 < 0) { bad = 1 } END { exit bad }' "$work/scores"
summary=$("$lsscore" -m "$work/lines" --cpu -t "$work/valid.en" --summary 2>/dev/null)
scored_ppl=$(echo "$summary" | awk '{print $4}')
check "lsscore's perplexity $scored_ppl equals the validation's ${ppl[3]}" \
  awk -v a="$scored_ppl" -v b="${ppl[3]}" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d < 1e-3 * b) }'
tokens=$(echo "$summary" | awk '{print $5}' | tr -d '(')
check "the summary's tokens count every word and eos" test "$tokens" -gt 60
total=$(awk '{ s += $1 } END { printf "%.4f", -s }' "$work/scores")
check "the summed line scores give the summary's cross-entropy" \
  awk -v t="$total" -v n="$tokens" -v ce="$(echo "$summary" | awk '{print $2}')" \
  'BEGIN { d = t / n - ce; if (d < 0) d = -d; exit !(d < 1e-3) }'
check "lsscore refuses two files for a language model" bash -c \
  "! '$lsscore' -m '$work/lines' --cpu -t '$work/valid.en' '$work/valid.en' 2>'$work/two.err'"
check "... in one line naming --train-sets" bash -c "test \$(grep -c error '$work/two.err') -eq 1 && \
  grep -q -- '^error: .*--train-sets' '$work/two.err'"

# 3. lstranslate: prompts (the first words of lines, an empty line, a long line) and their continuations.
{
  head -n 12 "$sample/test.en" | awk '{ n = NF < 4 ? NF : 4; s = $1; for (i = 2; i <= n; ++i) s = s " " $i; print s }'
  echo
  for _ in $(seq 1 20); do printf 'the house is very old and '; done; echo
} >"$work/prompts.en"
"$lstranslate" -m "$work/lines" --cpu -i "$work/prompts.en" -o "$work/greedy.en" --max-length 6 2>"$work/gen.err"
check "lstranslate on a language model exits 0" test $? -eq 0
check "one continuation per prompt line (14)" test "$(wc -l <"$work/greedy.en")" -eq 14
check "the empty prompt gives an empty line" test -z "$(sed -n 13p "$work/greedy.en")"
check "continuations are not all empty" test "$(awk 'NF > 0' "$work/greedy.en" | wc -l)" -gt 3
"$lstranslate" -m "$work/lines" --cpu -i "$work/prompts.en" --max-length 6 --no-spm-decode \
  >"$work/greedy.ids" 2>/dev/null
check "at most --max-length 6 new tokens" awk 'NF > 6 { bad = 1 } END { exit bad }' "$work/greedy.ids"
"$lstranslate" -m "$work/lines" --cpu -i "$work/prompts.en" --max-length 6 -o "$work/greedy2.en" 2>/dev/null
check "greedy continuations repeat" cmp -s "$work/greedy.en" "$work/greedy2.en"
for seed in 7 7 8; do
  "$lstranslate" -m "$work/lines" --cpu -i "$work/prompts.en" --max-length 8 --output-sampling topp 0.9 1.2 \
    --seed "$seed" -o "$work/sampled.$seed.${RANDOM}" 2>/dev/null
done
sampled=("$work"/sampled.7.*)
check "seeded sampling is reproducible" cmp -s "${sampled[0]}" "${sampled[1]}"
check "another seed samples otherwise" bash -c "! cmp -s '${sampled[0]}' '$work'/sampled.8.*"
check "sampling: one line per prompt" test "$(wc -l <"${sampled[0]}")" -eq 14
"$lstranslate" -m "$work/lines" --cpu -i "$work/prompts.en" --max-length 5 --beam-size 3 --n-best \
  >"$work/beam.nbest" 2>/dev/null
check "beam search: 3 continuations for each of the 13 prompts, one empty entry" \
  test "$(wc -l <"$work/beam.nbest")" -eq 40

# 4. Packed blocks with document masks and learned positions on documents (blank line every 5 lines), under Marian's
# spelling of the type on the command line.
head -n 3000 "$sample/train.en" | awk '{ print } NR % 5 == 0 { print "" }' >"$work/docs.en"
"$lstrain" "${common[@]}" --type lm-transformer -t "$work/docs.en" -m "$work/blocks" --after 60u --lm-pack-blocks \
  --lm-document-masks --transformer-train-position-embeddings >"$work/blocks.log" 2>&1
check "lstrain with packed blocks and document masks exits 0" test $? -eq 0
check "... trained in blocks" grep -q 'in blocks of 48 tokens' "$work/blocks.log"
check "... validated" grep -q 'perplexity : [0-9.]*' "$work/blocks.log"
"$lsscore" -m "$work/blocks" --cpu -t "$work/valid.en" --summary >"$work/blocks.summary" 2>/dev/null
check "lsscore on the block model" grep -q '^cross-entropy [0-9.]* perplexity' "$work/blocks.summary"
"$lstranslate" -m "$work/blocks" --cpu -i "$work/prompts.en" --max-length 4 -o "$work/blocks.out" 2>/dev/null
check "lstranslate on the block model: one line per prompt" test "$(wc -l <"$work/blocks.out")" -eq 14

# 4b. --pretrained-model: a new run starts from the lines model's weights (with learning rate 0 they stay: the same
# scores), a model of other options is refused in one line naming the option, and a resumed run does not read it.
"$lstrain" "${common[@]}" -t "$sample/train.en" -m "$work/pre" --after 2u --learn-rate 0 \
  --pretrained-model "$work/lines" >"$work/pre.log" 2>&1
check "lstrain --pretrained-model exits 0" test $? -eq 0
check "... and says where the weights start" grep -q "weights start from --pretrained-model $work/lines/model.safetensors" \
  "$work/pre.log"
"$lsscore" -m "$work/pre" --cpu -t "$work/valid.en" -o "$work/pre.scores" 2>/dev/null
check "... with learning rate 0 the weights stay: lsscore's scores equal the pretrained model's" \
  cmp -s "$work/pre.scores" "$work/scores"
"$lstrain" "${common[@]}" -t "$sample/train.en" -m "$work/pre" --after 3u --pretrained-model "$work/lines" \
  >"$work/pre.log" 2>&1
check "a resumed run does not read --pretrained-model" grep -q "resuming .*--pretrained-model .* is not read" \
  "$work/pre.log"
"$lstrain" "${common[@]}" -t "$sample/train.en" -m "$work/pre2" --after 2u --dim-emb 64 \
  --pretrained-model "$work/lines" >"$work/pre2.log" 2>&1
check "--pretrained-model of another model is refused" test $? -ne 0
check "... in one line naming the option that differs" bash -c "test \$(grep -c error '$work/pre2.log') -eq 1 && \
  grep -q -- '^error: --pretrained-model .*dim-emb is 32 in the pretrained model but 64 here' '$work/pre2.log'"
check "... and writes no weights" test ! -e "$work/pre2/model.safetensors"

# 5. Refusals, one line each, before anything is written.
refused() {  # refused <description> <words the message names> -- <lstrain arguments...>
  local what=$1 words=$2; shift 3
  "$lstrain" "$@" >"$work/refused.log" 2>&1
  local rc=$?
  check "$what is refused" test "$rc" -ne 0
  check "... in one line naming $words" bash -c "test \$(grep -c error '$work/refused.log') -eq 1 && \
    grep -q -- '$words' '$work/refused.log'"
}
refused "--type lm with two corpus files" "--train-sets" -- "${common[@]}" -m "$work/r1" \
  -t "$sample/train.en" "$sample/train.de"
refused "--lm-pack-blocks without --type lm" "--type lm" -- -c "$work/lm.yaml" --type transformer \
  -t "$sample/train.de" "$sample/train.en" --cpu -m "$work/r2" --lm-pack-blocks
refused "bleu validation of a language model" "bleu" -- "${common[@]}" -m "$work/r3" -t "$sample/train.en" \
  --valid-metrics bleu
refused "--lm-document-masks without blocks" "--lm-pack-blocks" -- "${common[@]}" -m "$work/r4" \
  -t "$sample/train.en" --lm-document-masks
check "refused runs wrote no model" bash -c "! ls '$work'/r?/model.safetensors 2>/dev/null"

# 6. GPT-2's byte-level BPE tokenizer (vocab.json, merges.txt beside it; the 500-entry one of the data tests):
# lstrain trains with it, the model directory keeps both files, lsscore and lstranslate read them from there.
mkdir -p "$work/bpe"
cp "$source_dir/tests/data/fixtures/bpe-vocab.json" "$work/bpe/vocab.json"
"$lstrain" -c "$work/lm.yaml" --cpu --vocabs "$work/bpe/vocab.json" -t "$sample/train.en" -m "$work/r5" \
  >"$work/bpe.log" 2>&1
check "a vocab.json without merges.txt is refused" test $? -ne 0
check "... in one line naming merges.txt" bash -c "test \$(grep -c error '$work/bpe.log') -eq 1 && \
  grep -q '^error: .*vocab.json.*merges.txt' '$work/bpe.log'"
"$lstrain" -c "$work/lm.yaml" --cpu --vocabs "$work/missing/vocab.json" -t "$sample/train.en" -m "$work/r6" \
  >"$work/bpe.log" 2>&1
check "a vocab.json that does not exist is refused (lseq does not train BPE)" bash -c "test \$(grep -c error \
  '$work/bpe.log') -eq 1 && grep -q '^error: .*vocab.json.*does not train' '$work/bpe.log'"
cp "$source_dir/tests/data/fixtures/bpe-merges.txt" "$work/bpe/merges.txt"
"$lstrain" -c "$work/lm.yaml" --cpu --vocabs "$work/bpe/vocab.json" -t "$sample/train.en" -m "$work/bpe-lm" \
  --valid-sets "$work/valid.en" --after 50u >"$work/bpe.log" 2>&1
bpe_rc=$?
if grep -q "built without PCRE2" "$work/bpe.log"; then  # LSEQ_BPE=AUTO without libpcre2-dev (CI builds it: ON)
  echo "skipped: training with a BPE vocabulary (this build has no PCRE2)"
  check "... which is refused in one line" test "$(grep -c error "$work/bpe.log")" -eq 1
else
  check "lstrain --type lm with a GPT-2 BPE vocab.json exits 0" test "$bpe_rc" -eq 0
  check "... validated" grep -q 'perplexity : [0-9.]*' "$work/bpe.log"
  check "... the model directory keeps vocab.json and merges.txt" bash -c "cmp -s '$work/bpe/vocab.json' \
    '$work/bpe-lm/vocab.json' && cmp -s '$work/bpe/merges.txt' '$work/bpe-lm/merges.txt'"
  check "... and no SentencePiece model" test ! -e "$work/bpe-lm/vocab.spm"
  "$lsscore" -m "$work/bpe-lm" --cpu -t "$work/valid.en" -o "$work/bpe.scores" 2>/dev/null
  check "lsscore with the BPE model: one score per line" test "$(wc -l <"$work/bpe.scores")" -eq 60
  printf 'The house is\nGrüße aus Köln,  ja\nIt'"'"'s 42\n' >"$work/bpe.prompts"
  "$lstranslate" -m "$work/bpe-lm" --cpu -i "$work/bpe.prompts" --max-length 6 --output-sampling topk 5 --seed 3 \
    -o "$work/bpe.out" 2>"$work/bpe.err"
  check "lstranslate continues prompts with the BPE model: one line each" test "$(wc -l <"$work/bpe.out")" -eq 3
  check "... in UTF-8 text (no ids)" bash -c "iconv -f UTF-8 -t UTF-8 '$work/bpe.out' >/dev/null && \
    ! grep -qE '^[0-9 ]+$' '$work/bpe.out'"
  check "... some continuation is not empty" grep -q . "$work/bpe.out"
  # A vocabulary of the right size but another content (two tokens swapped) is refused against the checkpoint's
  # recorded fingerprint, in one line naming the file.
  cp "$work/bpe-lm/vocab.json" "$work/vocab.json.kept"
  python3 -c '
import json, sys
v = json.load(open(sys.argv[1], encoding="utf-8"))
a, b = sorted(v, key=v.get)[300:302]
v[a], v[b] = v[b], v[a]
json.dump(v, open(sys.argv[1], "w", encoding="utf-8"), ensure_ascii=False)' "$work/bpe-lm/vocab.json"
  echo hello | "$lstranslate" -m "$work/bpe-lm" --cpu >/dev/null 2>"$work/swapped.err"
  check "a swapped vocab.json is refused" test $? -ne 0
  check "... in one line naming it and the checkpoint's record" bash -c "test \$(grep -c error '$work/swapped.err') -eq 1 \
    && grep -q '^error: the vocabulary .*bpe-lm/vocab.json is not the one .* trained with' '$work/swapped.err'"
  cp "$work/vocab.json.kept" "$work/bpe-lm/vocab.json"
  # --no-reload with --vocabs naming the model directory's own vocab.json keeps its merges.txt too.
  "$lstrain" -c "$work/lm.yaml" --cpu --vocabs "$work/bpe-lm/vocab.json" -t "$sample/train.en" -m "$work/bpe-lm" \
    --after 10u --no-reload >"$work/bpe.log" 2>&1
  check "--no-reload with the model directory's vocab.json exits 0" test $? -eq 0
  check "... and keeps vocab.json and merges.txt" bash -c "cmp -s '$work/bpe/vocab.json' '$work/bpe-lm/vocab.json' && \
    cmp -s '$work/bpe/merges.txt' '$work/bpe-lm/merges.txt'"
fi

# 7. A Hugging Face checkpoint is refused in one line pointing to the converters (tests/tools/gpt2 tests GPT-2's).
mkdir -p "$work/hf" && echo '{"model_type": "gpt2"}' >"$work/hf/config.json" && cp "$work/lines/model.safetensors" "$work/hf/"
echo hello | "$lstranslate" -m "$work/hf" --cpu >"$work/hf.out" 2>"$work/hf.err"
check "a Hugging Face GPT-2 directory is refused" test $? -ne 0
check "... in one line naming its config.json" bash -c "test \$(grep -c error '$work/hf.err') -eq 1 && \
  grep -q '^error: .*Hugging Face checkpoint (config.json).*tools/gpt2/gpt2_to_lseq.py' '$work/hf.err'"

# 8. lsserve with a language model: prompts in, the continuations lstranslate gives out (greedy and seeded
# sampling), max-new-tokens per request, streamed as server-sent events, SIGTERM drains.
lsserve="$apps/serve/lsserve"
if [ -x "$lsserve" ]; then  # built where cpp-httplib is installed (CI always)
  # --max-length-crop: the long prompt is cropped as lstranslate crops it (else it would get an error of its own).
  "$lsserve" -m "$work/lines" --cpu --cpu-threads 1 --port 0 --max-length-crop >/dev/null 2>"$work/serve.log" &
  server=$!
  port=""
  for _ in $(seq 1 300); do
    port=$(sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\) .*|\1|p' "$work/serve.log")
    [ -n "$port" ] || ! kill -0 "$server" 2>/dev/null || { sleep 0.1; continue; }
    break
  done
  check "lsserve starts with a language model" test -n "$port"
  ask() {  # ask <JSON options>: POSTs the prompts of prompts.en with the options; prints the continuations
    python3 -c '
import json, sys
body = json.loads(sys.argv[2])
body["prompt"] = open(sys.argv[1], encoding="utf-8").read().split("\n")[:-1]
print(json.dumps(body))' "$work/prompts.en" "$1" >"$work/body.json"
    curl -sS --max-time 60 -H 'Content-Type: application/json' --data-binary "@$work/body.json" \
      "http://127.0.0.1:$port/translate" >"$work/answer.json" 2>/dev/null
    python3 -c 'import json, sys; print("\n".join(json.load(open(sys.argv[1]))["translations"]))' "$work/answer.json"
  }
  ask '{"max-new-tokens": 6}' >"$work/served.en"
  check "lsserve's greedy continuations equal lstranslate's" cmp -s "$work/served.en" "$work/greedy.en"
  ask '{"max-new-tokens": 8, "output-sampling": "topp 0.9 1.2", "seed": 7}' >"$work/served-sampled.en"
  check "... and so do its seeded samples" cmp -s "$work/served-sampled.en" "${sampled[0]}"
  ask '{"max-new-tokens": 2}' >/dev/null
  check "max-new-tokens 2: at most 2 new tokens" python3 -c '
import json, sys
answers = json.load(open(sys.argv[1]))["translations"]
sys.exit(not (len(answers) == 14 and all(len(a.split()) <= 2 for a in answers)))' "$work/answer.json"
  # Streamed: server-sent events whose texts add up, per prompt, to the continuations the whole answer has.
  ask '{"max-new-tokens": 6, "stream": true}' >/dev/null 2>&1
  check "streamed: the events' texts add up to lstranslate's continuations, then the answer and [DONE]" python3 -c '
import json, sys
lines = open(sys.argv[1], encoding="utf-8").read().split("\n")
data = [l[6:] for l in lines if l.startswith("data: ")]
assert data[-1] == "[DONE]", data[-1]
answer = json.loads(data[-2])["translations"]
texts = [""] * len(answer)
for d in data[:-2]:
    e = json.loads(d)
    texts[e["index"]] += e["text"]
expected = open(sys.argv[2], encoding="utf-8").read().split("\n")[:-1]
assert texts == answer == expected, (texts, answer, expected)' "$work/answer.json" "$work/greedy.en"
  ask '{"stream": true, "n-best": true}' >/dev/null 2>&1
  check "... a streamed n-best list is refused in one line" grep -q '"error":.*without n-best' "$work/answer.json"
  kill -TERM "$server"
  wait "$server"
  check "SIGTERM: lsserve exits 0" test $? -eq 0
fi

if [ "$failures" -gt 0 ]; then
  echo "lm_test.sh: $failures check(s) failed (KEEP=1 keeps $work)"
  exit 1
fi
echo "lm_test.sh: all checks passed"
