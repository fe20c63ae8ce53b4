#!/usr/bin/env python3
"""Bytes and tokens of structured outputs, compact (the default) against any whitespace (issue 41).

Starts `build/aerie serve` on loopback with the shipped tiny model (ChatML template lent, as in
docs/serving.md), asks for each schema below once per seed at temperature 1, with and without
structured_outputs.disable_any_whitespace = false, and prints per mode the mean bytes and completion tokens
of the finished outputs (finish_reason stop: an output cut at max_tokens says nothing about its length) and
the share of bytes that are whitespace outside strings. Python 3 standard library only.

  python3 tools/measure_json_whitespace.py              # 16 seeds
  python3 tools/measure_json_whitespace.py --seeds 4    # quicker
"""
import argparse
import http.client
import json
import socket
import subprocess
import sys
import time

SCHEMAS = {
    "json_object": None,
    "person": {"type": "object", "properties": {
        "name": {"type": "string", "maxLength": 20}, "age": {"type": "integer", "minimum": 0, "maximum": 150},
        "email": {"type": ["string", "null"], "maxLength": 20},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 8}, "maxItems": 4}},
        "required": ["name", "age", "email", "tags"], "additionalProperties": False},
    "report": {"type": "object", "properties": {
        "unit": {"enum": ["celsius", "fahrenheit"]}, "windy": {"type": "boolean"}, "note": {"type": "null"},
        "days": {"type": "array", "items": {"enum": ["mon", "tue", "wed"]}, "minItems": 1, "maxItems": 3}},
        "required": ["unit", "windy", "note", "days"], "additionalProperties": False},
    "points": {"type": "array", "items": {"type": "object", "properties": {
        "x": {"type": "integer", "minimum": -99, "maximum": 99}, "y": {"type": "integer", "minimum": -99, "maximum": 99}},
        "required": ["x", "y"], "additionalProperties": False}, "minItems": 2, "maxItems": 4},
}


def layout_bytes(text):
    """Whitespace outside strings."""
    n, in_string, escaped = 0, False, False
    for c in text:
        if in_string:
            in_string, escaped = escaped or c != '"', not escaped and c == "\\"
        else:
            in_string = c == '"'
            n += c in " \t\n\r"
    return n


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(port, body):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    conn.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
    reply = json.loads(conn.getresponse().read())
    conn.close()
    return reply


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--aerie", default="build/aerie")
    parser.add_argument("--model", default="models/aerie-tiny-llama")
    parser.add_argument("--template", default="tests/data/chat_template/templates/HuggingFaceTB-SmolLM2-135M-Instruct.jinja")
    parser.add_argument("--seeds", type=int, default=16)
    parser.add_argument("--max-tokens", type=int, default=256)
    args = parser.parse_args()
    port = free_port()
    server = subprocess.Popen([args.aerie, "serve", "--model", args.model, "--port", str(port),
                               "--chat-template", args.template], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(600):  # until /health answers 200 (the model is loaded)
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
                conn.request("GET", "/health")
                if conn.getresponse().status == 200:
                    break
            except OSError:
                pass
            time.sleep(0.1)
        totals = {}
        for name, schema in SCHEMAS.items():
            fmt = {"type": "json_object"} if schema is None else \
                {"type": "json_schema", "json_schema": {"name": name, "schema": schema}}
            for mode in ("compact", "any"):
                for seed in range(args.seeds):
                    body = {"messages": [{"role": "user", "content": f"Give me a {name} as JSON."}],
                            "response_format": fmt, "temperature": 1.0, "seed": seed, "max_tokens": args.max_tokens}
                    if mode == "any":
                        body["structured_outputs"] = {"disable_any_whitespace": False}
                    choice = post(port, body)
                    if "choices" not in choice:
                        raise SystemExit(f"{name} {mode}: {choice}")
                    reply = choice["choices"][0]
                    if reply["finish_reason"] != "stop":
                        continue
                    text = reply["message"]["content"]
                    json.loads(text)
                    row = totals.setdefault((name, mode), [0, 0, 0, 0])
                    row[0] += 1
                    row[1] += len(text.encode())
                    row[2] += choice["usage"]["completion_tokens"]
                    row[3] += layout_bytes(text)
        print(f"{'schema':12} {'mode':8} {'done':>5} {'bytes':>8} {'tokens':>8} {'layout':>7}")
        for mode in ("compact", "any"):
            all_rows = [0, 0, 0, 0]
            for name in SCHEMAS:
                n, b, t, w = totals.get((name, mode), [0, 0, 0, 0])
                all_rows = [x + y for x, y in zip(all_rows, [n, b, t, w])]
                if n:
                    print(f"{name:12} {mode:8} {n:5} {b / n:8.1f} {t / n:8.1f} {w / max(b, 1):7.1%}")
            n, b, t, w = all_rows
            if n:
                print(f"{'(all)':12} {mode:8} {n:5} {b / n:8.1f} {t / n:8.1f} {w / max(b, 1):7.1%}")
    finally:
        server.terminate()
        server.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
