#!/usr/bin/python3
"""Trains aerie-tiny-deepseek, a small DeepSeek-V3 with its MTP layer (tools/gen/trained/deepseek_model.py),
on the CPU on the token streams aerie-tiny-llama was trained on, and exports it in the published
DeepseekV3ForCausalLM layout (config.json, generation_config.json, BF16 model.safetensors with the MTP
layer model.layers.L.*, aerie-tiny-llama's tokenizer, training_summary.json).

Data: --data/{train,validation}.u16, written by train_target.py (every document as <|begin_of_text|> text
<|end_of_text|>, concatenated; vocabulary of models/aerie-tiny-llama/tokenizer.json). Batches, learning
rate schedule, optimiser and checkpointing are train_target.py's (imported): --batch windows of
--context + 1 tokens at offsets drawn from (seed, step), AdamW, warm-up then cosine, clipping at 1.0.

Loss per step, as DeepSeek-V3 trains (its report, §2.2 and §2.1.2):
  main next-token cross-entropy + --mtp-weight * MTP cross-entropy (row t predicts token t + 2 from the
  final-normed hidden state t and token t + 1) + --balance-alpha * the sequence-wise balance loss.
After each optimiser step every MoE layer's e_score_correction_bias moves by --bias-rate * sign(mean
load - load_e) (aux-loss-free balancing; no gradient). The progress line's "load" is the worst layer's
max / mean expert load over the logged steps (1.00 = balanced).
Validation: main and MTP loss and top-1 accuracy over the whole validation stream in consecutive windows.

  /usr/bin/python3 tools/gen/trained/train_deepseek.py --steps 2400 --fp8 --export models/aerie-tiny-deepseek
  /usr/bin/python3 tools/gen/trained/train_deepseek.py --resume ...       # same flags, after an interruption
  /usr/bin/python3 tools/gen/trained/train_deepseek.py --export-only --fp8 --export models/aerie-tiny-deepseek
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

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, HERE)
import deepseek_model as dm  # noqa: E402
from train_target import fmt_time, learning_rate, make_optimizer, resume_checkpoint, save_atomic, train_batch  # noqa: E402


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default="/tmp/trained/target/data", help="train.u16 and validation.u16")
    p.add_argument("--tokenizer", default=os.path.join(ROOT, "models", "aerie-tiny-llama"),
                   help="folder with tokenizer.json and tokenizer_config.json (copied on export)")
    p.add_argument("--work", default="/tmp/trained/deepseek", help="checkpoints, final weights, summary")
    p.add_argument("--export", help="export the final model into this folder")
    p.add_argument("--resume", action="store_true")
    p.add_argument("--export-only", action="store_true", help="export --work/final.pt into --export, no training")
    p.add_argument("--fp8", action="store_true",
                   help="export the linear weights FP8 (E4M3, 128x128 weight_scale_inv tiles) as DeepSeek-V3 "
                        "publishes them; the summary gains the validation loss of those weights (val_fp8)")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--threads", type=int, default=2)
    # Model (DeepSeek-V3 architecture; defaults = DeepseekConfig's).
    d = dm.DeepseekConfig()
    for name in ("hidden_size", "intermediate_size", "moe_intermediate_size", "num_layers", "num_heads",
                 "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim",
                 "n_routed_experts", "n_shared_experts", "num_experts_per_tok", "n_group", "topk_group",
                 "first_k_dense_replace"):
        p.add_argument("--" + name.replace("_", "-"), type=int, default=getattr(d, name))
    p.add_argument("--routed-scaling-factor", type=float, default=d.routed_scaling_factor)
    p.add_argument("--rope-theta", type=float, default=d.rope_theta)
    p.add_argument("--context", type=int, default=512, help="training window = max_position_embeddings")
    # Optimisation.
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--batch", type=int, default=4, help="windows per step")
    p.add_argument("--lr", type=float, default=2e-3, help="peak learning rate")
    p.add_argument("--min-lr-ratio", type=float, default=0.1)
    p.add_argument("--warmup", type=int, default=100)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--grad-clip", type=float, default=1.0)
    p.add_argument("--mtp-weight", type=float, default=0.3, help="lambda of the MTP loss")
    p.add_argument("--bias-rate", type=float, default=1e-2,
                   help="gamma of the router bias update (DeepSeek-V3: 1e-3 over ~10^5 steps; a 2,000-step run "
                        "at 1e-3 leaves the experts unbalanced for its first ~500 steps, 1e-2 balances in ~50)")
    p.add_argument("--balance-alpha", type=float, default=1e-4, help="sequence-wise balance loss weight")
    # Reporting.
    p.add_argument("--log-every", type=int, default=10)
    p.add_argument("--eval-every", type=int, default=250)
    p.add_argument("--train-eval-tokens", type=int, default=65536, help="train-stream tokens for 'train (eval)'")
    p.add_argument("--checkpoint-every", type=int, default=100)
    return p.parse_args(argv)


def make_config(a, bos, eos):
    return dm.DeepseekConfig(
        hidden_size=a.hidden_size, intermediate_size=a.intermediate_size,
        moe_intermediate_size=a.moe_intermediate_size, num_layers=a.num_layers, num_heads=a.num_heads,
        q_lora_rank=a.q_lora_rank, kv_lora_rank=a.kv_lora_rank, qk_nope_head_dim=a.qk_nope_head_dim,
        qk_rope_head_dim=a.qk_rope_head_dim, v_head_dim=a.v_head_dim, n_routed_experts=a.n_routed_experts,
        n_shared_experts=a.n_shared_experts, num_experts_per_tok=a.num_experts_per_tok, n_group=a.n_group,
        topk_group=a.topk_group, routed_scaling_factor=a.routed_scaling_factor,
        first_k_dense_replace=a.first_k_dense_replace, max_position_embeddings=a.context, rope_theta=a.rope_theta,
        bos_token_id=bos, eos_token_id=eos)


def special_ids(tokenizer_folder):
    with open(os.path.join(tokenizer_folder, "tokenizer.json"), encoding="utf-8") as f:
        tok = json.load(f)
    special = {t["content"]: t["id"] for t in tok["added_tokens"]}
    vocab = max(max(tok["model"]["vocab"].values()), max(special.values())) + 1
    return vocab, special["<|begin_of_text|>"], special["<|end_of_text|>"]


def losses(model, x, mtp_weight, reduction="mean"):
    """x [b, n + 1] -> (main CE, MTP CE, main top-1 hits, MTP top-1 hits) over targets x[:, 1:] / x[:, 2:]."""
    logits, mtp_logits, _ = model(x[:, :-1])
    v = logits.shape[-1]
    main = F.cross_entropy(logits.reshape(-1, v), x[:, 1:].reshape(-1), reduction=reduction)
    if mtp_logits is None or mtp_weight == 0:
        return main, torch.zeros(()), None, None
    mtp = F.cross_entropy(mtp_logits.reshape(-1, v), x[:, 2:].reshape(-1), reduction=reduction)
    if reduction == "mean":
        return main, mtp, None, None
    hits = int((logits.argmax(-1) == x[:, 1:]).sum()), int((mtp_logits.argmax(-1) == x[:, 2:]).sum())
    return main, mtp, hits[0], hits[1]


@torch.no_grad()
def evaluate(model, stream, context, max_tokens=None, batch=8):
    """{"loss", "mtp_loss", "acc", "mtp_acc"} over consecutive windows of context + 1 tokens (each main
    target counted once; the MTP predicts the window's targets from its second one)."""
    n = len(stream) - 1 if max_tokens is None else min(len(stream) - 1, max_tokens)
    starts = list(range(0, n, context))
    sums, counts = np.zeros(4), np.zeros(2)
    was_training = model.training
    model.eval()
    for i in range(0, len(starts), batch):
        rows = [torch.from_numpy(stream[s:min(s + context, n) + 1].astype(np.int64)) for s in starts[i:i + batch]]
        for length in sorted({len(r) for r in rows}):  # the last window may be shorter
            x = torch.stack([r for r in rows if len(r) == length])
            if length < 3:
                continue
            main, mtp, hit, mtp_hit = losses(model, x, 1.0, reduction="sum")
            sums += [float(main), float(mtp), hit, mtp_hit]
            counts += [x[:, 1:].numel(), x[:, 2:].numel()]
    model.train(was_training)
    return {"loss": sums[0] / counts[0], "mtp_loss": sums[1] / counts[1], "acc": sums[2] / counts[0],
            "mtp_acc": sums[3] / counts[1]}


def fmt_eval(r):
    return (f"loss {r['loss']:.4f} (ppl {math.exp(r['loss']):.2f}, top-1 {r['acc']:.3f}), "
            f"MTP loss {r['mtp_loss']:.4f} (top-1 {r['mtp_acc']:.3f})")


def train_step(model, optimizer, x, a):
    main, mtp, _, _ = losses(model, x, a.mtp_weight)
    balance = model.balance_loss()
    loss = main + a.mtp_weight * mtp + a.balance_alpha * balance
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    grad_norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), a.grad_clip))
    optimizer.step()
    return float(main), float(mtp), float(balance), grad_norm


def main(argv):
    a = parse_args(argv)
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    os.makedirs(a.work, exist_ok=True)
    vocab, bos, eos = special_ids(a.tokenizer)
    config = make_config(a, bos, eos)
    config.vocab_size = vocab
    model = dm.DeepseekV3ForCausalLM(config)
    model.init_weights(a.seed)
    if a.export_only:
        final = torch.load(os.path.join(a.work, "final.pt"))
        model.load_state_dict(final["model"])
        export(model, a, final["summary"])
        return
    train = np.fromfile(os.path.join(a.data, "train.u16"), dtype=np.uint16)
    val = np.fromfile(os.path.join(a.data, "validation.u16"), dtype=np.uint16)
    if max(int(train.max()), int(val.max())) >= vocab:
        raise SystemExit(f"{a.data}: token ids beyond the tokenizer's vocabulary of {vocab}")
    optimizer = make_optimizer(model, a)
    tokens_per_step = a.batch * a.context
    print(f"model: {dm.param_count(model) / 1e6:.3f} M parameters ({dm.active_param_count(model) / 1e6:.3f} M "
          f"active per token without MTP; {config}); train {len(train)} tokens, validation {len(val)} tokens; "
          f"{a.steps} steps x {a.batch} x {a.context} = {a.steps * tokens_per_step / 1e6:.1f} M tokens "
          f"({a.steps * tokens_per_step / len(train):.1f} epochs)", flush=True)

    checkpoint_path = os.path.join(a.work, "checkpoint.pt")
    step, elapsed, log = resume_checkpoint(checkpoint_path, model, optimizer) if a.resume else (0, 0.0, None)
    log = log or {"train": [], "eval": []}

    def run_eval():
        v = evaluate(model, val, a.context)
        t = evaluate(model, train, a.context, a.train_eval_tokens)
        log["eval"].append({"step": step, "val": v, "train_eval": t})
        print(f"eval step {step}: val {fmt_eval(v)}; train (eval) {fmt_eval(t)}", flush=True)

    model.train()
    window, window_start, window_steps, worst_load = np.zeros(3), time.time(), 0, 0.0
    while step < a.steps:
        started = time.time()
        lr = learning_rate(step, a)
        for group in optimizer.param_groups:
            group["lr"] = lr
        main_loss, mtp_loss, balance, grad_norm = train_step(model, optimizer, train_batch(train, step, a), a)
        load = model.update_router_biases(a.bias_rate)
        step += 1
        elapsed += time.time() - started
        log["train"].append({"step": step, "loss": main_loss, "mtp_loss": mtp_loss, "balance": balance, "lr": lr,
                             "grad_norm": grad_norm, "max_load": max(load, default=1.0)})
        window, window_steps = window + [main_loss, mtp_loss, balance], window_steps + 1
        worst_load = max(worst_load, max(load, default=1.0))
        if step % a.log_every == 0 or step == a.steps:
            rate = window_steps * tokens_per_step / (time.time() - window_start)
            eta = (a.steps - step) * tokens_per_step / rate
            m = window / window_steps
            print(f"step {step}/{a.steps} loss {m[0]:.4f} mtp {m[1]:.4f} bal {m[2]:.3f} load {worst_load:.2f} "
                  f"lr {lr:.2e} |g| {grad_norm:.2f} {rate:.0f} tok/s elapsed {fmt_time(elapsed)} eta {fmt_time(eta)}",
                  flush=True)
            window, window_start, window_steps, worst_load = np.zeros(3), time.time(), 0, 0.0
        if step % a.eval_every == 0 and step < a.steps:
            run_eval()
            window_start = time.time()
        if step % a.checkpoint_every == 0 or step == a.steps:
            save_atomic({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step,
                         "elapsed": elapsed, "log": log, "args": vars(a)}, checkpoint_path)

    run_eval()
    summary = summarize(model, config, a, log, elapsed, train, val)
    save_atomic({"model": model.state_dict(), "config": vars(config), "summary": summary},
                os.path.join(a.work, "final.pt"))
    with open(os.path.join(a.work, "summary.json"), "w") as f:
        json.dump({**summary, "log": log}, f, indent=1)
    print(f"done: {fmt_time(elapsed)}, train loss (last 50 steps) {summary['train_loss_last_50_steps']:.4f}, "
          f"val {fmt_eval(summary['val'])}; BF16 weights: val {fmt_eval(summary['val_bf16'])}", flush=True)
    if a.export:
        export(model, a, summary)


def summarize(model, config, a, log, elapsed, train, val):
    final = log["eval"][-1]
    recent = log["train"][-50:]
    bf16 = dm.DeepseekV3ForCausalLM(config)
    bf16.load_state_dict(model.state_dict())
    dm.round_to_bf16_(bf16)
    bf16_val = evaluate(bf16, val, a.context)
    tokens = a.steps * a.batch * a.context
    return {
        "parameters": dm.param_count(model), "active_parameters_per_token": dm.active_param_count(model),
        "parameters_without_mtp": dm.param_count(model) - sum(
            p.numel() for n, p in model.named_parameters() if n.startswith(f"model.layers.{config.num_layers}.")),
        "config": vars(config), "steps": a.steps, "tokens_seen": tokens, "train_tokens": int(len(train)),
        "validation_tokens": int(len(val)), "epochs": tokens / len(train), "training_seconds": elapsed,
        "tokens_per_second": tokens / elapsed if elapsed else None,
        "train_loss_last_50_steps": sum(r["loss"] for r in recent) / len(recent),
        "train_mtp_loss_last_50_steps": sum(r["mtp_loss"] for r in recent) / len(recent),
        "val": final["val"], "train_eval": final["train_eval"], "val_perplexity": math.exp(final["val"]["loss"]),
        "val_bf16": bf16_val, "router_bias": {
            name: buf.tolist() for name, buf in model.named_buffers() if name.endswith("e_score_correction_bias")},
        "args": vars(a), "torch": torch.__version__, "threads": a.threads,
    }


def export(model, a, summary):
    if a.fp8:
        twin = dm.DeepseekV3ForCausalLM(model.config)
        twin.load_state_dict(model.state_dict())
        dm.round_to_export_(twin, fp8=True)
        val = np.fromfile(os.path.join(a.data, "validation.u16"), dtype=np.uint16)
        summary = {**summary, "val_fp8": evaluate(twin, val, a.context)}
        print(f"FP8 weights: val {fmt_eval(summary['val_fp8'])}", flush=True)
    dm.export(model, a.export, fp8=a.fp8)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(os.path.join(a.tokenizer, name), os.path.join(a.export, name))
    with open(os.path.join(a.export, "training_summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
        f.write("\n")
    print(f"exported to {a.export}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
