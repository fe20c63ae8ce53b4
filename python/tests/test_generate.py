"""generate() against the `aerie` command, speculation, seeded sampling, stops, n > 1 and chat."""

import json

from aerie import LLM, SamplingParams
from conftest import CHAT_TOKENIZER, DEEPSEEK, MODEL, PROMPTS, run_aerie

GREEDY = SamplingParams(temperature=0, max_tokens=24)


def test_greedy_equals_the_command(llm):
    outputs = llm.generate(PROMPTS, GREEDY)
    assert [o.prompt for o in outputs] == PROMPTS
    for prompt, out in zip(PROMPTS, outputs):
        want = run_aerie("generate", "--model", MODEL, "--draft", "none", "--prompt", prompt, "--max-tokens", "24",
                         "--temperature", "0")
        completion = out.outputs[0]
        assert out.finished and len(out.outputs) == 1
        assert out.prompt_token_ids == want["prompt_ids"]
        assert completion.token_ids == want["ids"]
        assert completion.text == want["text"]
        assert completion.finish_reason == want["finish_reason"]
        assert completion.logprobs is None and completion.cumulative_logprob is None
        assert out.metrics.prompt_tokens == len(want["prompt_ids"])
        assert out.metrics.generated_tokens == len(want["ids"])
    # The same prompt as ids: the same tokens.
    by_ids = llm.generate({"prompt_token_ids": outputs[0].prompt_token_ids}, GREEDY)[0]
    assert by_ids.prompt is None and by_ids.outputs[0].token_ids == outputs[0].outputs[0].token_ids


def test_speculative_greedy_equals_plain(llm, spec_llm):
    plain = llm.generate(PROMPTS, GREEDY)
    drafted = spec_llm.generate(PROMPTS, GREEDY)
    for p, d in zip(plain, drafted):
        assert d.outputs[0].token_ids == p.outputs[0].token_ids
        assert d.outputs[0].text == p.outputs[0].text
    metrics = [d.metrics for d in drafted]
    assert sum(m.draft_tokens for m in metrics) > 0 and sum(m.accepted_tokens for m in metrics) > 0
    assert all(m.accepted_tokens <= m.draft_tokens for m in metrics)
    assert all(0 <= m.acceptance_rate <= 1 for m in metrics if m.draft_tokens)
    with LLM(model=MODEL, speculative_config={"method": "ngram", "num_speculative_tokens": 3}, n_threads=2) as ngram:
        assert [o.outputs[0].token_ids for o in ngram.generate(PROMPTS, GREEDY)] == \
               [p.outputs[0].token_ids for p in plain]


def test_mtp_greedy_equals_plain():
    with LLM(model=DEEPSEEK, n_threads=2) as plain, LLM(model=DEEPSEEK, draft="mtp", n_threads=2) as mtp:
        want = [o.outputs[0].token_ids for o in plain.generate(PROMPTS, GREEDY)]
        drafted = mtp.generate(PROMPTS, GREEDY)
        assert [o.outputs[0].token_ids for o in drafted] == want
        assert sum(o.metrics.accepted_tokens for o in drafted) > 0


def test_seeded_sampling_is_reproducible(llm):
    params = SamplingParams(temperature=0.9, seed=1234, max_tokens=24)
    first = llm.generate(PROMPTS[0], params)[0].outputs[0].token_ids
    assert llm.generate(PROMPTS[0], params)[0].outputs[0].token_ids == first
    want = run_aerie("generate", "--model", MODEL, "--draft", "none", "--prompt", PROMPTS[0], "--max-tokens", "24",
                     "--temperature", "0.9", "--top-p", "1", "--top-k", "0", "--min-p", "0", "--seed", "1234")
    assert first == want["ids"]
    others = [llm.generate(PROMPTS[0], SamplingParams(temperature=0.9, seed=s, max_tokens=24))[0].outputs[0].token_ids
              for s in (1, 2, 3)]
    assert any(o != first for o in others)
    # n completions of one prompt: seeds seed, seed + 1, ...; the first is the single run's.
    many = llm.generate(PROMPTS[0], SamplingParams(n=3, temperature=0.9, seed=1234, max_tokens=24))[0]
    assert [c.index for c in many.outputs] == [0, 1, 2]
    assert many.outputs[0].token_ids == first
    assert many.outputs[1].token_ids == llm.generate(
        PROMPTS[0], SamplingParams(temperature=0.9, seed=1235, max_tokens=24))[0].outputs[0].token_ids
    # Without a seed: LLM(seed=...) makes the run reproducible.
    unseeded = SamplingParams(temperature=0.9, max_tokens=24)
    runs = []
    for _ in range(2):
        with LLM(model=MODEL, seed=7, n_threads=2) as seeded:
            runs.append([o.outputs[0].token_ids for o in seeded.generate(PROMPTS, unseeded)])
    assert runs[0] == runs[1]


def test_stops(llm):
    whole = llm.generate(PROMPTS[0], GREEDY)[0].outputs[0]
    stop = whole.text[len(whole.text) // 2:][:4]
    cut = llm.generate(PROMPTS[0], SamplingParams(temperature=0, max_tokens=24, stop=["never here", stop]))
    completion = cut[0].outputs[0]
    assert completion.text == whole.text[:whole.text.index(stop)]
    assert completion.finish_reason == "stop" and completion.stop_reason == stop
    token = whole.token_ids[5]
    by_token = llm.generate(PROMPTS[0], SamplingParams(temperature=0, max_tokens=24, stop_token_ids=[token]))
    completion = by_token[0].outputs[0]
    assert completion.token_ids == whole.token_ids[:whole.token_ids.index(token) + 1]
    assert completion.finish_reason == "stop" and completion.stop_reason == token
    assert whole.finish_reason == "length" and whole.stop_reason is None


def test_per_prompt_params_and_many_prompts(llm):
    params = [SamplingParams(temperature=0, max_tokens=n) for n in (3, 5, 7)]
    assert [len(o.outputs[0].token_ids) for o in llm.generate(PROMPTS, params)] == [3, 5, 7]
    # More prompts than the engine takes at once (max_in_flight 4): read the oldest to make room.
    with LLM(model=MODEL, max_in_flight=4, n_threads=2) as small:
        outs = small.generate([PROMPTS[1]] * 10, SamplingParams(temperature=0, max_tokens=4))
        assert len({tuple(o.outputs[0].token_ids) for o in outs}) == 1 and len(outs) == 10


def test_chat_equals_the_command(tmp_path):
    conversation = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Tell me a story."}]
    path = tmp_path / "conversation.json"
    path.write_text(json.dumps(conversation))
    want = run_aerie("generate", "--model", MODEL, "--tokenizer", str(CHAT_TOKENIZER), "--messages", str(path),
                     "--draft", "none", "--max-tokens", "16", "--temperature", "0")
    with LLM(model=MODEL, tokenizer=str(CHAT_TOKENIZER), n_threads=2) as chat_llm:
        out = chat_llm.chat(conversation, SamplingParams(temperature=0, max_tokens=16))[0]
        tokenizer = chat_llm.get_tokenizer()
        assert out.prompt == tokenizer.apply_chat_template(conversation, tokenize=False, add_generation_prompt=True)
        assert out.prompt.startswith("<|begin_of_text|><|start_header_id|>system")
        assert out.prompt_token_ids == want["prompt_ids"]
        assert out.prompt_token_ids == tokenizer.apply_chat_template(conversation, add_generation_prompt=True)
        assert out.outputs[0].token_ids == want["ids"]
        # A list of conversations, and OpenAI's content parts.
        parts = [{"role": "user", "content": [{"type": "text", "text": "Tell me "}, {"type": "text", "text": "a story."}]}]
        both = chat_llm.chat([conversation, parts], SamplingParams(temperature=0, max_tokens=4))
        assert len(both) == 2 and both[1].prompt.endswith("<|start_header_id|>assistant<|end_header_id|>\n\n")


def test_tokenizer(llm):
    tokenizer = llm.get_tokenizer()
    want = run_aerie("tokenize", "--model", MODEL, "--text", PROMPTS[2])
    assert tokenizer.encode(PROMPTS[2]) == want["ids"]
    assert tokenizer.encode(PROMPTS[2], add_special_tokens=False) == want["ids"][1:]  # the BOS
    assert tokenizer.decode(want["ids"]) == PROMPTS[2]
    assert tokenizer.vocab_size == 6144
