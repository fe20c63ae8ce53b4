#!/usr/bin/env python3
"""Soak test of `aerie serve` under a hostile mix of clients (issue 17).

Starts `build/aerie serve` on loopback (by default the shipped model, found the way `aerie generate`
finds it, with its EAGLE-3 head for speculative decoding) and for --duration seconds runs:

  * --clients streaming clients (completions, and chat when the model has a chat template; temperature > 0,
    so that the drafts are verified by rejection sampling); a share of them hang up mid-stream on purpose;
  * --slowloris connections that trickle a request head one byte a second (the server must cut them with
    408 at its header deadline, and they must never delay the others);
  * a client that sends bodies beyond --max-request-bytes, by Content-Length and chunked (413 at once).

Then it prints the requests served, the outcomes by class, the latency of the well-behaved streams
(p50/p99), checks through /metrics that nothing is left in flight and no KV block is held, stops the
server with SIGTERM, and exits non-zero on a server crash, a 4xx other than 429 or a 5xx for a
well-behaved client, a broken stream, a hung client, a slow client not cut, or anything left over. Python 3 standard library only.

  python3 tools/soak_serve.py                 # 600 s
  python3 tools/soak_serve.py --duration 30   # a short run
  python3 tools/soak_serve.py --duration 20 --serve-args "--spec-tree-top-k 4 --spec-tree-depth 3"   # trees
  python3 tools/soak_serve.py --duration 20 --draft ngram --serve-args --deterministic              # n-gram

CI (.ci/run) runs all three: EAGLE-3 chains, EAGLE-2 trees, and n-gram drafts in a deterministic server, each
sampled (rejection sampling over the drafts) with clients hanging up mid-stream.
"""
import argparse
import http.client
import json
import os
import random
import re
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_MODEL = "aerie-tiny-llama"
DEFAULT_DRAFT = "aerie-tiny-llama-eagle3"
PROMPTS = ["Tell me a story about a dragon.", "Once upon a time", "The weather today is", "List three colours.",
           "Why is the sky blue?", "Write a short poem about the sea.", "hello", "Count from one to ten."]


def shipped_models_dir(aerie):
    """The models/ folder the way src/cli/default_model.cpp looks for it."""
    candidates = []
    if os.environ.get("AERIE_MODELS_DIR"):
        candidates.append(os.environ["AERIE_MODELS_DIR"])
    exe_dir = os.path.dirname(os.path.abspath(aerie))
    candidates += [os.path.join(exe_dir, "models"), os.path.join(os.path.dirname(exe_dir), "models"),
                   os.path.join(ROOT, "models")]
    for d in candidates:
        if os.path.isfile(os.path.join(d, DEFAULT_MODEL, "config.json")):
            return d
    sys.exit("soak: the shipped model %s was not found (looked in %s); pass --model" % (DEFAULT_MODEL, candidates))


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.outcomes = Counter()
        self.latencies = []  # seconds, completed well-behaved streams
        self.first_token = []
        self.examples = {}  # outcome -> the first response body seen with it

    def add(self, outcome, latency=None, first_token=None, example=None):
        with self.lock:
            self.outcomes[outcome] += 1
            if example is not None:
                self.examples.setdefault(outcome, example)
            if latency is not None:
                self.latencies.append(latency)
            if first_token is not None:
                self.first_token.append(first_token)


def percentile(values, p):
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100.0 * (len(values) - 1))))]


def start_server(args):
    cmd = [args.aerie, "serve", "--model", args.model, "--host", "127.0.0.1", "--port", "0", "--quiet",
           "--http-threads", str(args.http_threads), "--max-request-bytes", str(args.max_request_bytes),
           "--header-timeout", str(args.header_timeout), "--body-timeout", "10", "--max-length", "512"]
    if args.draft != "none":
        cmd += ["--draft", args.draft, "--num-speculative-tokens", "2"]
    cmd += shlex.split(args.serve_args)
    print("soak: " + " ".join(cmd), flush=True)
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    log = []
    port = None
    while port is None:
        line = proc.stderr.readline()
        if not line:
            sys.exit("soak: the server exited before listening:\n" + "".join(log))
        log.append(line)
        m = re.search(r"listening on http://[^:]+:(\d+)", line)
        if m:
            port = int(m.group(1))
    tail = []  # the server's last lines, for a post-mortem

    def drain():
        for line in proc.stderr:
            tail.append(line)
            del tail[:-200]
    threading.Thread(target=drain, daemon=True).start()
    deadline = time.time() + 300
    while time.time() < deadline:
        if proc.poll() is not None:
            sys.exit("soak: the server exited while loading:\n" + "".join(log + tail))
        try:
            if get(port, "/health")[0] == 200:
                return proc, port, tail
        except OSError:
            pass
        time.sleep(0.2)
    proc.kill()
    sys.exit("soak: the server was not ready within 300 s")


def get(port, path, timeout=10):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", path)
        r = conn.getresponse()
        return r.status, r.read().decode()
    finally:
        conn.close()


def metrics(port):
    values = {}
    for line in get(port, "/metrics")[1].splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            values[name] = float(value)
    return values


def has_chat_template(port):
    """Whether /v1/chat/completions works (the shipped tiny model has no chat template: completions only)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}
        conn.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
        r = conn.getresponse()
        r.read()
        return r.status == 200
    finally:
        conn.close()


def streaming_client(port, stop, stats, rng, max_tokens, hangup_share, chat_share):
    """Streams until `stop`; a share of the streams hang up after a few events on purpose."""
    while not stop.is_set():
        chat = rng.random() < chat_share
        body = {"max_tokens": rng.randint(4, max_tokens), "temperature": rng.uniform(0.6, 1.0), "stream": True,
                "top_p": rng.choice([1.0, 0.95, 0.9]), "seed": rng.randrange(1 << 30)}
        if chat:
            body["messages"] = [{"role": "user", "content": rng.choice(PROMPTS)}]
        else:
            body["prompt"] = rng.choice(PROMPTS)
        hang_up_after = rng.randint(1, 4) if rng.random() < hangup_share else None
        path = "/v1/chat/completions" if chat else "/v1/completions"
        start = time.time()
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        try:
            conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
            r = conn.getresponse()
            if r.status != 200:
                stats.add("http_%d" % r.status, example=r.read()[:300])
                if r.status == 429:
                    time.sleep(0.1)
                continue
            events, first, done = 0, None, False
            for raw in r:
                line = raw.decode().strip()
                if not line.startswith("data: "):
                    continue
                if line == "data: [DONE]":
                    done = True
                    break
                payload = json.loads(line[6:])
                if "error" in payload:
                    stats.add("stream_error:" + str(payload["error"].get("code")))
                    break
                events += 1
                if first is None:
                    first = time.time() - start
                if hang_up_after is not None and events >= hang_up_after:
                    break
            if hang_up_after is not None and not done:
                stats.add("hung_up_on_purpose")
            elif done:
                stats.add("ok", time.time() - start, first)
            else:
                stats.add("broken_stream")
        except (socket.timeout, TimeoutError):
            stats.add("client_timeout")
        except (OSError, http.client.HTTPException, ValueError) as e:
            stats.add("transport:" + type(e).__name__)
        finally:
            conn.close()


def slowloris(port, stop, stats, count, header_timeout):
    """`count` connections trickling a request head; each cut by the server is replaced by a new one."""
    conns = {}
    while not stop.is_set():
        while len(conns) < count:
            try:
                s = socket.create_connection(("127.0.0.1", port), timeout=5)
                s.setblocking(False)
                conns[s] = [time.time(), b"GET /v1/models HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"s" * 4096]
            except OSError:
                stats.add("slowloris_connect_failed")
                break
        for s, state in list(conns.items()):
            opened, rest = state
            try:
                answer = s.recv(4096)
                if answer.startswith(b"HTTP/1.1 408") or not answer:
                    stats.add("slowloris_cut_408" if answer else "slowloris_closed")
                    s.close()
                    del conns[s]
                    continue
            except BlockingIOError:
                pass
            except OSError:
                stats.add("slowloris_reset")
                s.close()
                del conns[s]
                continue
            if time.time() - opened > header_timeout + 5:
                stats.add("slowloris_not_cut")  # the deadline did not act
                s.close()
                del conns[s]
                continue
            try:
                s.send(rest[:1])
                state[1] = rest[1:] or rest
            except OSError:
                pass
        time.sleep(1.0)
    for s in conns:
        s.close()


def oversize(port, stop, stats, limit, rng):
    """Bodies beyond the limit, by Content-Length and chunked: each must get 413 before it is all sent."""
    while not stop.is_set():
        chunked = rng.random() < 0.5
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        try:
            head = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            head += "Transfer-Encoding: chunked\r\n\r\n" if chunked else "Content-Length: %d\r\n\r\n" % (limit * 4)
            s.sendall(head.encode())
            sent, answer = 0, b""
            s.setblocking(False)
            while sent < limit * 4:
                piece = b"a" * 65536
                if chunked:
                    piece = b"10000\r\n" + piece + b"\r\n"
                try:
                    answer = s.recv(65536)
                    break
                except BlockingIOError:
                    pass
                try:
                    s.setblocking(True)
                    s.settimeout(10)
                    s.sendall(piece)
                    s.setblocking(False)
                except OSError:
                    break
                sent += 65536
            s.settimeout(10)
            s.setblocking(True)
            while b"\r\n" not in answer:
                more = s.recv(65536)
                if not more:
                    break
                answer += more
            if answer.startswith(b"HTTP/1.1 413"):
                stats.add("oversize_413")
            else:
                stats.add("oversize_unexpected:" + answer[:12].decode(errors="replace"))
        except OSError as e:
            stats.add("oversize_transport:" + type(e).__name__)
        finally:
            s.close()
        time.sleep(0.5)


def wait_until_idle(port, timeout):
    """Polls /metrics until nothing is in flight and no KV block is held; returns the last values."""
    deadline = time.time() + timeout
    keys = ["aerie_requests_in_flight", "aerie_requests_running", "aerie_requests_waiting", "aerie_kv_blocks_in_use"]
    while True:
        m = metrics(port)
        if all(m.get(k, -1) == 0 for k in keys) or time.time() > deadline:
            return m, {k: m.get(k) for k in keys}
        time.sleep(0.5)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--aerie", default=os.path.join(ROOT, "build", "aerie"))
    p.add_argument("--model", help="model folder (default: the shipped %s)" % DEFAULT_MODEL)
    p.add_argument("--draft", help="EAGLE head folder, ngram, or none (default: the shipped head with the shipped model)")
    p.add_argument("--serve-args", default="", help="more `aerie serve` flags, one string (e.g. tree options)")
    p.add_argument("--clients", type=int, default=64, help="streaming clients (default 64)")
    p.add_argument("--duration", type=float, default=600, help="seconds of load (default 600)")
    p.add_argument("--slowloris", type=int, default=64, help="slow-head connections (default 64)")
    p.add_argument("--hangup-share", type=float, default=0.2, help="share of streams dropped mid-way (default 0.2)")
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--http-threads", type=int, default=0, help="server workers (default: clients + 8)")
    p.add_argument("--max-request-bytes", type=int, default=1 << 20)
    p.add_argument("--header-timeout", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    if not args.model:
        models = shipped_models_dir(args.aerie)
        args.model = os.path.join(models, DEFAULT_MODEL)
        if args.draft is None and os.path.isfile(os.path.join(models, DEFAULT_DRAFT, "config.json")):
            args.draft = os.path.join(models, DEFAULT_DRAFT)
    args.draft = args.draft or "none"
    args.http_threads = args.http_threads or args.clients + 8

    proc, port, server_log = start_server(args)
    chat_share = 0.5 if has_chat_template(port) else 0.0
    stats, stop = Stats(), threading.Event()
    rng = random.Random(args.seed)
    threads = [threading.Thread(target=streaming_client,
                                args=(port, stop, stats, random.Random(rng.random()), args.max_tokens,
                                      args.hangup_share, chat_share)) for _ in range(args.clients)]
    threads.append(threading.Thread(target=slowloris, args=(port, stop, stats, args.slowloris, args.header_timeout)))
    threads.append(threading.Thread(target=oversize, args=(port, stop, stats, args.max_request_bytes,
                                                           random.Random(rng.random()))))
    started = time.time()
    for t in threads:
        t.start()
    crashed = False
    while time.time() - started < args.duration:
        time.sleep(min(5.0, args.duration))
        if proc.poll() is not None:
            crashed = True
            break
        with stats.lock:
            print("soak: %4.0f s  ok %d  %s" % (time.time() - started, stats.outcomes["ok"],
                                                 dict(stats.outcomes.most_common(6))), flush=True)
    stop.set()
    for t in threads:
        t.join(timeout=180)
    hung = sum(t.is_alive() for t in threads)
    elapsed = time.time() - started

    failures = []
    if crashed or proc.poll() is not None:
        failures.append("the server exited during the run (code %s)" % proc.returncode)
    else:
        m, left = wait_until_idle(port, timeout=30)
        if any(v != 0 for v in left.values()):
            failures.append("not back to empty after the run: %s" % left)
        print("soak: after the run: %s" % left)
        print("soak: engine: %d tokens generated, %d requests cancelled, spec acceptance %.3f, mean length %.2f" % (
            m.get("aerie_generation_tokens_total", 0), m.get("aerie_requests_cancelled_total", 0),
            m.get("aerie_spec_decode_acceptance_rate", 0), m.get("aerie_spec_decode_mean_acceptance_length", 0)))
        if get(port, "/health")[0] != 200:
            failures.append("/health is not 200 after the run")
    o = stats.outcomes
    print("soak: %.0f s, %d streams served (%.1f/s), %d dropped mid-way on purpose" % (
        elapsed, o["ok"], o["ok"] / elapsed, o["hung_up_on_purpose"]))
    print("soak: outcomes by class:")
    for name, n in sorted(o.items()):
        print("  %-40s %d%s" % (name, n, "  e.g. %r" % stats.examples[name] if name in stats.examples else ""))
    print("soak: well-behaved streams: latency p50 %.3f s, p99 %.3f s; first token p50 %.3f s, p99 %.3f s" % (
        percentile(stats.latencies, 50), percentile(stats.latencies, 99),
        percentile(stats.first_token, 50), percentile(stats.first_token, 99)))

    bad = [k for k in o if k.startswith(("http_4", "http_5", "broken_stream", "stream_error", "transport", "client_timeout",
                                         "slowloris_not_cut", "oversize_unexpected", "oversize_transport"))]
    bad = [k for k in bad if k != "http_429"]  # overload is a legitimate answer
    if bad:
        failures.append("unexpected outcomes: %s" % {k: o[k] for k in bad})
    if hung:
        failures.append("%d client threads did not finish" % hung)
    if o["ok"] == 0:
        failures.append("no stream completed")
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            if proc.wait(timeout=60) != 0:
                failures.append("the server exited with %d on SIGTERM" % proc.returncode)
        except subprocess.TimeoutExpired:
            proc.kill()
            failures.append("the server did not stop within 60 s of SIGTERM")
    if failures:
        print("soak: FAILED\n  " + "\n  ".join(failures) + "\nsoak: the server's last lines:\n" + "".join(server_log[-30:]))
        return 1
    print("soak: passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
