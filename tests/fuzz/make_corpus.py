#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpora, tests/fuzz/corpus/<target>/seed-*, from real inputs: the chat
templates and Jinja snippets of tests/data/chat_template, the request bodies and JSON schemas written in the
tests, the test checkpoints' safetensors headers (with tiny tensors) and torch zip / pickle files, and
tokenizer.json snippets cut from the real Llama 3.1 and DeepSeek-V3 tokenizers (when
tools/gen/tokenizer/fetch_tokenizers.sh has fetched them; the committed seeds keep them otherwise).

Only seed-* files are rewritten; regress-* files (inputs of past crashes) are left alone.
Usage: python3 tests/fuzz/make_corpus.py
"""
import io
import json
import pathlib
import pickle
import re
import struct
import zipfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
CORPUS = ROOT / "tests" / "fuzz" / "corpus"


def write_seeds(target, seeds, keep=()):
    """Replaces the target's seed-* files; those named in `keep` stay when not regenerated."""
    folder = CORPUS / target
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("seed-*"):
        if old.name[len("seed-"):] not in keep:
            old.unlink()
    for name, data in seeds:
        (folder / f"seed-{name}").write_bytes(data if isinstance(data, bytes) else data.encode())
    print(f"{target}: {len(seeds)} seeds")


def raw_strings(path):
    """The R"(...)" literals of a C++ test file."""
    return re.findall(r'R"\((.*?)\)"', path.read_text(), re.S)


def json_objects(paths, keep):
    out, seen = [], set()
    for path in paths:
        for text in raw_strings(path):
            try:
                value = json.loads(text)
            except ValueError:
                continue
            if isinstance(value, dict) and keep(value) and text not in seen:
                seen.add(text)
                out.append(text)
    return out


# --- chat templates -------------------------------------------------------------------------------------
def jinja_seeds():
    seeds = [(p.stem, p.read_text()) for p in sorted((DATA / "chat_template").glob("*.jinja"))]
    for snippet in json.loads((DATA / "chat_template" / "snippets.json").read_text()):
        context = json.dumps(snippet.get("context", {}), ensure_ascii=False)
        seeds.append(("snippet-" + snippet["name"], snippet["template"] + "\0" + context))
    return seeds


# --- OpenAI request bodies ------------------------------------------------------------------------------
def request_seeds():
    server_tests = sorted((ROOT / "tests" / "server").glob("*_test.cpp"))
    bodies = json_objects(server_tests, lambda v: "messages" in v or "prompt" in v)
    conversation = json.loads((DATA / "chat_template" / "cases.json").read_text())
    tools = conversation["tools"]
    for name in ["tool_call_object_args", "two_tool_calls", "content_parts", "non_ascii_and_think"]:
        bodies.append(json.dumps({"model": "m", "messages": conversation["conversations"][name], "tools": tools,
                                  "tool_choice": "auto", "max_tokens": 16, "seed": 1}, ensure_ascii=False))
    bodies.append(json.dumps({"messages": [{"role": "user", "content": "json"}], "response_format": {
        "type": "json_schema", "json_schema": {"name": "w", "strict": True, "schema": tools[0]["function"]["parameters"]}}}))
    bodies.append(json.dumps({"messages": [{"role": "user", "content": "x"}], "tools": tools, "tool_choice": "required",
                              "parallel_tool_calls": False}))
    bodies.append(json.dumps({"prompt": [[1, 2, 3], [4]], "max_tokens": 3, "echo": True, "logprobs": 2, "n": 2}))
    return [(f"{i:03d}", body) for i, body in enumerate(bodies)]


# --- JSON schemas ---------------------------------------------------------------------------------------
def schema_seeds():
    sample_tests = sorted((ROOT / "tests" / "sample").glob("*_test.cpp"))
    schemas = json_objects(sample_tests, lambda v: True)
    cases = json.loads((DATA / "sample" / "json_cases.json").read_text())["cases"]
    documents = [c["text"] for c in cases if c["valid"]][:40]
    return [(f"{i:03d}", schema + "\0" + documents[i % len(documents)]) for i, schema in enumerate(schemas)]


# --- tool-call texts ------------------------------------------------------------------------------------
def tool_parser_seeds():
    calls_begin, calls_end = "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"
    call_begin, call_end, sep = "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>", "<｜tool▁sep｜>"
    args = '{"location": "Paris, France", "options": {"days": 2, "hourly": false}}'
    v3 = lambda name, a: f"{call_begin}function{sep}{name}\n```json\n{a}\n```{call_end}"
    v31 = lambda name, a: f"{call_begin}{name}{sep}{a}{call_end}"
    texts = [
        ("v3-one", "0", calls_begin + v3("get_weather", args) + calls_end),
        ("v3-two", "0", "Let me check." + calls_begin + v3("get_weather", args) + "\n" + v3("search", '{"q": "x"}') + calls_end),
        ("v3-bad", "0", calls_begin + v3("f", "[1, 2]") + v3("", "{}") + calls_end + " after"),
        ("v3-cut", "0", "text" + calls_begin + call_begin + "function" + sep + "f\n```json\n{\"a\": "),
        ("v31-one", "1", calls_begin + v31("get_weather", args) + calls_end),
        ("v31-two", "1", "ok " + calls_begin + v31("a", "{}") + v31("b", '"{\\"x\\": 1}"') + calls_end + "tail"),
        ("v31-bare", "1", v31("get_weather", args) + "<｜end▁of▁sentence｜>"),
        ("llama-one", "2", '{"name": "get_weather", "parameters": ' + args + "}"),
        ("llama-tag", "2", 'Sure.<|python_tag|>{"name": "a", "arguments": {}}; {"name": "b", "parameters": {"s": "}"}}'),
        ("llama-two", "2", '  {"name": "a", "parameters": {"k": [1, {"z": "\\"}"}]}}\n{"name": "b", "parameters": {}}'),
        ("llama-notcall", "2", '{"nome": "a"} then {"name": "b", "parameters": {}}'),
        ("llama-cut", "2", '<|python_tag|>{"name": "get_weather", "parameters": {"location": "Pa'),
        ("content", "2", "Plain answer with { braces } and <|eot_id|>."),
    ]
    return [(name, kind + chr(ord("A") + i) + text) for i, (name, kind, text) in enumerate(texts)]


# --- tokenizer.json snippets ----------------------------------------------------------------------------
TOKENIZER_TEXT = "Hello world! It's 2025: 1234567 apples\n\n\tcafé 中文 日本語 😀 <s> [X] don't  end"


def tiny_tokenizer():
    vocab = {"a": 0, "b": 1, "c": 2, "Ġ": 3, "ab": 4, "abc": 5, "Ġa": 6, "ca": 7, "<": 12, "s": 13, ">": 14}
    return {
        "version": "1.0",
        "added_tokens": [
            {"id": 9, "content": "<s>", "special": True, "normalized": False},
            {"id": 10, "content": "[X]", "special": False, "lstrip": True, "rstrip": True},
            {"id": 11, "content": "wd", "special": False, "single_word": True}],
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True},
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                           "special_tokens": {"<s>": {"id": "<s>", "ids": [9], "tokens": ["<s>"]}}},
        "decoder": {"type": "ByteLevel"},
        "model": {"type": "BPE", "vocab": vocab, "merges": ["a b", "ab c", "Ġ a"]},
    }


def cut_tokenizer(folder, n_merges, n_added):
    """The real tokenizer's components with its single-character tokens and first merges only."""
    tokenizer = json.loads((folder / "tokenizer.json").read_text())
    config = json.loads((folder / "tokenizer_config.json").read_text())
    vocab = tokenizer["model"]["vocab"]
    kept = {t: i for t, i in vocab.items() if len(t) == 1}
    merges = []
    for merge in tokenizer["model"]["merges"]:
        left, right = merge.split(" ", 1) if isinstance(merge, str) else merge
        if left in kept and right in kept and left + right in vocab:
            kept[left + right] = vocab[left + right]
            merges.append(merge)
            if len(merges) == n_merges:
                break
    tokenizer["model"]["vocab"] = kept
    tokenizer["model"]["merges"] = merges
    tokenizer["added_tokens"] = tokenizer["added_tokens"][:n_added]
    config.pop("chat_template", None)
    if "added_tokens_decoder" in config:
        ids = {str(t["id"]) for t in tokenizer["added_tokens"]}
        config["added_tokens_decoder"] = {k: v for k, v in config["added_tokens_decoder"].items() if k in ids}
    return json.dumps(tokenizer, ensure_ascii=False), json.dumps(config, ensure_ascii=False)


def tokenizer_seeds():
    seeds = [("tiny", json.dumps(tiny_tokenizer(), ensure_ascii=False) + "\0" + TOKENIZER_TEXT + "\0"
              + json.dumps({"bos_token": "<s>", "eos_token": {"content": "</s>"}, "add_bos_token": True}))]
    pair = tiny_tokenizer()
    pair["model"]["merges"] = [["a", "b"], ["ab", "c"], ["Ġ", "a"]]
    pair["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Digits", "individual_digits": True},
        {"type": "Split", "pattern": {"Regex": "\\s+(?!\\S)|\\s+|\\S+"}, "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "use_regex": False}]}
    seeds.append(("pair-merges", json.dumps(pair, ensure_ascii=False) + "\0" + TOKENIZER_TEXT))
    cache = ROOT / ".cache" / "tokenizers"
    for model in ["llama3_1", "deepseek_v3"]:
        if (cache / model / "tokenizer.json").exists():
            tokenizer, config = cut_tokenizer(cache / model, 120, 12)
            seeds.append((model, tokenizer + "\0" + TOKENIZER_TEXT + "\0" + config))
    return seeds


# --- safetensors ----------------------------------------------------------------------------------------
DTYPE_BYTES = {"F64": 8, "F32": 4, "I64": 8, "I32": 4, "BF16": 2, "F16": 2, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1,
               "F8_E4M3": 1}


def safetensors_bytes(tensors, metadata=None):
    """tensors: [(name, dtype, shape)], laid out in order, filled with a counting byte pattern."""
    header, data = {}, b""
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape in tensors:
        n = DTYPE_BYTES.get(dtype, 4)
        for dim in shape:
            n *= dim
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + n]}
        data += bytes((len(data) + i) % 251 for i in range(n))
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


def real_header(path):
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    return json.loads(raw[8:8 + n])


def safetensors_seeds():
    seeds = [
        ("two", safetensors_bytes([("a", "F32", [2, 3]), ("b", "BF16", [4])], {"format": "pt"})),
        ("dtypes", safetensors_bytes([(d.lower(), d, [3]) for d in DTYPE_BYTES])),
        ("empty-and-scalar", safetensors_bytes([("e", "F32", [0, 4]), ("s", "F16", [])])),
        ("no-tensors", safetensors_bytes([], {"k": "v"})),
    ]
    # The tensor names and dtypes of real test checkpoints, with 2-element tensors.
    for name, path in [("llama", DATA / "llama" / "bf16_gqa_rope_scaled_tied" / "model.safetensors"),
                       ("deepseek-fp8", DATA / "deepseek" / "fp8_qlora_yarn" / "model.safetensors"),
                       ("eagle3", DATA / "eagle" / "eagle3_midlayer_d2t" / "model.safetensors")]:
        header = real_header(path)
        tensors = [(k, v["dtype"], [2] if len(v["shape"]) < 2 else [1, 2]) for k, v in header.items()
                   if k != "__metadata__"][:24]
        seeds.append((name, safetensors_bytes(tensors, header.get("__metadata__"))))
    return seeds


# --- torch zip and pickle -------------------------------------------------------------------------------
TORCH_FILES = [("state-dict", DATA / "io" / "state_dict.bin"),
               ("eagle1", DATA / "eagle" / "eagle1_bin_nobias_f32" / "pytorch_model.bin"),
               ("eagle3", DATA / "eagle" / "eagle3_bin_d2t_override" / "pytorch_model.bin"),
               ("llama", DATA / "llama" / "bf16_bin_tied" / "pytorch_model.bin")]


def data_pkl(path):
    with zipfile.ZipFile(path) as archive:
        name = next(n for n in archive.namelist() if n.endswith("/data.pkl"))
        return archive.read(name)


def shrunk_zip(path, zip64):
    """The archive with every storage cut to 16 bytes (a different layout: stored, maybe ZIP64)."""
    out = io.BytesIO()
    with zipfile.ZipFile(path) as source, zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as target:
        for info in source.infolist():
            data = source.read(info)
            if "/data/" in info.filename:
                data = data[:16]
            with target.open(info.filename, "w", force_zip64=zip64) as entry:
                entry.write(data)
    return out.getvalue()


def torch_zip_seeds():
    seeds = [("state-dict", (DATA / "io" / "state_dict.bin").read_bytes())]
    seeds.append(("state-dict-zip64", shrunk_zip(DATA / "io" / "state_dict.bin", True)))
    seeds.append(("eagle3-shrunk", shrunk_zip(TORCH_FILES[2][1], False)))
    return seeds


def pickle_seeds():
    seeds = [(name, data_pkl(path)) for name, path in TORCH_FILES]
    shared = [1, 2]
    value = {"ints": [0, -1, 255, 65535, 2**31, -2**63, 2**64], "floats": [0.5, -1e300], "text": "é中😀",
             "bytes": b"\x00\xff", "tuple": (1, (2, (3,))), "nested": {"a": [shared, shared]}, "flags": [True, False, None]}
    for protocol in (2, 3, 4):
        seeds.append((f"python-protocol-{protocol}", pickle.dumps(value, protocol=protocol)))
    return seeds


# --- GGUF -----------------------------------------------------------------------------------------------
def gguf_bytes(kv, tensors, alignment=32):
    """A GGUF v3 file: kv is [(key, type id, packed value bytes)], tensors [(name, ne, ggml type, data)]."""
    def string(s):
        b = s.encode()
        return struct.pack("<Q", len(b)) + b
    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kv))
    for key, type_id, value in kv:
        out += string(key) + struct.pack("<I", type_id) + value
    offset, blobs = 0, []
    for name, ne, ggml_type, data in tensors:
        out += string(name) + struct.pack("<I", len(ne)) + struct.pack("<%dQ" % len(ne), *ne)
        out += struct.pack("<IQ", ggml_type, offset)
        blobs.append(data + b"\0" * (-len(data) % alignment))
        offset += len(blobs[-1])
    out += b"\0" * (-len(out) % alignment)
    return out + b"".join(blobs)


def gguf_seeds():
    def string(s):
        b = s.encode()
        return struct.pack("<Q", len(b)) + b
    tokens = struct.pack("<IQ", 8, 3) + string("a") + string("b") + string("ab")
    types = struct.pack("<IQ", 5, 3) + struct.pack("<3i", 1, 1, 3)
    kv = [("general.architecture", 8, string("llama")), ("llama.block_count", 4, struct.pack("<I", 2)),
          ("llama.rope.freq_base", 6, struct.pack("<f", 5e5)), ("tokenizer.ggml.add_bos_token", 7, b"\1"),
          ("tokenizer.ggml.tokens", 9, tokens), ("tokenizer.ggml.token_type", 9, types)]
    f32 = struct.pack("<6f", 1, 2, 3, 4, 5, 6)
    q8_0 = struct.pack("<e", 0.5) + bytes(range(32))
    q4_k = struct.pack("<ee", 0.25, 0.125) + bytes(range(12)) + bytes(128)
    q6_k = bytes(range(128)) + bytes(64) + bytes(range(16)) + struct.pack("<e", 0.01)
    return [
        ("small", gguf_bytes(kv, [("w", [2, 3], 0, f32), ("q", [32], 8, q8_0)])),
        ("k-types", gguf_bytes(kv[:1], [("a", [256], 12, q4_k), ("b", [256], 14, q6_k), ("h", [4], 1, bytes(8))])),
        ("no-tensors", gguf_bytes(kv, [])),
    ]


def main():
    write_seeds("jinja", jinja_seeds())
    write_seeds("openai_request", request_seeds())
    write_seeds("json_schema", schema_seeds())
    write_seeds("tool_parser", tool_parser_seeds())
    write_seeds("tokenizer", tokenizer_seeds(), keep={"llama3_1", "deepseek_v3"})
    write_seeds("safetensors", safetensors_seeds())
    write_seeds("torch_zip", torch_zip_seeds())
    write_seeds("pickle", pickle_seeds())
    write_seeds("gguf", gguf_seeds())


if __name__ == "__main__":
    main()
