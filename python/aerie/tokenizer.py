"""The model's tokenizer and chat template, through the C API (aerie_tokenize, aerie_detokenize,
aerie_apply_chat_template): the same code the engine's requests use."""

from typing import Any, Dict, List, Sequence, Tuple, Union


class Tokenizer:
    """A Hugging Face-like view of the model's tokenizer (LLM.get_tokenizer())."""

    def __init__(self, model):
        self._model = model  # aerie._aerie.Model

    @property
    def vocab_size(self) -> int:
        """The model's output vocabulary (its logits' width)."""
        return self._model.n_vocab

    def encode(self, text: str, add_special_tokens: bool = True) -> List[int]:
        """Token ids of `text`; add_special_tokens adds the BOS the tokenizer configures."""
        return self._model.tokenize(text, add_special_tokens)

    def decode(self, token_ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        """The text of `token_ids` (bytes that do not form UTF-8 become U+FFFD)."""
        return self._model.detokenize([int(t) for t in token_ids], skip_special_tokens)

    def apply_chat_template(self, conversation: List[Dict[str, Any]], tokenize: bool = True,
                            add_generation_prompt: bool = False) -> Union[str, List[int]]:
        """Renders a conversation with the model's chat template as Hugging Face's apply_chat_template does
        (same defaults: ids, no generation prompt); the ids are encoded without adding special tokens, since
        the rendered text carries its own."""
        text = self._model.apply_chat_template(conversation_pairs(conversation), add_generation_prompt)
        return self._model.tokenize(text, False) if tokenize else text


def conversation_pairs(conversation) -> List[Tuple[str, str]]:
    """(role, content) pairs of a list of {"role", "content"} messages; content may be a string or a list
    of {"type": "text", "text": ...} parts (OpenAI's shape), joined."""
    if isinstance(conversation, (str, bytes)) or not isinstance(conversation, (list, tuple)):
        raise ValueError(f"a conversation is a list of messages, got {type(conversation).__name__}")
    pairs = []
    for i, message in enumerate(conversation):
        if not isinstance(message, dict) or "role" not in message or "content" not in message:
            raise ValueError(f"messages[{i}] must be a dict with \"role\" and \"content\"")
        content = message["content"]
        if isinstance(content, list):
            if not all(isinstance(p, dict) and p.get("type") == "text" for p in content):
                raise ValueError(f"messages[{i}].content: only text parts are supported")
            content = "".join(p["text"] for p in content)
        if not isinstance(content, str) or not isinstance(message["role"], str):
            raise ValueError(f"messages[{i}]: role and content must be strings")
        pairs.append((message["role"], content))
    return pairs
