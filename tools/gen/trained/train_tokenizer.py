#!/usr/bin/python3
"""Trains a byte-level BPE tokenizer in Llama 3's form on the corpus of make_corpus.py (train split only)
and writes it as Hugging Face files: tokenizer.json (BPE model with ignore_merges, the Llama 3 Split +
ByteLevel pre-tokenizer, ByteLevel decoder, a TemplateProcessing post-processor that adds
<|begin_of_text|>, exactly as Meta's published file is laid out) and tokenizer_config.json.

Vocabulary: the 256 byte tokens in GPT-2's byte order (ids 0..255, as Llama 3), then one token per merge
in merge order, up to --vocab-size minus the 16 special tokens, which take the last ids with Llama 3's
names and order (<|begin_of_text|>, <|end_of_text|>, reserved, <|start_header_id|>, <|end_header_id|>,
<|eot_id|>, ...).

Training (the classic algorithm with incremental pair counts): the text is split into pieces by the
Llama 3 regex and the distinct pieces counted; each piece is a sequence of byte tokens. Pair counts (over
pieces, weighted by piece count) and, per pair, the set of pieces holding it are kept up to date: a
merge rewrites only the pieces that hold its pair and adjusts the counts of the pairs around each rewrite.
The best pair comes from a heap with lazy deletion (an entry whose count is stale is pushed again with the
current count). Ties go to the pair whose bytes sort first, so the result is deterministic.

  /usr/bin/python3 tools/gen/trained/train_tokenizer.py --corpus /tmp/trained/corpus --out /tmp/trained/tokenizer \
      [--vocab-size 6144]
"""
import argparse
import collections
import heapq
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from byte_bpe import BYTE_TO_CHAR, PATTERN, Encoder, pieces, to_chars  # noqa: E402

SPECIAL_TOKENS = ["<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>",
                  "<|reserved_special_token_1|>", "<|reserved_special_token_2|>", "<|reserved_special_token_3|>",
                  "<|start_header_id|>", "<|end_header_id|>", "<|reserved_special_token_4|>", "<|eot_id|>",
                  "<|reserved_special_token_5|>", "<|reserved_special_token_6|>", "<|reserved_special_token_7|>",
                  "<|reserved_special_token_8|>", "<|reserved_special_token_9|>", "<|reserved_special_token_10|>"]
BOS, EOS = "<|begin_of_text|>", "<|end_of_text|>"


def count_pieces(corpus_dir):
    counts = collections.Counter()
    with open(os.path.join(corpus_dir, "train.jsonl"), encoding="utf-8") as f:
        for line in f:
            counts.update(pieces(json.loads(line)["text"]))
    return counts


def train(piece_counts, n_merges, log_every=500):
    """Returns (token byte strings by id, merges as (left id, right id)) after up to n_merges merges."""
    tokens = [bytes([b]) for b in BYTE_TO_CHAR]  # id -> bytes, GPT-2 byte order
    token_id = {t: i for i, t in enumerate(tokens)}
    words = [[token_id[bytes([b])] for b in piece.encode("utf-8")] for piece in piece_counts]
    freq = list(piece_counts.values())
    pair_count = collections.defaultdict(int)
    where = collections.defaultdict(set)  # pair -> indices of the words holding it
    for w, (word, n) in enumerate(zip(words, freq)):
        for pair in zip(word, word[1:]):
            pair_count[pair] += n
            where[pair].add(w)

    def entry(pair):  # heap order: highest count, then the pair's bytes in order
        return (-pair_count[pair], tokens[pair[0]], tokens[pair[1]], pair)

    heap = [entry(p) for p in pair_count]
    heapq.heapify(heap)
    merges, start = [], time.time()
    while len(merges) < n_merges and heap:
        neg, _, _, pair = heapq.heappop(heap)
        if -neg != pair_count.get(pair, 0):  # stale: push again with the current count
            if pair_count.get(pair, 0) > 0:
                heapq.heappush(heap, entry(pair))
            continue
        a, b = pair
        merged = tokens[a] + tokens[b]
        if merged not in token_id:  # two merge paths can spell the same bytes: one token
            token_id[merged] = len(tokens)
            tokens.append(merged)
        z = token_id[merged]
        merges.append(pair)
        touched = set()
        for w in sorted(where.pop(pair)):
            word, n = words[w], freq[w]
            for p in zip(word, word[1:]):
                pair_count[p] -= n
                where[p].discard(w)
                touched.add(p)
            out, i = [], 0
            while i < len(word):
                if i + 1 < len(word) and word[i] == a and word[i + 1] == b:
                    out.append(z)
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            words[w] = out
            for p in zip(out, out[1:]):
                pair_count[p] += n
                where[p].add(w)
                touched.add(p)
        pair_count.pop(pair, None)
        for p in touched:
            if pair_count.get(p, 0) <= 0:
                pair_count.pop(p, None)
                where.pop(p, None)
            elif z in p:  # counts of other pairs only fell: their heap entries are caught as stale
                heapq.heappush(heap, entry(p))
        if len(merges) % log_every == 0:
            print(f"merge {len(merges)}/{n_merges}: {merged!r} ({-neg} uses), {time.time() - start:.0f} s", flush=True)
    return tokens, merges


def tokenizer_json(tokens, merges, n_vocab_model):
    chars = [to_chars(t) for t in tokens]
    added = [{"id": n_vocab_model + i, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for i, s in enumerate(SPECIAL_TOKENS)]
    bos_id = n_vocab_model + SPECIAL_TOKENS.index(BOS)
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": PATTERN}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]},
        "post_processor": {"type": "Sequence", "processors": [
            {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
            {"type": "TemplateProcessing",
             "single": [{"SpecialToken": {"id": BOS, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
             "pair": [{"SpecialToken": {"id": BOS, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                      {"SpecialToken": {"id": BOS, "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
             "special_tokens": {BOS: {"id": BOS, "ids": [bos_id], "tokens": [BOS]}}}]},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": True,
                  "vocab": {c: i for i, c in enumerate(chars)},
                  "merges": [f"{chars[a]} {chars[b]}" for a, b in merges]},
    }


def tokenizer_config(n_vocab_model, max_length):
    decoder = {str(n_vocab_model + i): {"content": s, "lstrip": False, "normalized": False, "rstrip": False,
                                        "single_word": False, "special": True} for i, s in enumerate(SPECIAL_TOKENS)}
    return {"added_tokens_decoder": decoder, "bos_token": BOS, "clean_up_tokenization_spaces": False,
            "eos_token": EOS, "model_input_names": ["input_ids", "attention_mask"],
            "model_max_length": max_length, "tokenizer_class": "PreTrainedTokenizerFast"}


def write_json(path, value, indent=2):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(value, f, ensure_ascii=False, indent=indent)
        f.write("\n")


def main(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--corpus", default="/tmp/trained/corpus", help="make_corpus.py's output folder")
    p.add_argument("--out", default="/tmp/trained/tokenizer")
    p.add_argument("--vocab-size", type=int, default=6144, help="including the 256 bytes and 16 special tokens")
    p.add_argument("--model-max-length", type=int, default=512, help="tokenizer_config.json's model_max_length")
    args = p.parse_args(argv)
    n_vocab_model = args.vocab_size - len(SPECIAL_TOKENS)

    start = time.time()
    counts = count_pieces(args.corpus)
    print(f"{sum(counts.values())} pieces, {len(counts)} distinct, {time.time() - start:.0f} s", flush=True)
    # Merges that repeat an existing spelling add no token: keep merging until the vocabulary is full.
    tokens, merges = train(counts, n_vocab_model - 256)
    while len(tokens) < n_vocab_model:
        tokens, merges = train(counts, len(merges) + n_vocab_model - len(tokens))
    print(f"{len(merges)} merges, {len(tokens)} tokens + {len(SPECIAL_TOKENS)} special, {time.time() - start:.0f} s")

    os.makedirs(args.out, exist_ok=True)
    write_json(os.path.join(args.out, "tokenizer.json"), tokenizer_json(tokens, merges, n_vocab_model))
    write_json(os.path.join(args.out, "tokenizer_config.json"), tokenizer_config(n_vocab_model, args.model_max_length))

    # Check: the encoder round-trips the validation split, and report its compression.
    enc = Encoder(os.path.join(args.out, "tokenizer.json"))
    n_chars = n_ids = 0
    with open(os.path.join(args.corpus, "validation.jsonl"), encoding="utf-8") as f:
        for line in f:
            text = json.loads(line)["text"]
            ids = enc.encode(text)
            assert enc.decode(ids) == text, "round trip failed"
            n_chars, n_ids = n_chars + len(text), n_ids + len(ids)
    print(f"validation: {n_chars} characters -> {n_ids} tokens ({n_chars / n_ids:.2f} characters per token); "
          f"wrote {args.out}, {time.time() - start:.0f} s in all")


if __name__ == "__main__":
    main(sys.argv[1:])
