#!/usr/bin/env bash
# lsserve end to end on the CPU with a tiny model trained here, through a real HTTP client (curl, and Python's
# http.client for concurrency and disconnects): answers equal lstranslate's for the same lines and options (beam,
# n-best, word scores, sampling), in order, also when concurrent requests share batches; 400 naming the problem for
# malformed JSON and invalid UTF-8; 413 for a too large body and too many sentences; a per-sentence error for an
# over-long sentence; 503 with Retry-After when the queue is full; the time-out; a client that goes away; /health
# and /metrics (Prometheus text); a burst of new connections waits in the listen queue; SIGTERM drains (the
# request in flight is answered, then exit 0).
# Every wait has a time-out and every server is killed on exit, so the test cannot hang.
# Usage: bash serve_test.sh <dir of lstrain> <source dir>
set -uo pipefail
apps=$(cd "$1/.." && pwd)
lstrain="$apps/train/lstrain" lstranslate="$apps/translate/lstranslate" lsserve="$apps/serve/lsserve"
source_dir=$(cd "$2" && pwd)
work=$(mktemp -d)
servers=()
cleanup() {
  for pid in "${servers[@]}"; do kill -9 "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; done
  [ -n "${KEEP:-}" ] || rm -rf "$work"
}
trap cleanup EXIT
echo "work: $work"
failures=0
check() {  # check <description> <command...>
  local what=$1; shift
  if "$@"; then echo "ok: $what"; else echo "FAIL: $what"; failures=$((failures + 1)); fi
}
if [ ! -x "$lsserve" ]; then  # LSEQ_SERVE=AUTO without cpp-httplib: ctest counts exit 77 as skipped
  echo "SKIP: $lsserve was not built (cpp-httplib not found when configuring; install libcpp-httplib-dev)"; exit 77
fi
command -v curl >/dev/null || { echo "FAIL: curl not found (scripts/install-deps.sh installs it)"; exit 1; }

sample="$source_dir/data/sample-de-en"
head -n 1500 "$sample/train.de" >"$work/train.de"
head -n 1500 "$sample/train.en" >"$work/train.en"
head -n 24 "$sample/valid.de" >"$work/lines.de"
# 150 updates: outputs that differ from line to line (after 20 every sentence ends at once).
timeout 300 "$lstrain" -c "$source_dir/tests/apps/train-small.yaml" -m "$work/model" -t "$work/train.de" \
  "$work/train.en" --after 150u --cpu >"$work/train.log" 2>&1
check "training the tiny model exits 0" test $? -eq 0

# start_server <name> <options...>: starts lsserve on a free port of 127.0.0.1; sets $port and $pid.
start_server() {
  local name=$1; shift
  "$lsserve" -m "$work/model" --cpu --cpu-threads 1 --port 0 "$@" >"$work/$name.out" 2>"$work/$name.log" &
  pid=$!
  servers+=("$pid")
  port=""
  for _ in $(seq 1 300); do
    port=$(sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\) .*|\1|p' "$work/$name.log")
    [ -n "$port" ] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if [ -z "$port" ]; then
    echo "FAIL: lsserve $name did not start:"; tail -n 5 "$work/$name.log"; exit 1
  fi
}

# post <port> <body file> <answer file> [curl options...]: POST /translate; prints the HTTP status.
post() {
  local port=$1 body=$2 answer=$3; shift 3
  curl -sS --max-time 60 -o "$answer" -w '%{http_code}' -H 'Content-Type: application/json' "$@" \
    --data-binary "@$body" "http://127.0.0.1:$port/translate" 2>"$answer.curl"
}
request() {  # request <lines file> [JSON options]: the body {"text": [lines], ...options}
  python3 -c '
import json, sys
body = json.loads(sys.argv[2]) if len(sys.argv) > 2 else {}
body["text"] = open(sys.argv[1], encoding="utf-8").read().split("\n")[:-1]
print(json.dumps(body))' "$@"
}
lines_of() {  # lines_of <answer file>: its translations, one a line (n-best lists: their lines)
  python3 -c '
import json, sys
for t in json.load(open(sys.argv[1], encoding="utf-8"))["translations"]:
    print("\n".join(t) if isinstance(t, list) else t)' "$1"
}
json_field() {  # json_field <answer file> <python expression over a>
  python3 -c 'import json, sys; a = json.load(open(sys.argv[1], encoding="utf-8")); print(eval("(" + sys.argv[2] + ")"))' \
    "$1" "$2"
}

# --max-length-crop: over-long lines are cropped as lstranslate crops them (the comparisons below include some).
# Two decoding threads (a GPU's default), so that the answers below come from both.
start_server main --max-queue 1000 --max-request-sentences 60 --max-request-bytes 20000 --request-timeout 30 \
  --max-length-crop --decoders 2
main_port=$port main_pid=$pid
check "main: two decoding threads" grep -q "2 decoding threads" "$work/main.log"

# ---- where it listens: 127.0.0.1 by default, and a port in use is an error naming it ----
python3 - "$main_port" <<'EOF' >"$work/listen.log" 2>&1
import sys
port = "%04X" % int(sys.argv[1])
found = []
for table in ("/proc/net/tcp", "/proc/net/tcp6"):
    try:
        rows = open(table).read().splitlines()[1:]
    except OSError:
        continue
    for row in rows:
        local, state = row.split()[1], row.split()[3]
        if state == "0A" and local.endswith(":" + port):  # 0A: LISTEN
            found.append((table, local))
print("listening sockets:", found)
sys.exit(0 if found == [("/proc/net/tcp", "0100007F:" + port)] else 1)
EOF
status=$?
check "without --bind it listens on 127.0.0.1 only ($(tail -n 1 "$work/listen.log"))" test "$status" -eq 0
timeout 60 "$lsserve" -m "$work/model" --cpu --cpu-threads 1 --port "$main_port" >/dev/null 2>"$work/taken.log"
code=$?
check "a second lsserve on the same port exits 1 (got $code)" test "$code" -eq 1
check "... naming the address it cannot listen on" grep -q "cannot listen on 127.0.0.1:$main_port" "$work/taken.log"

# ---- a burst of new connections waits in the listen queue: none is dropped ----
# The server is stopped (SIGSTOP) while 64 clients connect, so that only the kernel's queue of the listening socket
# holds them: with httplib's backlog of 5 the handshakes beyond it were dropped (and retried a second later).
python3 - "$main_port" "$main_pid" 64 <<'EOF' >"$work/burst.log" 2>&1
import os, select, signal, socket, sys, time
port, pid, count = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
sockets, pending = [], set()
os.kill(pid, signal.SIGSTOP)
try:
    for _ in range(count):
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex(("127.0.0.1", port))
        sockets.append(s)
        pending.add(s)
    deadline = time.time() + 3
    while pending and time.time() < deadline:
        _, writable, _ = select.select([], list(pending), [], max(0.0, deadline - time.time()))
        pending.difference_update(writable)
    connected = [s for s in sockets if s not in pending and s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0]
finally:
    os.kill(pid, signal.SIGCONT)
print("connected while the server was stopped: %d of %d" % (len(connected), count))
answered = 0
for s in connected:
    s.setblocking(True)
    s.settimeout(10)
    s.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
    data = b""
    while True:
        chunk = s.recv(4096)
        if not chunk:
            break
        data += chunk
    answered += data.startswith(b"HTTP/1.1 200")
print("answered 200: %d" % answered)
sys.exit(0 if len(connected) == count and answered == count else 1)
EOF
status=$?
check "a burst of 64 new connections is queued while the server is busy, each answered ($(paste -sd ';' "$work/burst.log"))" \
  test "$status" -eq 0

# ---- the same translations as lstranslate ----
same_as_lstranslate() {  # same_as_lstranslate <name> <JSON options> <lstranslate options...>
  local name=$1 json=$2; shift 2
  "$lstranslate" -m "$work/model" --cpu --cpu-threads 1 -i "$work/lines.de" -o "$work/$name.lstranslate" "$@" \
    2>"$work/$name.lstranslate.log"
  request "$work/lines.de" "$json" >"$work/$name.json"
  local status
  status=$(post "$main_port" "$work/$name.json" "$work/$name.answer")
  check "$name: 200 (got $status)" test "$status" = 200
  lines_of "$work/$name.answer" >"$work/$name.lsserve"
  check "$name: the same as lstranslate's, line by line" same_lines "$work/$name.lstranslate" "$work/$name.lsserve"
}
# The same lines, numbers (scores) within 1e-4 relative: a sentence's scores may differ in the last printed digit
# with the sentences it was batched with (a GEMM's rounding depends on its row count; lsserve's searches take in
# requests as they come).
same_lines() {
  python3 - "$1" "$2" <<'PY'
import sys
a, b = (open(f).read().splitlines() for f in sys.argv[1:3])
def same(x, y):
    if x == y:
        return True
    try:
        u, v = float(x), float(y)
    except ValueError:
        return False
    return abs(u - v) <= 1e-4 * (1 + abs(u))
ok = len(a) == len(b) and all(
    len(p.split()) == len(q.split()) and all(same(x, y) for x, y in zip(p.split(), q.split())) for p, q in zip(a, b))
if not ok:
    bad = next((i for i, (p, q) in enumerate(zip(a, b)) if p != q), min(len(a), len(b)))
    print(f"line {bad + 1} differs:\n  {a[bad] if bad < len(a) else '(none)'}\n  {b[bad] if bad < len(b) else '(none)'}")
sys.exit(0 if ok else 1)
PY
}
same_as_lstranslate beam '{}'
same_as_lstranslate nbest '{"beam-size": 3, "n-best": true, "word-scores": true}' --beam-size 3 --n-best --word-scores
same_as_lstranslate greedy '{"beam-size": 1, "normalize": 1}' --beam-size 1 --normalize 1
same_as_lstranslate sampling '{"output-sampling": "topk 5 0.8", "seed": 7}' --output-sampling topk 5 0.8 --seed 7
check "nbest: 3 entries for each of the 24 lines" test "$(wc -l <"$work/nbest.lsserve")" -eq 72
check "the model translates (not every answer empty)" test -n "$(tr -d '\n' <"$work/beam.lsserve")"

# Concurrent requests of different lines share batches; each answer keeps its own order.
python3 - "$main_port" "$work/lines.de" "$work/beam.lstranslate" <<'EOF' >"$work/concurrent.log" 2>&1
import http.client, json, random, sys, threading
port, lines, expected = int(sys.argv[1]), open(sys.argv[2]).read().split("\n")[:-1], open(sys.argv[3]).read().split("\n")[:-1]
expect = dict(zip(lines, expected))
bad = []
def client(seed):
    rng = random.Random(seed)
    for _ in range(3):
        chosen = rng.sample(lines, rng.randint(1, 12))
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        c.request("POST", "/translate", json.dumps({"text": chosen}), {"Content-Type": "application/json"})
        r = c.getresponse()
        answer = json.loads(r.read())
        if r.status != 200 or answer["translations"] != [expect[s] for s in chosen]:
            bad.append((seed, r.status, chosen, answer))
        c.close()
threads = [threading.Thread(target=client, args=(s,)) for s in range(12)]
for t in threads: t.start()
for t in threads: t.join(120)
print("bad:", len(bad), bad[:1])
sys.exit(1 if bad or any(t.is_alive() for t in threads) else 0)
EOF
check "12 concurrent clients x 3 requests: every answer in order and equal to lstranslate's" test $? -eq 0

# ---- bad input ----
printf '{"text": ["Guten Tag", ' >"$work/malformed.json"
status=$(post "$main_port" "$work/malformed.json" "$work/malformed.answer")
check "malformed JSON: 400 (got $status)" test "$status" = 400
check "... naming the problem" grep -q '"error":"malformed JSON: .*parse error' "$work/malformed.answer"
printf '{"text": ["Das ist \xff kaputt"]}' >"$work/utf8.json"
status=$(post "$main_port" "$work/utf8.json" "$work/utf8.answer")
check "invalid UTF-8: 400 (got $status)" test "$status" = 400
check "... naming the byte" grep -q 'not valid UTF-8: invalid byte 0xFF at offset 19' "$work/utf8.answer"
python3 -c 'import json; print(json.dumps({"text": ["Hallo Welt. " * 100] * 20}))' >"$work/big.json"
status=$(post "$main_port" "$work/big.json" "$work/big.answer")
check "a body over --max-request-bytes: 413 (got $status)" test "$status" = 413
check "... naming the limit" grep -q 'max-request-bytes 20000' "$work/big.answer"
status=$(post "$main_port" "$work/big.json" "$work/big-chunked.answer" -H 'Transfer-Encoding: chunked')
check "the same body chunked (no Content-Length, read until the limit): 413 (got $status)" test "$status" = 413
check "... naming the limit" grep -q 'max-request-bytes 20000' "$work/big-chunked.answer"
python3 -c 'import json; print(json.dumps({"text": ["Hallo"] * 61}))' >"$work/many.json"
status=$(post "$main_port" "$work/many.json" "$work/many.answer")
check "61 sentences over --max-request-sentences 60: 413 (got $status)" test "$status" = 413
printf '{"text": ["Hallo"], "prompt": "Once upon a time"}' >"$work/prompt.json"
status=$(post "$main_port" "$work/prompt.json" "$work/prompt.answer")
check "a prompt to a translation model: 400 saying prompts are for language models (got $status)" \
  sh -c "test $status = 400 && grep -q 'language model' '$work/prompt.answer'"
printf '{"text": ["Hallo"], "beam-size": 9}' >"$work/beam9.json"
status=$(post "$main_port" "$work/beam9.json" "$work/beam9.answer")
check "beam-size above the server's: 400 (got $status)" test "$status" = 400
status=$(curl -sS --max-time 10 -o "$work/nothing.answer" -w '%{http_code}' "http://127.0.0.1:$main_port/nothing")
check "an unknown endpoint: 404 with a JSON message (got $status)" \
  sh -c "test $status = 404 && grep -q 'no such endpoint' '$work/nothing.answer'"

# ---- a client that goes away: its waiting sentences leave the queue ----
# slow.json: 60 sentences whose translations run to the length limit (about 0.5 s on one core); three of them keep
# the decoder busy while a fourth client sends one more and goes away after 0.3 s, its sentences still queued.
python3 -c 'import json; print(json.dumps({"text": ["Das Haus ist sehr alt und sehr schön. " * 2] * 60}))' \
  >"$work/slow.json"
python3 - "$main_port" "$work/slow.json" <<'EOF' >"$work/gone.log" 2>&1
import http.client, socket, sys, threading, time
port, body = int(sys.argv[1]), open(sys.argv[2], "rb").read()
statuses = []
def filler():
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    c.request("POST", "/translate", body, {"Content-Type": "application/json"})
    r = c.getresponse()
    r.read()
    statuses.append(r.status)
def in_flight():
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("GET", "/metrics")
    text = c.getresponse().read().decode()
    c.close()
    return int(next(l.split()[1] for l in text.splitlines() if l.startswith("lsserve_requests_in_flight ")))
threads = [threading.Thread(target=filler) for _ in range(3)]
for t in threads: t.start()
# The fourth request goes in once the three are in, so that its sentences wait behind theirs.
deadline = time.time() + 30
while in_flight() < 3 and time.time() < deadline:
    time.sleep(0.01)
time.sleep(0.05)
s = socket.create_connection(("127.0.0.1", port), timeout=10)
s.sendall(b"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
          % len(body) + body)
time.sleep(0.3)
s.close()
for t in threads: t.join(120)
print("fillers:", statuses)
sys.exit(0 if statuses == [200, 200, 200] else 1)
EOF
status=$?
check "three busy clients answered while a fourth went away ($(tail -n 1 "$work/gone.log"))" test "$status" -eq 0
for _ in $(seq 1 50); do  # the server notices within 50 ms; give it up to 5 s
  curl -sS --max-time 10 "http://127.0.0.1:$main_port/metrics" >"$work/metrics.txt"
  grep -q '^lsserve_requests_total{code="499"} 1$' "$work/metrics.txt" && break
  sleep 0.1
done
check "a client gone before its answer: counted as 499" grep -q '^lsserve_requests_total{code="499"} 1$' "$work/metrics.txt"
check "... and its waiting sentences cancelled" \
  grep -qE '^lsserve_sentences_total\{outcome="cancelled"\} [1-9][0-9]*$' "$work/metrics.txt"
for _ in $(seq 1 100); do
  curl -sS --max-time 10 "http://127.0.0.1:$main_port/metrics" >"$work/metrics.txt"
  grep -q '^lsserve_requests_in_flight 0$' "$work/metrics.txt" && grep -q '^lsserve_queue_sentences 0$' "$work/metrics.txt" &&
    break
  sleep 0.1
done
check "... nothing of it stays queued or in flight" \
  sh -c "grep -q '^lsserve_requests_in_flight 0$' '$work/metrics.txt' && grep -q '^lsserve_queue_sentences 0$' '$work/metrics.txt'"

# ---- /health and /metrics ----
status=$(curl -sS --max-time 10 -o "$work/health" -w '%{http_code}' "http://127.0.0.1:$main_port/health")
check "/health: 200 {\"status\":\"ok\"} (got $status)" sh -c "test $status = 200 && grep -q '\"status\":\"ok\"' '$work/health'"
curl -sS --max-time 10 -D "$work/metrics.headers" "http://127.0.0.1:$main_port/metrics" >"$work/metrics.txt"
check "/metrics: Prometheus' content type" grep -qi '^content-type: text/plain; version=0.0.4' "$work/metrics.headers"
python3 - "$work/metrics.txt" <<'EOF'
import re, sys
text = open(sys.argv[1]).read()
sample = re.compile(r'^([a-z_]+)(\{[a-z]+="[^"]*"\})? (-?[0-9.e+-]+|\+Inf|NaN)$')
types, values = {}, {}
for line in text.splitlines():
    if line.startswith("# TYPE "):
        _, _, name, kind = line.split(" ")
        assert name not in types, line
        types[name] = kind
    elif not line.startswith("# HELP "):
        m = sample.match(line)
        assert m, "not Prometheus text: " + line
        base = re.sub(r"_(bucket|sum|count)$", "", m.group(1)) if m.group(1) not in types else m.group(1)
        assert base in types, "no TYPE before " + line
        values[m.group(1) + (m.group(2) or "")] = float(m.group(3))
for name in ["lsserve_requests_total", "lsserve_request_duration_seconds", "lsserve_queue_sentences",
             "lsserve_batch_sentences", "lsserve_target_tokens_per_second", "lsserve_target_tokens_total"]:
    assert name in types, name + " missing"
buckets = [v for k, v in values.items() if k.startswith("lsserve_request_duration_seconds_bucket")]
assert buckets == sorted(buckets) and buckets[-1] == values["lsserve_request_duration_seconds_count"], buckets
assert values['lsserve_requests_total{code="200"}'] >= 10 and values['lsserve_requests_total{code="400"}'] >= 4
assert values['lsserve_requests_total{code="413"}'] >= 1 and values["lsserve_target_tokens_total"] > 0
EOF
check "/metrics: every line Prometheus text, with requests, latency, queue depth, batch sizes and tokens/s" test $? -eq 0

# ---- a full queue: 503 with Retry-After ----
start_server small --max-queue 4 --mini-batch 2 --request-timeout 60
python3 - "$port" <<'EOF' >"$work/full.log" 2>&1
import http.client, json, sys, threading
port = int(sys.argv[1])
body = json.dumps({"text": ["Das Haus ist sehr alt und sehr schön. " * 2] * 4})
results = []
def client():
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    c.request("POST", "/translate", body, {"Content-Type": "application/json"})
    r = c.getresponse()
    results.append((r.status, r.getheader("Retry-After"), json.loads(r.read())))
threads = [threading.Thread(target=client) for _ in range(16)]
for t in threads: t.start()
for t in threads: t.join(120)
codes = sorted(s for s, _, _ in results)
print("statuses:", codes)
ok = len(results) == 16 and 200 in codes and 503 in codes
ok = ok and all(s == 200 or (s == 503 and h and "--max-queue 4" in a["error"]) for s, h, a in results)
ok = ok and all(len(a["translations"]) == 4 and None not in a["translations"] for s, _, a in results if s == 200)
sys.exit(0 if ok else 1)
EOF
status=$?
check "16 concurrent requests of 4 sentences into --max-queue 4: 200s and 503s with Retry-After ($(tail -n 1 "$work/full.log"))" \
  test "$status" -eq 0

# ---- without --max-length-crop, an over-long sentence gets an error of its own ----
python3 -c 'import json; print(json.dumps({"text": ["Guten Tag.", "Haus " * 60, "Danke."]}))' >"$work/long.json"
status=$(post "$port" "$work/long.json" "$work/long.answer")
check "an over-long sentence: 200 for the request (got $status)" test "$status" = 200
check "... null for it, with an error naming --max-length" \
  test "$(json_field "$work/long.answer" '[t is None for t in a["translations"]] == [False, True, False] and
    a["errors"][0]["index"] == 1 and "--max-length 40" in a["errors"][0]["error"]')" = True

# ---- the time-out: what is not translated in time is answered with an error ----
start_server timeout --request-timeout 0.001
request "$work/lines.de" >"$work/all.json"
status=$(post "$port" "$work/all.json" "$work/timeout.answer")
check "a request past --request-timeout: 200 (got $status)" test "$status" = 200
check "... with an error, and null for the sentences not translated" \
  test "$(json_field "$work/timeout.answer" '"timed out" in a["error"] and None in a["translations"] and
    len(a["translations"]) == 24 and any("--request-timeout" in e["error"] for e in a["errors"])')" = True
kill -9 "$pid"
wait "$pid" 2>/dev/null

# ---- SIGTERM drains: the requests in flight are answered, later ones are refused, exit 0 ----
request "$work/lines.de" '{"beam-size": 4}' >"$work/drain.json"
answered_before=$(curl -sS --max-time 10 "http://127.0.0.1:$main_port/metrics" |
  sed -n 's/^lsserve_requests_total{code="200"} //p')
drain_clients=()
for i in 1 2 3 4; do
  ( post "$main_port" "$work/slow.json" "$work/drain$i.answer" >"$work/drain$i.status" ) &
  drain_clients+=($!)
done
# Until all four are accepted: in flight now, or already answered (they take about 2 s together on one core; a
# loaded machine may finish the first before the last is sent). Twice in a row, since an answer is counted a moment
# before its request leaves the in-flight count. At most about 30 s.
seen=0
for _ in $(seq 1 1500); do
  accepted=$(curl -sS --max-time 10 "http://127.0.0.1:$main_port/metrics" | awk -v before="${answered_before:-0}" '
    /^lsserve_requests_in_flight / { n += $2 } /^lsserve_requests_total\{code="200"\} / { n += $2 - before }
    END { print n + 0 }')
  if [ "$accepted" -ge 4 ]; then seen=$((seen + 1)); else seen=0; fi
  [ "$seen" -ge 2 ] && break
  sleep 0.02
done
kill -TERM "$main_pid"
sleep 0.2
late=$(post "$main_port" "$work/drain.json" "$work/late.answer")
check "after SIGTERM a new request is refused (503 or connection refused; got $late)" \
  sh -c "test '$late' = 503 || test '$late' = 000"
waited=0
while kill -0 "$main_pid" 2>/dev/null && [ $waited -lt 600 ]; do sleep 0.1; waited=$((waited + 1)); done
if kill -0 "$main_pid" 2>/dev/null; then
  echo "FAIL: lsserve still running 60 s after SIGTERM"; failures=$((failures + 1)); kill -9 "$main_pid"
fi
wait "$main_pid"
code=$?
check "SIGTERM: lsserve exits 0 (got $code)" test "$code" -eq 0
wait "${drain_clients[@]}"
check "... after answering the four requests in flight (statuses $(cat "$work"/drain?.status))" \
  test "$(cat "$work"/drain?.status)" = 200200200200
for i in 1 2 3 4; do
  check "... request $i in full: 60 translations, none missing" \
    test "$(json_field "$work/drain$i.answer" 'len(a["translations"]) == 60 and None not in a["translations"]')" = True
done
check "... and it said it drained" grep -q 'drained; exiting' "$work/main.log"

echo "$failures failed"
[ "$failures" -eq 0 ]
