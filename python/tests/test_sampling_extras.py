"""Penalties, logit bias and structured outputs in SamplingParams (the C API's version-3 request fields):
penalised output is `aerie generate`'s with the same flags, a bias of +100 takes over, a JSON schema holds."""

import json

import pytest
from aerie import SamplingParams, StructuredOutputsParams
from conftest import MODEL, PROMPTS, run_aerie


def test_penalties_equal_the_command_line(llm, spec_llm):
    flags = ("--repetition-penalty", "1.3", "--presence-penalty", "0.5", "--frequency-penalty", "0.4")
    want = run_aerie("generate", "--model", MODEL, "--draft", "none", "--prompt", PROMPTS[0], "--max-tokens", "24",
                     "--temperature", "0", "--ignore-eos", *flags)["ids"]
    plain = llm.generate(PROMPTS[0], SamplingParams(temperature=0, max_tokens=24, ignore_eos=True))
    params = SamplingParams(temperature=0, max_tokens=24, ignore_eos=True, repetition_penalty=1.3,
                            presence_penalty=0.5, frequency_penalty=0.4)
    for engine in (llm, spec_llm):  # speculation verifies against the penalised target: the same tokens
        assert engine.generate(PROMPTS[0], params)[0].outputs[0].token_ids == want
    assert plain[0].outputs[0].token_ids != want


def test_logit_bias_takes_over(llm):
    plain = llm.generate(PROMPTS[1], SamplingParams(temperature=0, max_tokens=4, ignore_eos=True))[0]
    first = plain.outputs[0].token_ids[0]
    out = llm.generate(PROMPTS[1], SamplingParams(temperature=0, max_tokens=4, ignore_eos=True,
                                                  logit_bias={first: -100, 77: 100}))[0]
    assert out.outputs[0].token_ids == [77] * 4
    out = llm.generate(PROMPTS[1], SamplingParams(temperature=0, max_tokens=4, ignore_eos=True,
                                                  logit_bias={first: -100}))[0]
    assert out.outputs[0].token_ids[0] != first


def test_a_json_schema_holds(llm):
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"],
              "additionalProperties": False}
    for structured in (StructuredOutputsParams(json=schema), StructuredOutputsParams(json=json.dumps(schema))):
        out = llm.generate(PROMPTS, SamplingParams(temperature=0.8, seed=3, max_tokens=32,
                                                   structured_outputs=structured))
        for o in out:
            assert o.outputs[0].finish_reason == "stop"
            assert json.loads(o.outputs[0].text) in ({"ok": True}, {"ok": False})
    out = llm.generate(PROMPTS[0], SamplingParams(temperature=0, max_tokens=64,
                                                  structured_outputs=StructuredOutputsParams(json_object=True)))
    text = out[0].outputs[0].text
    assert text.startswith("{")  # an object, complete when the constraint ended it
    if out[0].outputs[0].finish_reason == "stop":
        assert isinstance(json.loads(text), dict)


@pytest.mark.parametrize("field, value", [
    ("presence_penalty", 2.5), ("frequency_penalty", -3), ("repetition_penalty", 0), ("repetition_penalty", 11),
    ("logit_bias", {5: 101}), ("logit_bias", {-1: 1}), ("logit_bias", [1, 2]), ("structured_outputs", "{}"),
])
def test_values_out_of_range(field, value):
    with pytest.raises(ValueError, match=field.split("_")[0]):
        SamplingParams(**{field: value})


def test_refused_by_the_engine(llm):
    from aerie import InvalidArgumentError
    with pytest.raises(InvalidArgumentError, match="logit_bias_ids.0. = 999999 is outside the vocabulary"):
        llm.generate(PROMPTS[0], SamplingParams(logit_bias={999999: 1}))
    with pytest.raises(InvalidArgumentError, match="json_schema"):
        llm.generate(PROMPTS[0], SamplingParams(structured_outputs=StructuredOutputsParams(json="{not json")))
    with pytest.raises(ValueError, match="exactly one of json"):
        StructuredOutputsParams()
