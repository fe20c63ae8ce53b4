"""LLM: vLLM's offline interface over aerie's engine (the C API through aerie._aerie)."""

import itertools
import random
from collections import deque
from typing import Any, Dict, Iterator, List, Optional, Sequence, Union

from . import _aerie
from .errors import InvalidArgumentError, OverloadedError, RequestFailedError, UnsupportedError
from .lora import LoRARequest
from .outputs import CompletionOutput, Logprob, RequestMetrics, RequestOutput
from .sampling_params import SamplingParams
from .tokenizer import Tokenizer, conversation_pairs

_WEIGHTS = {"auto": 0, "as_stored": 0, "int8": 1, "int4": 2}  # aerie_weight_format
_FINISH = {"": None, "stop": "stop", "length": "length", "cancelled": "abort", "error": "error"}
_UNLIMITED = 2**62  # max_tokens None: the engine's max length ends the request
_SEED_SPACE = 2**64

PromptType = Union[str, Dict[str, Any]]
LoRAType = Union[LoRARequest, Sequence[Optional[LoRARequest]], None]


class _Completion:
    """One submitted request (one completion of a prompt), built up from its events."""

    def __init__(self, index: int, params: SamplingParams):
        self.index, self.params = index, params
        self.id = 0  # the engine's request id once submitted
        self.token_ids: List[int] = []
        self.text_parts: List[str] = []
        self.logprobs: Optional[List[Dict[int, Logprob]]] = [] if params.logprobs is not None else None
        self.cumulative_logprob = 0.0 if params.logprobs is not None else None
        self.finish_reason: Optional[str] = None
        self.metrics = RequestMetrics()
        # vLLM's shape: None for the first prompt token, then a dict per token (itself and the top k).
        self.prompt_logprobs: Optional[List[Optional[Dict[int, Logprob]]]] = \
            [None] if params.prompt_logprobs is not None else None

    def absorb(self, event, decode_one) -> CompletionOutput:
        """Adds an event; returns the delta it brought (what a stream yields)."""
        tokens, text = event["tokens"], event["text"]
        self.token_ids += tokens
        self.text_parts.append(text)
        delta_logprobs = None
        if self.logprobs is not None:
            delta_logprobs = [_position_logprobs(token, lp, top, decode_one)
                              for token, lp, top in zip(tokens, event["logprobs"] or [], event["top_logprobs"] or [])]
            self.logprobs += delta_logprobs
            self.cumulative_logprob += sum(event["logprobs"] or [])
        if self.prompt_logprobs is not None:
            for token, logprob, rank, top in event["prompt_logprobs"] or []:
                self.prompt_logprobs.append(_prompt_position_logprobs(token, logprob, rank, top, decode_one))
        self.metrics = RequestMetrics(*(event[k] for k in ("prompt_tokens", "cached_prompt_tokens", "generated_tokens",
                                                           "draft_tokens", "accepted_tokens", "spec_rounds")))
        if event["finished"]:
            self.finish_reason = _FINISH[event["finish_reason"]]
            if self.finish_reason == "error":
                raise RequestFailedError(event["error"] or "the request failed")
        return CompletionOutput(self.index, text, list(tokens), self.cumulative_logprob, delta_logprobs,
                                self.finish_reason)

    def output(self, tokenizer: Optional[Tokenizer]) -> CompletionOutput:
        text = "".join(self.text_parts)
        return CompletionOutput(self.index, text, self.token_ids, self.cumulative_logprob, self.logprobs,
                                self.finish_reason, self._stop_reason(text, tokenizer))

    def _stop_reason(self, text: str, tokenizer: Optional[Tokenizer]):
        """Which stop string or stop token ended it (vLLM's stop_reason); None for the end of sequence."""
        if self.finish_reason != "stop" or not self.token_ids:
            return None
        if self.token_ids[-1] in (self.params.stop_token_ids or []):
            return self.token_ids[-1]
        if self.params.stop and tokenizer is not None:
            rest = tokenizer.decode(self.token_ids)[len(text):]  # the text the stop string cut off
            for stop in self.params.stop:
                if stop and rest.startswith(stop):
                    return stop
        return None


def _prompt_position_logprobs(token: int, logprob: float, rank: int, top, decode_one) -> Dict[int, Logprob]:
    """A prompt token's entry: the token first with its own rank, then the top k by rank."""
    entry = {token: Logprob(logprob, rank, decode_one(token))}
    for r, (t, lp) in enumerate(top, start=1):
        if t not in entry:
            entry[t] = Logprob(lp, r, decode_one(t))
    return entry


def _position_logprobs(token: int, logprob: float, top, decode_one) -> Dict[int, Logprob]:
    """vLLM's shape for one position: the sampled token first, then the top k by rank."""
    ranks = {t: rank for rank, (t, _) in enumerate(top, start=1)}
    entry = {token: Logprob(logprob, ranks.get(token), decode_one(token))}
    for t, lp in top:
        if t not in entry:
            entry[t] = Logprob(lp, ranks[t], decode_one(t))
    return entry


class LLM:
    """A model and an engine over it, with vLLM's offline API (generate, chat, get_tokenizer).

    model: a Hugging Face folder or a GGUF file. draft: None (plain decoding), an EAGLE head folder, a draft
    model folder, "mtp" or "ngram"; or vLLM's speculative_config={"method": ..., "model": ...,
    "num_speculative_tokens": K}. enable_lora: requests may name LoRA adapters (lora_request=LoRARequest(...)),
    of rank at most max_lora_rank (None: 256), at most max_loras of them loaded (None: no limit). The rest are
    the C API's model and engine options (docs/python.md).
    """

    def __init__(self, model: str, draft: Optional[str] = None, num_speculative_tokens: Optional[int] = None, *,
                 speculative_config: Optional[Dict[str, Any]] = None, tokenizer: Optional[str] = None,
                 weights: str = "auto", max_model_len: Optional[int] = None, max_num_seqs: int = 16,
                 kv_cache_bytes: Optional[int] = None, max_in_flight: int = 256, n_threads: int = 0,
                 seed: Optional[int] = None, enable_lora: bool = False, max_lora_rank: Optional[int] = None,
                 max_loras: Optional[int] = None):
        draft, num_speculative_tokens = _speculation(draft, num_speculative_tokens, speculative_config)
        if weights not in _WEIGHTS:
            raise ValueError(f"weights must be one of {sorted(_WEIGHTS)}, got {weights!r}")
        for name, value, minimum in (("max_model_len", max_model_len, 1), ("max_num_seqs", max_num_seqs, 1),
                                     ("kv_cache_bytes", kv_cache_bytes, 1), ("max_in_flight", max_in_flight, 1),
                                     ("n_threads", n_threads, 0), ("seed", seed, 0),
                                     ("max_lora_rank", max_lora_rank, 1), ("max_loras", max_loras, 1)):
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < minimum):
                raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
        if not isinstance(enable_lora, bool):
            raise ValueError(f"enable_lora must be a bool, got {enable_lora!r}")
        if not enable_lora and (max_lora_rank is not None or max_loras is not None):
            raise ValueError("max_lora_rank and max_loras need enable_lora=True")
        self._model = _aerie.Model(str(model), n_threads, _WEIGHTS[weights], None if tokenizer is None else str(tokenizer))
        self._engine_args = (self._model, draft, num_speculative_tokens or 0, max_num_seqs, max_model_len or 0,
                             kv_cache_bytes or 0, max_in_flight)
        self._enable_lora, self._max_lora_rank, self._max_loras = enable_lora, max_lora_rank or 0, max_loras
        self._loras: List[LoRARequest] = []  # the adapters the engine holds, in its order
        self._open_streams = 0  # streams being iterated: the engine cannot be remade under them
        self._engine = self._new_engine(self._loras)
        self._tokenizer = Tokenizer(self._model) if self._model.has_tokenizer else None
        self._rng = random.Random(seed) if seed is not None else random.SystemRandom()
        self._request_ids = itertools.count()
        self._decoded: Dict[int, str] = {}  # token id -> its own text, for Logprob.decoded_token

    # -- lifetime -------------------------------------------------------------------------------------------

    def close(self) -> None:
        """Cancels what runs and frees the engine (also at garbage collection). Not beside other calls."""
        self._engine.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- the offline API ------------------------------------------------------------------------------------

    def get_tokenizer(self) -> Tokenizer:
        """The model's tokenizer (encode, decode, apply_chat_template); UnsupportedError without one."""
        if self._tokenizer is None:
            raise UnsupportedError("get_tokenizer: the model folder has no tokenizer (LLM(tokenizer=DIR))")
        return self._tokenizer

    def generate(self, prompts: Union[PromptType, Sequence[PromptType]],
                 sampling_params: Union[SamplingParams, Sequence[SamplingParams], None] = None,
                 use_tqdm: bool = False, lora_request: LoRAType = None) -> List[RequestOutput]:
        """Completes every prompt (text, or {"prompt_token_ids": [...]}) at once in the engine; one
        RequestOutput per prompt, in order. lora_request: one LoRARequest for every prompt, or one (or None,
        the base model) per prompt. use_tqdm is accepted for vLLM's callers and ignored."""
        del use_tqdm
        items = [self._prompt(p) for p in _as_list(prompts, (str, dict))]
        return self._run(items, _params_for(sampling_params, len(items)), self._adapters_for(lora_request, len(items)))

    def chat(self, messages, sampling_params: Union[SamplingParams, Sequence[SamplingParams], None] = None,
             add_generation_prompt: bool = True, use_tqdm: bool = False,
             lora_request: LoRAType = None) -> List[RequestOutput]:
        """generate() for a conversation (a list of {"role", "content"} dicts) or a list of them, rendered with
        the model's chat template (the C API's renderer) and encoded without adding special tokens."""
        del use_tqdm
        conversations = [messages] if messages and isinstance(messages[0], dict) else list(messages)
        items = [self._chat_prompt(c, add_generation_prompt) for c in conversations]
        return self._run(items, _params_for(sampling_params, len(items)), self._adapters_for(lora_request, len(items)))

    def generate_stream(self, prompt: PromptType, sampling_params: Optional[SamplingParams] = None,
                        lora_request: Optional[LoRARequest] = None) -> Iterator[RequestOutput]:
        """Streams one prompt: yields a RequestOutput per engine event whose outputs[0] holds the new text,
        token ids and logprobs since the previous one (vLLM's RequestOutputKind.DELTA); the last has
        finished=True, the finish reason and the whole request's metrics. Leaving the loop early (break,
        an exception, Ctrl-C) cancels the request."""
        return self._stream(self._prompt(prompt), sampling_params, self._adapters_for(lora_request, 1)[0])

    def chat_stream(self, messages, sampling_params: Optional[SamplingParams] = None,
                    add_generation_prompt: bool = True,
                    lora_request: Optional[LoRARequest] = None) -> Iterator[RequestOutput]:
        """generate_stream for one conversation."""
        return self._stream(self._chat_prompt(messages, add_generation_prompt), sampling_params,
                            self._adapters_for(lora_request, 1)[0])

    # -- internals ------------------------------------------------------------------------------------------

    def _prompt(self, prompt: PromptType):
        """(text or None, token ids) of a prompt: text is encoded with the tokenizer's special tokens."""
        if isinstance(prompt, dict):
            if "prompt_token_ids" in prompt:
                ids = [int(t) for t in prompt["prompt_token_ids"]]
                if not ids:  # the C API would read an empty list as no prompt at all
                    raise InvalidArgumentError("prompt_token_ids is empty: a prompt needs at least one token")
                return prompt.get("prompt"), ids
            if "prompt" not in prompt:
                raise ValueError("a prompt dict needs \"prompt\" or \"prompt_token_ids\"")
            prompt = prompt["prompt"]
        if not isinstance(prompt, str):
            raise ValueError(f"a prompt is a string or a dict, got {type(prompt).__name__}")
        return prompt, self.get_tokenizer().encode(prompt)

    def _chat_prompt(self, conversation, add_generation_prompt: bool):
        text = self._model.apply_chat_template(conversation_pairs(conversation), add_generation_prompt)
        return text, self._model.tokenize(text, False)  # the rendered text carries its own BOS

    def _new_engine(self, loras: List[LoRARequest]):
        return _aerie.Engine(*self._engine_args, [r.lora_name for r in loras], [r.lora_path for r in loras],
                             self._max_lora_rank)

    def _adapters_for(self, lora_request: LoRAType, n_prompts: int) -> List[Optional[str]]:
        """The adapter name of each prompt (None: the base model). An adapter the engine does not hold yet is
        loaded now: the engine is made again with it (its prefix cache starts empty), which a stream being
        iterated forbids. Raises LoadError, leaving the engine as it was, when the folder does not load."""
        if lora_request is None:
            return [None] * n_prompts
        requests = [lora_request] * n_prompts if isinstance(lora_request, LoRARequest) else list(lora_request)
        if len(requests) != n_prompts:
            raise ValueError(f"lora_request: {len(requests)} given for {n_prompts} prompts")
        new: List[LoRARequest] = []
        for r in requests:
            if r is None:
                continue
            if not isinstance(r, LoRARequest):
                raise ValueError(f"lora_request must be a LoRARequest or None, got {type(r).__name__}")
            if not self._enable_lora:
                raise ValueError("lora_request needs LLM(..., enable_lora=True)")
            known = [k for k in self._loras + new if k.lora_int_id == r.lora_int_id or k.lora_name == r.lora_name]
            if any(k != r for k in known):
                raise ValueError(f"lora_request {r}: its id or name is already {known[0]}")
            if not known:
                new.append(r)
        if new:
            loras = self._loras + new
            if self._max_loras is not None and len(loras) > self._max_loras:
                raise ValueError(f"lora_request: {len(loras)} adapters would be loaded, beyond max_loras="
                                 f"{self._max_loras}")
            if self._open_streams:
                raise UnsupportedError("lora_request: a new adapter remakes the engine, and a stream is still "
                                       "being read: finish or close it first")
            self._engine.close()
            try:
                self._engine = self._new_engine(loras)
            except Exception:
                self._engine = self._new_engine(self._loras)
                raise
            self._loras = loras
        return [None if r is None else r.lora_name for r in requests]

    def _submit(self, prompt_ids: List[int], completion: _Completion, seed: int, adapter: Optional[str]) -> None:
        p = completion.params
        completion.id = self._engine.submit(
            prompt_ids, _UNLIMITED if p.max_tokens is None else p.max_tokens, float(p.temperature), max(p.top_k, 0),
            float(p.top_p), float(p.min_p), seed, list(p.stop or []), list(p.stop_token_ids or []), p.ignore_eos,
            -1 if p.logprobs is None else p.logprobs, adapter, float(p.presence_penalty), float(p.frequency_penalty),
            float(p.repetition_penalty), sorted((p.logit_bias or {}).items()),
            None if p.structured_outputs is None else p.structured_outputs.schema_text(),
            -1 if p.prompt_logprobs is None else p.prompt_logprobs)

    def _seeds(self, params: SamplingParams) -> List[int]:
        base = params.seed if params.seed is not None else self._rng.getrandbits(64)
        return [(base + i) % _SEED_SPACE for i in range(params.n)]

    def _run(self, items, params: List[SamplingParams], adapters: List[Optional[str]]) -> List[RequestOutput]:
        """Submits every completion of every prompt, then reads them in order. Beyond the engine's
        max_in_flight it reads the oldest to make room. Any exception cancels what is still in flight."""
        completions = [[_Completion(i, p) for i in range(p.n)] for p in params]
        live: deque = deque()
        try:
            for (text, ids), p, group, adapter in zip(items, params, completions, adapters):
                for completion, seed in zip(group, self._seeds(p)):
                    while True:
                        try:
                            self._submit(ids, completion, seed, adapter)
                            break
                        except OverloadedError:
                            if not live:
                                raise
                            self._drain(live[0])
                            live.popleft()
                    live.append(completion)
            while live:
                self._drain(live[0])
                live.popleft()
        finally:
            for completion in live:
                self._abandon(completion)
        return [RequestOutput(str(next(self._request_ids)), text, ids,
                              [c.output(self._tokenizer) for c in group], True, _merged_metrics(group),
                              group[0].prompt_logprobs)
                for (text, ids), group in zip(items, completions)]

    def _drain(self, completion: _Completion) -> None:
        """Reads a request's events to its last one, then releases it."""
        while completion.finish_reason is None:
            completion.absorb(self._engine.next_event(completion.id), self._decode_one)
        self._engine.release(completion.id)
        completion.id = 0

    def _abandon(self, completion: _Completion) -> None:
        """Cancels and frees a request whose reader is gone (releasing cancels it)."""
        if completion.id:
            try:
                self._engine.release(completion.id)
            except Exception:  # the engine was closed: nothing left to free
                pass
            completion.id = 0

    def _stream(self, item, sampling_params: Optional[SamplingParams],
                adapter: Optional[str]) -> Iterator[RequestOutput]:
        """Checks the parameters now; the request is submitted when the iteration starts (a stream that is
        never iterated leaves nothing running)."""
        params = _params_for(sampling_params, 1)[0]
        if params.n != 1:
            raise ValueError(f"generate_stream streams one completion: n must be 1, got {params.n}")
        return self._stream_events(item, params, adapter)

    def _stream_events(self, item, params: SamplingParams, adapter: Optional[str]) -> Iterator[RequestOutput]:
        text, ids = item
        completion = _Completion(0, params)
        self._submit(ids, completion, self._seeds(params)[0], adapter)
        request_id = str(next(self._request_ids))
        self._open_streams += 1
        try:
            while completion.finish_reason is None:
                delta = completion.absorb(self._engine.next_event(completion.id), self._decode_one)
                if delta.finish_reason is not None:
                    delta.stop_reason = completion.output(self._tokenizer).stop_reason
                yield RequestOutput(request_id, text, ids, [delta], delta.finish_reason is not None,
                                    completion.metrics, completion.prompt_logprobs)
        finally:
            self._open_streams -= 1
            self._abandon(completion)

    def _decode_one(self, token: int) -> Optional[str]:
        if self._tokenizer is None:
            return None
        if token not in self._decoded:
            self._decoded[token] = self._tokenizer.decode([token], skip_special_tokens=False)
        return self._decoded[token]


def _speculation(draft, num_speculative_tokens, speculative_config):
    """(draft, K) from LLM's arguments; vLLM's speculative_config maps onto the same two."""
    if speculative_config is not None:
        if draft is not None or num_speculative_tokens is not None:
            raise ValueError("give draft/num_speculative_tokens or speculative_config, not both")
        config = dict(speculative_config)
        method = config.pop("method", None)
        draft = method if method in ("ngram", "mtp") else config.pop("model", None)
        config.pop("model", None)
        num_speculative_tokens = config.pop("num_speculative_tokens", None)
        if draft is None:
            raise ValueError("speculative_config needs \"model\" (a head or draft folder) or method ngram/mtp")
        if config:
            raise ValueError(f"speculative_config: aerie does not take {sorted(config)}")
    if draft in ("", "none"):
        draft = None
    if num_speculative_tokens is not None:
        if not isinstance(num_speculative_tokens, int) or isinstance(num_speculative_tokens, bool) \
                or num_speculative_tokens < 1:
            raise ValueError(f"num_speculative_tokens must be an integer >= 1, got {num_speculative_tokens!r}")
        if draft is None:
            raise ValueError("num_speculative_tokens needs a draft (draft=DIR, \"mtp\" or \"ngram\")")
    return (None if draft is None else str(draft)), num_speculative_tokens


def _as_list(value, single_types) -> list:
    return [value] if isinstance(value, single_types) else list(value)


def _params_for(sampling_params, n_prompts: int) -> List[SamplingParams]:
    """One SamplingParams per prompt (a single one is shared), each checked again: fields may have changed."""
    if sampling_params is None:
        sampling_params = SamplingParams()
    params = [sampling_params] * n_prompts if isinstance(sampling_params, SamplingParams) else list(sampling_params)
    if len(params) != n_prompts:
        raise ValueError(f"sampling_params: {len(params)} given for {n_prompts} prompts")
    for p in params:
        if not isinstance(p, SamplingParams):
            raise ValueError(f"sampling_params must be SamplingParams, got {type(p).__name__}")
        p.validate()
    return params


def _merged_metrics(group: List[_Completion]) -> RequestMetrics:
    """A prompt's metrics over its n completions: the prompt once, the rest summed."""
    merged = RequestMetrics(group[0].metrics.prompt_tokens, group[0].metrics.cached_prompt_tokens)
    for c in group:
        merged.generated_tokens += c.metrics.generated_tokens
        merged.draft_tokens += c.metrics.draft_tokens
        merged.accepted_tokens += c.metrics.accepted_tokens
        merged.spec_rounds += c.metrics.spec_rounds
    return merged
