#!/usr/bin/env python3
"""The string instances of the JSON-Schema-Test-Suite's draft2020-12 optional/format tests for the formats
aerie enforces (src/grammar/json_formats.h), as tests/data/regex/formats.json: {format: [[text, valid,
description], ...]}.

    python3 tools/gen/regex/extract_formats.py /path/to/JSON-Schema-Test-Suite > tests/data/regex/formats.json

The argument is a checkout, or a bare git directory (read with `git show HEAD:...`).
"""
import json
import os
import subprocess
import sys

FORMATS = ["date", "time", "date-time", "duration", "email", "hostname", "ipv4", "ipv6", "uuid", "uri",
           "uri-reference"]


def read(root, path):
    if os.path.exists(os.path.join(root, path)):
        with open(os.path.join(root, path), encoding="utf-8") as f:
            return f.read()
    return subprocess.run(["git", "-C", root, "show", "HEAD:" + path], check=True, capture_output=True,
                          text=True).stdout


def main():
    root = sys.argv[1]
    out = {}
    for name in FORMATS:
        groups = json.loads(read(root, "tests/draft2020-12/optional/format/%s.json" % name))
        out[name] = [[t["data"], t["valid"], t["description"]] for g in groups for t in g["tests"]
                     if isinstance(t["data"], str)]
    json.dump(out, sys.stdout, ensure_ascii=False, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
