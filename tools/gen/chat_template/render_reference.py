#!/usr/bin/python3
"""Renders the chat-template goldens with python3-jinja2, configured the way Hugging Face's
apply_chat_template configures it:
  cases.json -> expected.json                        (Llama and DeepSeek templates)
  snippets.json -> snippets_expected.json            (one Jinja feature each)
  publisher_cases.json -> publisher_expected.json    (templates/: Qwen, Mistral, Gemma, Phi, Granite, GLM,
                                                      Kimi, gpt-oss, Command-R, Hermes, Functionary, SmolLM ...)

Run with Debian's interpreter (it has python3-jinja2): /usr/bin/python3 tools/gen/chat_template/render_reference.py
Each expected entry is {"output": text} or {"error": message} when the template raises.
"""
import datetime
import json
import pathlib

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

DATA = pathlib.Path(__file__).resolve().parents[3] / "tests" / "data" / "chat_template"
# strftime_now is pinned so the goldens do not depend on the day they were made; the C++ test passes the
# same instant (2024-07-26 00:00 UTC).
FIXED_NOW = datetime.datetime(2024, 7, 26)


class RaisedByTemplate(jinja2.exceptions.TemplateError):
    """What the template's own raise_exception(message) throws."""


def raise_exception(message):
    raise RaisedByTemplate(message)


def error_text(error):
    """"Type: message", with raise_exception's errors named as the jinja2 TemplateError they are."""
    name = "TemplateError" if isinstance(error, RaisedByTemplate) else type(error).__name__
    return f"{name}: {error}"


def tojson(value, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    # Hugging Face replaces jinja2's tojson: no HTML escaping, non-ASCII kept, keys in given order.
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


class AssistantTracker(Extension):
    """Hugging Face's {% generation %}...{% endgeneration %} block, parsed as transformers does: a call block
    whose caller renders the body (in a scope of its own). transformers also records where the output
    went, for an assistant-token mask; a prompt needs only the text."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return nodes.CallBlock(self.call_method("_generation_support"), [], [], body).set_lineno(lineno)

    def _generation_support(self, caller):
        return caller()


def make_environment():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[AssistantTracker, loopcontrols])
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
        return {"error": error_text(error)}


def describe_error(error):
    """{"raised": message} for the template's raise_exception, else {"error": "Type: message"}."""
    if isinstance(error, RaisedByTemplate):
        return {"raised": str(error)}
    return {"error": f"{type(error).__name__}: {error}"}


def publisher_cases(spec):
    """Every (template, variant, conversation, add_generation_prompt) of publisher_cases.json, in order.
    Variant "default" covers every conversation; the others list theirs. Tools are given exactly for the
    conversations named in tool_conversations."""
    for template_name, template in spec["templates"].items():
        variants = {"default": {"extra": {}, "conversations": list(spec["conversations"])}}
        variants.update(template["variants"])
        for variant_name, variant in variants.items():
            for conversation in variant["conversations"]:
                for add_generation_prompt in (False, True):
                    yield {
                        "name": f"{template_name}/{variant_name}/{conversation}/{'gen' if add_generation_prompt else 'nogen'}",
                        "template": template_name,
                        "variant": variant_name,
                        "conversation": conversation,
                        "add_generation_prompt": add_generation_prompt,
                    }


def publisher_context(spec, case):
    """The variables transformers' apply_chat_template passes: messages, tools, documents (None when not
    given), add_generation_prompt, the special tokens the tokenizer has (a missing one is not passed at
    all), then the template kwargs (chat_template_kwargs in vLLM's API)."""
    template = spec["templates"][case["template"]]
    context = {
        "messages": spec["conversations"][case["conversation"]],
        "tools": spec["tools"] if case["conversation"] in spec["tool_conversations"] else None,
        "documents": None,
        "add_generation_prompt": case["add_generation_prompt"],
    }
    for token in ("bos_token", "eos_token"):
        if template[token] is not None:
            context[token] = template[token]
    context.update(template["default_extra"])
    if case["variant"] != "default":
        context.update(template["variants"][case["variant"]]["extra"])
    return context


def render_publisher_cases(env):
    spec = json.loads((DATA / "publisher_cases.json").read_text(encoding="utf-8"))
    templates = {name: env.from_string((DATA / t["file"]).read_text(encoding="utf-8"))
                 for name, t in spec["templates"].items()}
    results = []
    for case in publisher_cases(spec):
        try:
            case["output"] = templates[case["template"]].render(**publisher_context(spec, case))
        except Exception as error:  # the C++ side must fail the same way
            case.update(describe_error(error))
        results.append(case)
    (DATA / "publisher_expected.json").write_text(json.dumps(results, ensure_ascii=False, indent=0) + "\n",
                                                  encoding="utf-8")
    n_failing = sum(1 for r in results if "output" not in r)
    print(f"{len(results)} publisher cases ({n_failing} raise an error) -> {DATA / 'publisher_expected.json'}")


def main():
    spec = json.loads((DATA / "cases.json").read_text(encoding="utf-8"))
    env = make_environment()
    templates = {name: env.from_string((DATA / file).read_text(encoding="utf-8"))
                 for name, file in spec["templates"].items()}
    expected = {case["name"]: render_case(env, templates, spec, case) for case in spec["cases"]}
    (DATA / "expected.json").write_text(json.dumps(expected, ensure_ascii=False, indent=0) + "\n", encoding="utf-8")
    n_errors = sum(1 for e in expected.values() if "error" in e)
    print(f"{len(expected)} cases ({n_errors} raise an error) -> {DATA / 'expected.json'}")
    # Small templates that pin down one Jinja feature each (tests/jinja/engine_test.cpp).
    snippets = json.loads((DATA / "snippets.json").read_text(encoding="utf-8"))
    snippet_expected = {}
    for snippet in snippets:
        try:
            snippet_expected[snippet["name"]] = {"output": env.from_string(snippet["template"]).render(**snippet["context"])}
        except Exception as error:
            snippet_expected[snippet["name"]] = {"error": error_text(error)}
    (DATA / "snippets_expected.json").write_text(json.dumps(snippet_expected, ensure_ascii=False, indent=1) + "\n",
                                                 encoding="utf-8")
    print(f"{len(snippets)} snippets -> {DATA / 'snippets_expected.json'}")
    render_publisher_cases(env)


if __name__ == "__main__":
    main()
