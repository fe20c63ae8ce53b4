"""Byte-level BPE as Llama 3's tokenizer.json defines it, shared by the trainer and the corpus encoder:
the pre-tokenizer regex, GPT-2's byte <-> character alphabet, and an encoder (merges applied by rank within
each pre-tokenized piece, a piece that is itself a vocabulary entry taken whole: ignore_merges).

Not a general tokenizer.json reader: it reads only what train_tokenizer.py writes (BPE + the Llama 3
pre-tokenizer; special tokens as added tokens matched literally in the text).
"""
import json

import regex

# The Split pattern of Llama 3's tokenizer.json (behavior Isolated).
PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
           r"|\s*[\r\n]+|\s+(?!\S)|\s+")
SPLIT = regex.compile(PATTERN)


def bytes_to_unicode():
    """GPT-2's byte -> printable character table, in its order (Llama 3's ids 0..255 follow it)."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\u00a1"), ord("\u00ac") + 1)) + \
        list(range(ord("\u00ae"), ord("\u00ff") + 1))
    chars, extra = {}, 0
    for b in printable:
        chars[b] = chr(b)
    for b in range(256):
        if b not in chars:
            chars[b] = chr(256 + extra)
            extra += 1
    order = printable + [b for b in range(256) if b not in printable]
    return {b: chars[b] for b in order}  # insertion order = id order


BYTE_TO_CHAR = bytes_to_unicode()
CHAR_TO_BYTE = {c: b for b, c in BYTE_TO_CHAR.items()}


def to_chars(data: bytes) -> str:
    return "".join(BYTE_TO_CHAR[b] for b in data)


def pieces(text):
    """The pre-tokenizer: the regex's matches, in order (they cover the whole text)."""
    return SPLIT.findall(text)


class Encoder:
    """Encodes text with a tokenizer.json written by train_tokenizer.py."""

    def __init__(self, path):
        with open(path, encoding="utf-8") as f:
            tok = json.load(f)
        self.vocab = tok["model"]["vocab"]
        self.ranks = {tuple(m.split(" ")): r for r, m in enumerate(tok["model"]["merges"])}
        self.ignore_merges = tok["model"].get("ignore_merges", False)
        self.special = {a["content"]: a["id"] for a in tok["added_tokens"]}
        self.id_to_bytes = {i: bytes(CHAR_TO_BYTE[c] for c in t) for t, i in self.vocab.items()}
        for content, i in self.special.items():
            self.id_to_bytes[i] = content.encode("utf-8")
        self.special_re = regex.compile("|".join(regex.escape(s) for s in sorted(self.special, key=len, reverse=True)))
        self.cache = {}

    def _piece(self, chars):
        if self.ignore_merges and chars in self.vocab:
            return [self.vocab[chars]]
        parts = list(chars)
        while len(parts) > 1:
            best = min(range(len(parts) - 1), key=lambda i: self.ranks.get((parts[i], parts[i + 1]), 1 << 60))
            if (parts[best], parts[best + 1]) not in self.ranks:
                break
            parts[best:best + 2] = [parts[best] + parts[best + 1]]
        return [self.vocab[p] for p in parts]

    def encode(self, text, special_tokens=True):
        """Ids of `text` (no BOS); special-token strings become their ids when special_tokens."""
        ids, at = [], 0
        spans = [(m.start(), m.end()) for m in self.special_re.finditer(text)] if special_tokens and self.special else []
        for start, end in spans + [(len(text), len(text))]:
            for piece in pieces(text[at:start]):
                cached = self.cache.get(piece)
                if cached is None:
                    cached = self._piece(to_chars(piece.encode("utf-8")))
                    if len(self.cache) < 1 << 20:
                        self.cache[piece] = cached
                ids += cached
            if end > start:
                ids.append(self.special[text[start:end]])
            at = end
        return ids

    def decode(self, ids):
        return b"".join(self.id_to_bytes[i] for i in ids).decode("utf-8", errors="replace")
