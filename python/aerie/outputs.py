"""What generate and chat return, in vLLM's shapes: RequestOutput holding CompletionOutputs."""

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Union


@dataclass
class Logprob:
    """One token's log-probability at a position (vLLM's Logprob).

    logprob: under the model's own distribution (log-softmax of the raw logits, before temperature and
    filters). rank: 1 for the most likely token; None for a sampled token outside the top-k asked for
    (aerie reports ranks within that list only). decoded_token: the token's own text.
    """

    logprob: float
    rank: Optional[int] = None
    decoded_token: Optional[str] = None


# Per generated position: token id -> Logprob, the sampled token and the top k (vLLM's SampleLogprobs).
SampleLogprobs = List[Dict[int, Logprob]]


@dataclass
class RequestMetrics:
    """A request's token counts and its speculation (drafts verified, accepted, target forwards)."""

    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0  # prompt positions taken from the prefix cache
    generated_tokens: int = 0
    draft_tokens: int = 0
    accepted_tokens: int = 0
    spec_rounds: int = 0  # target forwards that carried drafts

    @property
    def acceptance_rate(self) -> Optional[float]:
        """Accepted drafts over verified drafts; None without speculation."""
        return self.accepted_tokens / self.draft_tokens if self.draft_tokens else None

    @property
    def mean_acceptance_length(self) -> Optional[float]:
        """Tokens per speculative target forward (accepted drafts + the one the target adds)."""
        return 1 + self.accepted_tokens / self.spec_rounds if self.spec_rounds else None


@dataclass
class CompletionOutput:
    """One completion of a prompt (vLLM's CompletionOutput).

    finish_reason: "stop" (end of sequence, a stop token or a stop string), "length" (max_tokens or the
    engine's max length), "abort" (cancelled), or None while it runs. stop_reason: the stop string or stop
    token id that ended it; None for the model's end of sequence and for other reasons.
    """

    index: int
    text: str
    token_ids: List[int]
    cumulative_logprob: Optional[float] = None
    logprobs: Optional[SampleLogprobs] = None
    finish_reason: Optional[str] = None
    stop_reason: Union[int, str, None] = None

    def finished(self) -> bool:
        return self.finish_reason is not None


@dataclass
class RequestOutput:
    """A prompt's outputs (vLLM's RequestOutput); generate returns one per prompt, in order."""

    request_id: str
    prompt: Optional[str]
    prompt_token_ids: List[int]
    outputs: List[CompletionOutput]
    finished: bool
    metrics: RequestMetrics = field(default_factory=RequestMetrics)
    # With SamplingParams.prompt_logprobs: None for the first prompt token, then per token a dict of it and the
    # k most likely (vLLM's PromptLogprobs).
    prompt_logprobs: Optional[List[Optional[Dict[int, Logprob]]]] = None

    @property
    def num_cached_tokens(self) -> int:
        return self.metrics.cached_prompt_tokens
