#!/usr/bin/env python3
"""Load client of lsserve, Python's standard library only (http.client, threads, processes).

Sends POST /translate requests of --min-sentences to --max-sentences lines drawn from --input and reports
throughput, latency percentiles and errors, with a RESULT line for bench tables. Modes:
  closed loop (default)  --clients threads each send requests back to back, for --requests in all or --duration s
  open loop (--rate R)   R requests a second in all, at fixed intervals, --clients threads sending them; latency
                         counts from when a request was due (a late send counts as waiting, as a user would)
  --once                 every --input line exactly once, in order, cut into requests of the given sizes (the same
                         sentences as an offline lstranslate run of the file); --save-output writes the answers in
                         order, one a line, for comparison with lstranslate's output
  --malformed F          that fraction of requests is broken (truncated JSON, invalid UTF-8, an unknown field, a
                         number for a sentence); each must get 400, every other one 200 and, with --expect (the
                         reference translation of each --input line), exactly the reference translations
  --pid P                samples the server's resident memory (VmRSS) every --rss-interval s: start (after the
                         first --warmup of the run), peak, end
Target tokens/s comes from the server's own counter (lsserve_target_tokens_total in GET /metrics), read before and
after the run.
Valid requests that went wrong are told apart: lost (no 200, or a translation missing) and answered with translations
other than --expect's (differ: on a GPU in 16 bits another batch can flip a near tie, docs/serving.md); latency and
throughput count every answered request.

  python3 bench/serve_load.py --url http://127.0.0.1:8080 --input test.de --clients 64 --duration 20
  python3 bench/serve_load.py --url ... --input test.de --expect test.lstranslate.en --requests 100000 \\
      --malformed 0.01 --min-sentences 1 --max-sentences 4 --pid $(pgrep -n lsserve)
"""
import argparse
import http.client
import json
import multiprocessing
import os
import random
import re
import sys
import threading
import time
import urllib.parse


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", default="http://127.0.0.1:8080")
    p.add_argument("--input", required=True, help="sentences, one a line")
    p.add_argument("--expect", help="reference translations of the --input lines (lstranslate's output)")
    p.add_argument("--clients", type=int, default=64, help="concurrent connections (threads) in all")
    p.add_argument("--processes", type=int, default=1, help="processes the clients are spread over")
    p.add_argument("--min-sentences", type=int, default=1)
    p.add_argument("--max-sentences", type=int, default=16)
    p.add_argument("--requests", type=int, default=0, help="requests in all (0: run for --duration)")
    p.add_argument("--duration", type=float, default=20.0, help="seconds, when --requests is 0")
    p.add_argument("--max-seconds", type=float, default=0.0,
                   help="with --requests: stop sending after this many seconds even if requests remain (0: never)")
    p.add_argument("--rate", type=float, default=0.0, help="open loop: requests a second in all (0: closed loop)")
    p.add_argument("--once", action="store_true", help="send every --input line once, in order")
    p.add_argument("--save-output", help="with --once: write the translations in input order here")
    p.add_argument("--malformed", type=float, default=0.0, help="fraction of broken requests (each must get 400)")
    p.add_argument("--options", default="{}", help="JSON object of request options, e.g. '{\"beam-size\": 4}'")
    p.add_argument("--pid", type=int, default=0, help="the server's process id: sample its VmRSS")
    p.add_argument("--rss-interval", type=float, default=1.0)
    p.add_argument("--warmup", type=float, default=0.1, help="fraction of the run before RSS 'start' is taken")
    p.add_argument("--rss-log", help="write each VmRSS sample here: seconds from the start, MiB, recorded steps "
                   "held, made")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds a request may take before it counts as lost")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--label", default="serve", help="case name in the RESULT line")
    p.add_argument("--dump", help="write one line per request here: sent (s from the start), latency (ms), "
                   "sentences, status")
    return p.parse_args()


def read_lines(path):
    with open(path, encoding="utf-8") as f:
        return f.read().split("\n")[:-1] if os.path.getsize(path) else []


def get(url, path, timeout=30):
    u = urllib.parse.urlsplit(url)
    c = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=timeout)
    try:
        c.request("GET", path)
        r = c.getresponse()
        return r.status, r.read().decode("utf-8", "replace")
    finally:
        c.close()


def metric(text, name):
    m = re.search(r"^%s (\S+)$" % re.escape(name), text, re.M)
    return float(m.group(1)) if m else float("nan")


def malformed_body(rng, sentences):
    kind = rng.choice(["json", "utf8", "field", "type"])
    if kind == "json":
        return kind, json.dumps({"text": sentences}).encode()[:-3]
    if kind == "utf8":
        good = json.dumps({"text": sentences}, ensure_ascii=False).encode()
        cut = rng.randrange(10, len(good) - 2) if len(good) > 12 else len(good) // 2
        return kind, good[:cut] + b"\xff" + good[cut:]
    if kind == "field":
        return kind, json.dumps({"text": sentences, "beam": 4}).encode()
    return kind, json.dumps({"text": sentences[:-1] + [12345]}).encode()


class Client:
    """One keep-alive connection; reconnects (and resends once) when the server closed it between requests."""

    def __init__(self, url, timeout):
        u = urllib.parse.urlsplit(url)
        self.host, self.port, self.timeout = u.hostname, u.port or 80, timeout
        self.conn = None
        self.retries = 0

    def post(self, body):
        for attempt in (0, 1):
            if self.conn is None:
                self.conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
            try:
                self.conn.request("POST", "/translate", body, {"Content-Type": "application/json"})
                r = self.conn.getresponse()
                data = r.read()
                if r.getheader("Connection", "").lower() == "close":
                    self.conn.close()
                    self.conn = None
                return r.status, data
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError) as e:
                self.conn.close()
                self.conn = None
                if attempt == 1:
                    return -1, str(e).encode()
                self.retries += 1
            except (OSError, http.client.HTTPException) as e:
                self.conn.close()
                self.conn = None
                return -1, str(e).encode()
        return -1, b"unreachable"


def run_process(index, args, plan, start_at, lines, expected, options):
    """Runs this process' share of the clients; returns its records."""
    threads_here = [t for t in range(args.clients) if t % args.processes == index]
    records, lock = [], threading.Lock()
    next_job = [0]
    deadline = start_at + args.duration if not plan and args.requests == 0 else float("inf")
    stop_at = start_at + args.max_seconds if args.max_seconds > 0 else float("inf")

    def take():
        with lock:
            i = next_job[0]
            next_job[0] += 1
            return i

    def worker(thread_id):
        rng = random.Random(args.seed * 1000003 + thread_id)
        client = Client(args.url, args.timeout)
        # Every thread of every process starts together, once the processes are up.
        time.sleep(max(0.0, start_at - time.time()))
        while True:
            if plan:  # --once or --requests or --rate: a global job list, this process takes every P-th
                j = take() * args.processes + index
                if j >= len(plan) or time.time() >= stop_at:
                    break
                first, count, due, broken = plan[j]
            else:  # closed loop for --duration
                if time.time() >= deadline:
                    break
                count = rng.randint(args.min_sentences, args.max_sentences)
                first, due, broken = rng.randrange(len(lines)), None, rng.random() < args.malformed
            if due is not None and args.rate > 0:
                wait = start_at + due - time.time()
                if wait > 0:
                    time.sleep(wait)
            chosen = [lines[(first + k) % len(lines)] for k in range(count)]
            ids = [(first + k) % len(lines) for k in range(count)]
            if broken:
                kind, body = malformed_body(rng, chosen)
            else:
                kind, body = "valid", json.dumps(dict(options, text=chosen), ensure_ascii=False).encode()
            sent = start_at + due if (due is not None and args.rate > 0) else time.time()
            status, data = client.post(body)
            done = time.time()
            # A valid request is answered when it gets 200 with a translation for each sentence; its answer then
            # differs when some translation is not --expect's line (in 16 bits another batch can flip a near tie).
            ok, answered, translations, differ, detail = False, False, None, 0, ""
            if kind == "valid":
                if status == 200:
                    try:
                        translations = json.loads(data)["translations"]
                        answered = len(translations) == count and None not in translations
                    except (ValueError, KeyError, TypeError):
                        answered = False
                if answered and expected is not None:
                    pairs = [(expected[i], t, i) for t, i in zip(translations, ids) if t != expected[i]]
                    differ = len(pairs)
                    if pairs:
                        line, want, got = pairs[0][2] + 1, pairs[0][0][:150], pairs[0][1][:150]
                        detail = "line %d: expected %r, got %r" % (line, want, got)
                ok = answered and differ == 0
            else:
                ok = status == 400
            if not ok and not detail:
                detail = data[:300].decode("utf-8", "replace")
            rec = (kind, status, ok, done - sent, count, done, first if args.once else -1,
                   translations if args.once else None, detail, sent, differ, answered)
            with lock:
                records.append(rec)
        with lock:
            records.append(("retries", client.retries, True, 0, 0, 0, -1, None, "", 0, 0, True))

    threads = [threading.Thread(target=worker, args=(t,)) for t in threads_here]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return records


def make_plan(args, lines):
    """(first line, sentences, due second, malformed) per request; empty for a closed loop with --duration."""
    rng = random.Random(args.seed)
    plan = []
    if args.once:
        first = 0
        while first < len(lines):
            count = min(rng.randint(args.min_sentences, args.max_sentences), len(lines) - first)
            plan.append((first, count, None, False))
            first += count
        return plan
    total = args.requests if args.requests > 0 else (int(args.rate * args.duration) if args.rate > 0 else 0)
    for i in range(total):
        due = i / args.rate if args.rate > 0 else None
        plan.append((rng.randrange(len(lines)), rng.randint(args.min_sentences, args.max_sentences), due,
                     rng.random() < args.malformed))
    return plan


def percentile(values, p):
    if not values:
        return float("nan")
    values = sorted(values)
    k = min(len(values) - 1, max(0, int(round(p / 100.0 * len(values) + 0.5)) - 1))
    return values[k]


def main():
    args = parse_args()
    lines = read_lines(args.input)
    if not lines:
        sys.exit("serve_load: --input has no lines")
    expected = read_lines(args.expect) if args.expect else None
    if expected is not None and len(expected) != len(lines):
        sys.exit("serve_load: --expect has %d lines, --input %d" % (len(expected), len(lines)))
    options = json.loads(args.options)
    plan = make_plan(args, lines)

    status, before = get(args.url, "/metrics")
    if status != 200:
        sys.exit("serve_load: GET /metrics answered %d" % status)

    rss, stop_rss = [], threading.Event()

    def sample_rss():
        # VmRSS beside the decoders' recorded steps (CUDA graphs: each held one costs memory), to tell growth that
        # follows new recordings (bounded) from growth that does not.
        path = "/proc/%d/status" % args.pid
        while not stop_rss.is_set():
            try:
                with open(path) as f:
                    kib = int(re.search(r"^VmRSS:\s+(\d+) kB", f.read(), re.M).group(1))
            except (OSError, AttributeError):
                break
            try:
                code, text = get(args.url, "/metrics")
            except (OSError, http.client.HTTPException):
                code, text = 0, ""
            held = metric(text, "lsserve_recorded_steps") if code == 200 else float("nan")
            made = metric(text, "lsserve_step_recordings_total") if code == 200 else float("nan")
            rss.append((time.time(), kib / 1024.0, held, made))
            stop_rss.wait(args.rss_interval)

    sampler = threading.Thread(target=sample_rss, daemon=True) if args.pid else None
    # Time for the processes to start (they fork when the pool is made) before the first request is due.
    start_at = time.time() + (1.0 if args.processes > 1 else 0.2)
    if sampler:
        sampler.start()
    if args.processes > 1:
        with multiprocessing.Pool(args.processes) as pool:
            parts = pool.starmap(run_process, [(i, args, plan, start_at, lines, expected, options)
                                               for i in range(args.processes)])
    else:
        parts = [run_process(0, args, plan, start_at, lines, expected, options)]
    end_at = time.time()
    stop_rss.set()
    status, after = get(args.url, "/metrics")

    records = [r for part in parts for r in part if r[0] != "retries"]
    retries = sum(r[1] for part in parts for r in part if r[0] == "retries")
    # From the first request sent (or due, open loop) to the last answer.
    wall = max(r[5] for r in records) - min(r[9] for r in records) if records else float("nan")
    valid = [r for r in records if r[0] == "valid"]
    broken = [r for r in records if r[0] != "valid"]
    latencies = [r[3] * 1000 for r in valid if r[11]]  # every answered request, its translations as expected or not
    sentences = sum(r[4] for r in valid if r[11])
    wrong = [r for r in valid if not r[2]]
    lost = [r for r in valid if not r[11]]  # no 200, or a translation missing
    differ = [r for r in valid if r[11] and r[10] > 0]  # answered, but not --expect's translations
    wrong_broken = [r for r in broken if not r[2]]
    tokens = metric(after, "lsserve_target_tokens_total") - metric(before, "lsserve_target_tokens_total")
    batches = metric(after, "lsserve_batches_total") - metric(before, "lsserve_batches_total")
    batch_sentences = (metric(after, "lsserve_batch_sentences_sum") -
                       metric(before, "lsserve_batch_sentences_sum"))

    if args.dump:
        with open(args.dump, "w") as f:
            for r in sorted(records, key=lambda r: r[9]):
                f.write("%.4f\t%.2f\t%d\t%d\n" % (r[9] - start_at, r[3] * 1000, r[4], r[1]))
    if args.once and args.save_output:
        answers = {}
        for r in valid:
            for k, t in enumerate(r[7] or []):
                answers[r[6] + k] = t
        with open(args.save_output, "w", encoding="utf-8") as f:
            for i in range(len(lines)):
                t = answers.get(i)
                f.write(("\n".join(t) if isinstance(t, list) else (t if t is not None else "<missing>")) + "\n")

    print("serve_load %s: %d requests (%d valid, %d malformed) in %.2f s, %d client threads, %d processes%s" % (
        args.label, len(records), len(valid), len(broken), wall, args.clients, args.processes,
        ", open loop at %.1f requests/s" % args.rate if args.rate > 0 else ""))
    print("  valid answered correctly: %d of %d (%d wrong: %d lost, %d answered with %d sentences other than "
          "--expect's); malformed refused with 400: %d of %d; resent after a closed keep-alive: %d" % (
              len(valid) - len(wrong), len(valid), len(wrong), len(lost), len(differ), sum(r[10] for r in differ),
              len(broken) - len(wrong_broken), len(broken), retries))
    for r in (lost + wrong_broken)[:5] + differ[:5]:
        print("  e.g. %s status %s: %s" % (r[0], r[1], r[8]))
    print("  throughput: %.1f requests/s, %.1f sentences/s, %.0f target tokens/s (server's count); %.1f sentences "
          "a batch" % (len(valid) / wall, sentences / wall, tokens / wall, batch_sentences / batches if batches else 0))
    print("  latency (ms): p50 %.1f  p90 %.1f  p99 %.1f  max %.1f" % (
        percentile(latencies, 50), percentile(latencies, 90), percentile(latencies, 99),
        max(latencies) if latencies else float("nan")))
    if args.rss_log:
        with open(args.rss_log, "w") as f:
            for t, mib, held, made in rss:
                f.write("%.1f\t%.1f\t%g\t%g\n" % (t - start_at, mib, held, made))
    rss_text = ""
    if rss:
        def after(fraction):  # the first sample at or after that fraction of the run
            due = start_at + fraction * (end_at - start_at)
            return next((r for r in rss if r[0] >= due), rss[-1])
        warm, half, end = after(args.warmup), after(0.5), rss[-1]
        print("  server VmRSS (MiB): first %.1f, after warm-up %.1f, half-way %.1f, peak %.1f, end %.1f (growth after "
              "warm-up %+.1f, in the second half %+.1f; %d samples)" % (
                  rss[0][1], warm[1], half[1], max(r[1] for r in rss), end[1], end[1] - warm[1], end[1] - half[1],
                  len(rss)))
        print("  recorded steps held (made): after warm-up %g (%g), half-way %g (%g), end %g (%g)" % (
            warm[2], warm[3], half[2], half[3], end[2], end[3]))
        rss_text = (" rss_first_mib=%.1f rss_warm_mib=%.1f rss_half_mib=%.1f rss_peak_mib=%.1f rss_end_mib=%.1f "
                    "graphs_warm=%g graphs_half=%g graphs_end=%g recordings_warm=%g recordings_half=%g "
                    "recordings_end=%g" % (rss[0][1], warm[1], half[1], max(r[1] for r in rss), end[1], warm[2],
                                           half[2], end[2], warm[3], half[3], end[3]))
    print("RESULT bench=serve case=%s clients=%d rate=%g requests=%d valid=%d wrong=%d lost=%d differ=%d "
          "differ_sentences=%d malformed=%d malformed_wrong=%d wall_s=%.3f req_s=%.1f sent_s=%.1f tgt_tok_s=%.0f "
          "batch_mean=%.1f p50_ms=%.1f p90_ms=%.1f p99_ms=%.1f%s" % (
              args.label, args.clients, args.rate, len(records), len(valid), len(wrong), len(lost), len(differ),
              sum(r[10] for r in differ), len(broken),
              len(wrong_broken), wall, len(valid) / wall, sentences / wall, tokens / wall,
              batch_sentences / batches if batches else 0, percentile(latencies, 50), percentile(latencies, 90),
              percentile(latencies, 99), rss_text))
    sys.exit(1 if wrong or wrong_broken else 0)


if __name__ == "__main__":
    main()
