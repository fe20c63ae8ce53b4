"""aerie for Python: vLLM's offline interface (LLM, SamplingParams, RequestOutput) over aerie's C API.

    from aerie import LLM, SamplingParams
    llm = LLM(model="models/aerie-tiny-llama", draft="models/aerie-tiny-llama-eagle3", num_speculative_tokens=2)
    out = llm.generate(["Once upon a time"], SamplingParams(temperature=0, max_tokens=16))
    print(out[0].outputs[0].text)

Reference: docs/python.md.
"""

from . import errors
from .errors import AerieError, InvalidArgumentError, LoadError, RequestFailedError, UnsupportedError
from .llm import LLM
from .lora import LoRARequest
from .outputs import CompletionOutput, Logprob, RequestMetrics, RequestOutput
from .sampling_params import SamplingParams, StructuredOutputsParams
from .tokenizer import Tokenizer

__all__ = [
    "LLM", "SamplingParams", "StructuredOutputsParams", "LoRARequest", "RequestOutput", "CompletionOutput", "Logprob", "RequestMetrics", "Tokenizer",
    "AerieError", "InvalidArgumentError", "LoadError", "UnsupportedError", "RequestFailedError", "errors",
]
