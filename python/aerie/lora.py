"""LoRARequest: vLLM's handle on a LoRA adapter, passed to LLM.generate/chat (lora_request=...)."""

from dataclasses import dataclass


@dataclass(frozen=True)
class LoRARequest:
    """A LoRA adapter in PEFT's layout (a local folder with adapter_config.json and
    adapter_model.safetensors), as vLLM's vllm.lora.request.LoRARequest names one.

    lora_name names it (the OpenAI server's model name for it); lora_int_id (>= 1) identifies it, as in vLLM:
    one id, one name and one path. The engine loads an adapter the first time a call names it (docs/python.md).
    """

    lora_name: str
    lora_int_id: int
    lora_path: str = ""

    def __post_init__(self):
        if not isinstance(self.lora_name, str) or not self.lora_name:
            raise ValueError(f"lora_name must be a non-empty string, got {self.lora_name!r}")
        if not isinstance(self.lora_int_id, int) or isinstance(self.lora_int_id, bool) or self.lora_int_id < 1:
            raise ValueError(f"lora_int_id must be an integer >= 1, got {self.lora_int_id!r}")
        if not isinstance(self.lora_path, str) or not self.lora_path:
            raise ValueError(f"lora_path must be the adapter's folder, got {self.lora_path!r}")
