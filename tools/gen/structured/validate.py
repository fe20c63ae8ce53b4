#!/usr/bin/env python3
"""Checks JSON documents against JSON Schemas with the `jsonschema` package (Debian python3-jsonschema), the
independent reference for tests/grammar/json_schema_test.cpp.

    python3 tools/gen/structured/validate.py CASES.jsonl

Each line of CASES.jsonl is {"label": str, "schema": <schema>, "instance": <document text>, "expected": bool}.
A document must parse as strict JSON (NaN/Infinity refused); `expected` says whether it must validate
(under the draft the schema's $schema names, Draft 2020-12 without one; formats not asserted). Prints every disagreement; exit status 0 when there is none, 1 when
there is, 77 when jsonschema is not installed (the test then reports itself skipped).
"""
import json
import sys

try:
    import jsonschema
except ImportError:
    print("validate.py: the jsonschema package is not installed (apt-get install python3-jsonschema)")
    sys.exit(77)


def reject_constant(name):
    raise ValueError("non-finite constant " + name)


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    failures = checked = 0
    with open(sys.argv[1], encoding="utf-8") as f:
        for line_number, line in enumerate(f, 1):
            case = json.loads(line)
            cls = jsonschema.validators.validator_for(case["schema"], default=jsonschema.Draft202012Validator)
            validator = cls(case["schema"])
            try:
                instance = json.loads(case["instance"], parse_constant=reject_constant)
                errors = [e.message for e in validator.iter_errors(instance)]
            except ValueError as e:
                errors = ["not JSON: %s" % e]
            checked += 1
            if (not errors) != case["expected"]:
                failures += 1
                print("line %d (%s): expected %s, got %s: %r" % (
                    line_number, case["label"], "valid" if case["expected"] else "invalid",
                    "valid" if not errors else "; ".join(errors), case["instance"]))
    print("validate.py: %d documents, %d disagreements" % (checked, failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
