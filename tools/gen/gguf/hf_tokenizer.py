#!/usr/bin/python3
"""The tokenizer.ggml.* keys of a byte-level BPE tokenizer (tokenizer.json + tokenizer_config.json), as
llama.cpp's convert_hf_to_gguf.py writes them for Llama 3 and DeepSeek-V3 (its _set_vocab_gpt2,
get_vocab_base and gguf-py's SpecialVocab), without the transformers package:

  tokenizer.ggml.model        "gpt2"
  tokenizer.ggml.pre          "llama-bpe" | "deepseek-v3" (recognised from the pre-tokenizer's Split
                              regexes; any other tokenizer needs --pre NAME)
  tokenizer.ggml.tokens       string[vocab_size], id order: the model vocabulary in its byte-level spelling,
                              added tokens by their content, ids nobody uses as "[PAD{id}]"
  tokenizer.ggml.token_type   i32[vocab_size]: 1 normal, 3 control (added tokens marked special, and added
                              tokens that look special: <|...|>, <｜...｜>, <pad>, <mask>, <unused...>),
                              4 user-defined (other added tokens; "▁" in them becomes " "), 5 unused (holes)
  tokenizer.ggml.merges       string[]: "left right" (pairs given as lists have spaces written as U+0120)
  tokenizer.ggml.{bos,eos,unk,seperator,padding,mask}_token_id   u32: the token named by tokenizer_config's
                              *_token found among the added tokens, else config.json's *_token_id
  tokenizer.ggml.add_bos_token / add_eos_token   bool: from the post-processor's TemplateProcessing (a
                              leading bos / trailing eos), overridden by tokenizer_config's add_*_token
  tokenizer.ggml.add_space_prefix  bool, when tokenizer_config has add_prefix_space
  tokenizer.chat_template     tokenizer_config's chat_template (else chat_template.jinja / .json beside)

One simplification: llama.cpp re-normalises added tokens marked `normalized: false` by encoding and decoding
them with the Hugging Face tokenizer; here their content is written as is (the same for every Llama 3 and
DeepSeek-V3 special token).

minimal_byte_vocab() is what a checkpoint without tokenizer files gets (see its docstring).
"""
import json
import os
import sys

from gguf_file import ARRAY, BOOL, I32, STRING, U32

NORMAL, CONTROL, USER_DEFINED, UNUSED = 1, 3, 4, 5

# The Split regexes of the two pre-tokenizers aerie implements, exactly as their tokenizer.json spell them.
LLAMA3_SPLITS = ["(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+"
                 "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"]
DEEPSEEK3_SPLITS = ["\\p{N}{1,3}", "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
                    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+"
                    "| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"]
KNOWN_PRE = {"llama-bpe": LLAMA3_SPLITS, "deepseek-v3": DEEPSEEK3_SPLITS}

SPECIAL_TYPES = ("bos", "eos", "unk", "sep", "pad", "cls", "mask")
# gguf key per special token type; llama.cpp has no key for cls (gguf-py skips it with a warning).
SPECIAL_ID_KEYS = {"bos": "tokenizer.ggml.bos_token_id", "eos": "tokenizer.ggml.eos_token_id",
                   "unk": "tokenizer.ggml.unknown_token_id", "sep": "tokenizer.ggml.seperator_token_id",
                   "pad": "tokenizer.ggml.padding_token_id", "mask": "tokenizer.ggml.mask_token_id"}


def bytes_to_unicode():
    """GPT-2's byte -> printable character map (byte-level BPE spells every byte with one of these)."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    table, extra = {}, 0
    for b in range(256):
        if b in printable:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


def load_tokenizer(path):
    """path: a tokenizer.json file or a folder holding one. Returns (tokenizer_json, tokenizer_config or {},
    folder)."""
    folder = path if os.path.isdir(path) else os.path.dirname(os.path.abspath(path))
    file = os.path.join(path, "tokenizer.json") if os.path.isdir(path) else path
    with open(file, encoding="utf-8") as f:
        tok = json.load(f)
    config = {}
    config_file = os.path.join(folder, "tokenizer_config.json")
    if os.path.exists(config_file):
        with open(config_file, encoding="utf-8") as f:
            config = json.load(f)
    return tok, config, folder


def detect_pre(tok):
    """'llama-bpe' / 'deepseek-v3' when the pre-tokenizer's Split regexes are exactly those, else None."""
    pre = tok.get("pre_tokenizer") or {}
    steps = pre.get("pretokenizers", [pre]) if pre.get("type") == "Sequence" else [pre]
    splits = [s.get("pattern", {}).get("Regex") for s in steps if s.get("type") == "Split"]
    for name, patterns in KNOWN_PRE.items():
        if splits == patterns:
            return name
    return None


def looks_special(text):
    """convert_hf_to_gguf.py's does_token_look_special."""
    return (text in ("<pad>", "<mask>", "<2mass>", "[@BOS@]")
            or (text.startswith("<|") and text.endswith("|>"))
            or (text.startswith("<\uff5c") and text.endswith("\uff5c>"))
            or (text.startswith("<unused") and text.endswith(">")))


def _merges(model):
    merges = model.get("merges") or []
    if merges and isinstance(merges[0], list):
        return [" ".join("".join(chr(ord(c) + 256) if c == " " else c for c in part) for part in pair)
                for pair in merges]
    return list(merges)


def _special_ids(tok, tok_config, model_config):
    """gguf-py SpecialVocab: tokenizer_config's *_token content -> id among added tokens, then config.json."""
    added = tok.get("added_tokens", [])
    ids = {}
    for typ in SPECIAL_TYPES:
        entry = tok_config.get(f"{typ}_token")
        content = entry.get("content") if isinstance(entry, dict) else entry
        if isinstance(content, str):
            match = next((a["id"] for a in added if a.get("content") == content), None)
            if isinstance(match, int):
                ids[typ] = match
    for typ in SPECIAL_TYPES:
        value = model_config.get(f"{typ}_token_id")
        if typ not in ids and isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            ids[typ] = value
    return ids


def _add_flags(tok, tok_config):
    """add_bos / add_eos as SpecialVocab infers them (simplified to the single-sequence template)."""
    flags = {}
    bos = tok_config.get("bos_token")
    bos = bos.get("content") if isinstance(bos, dict) else bos
    post = tok.get("post_processor") or {}
    for proc in post.get("processors", [post]):
        if proc.get("type") == "TemplateProcessing":
            single = proc.get("single", [])
            if len(single) > 1:
                first = single[0].get("SpecialToken", {}).get("id")
                last = single[-1].get("SpecialToken", {}).get("id")
                if first:  # a leading special token is the bos (SpecialVocab adopts it when none is named)
                    flags["bos"] = not bos or first == bos
                if last:  # SpecialVocab then makes the trailing token the eos (the old one eot): not done here
                    flags["eos"] = True
        elif proc.get("type") == "RobertaProcessing":
            flags["bos"] = flags["eos"] = True
    for typ in ("bos", "eos"):
        if isinstance(tok_config.get(f"add_{typ}_token"), bool):
            flags[typ] = tok_config[f"add_{typ}_token"]
    return flags


def _chat_template(tok_config, folder):
    template = tok_config.get("chat_template")
    if template is None and os.path.exists(os.path.join(folder, "chat_template.jinja")):
        with open(os.path.join(folder, "chat_template.jinja"), encoding="utf-8") as f:
            template = f.read()
    if template is None and os.path.exists(os.path.join(folder, "chat_template.json")):
        with open(os.path.join(folder, "chat_template.json"), encoding="utf-8") as f:
            template = json.load(f).get("chat_template")
    return template


def tokenizer_keys(tok, tok_config, folder, model_config, vocab_size, pre=None):
    """[(key, vtype, value)] of the tokenizer.* metadata, in llama.cpp's order."""
    model = tok.get("model", {})
    if model.get("type") != "BPE":
        raise SystemExit(f"tokenizer model {model.get('type')!r}: only byte-level BPE is converted")
    pre = pre or detect_pre(tok)
    if pre is None:
        raise SystemExit("unrecognised pre-tokenizer (not Llama 3's or DeepSeek-V3's Split regexes): name it "
                         "with --pre")
    added = {a["id"]: a for a in tok.get("added_tokens", [])}
    reverse = {i: t for t, i in model.get("vocab", {}).items()}
    all_ids = set(reverse) | set(added)
    if all_ids and max(all_ids) >= vocab_size:
        raise SystemExit(f"tokenizer has id {max(all_ids)} but the model's vocab_size is {vocab_size}")
    tokens, types = [], []
    for i in range(vocab_size):
        if i in added:
            text = added[i]["content"]
            if added[i].get("special") or looks_special(text):
                types.append(CONTROL)
            else:
                text = text.replace("\u2581", " ")
                types.append(USER_DEFINED)
        elif i in reverse:
            text = reverse[i]
            types.append(NORMAL)
        else:
            text = f"[PAD{i}]"
            types.append(UNUSED)
        tokens.append(text)
    keys = [("tokenizer.ggml.model", STRING, "gpt2"), ("tokenizer.ggml.pre", STRING, pre),
            ("tokenizer.ggml.tokens", ARRAY, (STRING, tokens)), ("tokenizer.ggml.token_type", ARRAY, (I32, types))]
    merges = _merges(model)
    if merges:
        keys.append(("tokenizer.ggml.merges", ARRAY, (STRING, merges)))
    for typ, tid in _special_ids(tok, tok_config, model_config).items():
        if typ in SPECIAL_ID_KEYS:
            keys.append((SPECIAL_ID_KEYS[typ], U32, tid))
    for typ, value in _add_flags(tok, tok_config).items():
        keys.append((f"tokenizer.ggml.add_{typ}_token", BOOL, value))
    if isinstance(tok_config.get("add_prefix_space"), bool):
        keys.append(("tokenizer.ggml.add_space_prefix", BOOL, tok_config["add_prefix_space"]))
    template = _chat_template(tok_config, folder)
    if isinstance(template, str):
        keys.append(("tokenizer.chat_template", STRING, template))
    elif isinstance(template, list):  # [{name, template}]: "default" is the plain key, others are named
        for choice in template:
            name = "".join(c if c.isascii() and c.isalnum() else "_" for c in choice.get("name", ""))
            key = "tokenizer.chat_template" if name == "default" else f"tokenizer.chat_template.{name}"
            keys.append((key, STRING, choice["template"]))
    return keys


# UTF-8 never uses these byte values: they are the first left out when ids run short.
_NEVER_IN_UTF8 = [0xC0, 0xC1] + list(range(0xF5, 0x100))
_SPECIAL_NAMES = {"bos": "<|begin_of_text|>", "eos": "<|end_of_text|>", "pad": "<|pad|>", "unk": "<|unk|>"}


def minimal_byte_vocab(model_config, vocab_size, pre):
    """Tokenizer keys for a checkpoint that ships no tokenizer (aerie's tiny test checkpoints: vocab 192 or
    256, bos/eos ids in config.json). A byte-level vocabulary with no merges, so text encodes byte by byte:
      - the ids config.json names as bos/eos/pad/unk become CONTROL tokens <|begin_of_text|>,
        <|end_of_text|>, <|pad|>, <|unk|>;
      - every other id, in increasing order, spells one byte (GPT-2's byte-level character for it), bytes
        in increasing order. When fewer than 256 ids are left, the bytes kept are, by priority, all bytes
        UTF-8 uses (0x00-0xBF, 0xC2-0xF4) in increasing order, then 0xC0, 0xC1, 0xF5-0xFF: with 254 ids
        0xFE and 0xFF are left out; with 190 ids only 0x00-0xBD remain (ASCII text still encodes);
      - ids beyond the 256 bytes are "[PAD{id}]" (UNUSED);
      - merges: an empty array; add_bos_token true when there is a bos, add_eos_token false."""
    specials = {}
    for typ in ("bos", "eos", "pad", "unk"):
        tid = model_config.get(f"{typ}_token_id")
        if isinstance(tid, int) and not isinstance(tid, bool) and 0 <= tid < vocab_size and tid not in specials:
            specials[tid] = typ
    free = vocab_size - len(specials)
    priority = [b for b in range(256) if b not in _NEVER_IN_UTF8] + _NEVER_IN_UTF8
    kept = sorted(priority[:max(0, free)])
    if len(kept) < 128:
        print(f"minimal vocabulary: {vocab_size} ids do not hold all of ASCII", file=sys.stderr)
    byte_chars = bytes_to_unicode()
    byte_queue = [byte_chars[b] for b in kept]
    tokens, types = [], []
    for i in range(vocab_size):
        if i in specials:
            tokens.append(_SPECIAL_NAMES[specials[i]])
            types.append(CONTROL)
        elif byte_queue:
            tokens.append(byte_queue.pop(0))
            types.append(NORMAL)
        else:
            tokens.append(f"[PAD{i}]")
            types.append(UNUSED)
    keys = [("tokenizer.ggml.model", STRING, "gpt2"), ("tokenizer.ggml.pre", STRING, pre),
            ("tokenizer.ggml.tokens", ARRAY, (STRING, tokens)), ("tokenizer.ggml.token_type", ARRAY, (I32, types)),
            ("tokenizer.ggml.merges", ARRAY, (STRING, []))]
    for tid, typ in specials.items():
        keys.append((SPECIAL_ID_KEYS[typ], U32, tid))
    keys.append(("tokenizer.ggml.add_bos_token", BOOL, "bos" in specials.values()))
    keys.append(("tokenizer.ggml.add_eos_token", BOOL, False))
    return keys
