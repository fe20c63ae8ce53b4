"""SamplingParams: how one prompt is sampled, with vLLM's names and defaults."""

import json
import math
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Union

_MAX_SEED = 2**64
_MAX_N = 128  # the server's bound on n (src/server/openai_schema.cpp)


@dataclass
class StructuredOutputsParams:
    """vLLM's structured outputs, the kinds aerie's C API takes: `json`, a JSON schema (a dict or its text) the
    output must match, or `json_object=True`, any JSON object. Token masks, as the server's response_format."""

    json: Optional[Union[str, Dict[str, Any]]] = None
    json_object: Optional[bool] = None

    def __post_init__(self):
        self.validate()

    def validate(self):
        if (self.json is None) == (not self.json_object):
            raise ValueError("structured_outputs: give exactly one of json (a schema) and json_object=True")
        if self.json is not None and not isinstance(self.json, (str, dict)):
            raise ValueError(f"structured_outputs.json must be a schema (a dict or its JSON text), got "
                             f"{type(self.json).__name__}")

    def schema_text(self) -> str:
        """The schema as the C API's aerie_request.json_schema takes it."""
        if self.json_object:
            return '{"type": "object"}'
        return self.json if isinstance(self.json, str) else json.dumps(self.json)


@dataclass
class SamplingParams:
    """vLLM's SamplingParams, the fields aerie's engine has.

    Defaults are vLLM's (temperature 1.0, max_tokens 16), not `aerie generate`'s (greedy, 128): pass
    temperature=0 for greedy decoding. Every field is checked when the object is made (and when it is
    changed and used again): a ValueError names the field and its range.
    """

    n: int = 1  # completions of each prompt, 1-128 as on the server (each its own request; seeds seed, seed + 1, ...)
    temperature: float = 1.0  # 0: greedy
    top_p: float = 1.0  # (0, 1]; 1: off
    top_k: int = 0  # 0 or -1: off
    min_p: float = 0.0  # [0, 1]; 0: off
    seed: Optional[int] = None  # None: a fresh random seed per request
    max_tokens: Optional[int] = 16  # None: until the end of sequence or the engine's max length
    stop: Optional[Union[str, List[str]]] = None  # stop strings; the text ends before the first match
    stop_token_ids: Optional[List[int]] = None  # besides the model's end-of-sequence ids
    ignore_eos: bool = False
    logprobs: Optional[int] = None  # None: none; k >= 0: the sampled token's log-probability and the top k
    presence_penalty: float = 0.0  # [-2, 2], on tokens the output holds; 0: off
    frequency_penalty: float = 0.0  # [-2, 2], by how often the output holds them; 0: off
    repetition_penalty: float = 1.0  # (0, 10], vLLM's, on tokens of the prompt and output; 1: off
    logit_bias: Optional[Dict[int, float]] = None  # token id -> bias in [-100, 100], added to the logits
    structured_outputs: Optional[StructuredOutputsParams] = None  # a JSON schema the output must match
    prompt_logprobs: Optional[int] = None  # None: none; k >= 0: each prompt token's log-probability and the top k

    def __post_init__(self):
        self.validate()

    def validate(self):
        """Checks every field; raises ValueError naming the first one out of range."""
        _integer("n", self.n, 1)
        if self.n > _MAX_N:
            raise ValueError(f"n must be at most {_MAX_N} (as `aerie serve` allows), got {self.n}")
        if not _is_number(self.temperature) or not math.isfinite(self.temperature) or self.temperature < 0:
            raise ValueError(f"temperature must be a finite number >= 0, got {self.temperature!r}")
        if not _is_number(self.top_p) or not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p!r}")
        _integer("top_k", self.top_k, -1)
        if not _is_number(self.min_p) or not 0 <= self.min_p <= 1:
            raise ValueError(f"min_p must be in [0, 1], got {self.min_p!r}")
        if self.seed is not None:
            _integer("seed", self.seed, 0)
            if self.seed >= _MAX_SEED:
                raise ValueError(f"seed must be below 2**64, got {self.seed}")
        if self.max_tokens is not None:
            _integer("max_tokens", self.max_tokens, 1)
        if isinstance(self.stop, str):
            self.stop = [self.stop]
        if self.stop is not None and not all(isinstance(s, str) for s in self.stop):
            raise ValueError(f"stop must be a string or a list of strings, got {self.stop!r}")
        for token in self.stop_token_ids or []:
            _integer("stop_token_ids", token, 0)
        if not isinstance(self.ignore_eos, bool):
            raise ValueError(f"ignore_eos must be a bool, got {self.ignore_eos!r}")
        if self.logprobs is not None:
            _integer("logprobs", self.logprobs, 0)
        if self.prompt_logprobs is not None:
            _integer("prompt_logprobs", self.prompt_logprobs, 0)
        for name, low, high in (("presence_penalty", -2, 2), ("frequency_penalty", -2, 2)):
            value = getattr(self, name)
            if not _is_number(value) or not low <= value <= high:
                raise ValueError(f"{name} must be in [{low}, {high}], got {value!r}")
        if not _is_number(self.repetition_penalty) or not 0 < self.repetition_penalty <= 10:
            raise ValueError(f"repetition_penalty must be in (0, 10], got {self.repetition_penalty!r}")
        if self.logit_bias is not None:
            if not isinstance(self.logit_bias, dict):
                raise ValueError(f"logit_bias must be a dict of token id -> bias, got {self.logit_bias!r}")
            for token, bias in self.logit_bias.items():
                _integer("logit_bias token", token, 0)
                if token >= 2**31:
                    raise ValueError(f"logit_bias token ids must be below 2**31, got {token}")
                if not _is_number(bias) or not -100 <= bias <= 100:
                    raise ValueError(f"logit_bias[{token}] must be in [-100, 100], got {bias!r}")
        if self.structured_outputs is not None:
            if not isinstance(self.structured_outputs, StructuredOutputsParams):
                raise ValueError("structured_outputs must be a StructuredOutputsParams, got "
                                 f"{type(self.structured_outputs).__name__}")
            self.structured_outputs.validate()


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _integer(name, value, minimum):
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
