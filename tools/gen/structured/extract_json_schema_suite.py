#!/usr/bin/env python3
"""Copies the cases of the official JSON-Schema-Test-Suite (github.com/json-schema-org/JSON-Schema-Test-Suite,
MIT licence) that tests/grammar/json_schema_suite_test.cpp runs into tests/data/json_schema_suite/, with the
suite's LICENSE and a SOURCE.json naming the commit they came from.

    python3 tools/gen/structured/extract_json_schema_suite.py [--suite GIT_DIR] [--out DIR]

GIT_DIR is a clone of the suite (a bare one is enough: files are read with `git show <commit>:<path>`).
Taken: draft2020-12 (every file, and optional/ with format/), plus the draft7 and draft4 files whose
keywords are spelt differently in those drafts (tuple items, additionalItems, dependencies, definitions,
boolean exclusiveMaximum/exclusiveMinimum, $ref beside siblings). Left out: the files that need the suite's
remote documents served over the network (refRemote, vocabulary, cross-draft, format-assertion), and the
older drafts' optional/ files. The files are copied byte for byte.
"""
import argparse
import json
import pathlib
import subprocess

DEFAULT_SUITE = "/work/.mirror/json-schema-org+JSON-Schema-Test-Suite/repo"
REMOTE = {"refRemote.json", "vocabulary.json", "cross-draft.json", "format-assertion.json"}
OLDER_SPELLINGS = {
    "draft7": ["additionalItems", "definitions", "dependencies", "items", "ref"],
    "draft4": ["additionalItems", "definitions", "dependencies", "items", "maximum", "minimum", "ref"],
}


def git(suite, *args):
    return subprocess.run(["git", "-C", suite, *args], check=True, capture_output=True).stdout


def wanted(path):
    parts = path.split("/")  # tests/<draft>/[optional/[format/]]<name>.json
    if not path.endswith(".json") or parts[-1] in REMOTE:
        return False
    draft, name = parts[1], parts[-1][:-len(".json")]
    if draft == "draft2020-12":
        return True
    return len(parts) == 3 and name in OLDER_SPELLINGS.get(draft, [])


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--suite", default=DEFAULT_SUITE)
    parser.add_argument("--out", default=str(pathlib.Path(__file__).resolve().parents[3] /
                                             "tests/data/json_schema_suite"))
    args = parser.parse_args()
    commit = git(args.suite, "rev-parse", "HEAD").decode().strip()
    out = pathlib.Path(args.out)
    paths = [p for p in git(args.suite, "ls-tree", "-r", "--name-only", commit, "tests").decode().split("\n")
             if p and wanted(p)]
    for path in paths:
        target = out / path[len("tests/"):]
        target.parent.mkdir(parents=True, exist_ok=True)
        data = git(args.suite, "show", f"{commit}:{path}")
        json.loads(data)  # every case file is JSON
        target.write_bytes(data)
    (out / "LICENSE").write_bytes(git(args.suite, "show", f"{commit}:LICENSE"))
    source = {"repository": "https://github.com/json-schema-org/JSON-Schema-Test-Suite", "commit": commit,
              "licence": "MIT (LICENSE beside this file)",
              "files": sorted(p[len("tests/"):] for p in paths)}
    (out / "SOURCE.json").write_text(json.dumps(source, indent=1) + "\n")
    print(f"extract_json_schema_suite.py: {len(paths)} files from {commit} into {out}")


if __name__ == "__main__":
    main()
