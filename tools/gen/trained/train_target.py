#!/usr/bin/python3
"""Trains aerie-tiny-llama, a small Llama 3 (tools/gen/trained/llama_model.py) on the corpus of make_corpus.py
with the tokenizer of train_tokenizer.py, on the CPU, and exports it in the Hugging Face LlamaForCausalLM
layout (config.json, generation_config.json, BF16 model.safetensors with tied embeddings, the tokenizer).

Data: every document of a split becomes <|begin_of_text|> text <|end_of_text|>; the documents are
concatenated into one token stream per split (cached as uint16 under --work/data). A training step takes
--batch windows of --context + 1 tokens at offsets drawn from a generator seeded by (seed, step), so a
run is reproducible and a resumed run draws exactly the batches the uninterrupted one would have.
Validation: the whole validation stream in consecutive windows of --context tokens (each predicted
token counted once); "train (eval)" is the same measure on the first windows of the train stream.

Optimisation: AdamW (betas 0.9/0.95, weight decay on matrices and embeddings, not on norms), linear
warm-up then cosine decay to --min-lr-ratio of the peak, gradient clipping at 1.0, float32.

Checkpoints (--work/checkpoint.pt, written atomically every --checkpoint-every steps) hold model,
optimiser, step and log; --resume continues from it. At the end: --work/final.pt (float32 weights,
config, summary), the export into --export, and --work/summary.json with the figures the model card quotes.

  /usr/bin/python3 tools/gen/trained/train_target.py --steps 1800 --export models/aerie-tiny-llama
  /usr/bin/python3 tools/gen/trained/train_target.py --resume ...     # same flags, after an interruption
  /usr/bin/python3 tools/gen/trained/train_target.py --export-only --export models/aerie-tiny-llama
"""
import argparse
import json
import math
import os
import shutil
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import llama_model  # noqa: E402
from byte_bpe import Encoder  # noqa: E402


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--corpus", default="/tmp/trained/corpus")
    p.add_argument("--tokenizer", default="/tmp/trained/tokenizer", help="folder with tokenizer.json")
    p.add_argument("--work", default="/tmp/trained/target", help="data cache, checkpoints, final weights")
    p.add_argument("--export", help="export the final model into this folder")
    p.add_argument("--resume", action="store_true")
    p.add_argument("--export-only", action="store_true", help="export --work/final.pt into --export, no training")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--threads", type=int, default=2)
    # Model (Llama 3 architecture).
    p.add_argument("--hidden-size", type=int, default=256)
    p.add_argument("--intermediate-size", type=int, default=768)
    p.add_argument("--num-layers", type=int, default=6)
    p.add_argument("--num-heads", type=int, default=8)
    p.add_argument("--num-kv-heads", type=int, default=2)
    p.add_argument("--rope-theta", type=float, default=10000.0)
    p.add_argument("--context", type=int, default=512, help="training window = max_position_embeddings")
    # Optimisation.
    p.add_argument("--steps", type=int, default=1800)
    p.add_argument("--batch", type=int, default=8, help="windows per step")
    p.add_argument("--lr", type=float, default=2e-3, help="peak learning rate")
    p.add_argument("--min-lr-ratio", type=float, default=0.1)
    p.add_argument("--warmup", type=int, default=100)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--grad-clip", type=float, default=1.0)
    # Reporting.
    p.add_argument("--log-every", type=int, default=10)
    p.add_argument("--eval-every", type=int, default=250)
    p.add_argument("--train-eval-tokens", type=int, default=65536, help="train-stream tokens for 'train (eval)'")
    p.add_argument("--checkpoint-every", type=int, default=100)
    return p.parse_args(argv)


# ---- data --------------------------------------------------------------------------------------------------------
def token_stream(corpus, split, encoder, bos, eos, cache):
    """uint16 ids of all documents of a split, each as BOS text EOS (cached in `cache`)."""
    if os.path.exists(cache):
        return np.fromfile(cache, dtype=np.uint16)
    ids = []
    with open(os.path.join(corpus, f"{split}.jsonl"), encoding="utf-8") as f:
        for line in f:
            ids += [bos] + encoder.encode(json.loads(line)["text"], special_tokens=False) + [eos]
    stream = np.array(ids, dtype=np.uint16)
    os.makedirs(os.path.dirname(cache), exist_ok=True)
    stream.tofile(cache + ".tmp")
    os.replace(cache + ".tmp", cache)
    return stream


def train_batch(stream, step, a):
    """[batch, context + 1] windows at offsets drawn from (seed, step)."""
    rng = np.random.default_rng([a.seed, step])
    offsets = rng.integers(0, len(stream) - a.context - 1, size=a.batch)
    return torch.from_numpy(np.stack([stream[o:o + a.context + 1] for o in offsets]).astype(np.int64))


@torch.no_grad()
def evaluate(model, stream, context, max_tokens=None, batch=8):
    """Mean next-token loss over consecutive windows of the stream (each target counted once)."""
    n = len(stream) - 1 if max_tokens is None else min(len(stream) - 1, max_tokens)
    starts = list(range(0, n, context))
    total, count = 0.0, 0
    model.eval()
    for i in range(0, len(starts), batch):
        rows = [torch.from_numpy(stream[s:min(s + context, n) + 1].astype(np.int64)) for s in starts[i:i + batch]]
        for length in sorted({len(r) for r in rows}):  # the last window may be shorter
            x = torch.stack([r for r in rows if len(r) == length])
            logits = model(x[:, :-1])
            total += float(F.cross_entropy(logits.reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1), reduction="sum"))
            count += x[:, 1:].numel()
    model.train()
    return total / count


# ---- optimisation ------------------------------------------------------------------------------------------------
def learning_rate(step, a):
    if step < a.warmup:
        return a.lr * (step + 1) / a.warmup
    progress = (step - a.warmup) / max(1, a.steps - a.warmup)
    return a.lr * (a.min_lr_ratio + (1 - a.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * min(1.0, progress))))


def make_optimizer(model, a):
    decay = [p for n, p in model.named_parameters() if p.dim() == 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": a.weight_decay},
                              {"params": no_decay, "weight_decay": 0.0}], lr=a.lr, betas=(0.9, 0.95), eps=1e-8)


def save_atomic(obj, path):
    torch.save(obj, path + ".tmp")
    os.replace(path + ".tmp", path)


def fmt_time(seconds):
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def resume_checkpoint(path, model, optimizer):
    """(step, elapsed seconds, log) of the checkpoint at path, loaded into model and optimizer; (0, 0.0, None)
    when there is none yet."""
    if not os.path.exists(path):
        return 0, 0.0, None
    ckpt = torch.load(path)
    model.load_state_dict(ckpt["model"])
    optimizer.load_state_dict(ckpt["optimizer"])
    print(f"resumed at step {ckpt['step']} ({fmt_time(ckpt['elapsed'])} of training so far)", flush=True)
    return ckpt["step"], ckpt["elapsed"], ckpt["log"]


def main(argv):
    a = parse_args(argv)
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    os.makedirs(a.work, exist_ok=True)

    encoder = Encoder(os.path.join(a.tokenizer, "tokenizer.json"))
    bos, eos = encoder.special["<|begin_of_text|>"], encoder.special["<|end_of_text|>"]
    data_dir = os.path.join(a.work, "data")
    train = token_stream(a.corpus, "train", encoder, bos, eos, os.path.join(data_dir, "train.u16"))
    val = token_stream(a.corpus, "validation", encoder, bos, eos, os.path.join(data_dir, "validation.u16"))
    config = llama_model.LlamaConfig(
        vocab_size=len(encoder.vocab) + len(encoder.special), hidden_size=a.hidden_size,
        intermediate_size=a.intermediate_size, num_layers=a.num_layers, num_heads=a.num_heads,
        num_kv_heads=a.num_kv_heads, max_position_embeddings=a.context, rope_theta=a.rope_theta,
        bos_token_id=bos, eos_token_id=eos)
    model = llama_model.LlamaForCausalLM(config)
    model.init_weights(a.seed)
    if a.export_only:
        model.load_state_dict(torch.load(os.path.join(a.work, "final.pt"))["model"])
        export(model, a)
        return
    optimizer = make_optimizer(model, a)
    print(f"model: {llama_model.param_count(model) / 1e6:.3f} M parameters ({config}); train {len(train)} tokens, "
          f"validation {len(val)} tokens; {a.steps} steps x {a.batch} x {a.context} = "
          f"{a.steps * a.batch * a.context / 1e6:.1f} M tokens ({a.steps * a.batch * a.context / len(train):.1f} epochs)",
          flush=True)

    checkpoint_path = os.path.join(a.work, "checkpoint.pt")
    step, elapsed, log = resume_checkpoint(checkpoint_path, model, optimizer) if a.resume else (0, 0.0, None)
    log = log or {"train": [], "eval": []}

    def run_eval():
        val_loss = evaluate(model, val, a.context)
        train_loss = evaluate(model, train, a.context, a.train_eval_tokens)
        log["eval"].append({"step": step, "val_loss": val_loss, "train_eval_loss": train_loss})
        print(f"eval step {step}: val loss {val_loss:.4f} (ppl {math.exp(val_loss):.2f}), "
              f"train (eval) loss {train_loss:.4f} (ppl {math.exp(train_loss):.2f})", flush=True)

    model.train()
    window_loss, window_start, window_steps = 0.0, time.time(), 0
    tokens_per_step = a.batch * a.context
    while step < a.steps:
        started = time.time()
        lr = learning_rate(step, a)
        for group in optimizer.param_groups:
            group["lr"] = lr
        x = train_batch(train, step, a)
        logits = model(x[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), a.grad_clip))
        optimizer.step()
        step += 1
        elapsed += time.time() - started
        log["train"].append({"step": step, "loss": float(loss), "lr": lr, "grad_norm": grad_norm})
        window_loss, window_steps = window_loss + float(loss), window_steps + 1
        if step % a.log_every == 0 or step == a.steps:
            rate = window_steps * tokens_per_step / (time.time() - window_start)
            eta = (a.steps - step) * tokens_per_step / rate
            print(f"step {step}/{a.steps} loss {window_loss / window_steps:.4f} lr {lr:.2e} |g| {grad_norm:.2f} "
                  f"{rate:.0f} tok/s elapsed {fmt_time(elapsed)} eta {fmt_time(eta)}", flush=True)
            window_loss, window_start, window_steps = 0.0, time.time(), 0
        if step % a.eval_every == 0 and step < a.steps:
            run_eval()
            window_start = time.time()
        if step % a.checkpoint_every == 0 or step == a.steps:
            save_atomic({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step,
                         "elapsed": elapsed, "log": log, "args": vars(a)}, checkpoint_path)

    run_eval()
    final = log["eval"][-1]
    recent = [r["loss"] for r in log["train"][-50:]]
    bf16 = llama_model.round_to_bf16_(llama_model.LlamaForCausalLM(config))
    bf16.load_state_dict(model.state_dict())
    llama_model.round_to_bf16_(bf16)
    bf16_val = evaluate(bf16, val, a.context)
    summary = {
        "parameters": llama_model.param_count(model), "config": vars(config), "steps": a.steps,
        "tokens_seen": a.steps * tokens_per_step, "train_tokens": int(len(train)), "validation_tokens": int(len(val)),
        "epochs": a.steps * tokens_per_step / len(train), "training_seconds": elapsed,
        "train_loss_last_50_steps": sum(recent) / len(recent), "train_eval_loss": final["train_eval_loss"],
        "val_loss": final["val_loss"], "val_perplexity": math.exp(final["val_loss"]),
        "val_loss_bf16": bf16_val, "val_perplexity_bf16": math.exp(bf16_val), "args": vars(a),
        "torch": torch.__version__, "threads": a.threads,
    }
    save_atomic({"model": model.state_dict(), "config": vars(config), "summary": summary},
                os.path.join(a.work, "final.pt"))
    with open(os.path.join(a.work, "summary.json"), "w") as f:
        json.dump({**summary, "log": log}, f, indent=1)
    print(f"done: {fmt_time(elapsed)}, train loss (last 50 steps) {summary['train_loss_last_50_steps']:.4f}, "
          f"val loss {final['val_loss']:.4f} (ppl {summary['val_perplexity']:.2f}), "
          f"BF16 weights: val loss {bf16_val:.4f} (ppl {math.exp(bf16_val):.2f})", flush=True)
    if a.export:
        export(model, a)


def export(model, a):
    llama_model.export(model, a.export)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(os.path.join(a.tokenizer, name), os.path.join(a.export, name))
    print(f"exported to {a.export}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
