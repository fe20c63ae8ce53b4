#!/usr/bin/python3
"""Renders every case of tests/data/chat_template/cases.json with python3-jinja2, configured the way
Hugging Face's apply_chat_template configures it, and writes tests/data/chat_template/expected.json.

Run with Debian's interpreter (it has python3-jinja2): /usr/bin/python3 tools/chat_template/render_reference.py
Each expected entry is {"output": text} or {"error": message} when the template raises.
"""
import datetime
import json
import pathlib

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

DATA = pathlib.Path(__file__).resolve().parents[2] / "tests" / "data" / "chat_template"
# strftime_now is pinned so the goldens do not depend on the day they were made; the C++ test passes the
# same instant (2024-07-26 00:00 UTC).
FIXED_NOW = datetime.datetime(2024, 7, 26)


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(value, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    # Hugging Face replaces jinja2's tojson: no HTML escaping, non-ASCII kept, keys in given order.
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def make_environment():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: FIXED_NOW.strftime(fmt)
    return env


def render_case(env, templates, spec, case):
    context = {
        "messages": spec["conversations"][case["conversation"]],
        "tools": spec["tools"] if case["tools"] else None,  # HF passes tools=None when not given
        "add_generation_prompt": case["add_generation_prompt"],
        "bos_token": case["bos_token"],
        "eos_token": case["eos_token"],
    }
    context.update(case["extra"])
    try:
        return {"output": templates[case["template"]].render(**context)}
    except Exception as error:  # every template failure is a golden too: the C++ side must fail as well
        return {"error": f"{type(error).__name__}: {error}"}


def main():
    spec = json.loads((DATA / "cases.json").read_text(encoding="utf-8"))
    env = make_environment()
    templates = {name: env.from_string((DATA / file).read_text(encoding="utf-8"))
                 for name, file in spec["templates"].items()}
    expected = {case["name"]: render_case(env, templates, spec, case) for case in spec["cases"]}
    (DATA / "expected.json").write_text(json.dumps(expected, ensure_ascii=False, indent=0) + "\n", encoding="utf-8")
    n_errors = sum(1 for e in expected.values() if "error" in e)
    print(f"{len(expected)} cases ({n_errors} raise an error) -> {DATA / 'expected.json'}")
    # Small templates that pin down one Jinja feature each (tests/tokenizer/jinja_engine_test.cpp).
    snippets = json.loads((DATA / "snippets.json").read_text(encoding="utf-8"))
    snippet_expected = {}
    for snippet in snippets:
        try:
            snippet_expected[snippet["name"]] = {"output": env.from_string(snippet["template"]).render(**snippet["context"])}
        except Exception as error:
            snippet_expected[snippet["name"]] = {"error": f"{type(error).__name__}: {error}"}
    (DATA / "snippets_expected.json").write_text(json.dumps(snippet_expected, ensure_ascii=False, indent=1) + "\n",
                                                 encoding="utf-8")
    print(f"{len(snippets)} snippets -> {DATA / 'snippets_expected.json'}")


if __name__ == "__main__":
    main()
