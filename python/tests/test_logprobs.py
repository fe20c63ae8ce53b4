"""Log-probabilities against the model's own logits: `aerie logits` prefills prompt + output in one pass and
writes every position's raw logits; their log-softmax is the reference (the engine decoded step by step
with a bf16 KV cache, hence the tolerance)."""

import math
import subprocess

import numpy as np
from aerie import SamplingParams
from conftest import AERIE, MODEL, PROMPTS

TOLERANCE = 0.05  # measured: at most 0.009 (split activations), 0.017 (rounded)


def reference_logprobs(ids, tmp_path):
    out = tmp_path / "logits.npy"
    subprocess.run([AERIE, "logits", "--model", MODEL, "--ids", ",".join(map(str, ids)), "--out", str(out)],
                   check=True, capture_output=True, timeout=120)
    logits = np.load(out).astype(np.float64)  # [n, n_vocab]
    peak = logits.max(axis=1, keepdims=True)
    return logits - peak - np.log(np.exp(logits - peak).sum(axis=1, keepdims=True))


def check_against_reference(out, k, tmp_path):
    completion = out.outputs[0]
    reference = reference_logprobs(out.prompt_token_ids + completion.token_ids, tmp_path)
    n_prompt = len(out.prompt_token_ids)
    assert len(completion.logprobs) == len(completion.token_ids)
    for i, (token, entry) in enumerate(zip(completion.token_ids, completion.logprobs)):
        row = reference[n_prompt - 1 + i]  # the row that predicted output token i
        assert next(iter(entry)) == token  # the sampled token comes first
        top = sorted(((lp.rank, t) for t, lp in entry.items() if lp.rank is not None))
        assert [rank for rank, _ in top] == list(range(1, k + 1))
        kth = np.sort(row)[-k]
        for t, lp in entry.items():
            assert abs(lp.logprob - row[t]) < TOLERANCE, (i, t, lp.logprob, row[t])
            if lp.rank is not None:
                assert row[t] >= kth - TOLERANCE  # among the k most likely
            else:
                assert t == token and row[t] <= kth + TOLERANCE
        ranked = [entry[t].logprob for _, t in top]
        assert ranked == sorted(ranked, reverse=True)
    assert math.isclose(completion.cumulative_logprob, sum(e[t].logprob for t, e in
                                                           zip(completion.token_ids, completion.logprobs)),
                        rel_tol=1e-5, abs_tol=1e-4)


def test_greedy_logprobs_match_the_logits(llm, spec_llm, tmp_path):
    params = SamplingParams(temperature=0, max_tokens=20, logprobs=4)
    out = llm.generate(PROMPTS[0], params)[0]
    check_against_reference(out, 4, tmp_path)
    # Greedy: the sampled token is the most likely, and its text is its own decoding.
    tokenizer = llm.get_tokenizer()
    for token, entry in zip(out.outputs[0].token_ids, out.outputs[0].logprobs):
        assert entry[token].rank == 1
        assert entry[token].decoded_token == tokenizer.decode([token], skip_special_tokens=False)
    # Under speculation the verified tokens carry the same log-probabilities.
    drafted = spec_llm.generate(PROMPTS[0], params)[0]
    assert drafted.outputs[0].token_ids == out.outputs[0].token_ids
    for a, b in zip(drafted.outputs[0].logprobs, out.outputs[0].logprobs):
        assert a.keys() == b.keys()
        assert all(abs(a[t].logprob - b[t].logprob) < TOLERANCE for t in a)


def test_sampled_logprobs_match_the_logits(llm, tmp_path):
    out = llm.generate(PROMPTS[1], SamplingParams(temperature=1.0, seed=5, max_tokens=20, logprobs=1))[0]
    check_against_reference(out, 1, tmp_path)
    # logprobs=0: the sampled token's alone.
    zero = llm.generate(PROMPTS[1], SamplingParams(temperature=1.0, seed=5, max_tokens=20, logprobs=0))[0]
    assert zero.outputs[0].token_ids == out.outputs[0].token_ids
    assert all(len(e) == 1 for e in zero.outputs[0].logprobs)


def test_prompt_logprobs_match_the_logits(llm, tmp_path):
    k = 3
    out = llm.generate(PROMPTS[2], SamplingParams(temperature=0, max_tokens=1, prompt_logprobs=k))[0]
    ids = out.prompt_token_ids
    reference = reference_logprobs(ids, tmp_path)
    assert len(out.prompt_logprobs) == len(ids) and out.prompt_logprobs[0] is None
    for i, (token, entry) in enumerate(zip(ids[1:], out.prompt_logprobs[1:])):
        row = reference[i]  # the row that predicted prompt token i + 1
        assert next(iter(entry)) == token
        assert abs(entry[token].logprob - row[token]) < TOLERANCE
        # Its rank: 1 + the tokens the reference puts clearly above it (a near tie may go either way).
        above = int((row > row[token] + TOLERANCE).sum())
        near = int((abs(row - row[token]) <= TOLERANCE).sum())
        assert above + 1 <= entry[token].rank <= above + near
        top = sorted((lp.rank, t) for t, lp in entry.items() if t != token or lp.rank <= k)
        assert [rank for rank, _ in top] == list(range(1, k + 1))
        for rank, t in top:
            assert abs(entry[t].logprob - row[t]) < TOLERANCE
    # The same entries in a stream, and none unless asked.
    streamed = list(llm.generate_stream(PROMPTS[2], SamplingParams(temperature=0, max_tokens=1, prompt_logprobs=k)))
    assert streamed[-1].prompt_logprobs == out.prompt_logprobs
    assert llm.generate(PROMPTS[2], SamplingParams(temperature=0, max_tokens=1))[0].prompt_logprobs is None
