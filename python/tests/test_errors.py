"""Errors become Python exceptions carrying the C API's message; bad values are refused by name."""

import pytest
from aerie import LLM, AerieError, InvalidArgumentError, LoadError, SamplingParams, UnsupportedError
from conftest import MODEL, PROMPTS


def test_a_missing_model_folder(tmp_path):
    with pytest.raises(LoadError, match="/nonexistent/model") as error:
        LLM(model="/nonexistent/model")
    assert isinstance(error.value, OSError) and error.value.status == "load"
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text('{"architectures": ["LlamaForCausalLM"], ')
    with pytest.raises(LoadError, match="config.json"):
        LLM(model=str(broken))


def test_a_bad_draft(tmp_path):
    with pytest.raises(LoadError, match="aerie_engine_options.draft"):
        LLM(model=MODEL, draft="/nonexistent/head")
    with pytest.raises(LoadError, match="aerie_engine_options.draft"):
        LLM(model=MODEL, draft=str(tmp_path))  # a folder with no head in it
    with pytest.raises(ValueError, match="num_speculative_tokens needs a draft"):
        LLM(model=MODEL, num_speculative_tokens=2)
    with pytest.raises(ValueError, match="num_speculative_tokens must be"):
        LLM(model=MODEL, draft="ngram", num_speculative_tokens=0)
    with pytest.raises(ValueError, match="speculative_config: aerie does not take"):
        LLM(model=MODEL, speculative_config={"method": "ngram", "prompt_lookup_max": 4})


@pytest.mark.parametrize("field, value", [
    ("temperature", -1.0), ("temperature", float("nan")), ("top_p", 0.0), ("top_p", 1.5), ("top_k", -2),
    ("min_p", 1.5), ("max_tokens", 0), ("n", 0), ("n", 129), ("seed", -1), ("seed", 2**64), ("logprobs", -1),
    ("stop_token_ids", [-3]), ("stop", [3]), ("ignore_eos", "yes"),
])
def test_sampling_values_out_of_range(field, value):
    with pytest.raises(ValueError, match=field):
        SamplingParams(**{field: value})


def test_engine_refusals_carry_the_c_api_message(llm):
    greedy = SamplingParams(temperature=0, max_tokens=4)
    with pytest.raises(InvalidArgumentError, match="outside the vocabulary"):
        llm.generate({"prompt_token_ids": [1, 10**6]}, greedy)
    with pytest.raises(InvalidArgumentError, match=r"aerie_request.stop_token_ids\[0\]"):
        llm.generate(PROMPTS[0], SamplingParams(stop_token_ids=[10**6]))
    with pytest.raises(InvalidArgumentError, match="aerie_request.logprobs"):
        llm.generate(PROMPTS[0], SamplingParams(logprobs=10**6))
    with pytest.raises(InvalidArgumentError, match="prompt_token_ids is empty"):
        llm.generate({"prompt_token_ids": []}, greedy)
    with pytest.raises(UnsupportedError, match="chat template") as error:
        llm.chat([{"role": "user", "content": "Hello!"}], greedy)
    assert isinstance(error.value, AerieError) and "has none" in str(error.value)
    # A value changed after construction is checked again when used.
    params = SamplingParams(temperature=0)
    params.top_p = 2.0
    with pytest.raises(ValueError, match="top_p"):
        llm.generate(PROMPTS[0], params)
    with pytest.raises(ValueError, match="2 given for 3 prompts"):
        llm.generate(PROMPTS, [greedy, greedy])
    with pytest.raises(ValueError, match="weights must be one of"):
        LLM(model=MODEL, weights="int3")


def test_max_model_len_and_a_closed_engine():
    with LLM(model=MODEL, max_model_len=8, n_threads=2) as short:
        with pytest.raises(InvalidArgumentError, match="max length is 8"):
            short.generate(PROMPTS[2] * 3, SamplingParams(temperature=0))
        out = short.generate(PROMPTS[1], SamplingParams(temperature=0, max_tokens=100))[0].outputs[0]
        assert out.finish_reason == "length" and len(out.token_ids) == 8 - 4  # 4 prompt tokens
    with pytest.raises(InvalidArgumentError, match="the engine is closed"):
        short.generate(PROMPTS[1], SamplingParams(temperature=0))
