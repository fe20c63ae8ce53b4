"""LoRA adapters through vLLM's interface (LLM(enable_lora=True), lora_request=LoRARequest(...)): greedy tokens
are the float64 reference's (tests/data/lora, tools/gen/make_lora_goldens.sh), adapters and the base model mix
in one call, an adapter is loaded when first named, and bad requests are refused by name."""

import json

import pytest
from aerie import LLM, LoadError, LoRARequest, SamplingParams, UnsupportedError
from conftest import SOURCE

DATA = SOURCE / "tests" / "data"
TARGET = str(DATA / "llama" / "bf16_gqa_rope_scaled_tied")  # the model the adapters were made for
SQL = LoRARequest("sql", 1, str(DATA / "lora" / "bf16_all_modules"))
OTHER = LoRARequest("other", 2, str(DATA / "lora" / "f32_rslora_some_modules"))
# The reference's first 4 "sql" tokens have top-1 margins of 0.36 and up (they hold under bf16-rounded
# activations and cache); of "other" only the first has a margin that wide (0.29; the second's is 0.03).
GREEDY = SamplingParams(temperature=0, max_tokens=4, ignore_eos=True)


def golden(request: LoRARequest):
    return json.loads((DATA / "lora" / request.lora_path.rsplit("/", 1)[-1] / "golden.json").read_text())


PROMPT = {"prompt_token_ids": golden(SQL)["ids"]}


@pytest.fixture(scope="module")
def lora_llm():
    with LLM(model=TARGET, n_threads=2, enable_lora=True, max_loras=2) as engine:
        yield engine


def tokens(outputs):
    return [out.outputs[0].token_ids for out in outputs]


def test_adapters_and_the_base_model_in_one_call(lora_llm):
    outputs = lora_llm.generate([PROMPT] * 4, GREEDY, lora_request=[SQL, None, OTHER, None])
    sql, base, other, base_again = tokens(outputs)
    assert sql == golden(SQL)["greedy"][:4]
    assert other[0] == golden(OTHER)["greedy"][0]
    assert base == base_again and base != sql
    # One request per call, and one LoRARequest shared by every prompt: the same tokens.
    assert tokens(lora_llm.generate(PROMPT, GREEDY)) == [base]
    assert tokens(lora_llm.generate([PROMPT, PROMPT], GREEDY, lora_request=SQL)) == [sql, sql]
    streamed = [t for delta in lora_llm.generate_stream(PROMPT, GREEDY, lora_request=SQL)
                for t in delta.outputs[0].token_ids]
    assert streamed == sql


def test_refusals(lora_llm):
    with pytest.raises(ValueError, match="its id or name is already"):
        lora_llm.generate(PROMPT, GREEDY, lora_request=LoRARequest("sql", 3, OTHER.lora_path))
    with pytest.raises(ValueError, match="its id or name is already"):
        lora_llm.generate(PROMPT, GREEDY, lora_request=LoRARequest("renamed", 1, SQL.lora_path))
    with pytest.raises(ValueError, match="2 given for 1 prompts"):
        lora_llm.generate(PROMPT, GREEDY, lora_request=[SQL, None])
    with pytest.raises(ValueError, match="lora_int_id must be an integer >= 1"):
        LoRARequest("x", 0, SQL.lora_path)
    lora_llm.generate([PROMPT] * 2, GREEDY, lora_request=[SQL, OTHER])  # both held now: max_loras=2
    with pytest.raises(ValueError, match="beyond max_loras=2"):
        lora_llm.generate(PROMPT, GREEDY, lora_request=LoRARequest("third", 3, SQL.lora_path))
    with pytest.raises(ValueError, match="lora_request needs LLM"):
        with LLM(model=TARGET, n_threads=2) as plain:
            plain.generate(PROMPT, GREEDY, lora_request=SQL)


def test_a_folder_that_does_not_load_leaves_the_engine_as_it_was(tmp_path):
    with LLM(model=TARGET, n_threads=2, enable_lora=True, max_lora_rank=2) as engine:
        base = tokens(engine.generate(PROMPT, GREEDY))
        with pytest.raises(LoadError, match="rank r = 4 is outside"):  # "sql" has rank 4
            engine.generate(PROMPT, GREEDY, lora_request=SQL)
        with pytest.raises(LoadError, match=str(tmp_path)):
            engine.generate(PROMPT, GREEDY, lora_request=LoRARequest("empty", 5, str(tmp_path)))
        assert tokens(engine.generate(PROMPT, GREEDY)) == base


def test_a_new_adapter_waits_for_open_streams():
    with LLM(model=TARGET, n_threads=2, enable_lora=True) as engine:
        stream = engine.generate_stream(PROMPT, SamplingParams(temperature=0, max_tokens=8, ignore_eos=True))
        next(stream)
        with pytest.raises(UnsupportedError, match="a stream is still being read"):
            engine.generate(PROMPT, GREEDY, lora_request=SQL)
        rest = list(stream)
        assert rest and rest[-1].finished
        assert tokens(engine.generate(PROMPT, GREEDY, lora_request=SQL))[0] == golden(SQL)["greedy"][:4]
