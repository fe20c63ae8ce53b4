#!/usr/bin/python3
"""Trains an EAGLE-1 or EAGLE-3 draft head for aerie-tiny-llama, or an EAGLE-3 MLA head for
aerie-tiny-deepseek, on the frozen target's own features and distributions, and exports it in the published
layout (tools/gen/trained/eagle_heads.py; the MLA head: tools/gen/trained/mla_head.py, Eagle3DeepseekV3ForCausalLM).

Data per step: --batch-corpus windows of the training split and --batch-selfgen sequences the target wrote
itself (tools/gen/trained/make_head_data.py), --context tokens each, drawn from (seed, step). The target runs
in float32 from its shipped BF16 weights, without gradients, for the features and the soft labels.

EAGLE-1 (as published): step 0 only; uniform noise U(-noise, noise) on the input features; loss =
SmoothL1(predicted feature, the target's next final-norm feature) + 0.1 x soft cross-entropy against the
target's next-token distribution through the target's head.
EAGLE-3: --ttt unrolled draft steps (training-time test: step j feeds step j-1's output feature and the
next token of the text, attention over the chain as aerie's cache holds it); loss = sum_j 0.8^j x soft
cross-entropy against the target's distribution restricted to the draft vocabulary, on rows whose target
argmax is in it (SpecForge's mask). The draft vocabulary: the --draft-vocab most frequent tokens of the
training data (corpus + self-generated), ascending by id; lm_head starts from the target's head rows.
A DeepSeek-V3 target (config model_type deepseek_v3) gets the MLA head, trained the same way; --aux-layers
count as for Llama (residual entering layer i; num_hidden_layers = the last layer's output).

Progress every --log-every steps (loss, top-1 agreement with the target's argmax per draft step, tokens/s,
ETA); validation on held-out text (validation split + self-generated rows kept out of training);
--resume continues from --work/checkpoint.pt.

  /usr/bin/python3 tools/gen/trained/train_heads.py --kind eagle3 --steps 1200 --export models/aerie-tiny-llama-eagle3
  /usr/bin/python3 tools/gen/trained/train_heads.py --kind eagle1 --steps 1200 --export models/aerie-tiny-llama-eagle1
  /usr/bin/python3 tools/gen/trained/train_heads.py --kind eagle3 --target models/aerie-tiny-deepseek \
      --selfgen /tmp/trained/heads/selfgen_ds.u16 --aux-layers 1,2,4 --export models/aerie-tiny-deepseek-eagle3
"""
import argparse
import dataclasses
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, HERE)
import deepseek_model  # noqa: E402
import llama_model  # noqa: E402
from eagle_heads import Eagle1Head, Eagle3Head, export, head_config, soft_cross_entropy  # noqa: E402
from mla_head import make_mla_head, mla_head_config  # noqa: E402
from llama_model import rope_cos_sin  # noqa: E402
from train_target import fmt_time, save_atomic  # noqa: E402


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kind", choices=["eagle1", "eagle3"], required=True)
    p.add_argument("--target", default=os.path.join(ROOT, "models", "aerie-tiny-llama"))
    p.add_argument("--data", default="/tmp/trained/target/data", help="train.u16 / validation.u16 of train_target.py")
    p.add_argument("--selfgen", default="/tmp/trained/heads/selfgen.u16")
    p.add_argument("--work", help="default /tmp/trained/heads/<kind>")
    p.add_argument("--export")
    p.add_argument("--resume", action="store_true")
    p.add_argument("--export-only", action="store_true")
    p.add_argument("--seed", type=int, default=2024)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=1200)
    p.add_argument("--context", type=int, default=256)
    p.add_argument("--batch-corpus", type=int, default=2)
    p.add_argument("--batch-selfgen", type=int, default=4)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--min-lr-ratio", type=float, default=0.1)
    p.add_argument("--warmup", type=int, default=50)
    p.add_argument("--weight-decay", type=float, default=0.0)
    p.add_argument("--grad-clip", type=float, default=0.5)
    p.add_argument("--ttt", type=int, help="EAGLE-3 unrolled draft steps (default 5; EAGLE-1: 1)")
    p.add_argument("--step-decay", type=float, default=0.8, help="EAGLE-3 loss weight of step j: decay^j")
    p.add_argument("--noise", type=float, default=0.1, help="EAGLE-1 feature noise half-width")
    p.add_argument("--draft-vocab", type=int, default=2048)
    p.add_argument("--aux-layers", default="1,3,5", help="EAGLE-3: target layers (residual entering layer i)")
    p.add_argument("--log-every", type=int, default=10)
    p.add_argument("--eval-every", type=int, default=200)
    p.add_argument("--checkpoint-every", type=int, default=50)
    a = p.parse_args(argv)
    a.work = a.work or f"/tmp/trained/heads/{a.kind}"
    a.ttt = a.ttt or (5 if a.kind == "eagle3" else 1)
    if a.kind == "eagle1" and a.ttt != 1:
        p.error("EAGLE-1 trains its first draft step only, as published")
    a.aux_layers = [int(x) for x in a.aux_layers.split(",")]
    with open(os.path.join(a.target, "config.json")) as f:
        a.deepseek = json.load(f).get("model_type") == "deepseek_v3"
    if a.deepseek and a.kind != "eagle3":
        p.error("a DeepSeek-V3 target gets an EAGLE-3 (MLA) head only")
    return a


def load_target(a):
    """The frozen target in float32 and its (head config, rope cos/sin, output-head matrix [V, H])."""
    if a.deepseek:
        target = deepseek_model.load(a.target)
        cos, sin = deepseek_model.rope_cos_sin(target.config, a.context + a.ttt + 1)
        return target, target.config, cos, sin, target.lm_head.weight.detach()
    target = llama_model.load(a.target)
    hc = dataclasses.replace(target.config)  # the head's layer has the target's sizes
    cos, sin = rope_cos_sin(hc, a.context + a.ttt + 1)
    return target, hc, cos, sin, target.model.embed_tokens.weight.detach()  # tied embeddings


class Data:
    """Training and validation batches: corpus windows and self-generated rows, [batch, context] int64."""

    def __init__(self, a):
        self.a = a
        self.train = np.fromfile(os.path.join(a.data, "train.u16"), dtype=np.uint16)
        self.validation = np.fromfile(os.path.join(a.data, "validation.u16"), dtype=np.uint16)
        with open(a.selfgen.replace(".u16", ".json")) as f:
            length = json.load(f)["length"]
        rows = np.fromfile(a.selfgen, dtype=np.uint16).reshape(-1, length)
        held = max(8, len(rows) // 20)
        self.selfgen_train, self.selfgen_val = rows[:-held], rows[-held:]

    def batch(self, step):
        a, rng = self.a, np.random.default_rng([self.a.seed, step])
        offsets = rng.integers(0, len(self.train) - a.context, size=a.batch_corpus)
        rows = [self.train[o:o + a.context] for o in offsets]
        for r in rng.integers(0, len(self.selfgen_train), size=a.batch_selfgen):
            rows.append(self.selfgen_train[r, :a.context])
        return torch.from_numpy(np.stack(rows).astype(np.int64))

    def validation_batches(self, n_windows=16):
        a, out = self.a, []
        step = (len(self.validation) - a.context) // n_windows
        windows = [self.validation[i * step:i * step + a.context] for i in range(n_windows)]
        sel = [self.selfgen_val[i, :a.context] for i in range(min(n_windows, len(self.selfgen_val)))]
        for group in (windows, sel):
            for i in range(0, len(group), 8):
                out.append(torch.from_numpy(np.stack(group[i:i + 8]).astype(np.int64)))
        return out


def draft_vocabulary(data, vocab, size):
    """The `size` most frequent token ids of the training data (ties: lower id), ascending."""
    counts = np.bincount(data.train, minlength=vocab) + np.bincount(data.selfgen_train.reshape(-1), minlength=vocab)
    order = np.lexsort((np.arange(vocab), -counts))[:size]
    chosen = np.sort(order)
    coverage = counts[chosen].sum() / counts.sum()
    return torch.from_numpy(chosen.astype(np.int64)), float(coverage)


class Trainer:
    def __init__(self, a, data):
        self.a, self.data = a, data
        self.target, self.hc, self.cos, self.sin, self.output_head = load_target(a)
        for p in self.target.parameters():
            p.requires_grad_(False)
        tc = self.target.config
        self.embed = self.target.model.embed_tokens.weight.detach()
        if a.kind == "eagle1":
            self.head = Eagle1Head(self.hc)
            self.selected = None
        else:
            self.selected, self.coverage = draft_vocabulary(data, tc.vocab_size, a.draft_vocab)
            n_fused = len(a.aux_layers)
            self.head = (make_mla_head(self.hc, n_fused, a.draft_vocab) if a.deepseek
                         else Eagle3Head(self.hc, n_fused, a.draft_vocab))
        self.init_weights()

    def init_weights(self):
        g = torch.Generator().manual_seed(self.a.seed)
        with torch.no_grad():
            for name, p in self.head.named_parameters():
                if p.dim() == 1:
                    p.fill_(1.0)
                else:
                    p.copy_(torch.randn(p.shape, generator=g) * 0.02)
            if self.a.kind == "eagle3":  # the target's head rows (its final norm folded in) for the draft vocabulary
                self.head.lm_head.weight.copy_(self.output_head[self.selected] * self.target.model.norm.weight.detach())

    @torch.no_grad()
    def target_pass(self, ids):
        layers = sorted(set(self.a.aux_layers) | {self.target.config.num_layers})
        if self.a.deepseek:
            hidden = dict.fromkeys(layers)
            logits, _, final = self.target(ids, with_mtp=False, hidden=hidden)
            return logits, hidden, final
        logits, hidden = self.target(ids, hidden_layers=layers)
        final = self.target.model.norm(hidden[self.target.config.num_layers])
        return logits, hidden, final

    def losses(self, ids, train=True):
        """(loss, {metric: value}) for a batch of ids [b, n]."""
        a, head = self.a, self.head
        logits, hidden, final = self.target_pass(ids)
        b, n = ids.shape
        rows = n - 1  # head rows t = 0..n-2
        t_idx = torch.arange(rows)
        pad = torch.zeros(b, a.ttt, dtype=ids.dtype)
        ids_p = torch.cat([ids, pad], dim=1)
        cache, metrics, total = [], {}, 0.0
        if a.kind == "eagle1":
            emb = self.embed[ids[:, 1:]]
            feature = final[:, :rows]
            if train and a.noise > 0:
                feature = feature + (torch.rand_like(feature) * 2 - 1) * a.noise
            x = head.step(emb, feature, 0, cache, self.cos, self.sin)
            target_feature = final[:, 1:]
            vloss = F.smooth_l1_loss(x, target_feature, reduction="none").mean(-1).mean()
            draft_logits = x @ self.embed.T
            p = torch.softmax(logits[:, 1:], dim=-1)
            ploss = soft_cross_entropy(draft_logits, p).mean()
            agree = (draft_logits.argmax(-1) == logits[:, 1:].argmax(-1)).float().mean()
            metrics = {"vloss": float(vloss), "ploss": float(ploss), "acc0": float(agree)}
            return vloss + 0.1 * ploss, metrics
        features = torch.cat([hidden[l][:, :rows] for l in a.aux_layers], dim=-1)
        g = head.fc(features)
        in_vocab = torch.zeros(self.target.config.vocab_size, dtype=torch.bool)
        in_vocab[self.selected] = True
        for j in range(a.ttt):
            emb = self.embed[ids_p[:, j + 1:j + 1 + rows]]
            x = head.step(emb, g, j, cache, self.cos, self.sin)
            valid = (t_idx <= n - 2 - j)[None, :].expand(b, rows)
            tl = logits[:, j + 1:].contiguous()
            tl = torch.cat([tl, torch.zeros(b, rows - tl.shape[1], tl.shape[2])], dim=1) if tl.shape[1] < rows else tl
            target_top = tl.argmax(-1)
            mask = valid & in_vocab[target_top]
            p = torch.softmax(tl[..., self.selected], dim=-1)
            dl = head.logits(x)
            ce = soft_cross_entropy(dl, p)
            loss_j = (ce * mask).sum() / mask.sum().clamp(min=1)
            total = total + a.step_decay ** j * loss_j
            hit = (self.selected[dl.argmax(-1)] == target_top) & valid
            metrics[f"acc{j}"] = float(hit.sum() / valid.sum())
            metrics[f"loss{j}"] = float(loss_j)
            g = x
        return total, metrics


def learning_rate(step, a):
    if step < a.warmup:
        return a.lr * (step + 1) / a.warmup
    progress = (step - a.warmup) / max(1, a.steps - a.warmup)
    return a.lr * (a.min_lr_ratio + (1 - a.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * min(1.0, progress))))


def evaluate(trainer, batches):
    trainer.head.eval()
    sums, count = {}, 0
    with torch.no_grad():
        for ids in batches:
            loss, m = trainer.losses(ids, train=False)
            m["loss"] = float(loss)
            for k, v in m.items():
                sums[k] = sums.get(k, 0.0) + v
            count += 1
    trainer.head.train()
    return {k: v / count for k, v in sums.items()}


def fmt(m, keys):
    return " ".join(f"{k} {m[k]:.3f}" for k in keys if k in m)


def do_export(trainer, a, summary):
    tc_path = os.path.join(a.target, "config.json")
    with open(tc_path) as f:
        tcfg = json.load(f)
    config = (mla_head_config(tcfg, trainer.hc, a.draft_vocab, a.aux_layers) if a.deepseek
              else head_config(trainer.hc, a.kind, tcfg, a.draft_vocab, a.aux_layers))
    d2t = t2d = None
    if a.kind == "eagle3":
        d2t = trainer.selected - torch.arange(len(trainer.selected))
        t2d = torch.zeros(tcfg["vocab_size"], dtype=torch.bool)
        t2d[trainer.selected] = True
    export(trainer.head, a.export, config, d2t, t2d)
    with open(os.path.join(a.export, "training_summary.json"), "w") as f:
        json.dump({k: v for k, v in summary.items() if k != "log"}, f, indent=2)
        f.write("\n")
    print(f"exported to {a.export}", flush=True)


def main(argv):
    a = parse_args(argv)
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    os.makedirs(a.work, exist_ok=True)
    data = Data(a)
    trainer = Trainer(a, data)
    head, target = trainer.head, trainer.target
    n_params = sum(p.numel() for p in head.parameters())
    print(f"{a.kind} head: {n_params:,} parameters; target {a.target}", flush=True)
    if a.kind == "eagle3":
        print(f"draft vocabulary {a.draft_vocab} of {target.config.vocab_size}: "
              f"{trainer.coverage:.2%} of training tokens", flush=True)
    opt = torch.optim.AdamW(head.parameters(), lr=a.lr, betas=(0.9, 0.95), eps=1e-8, weight_decay=a.weight_decay)
    start, log, elapsed_before = 0, [], 0.0
    ckpt = os.path.join(a.work, "checkpoint.pt")
    final = os.path.join(a.work, "final.pt")
    if a.export_only:
        state = torch.load(final)
        head.load_state_dict(state["head"])
        do_export(trainer, a, state["summary"])
        return
    if a.resume and os.path.exists(ckpt):
        state = torch.load(ckpt)
        head.load_state_dict(state["head"])
        opt.load_state_dict(state["opt"])
        start, log, elapsed_before = state["step"], state["log"], state["elapsed"]
        print(f"resumed at step {start}", flush=True)
    val_batches = data.validation_batches()
    tokens_per_step = (a.batch_corpus + a.batch_selfgen) * a.context
    began = time.time()
    for step in range(start, a.steps):
        for group in opt.param_groups:
            group["lr"] = learning_rate(step, a)
        loss, m = trainer.losses(data.batch(step))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        gnorm = float(torch.nn.utils.clip_grad_norm_(head.parameters(), a.grad_clip))
        opt.step()
        m.update(loss=float(loss), gnorm=gnorm, step=step + 1)
        log.append(m)
        done = step + 1
        if done % a.log_every == 0 or done == a.steps:
            spent = time.time() - began
            rate = (done - start) * tokens_per_step / max(spent, 1e-9)
            eta = (a.steps - done) * spent / max(done - start, 1)
            keys = ["loss", "vloss", "ploss"] + [f"acc{j}" for j in range(a.ttt)]
            print(f"step {done}/{a.steps} {fmt(m, keys)} |g| {gnorm:.2f} lr {learning_rate(step, a):.2e} "
                  f"{rate:.0f} tok/s elapsed {fmt_time(elapsed_before + spent)} eta {fmt_time(eta)}", flush=True)
        if done % a.eval_every == 0 or done == a.steps:
            v = evaluate(trainer, val_batches)
            log.append({"step": done, "validation": v})
            print(f"eval step {done}: {fmt(v, ['loss', 'vloss', 'ploss'] + [f'acc{j}' for j in range(a.ttt)])}",
                  flush=True)
        if done % a.checkpoint_every == 0 or done == a.steps:
            save_atomic({"head": head.state_dict(), "opt": opt.state_dict(), "step": done, "log": log,
                         "elapsed": elapsed_before + time.time() - began}, ckpt)
    v = evaluate(trainer, val_batches)
    summary = {"kind": a.kind, "parameters": n_params, "steps": a.steps, "ttt": a.ttt,
               "tokens_per_step": tokens_per_step, "training_seconds": elapsed_before + time.time() - began,
               "validation": v, "args": {k: v for k, v in vars(a).items()}, "torch": torch.__version__,
               "threads": a.threads, "log": log}
    if a.kind == "eagle3":
        summary["draft_vocab_coverage"] = trainer.coverage
    save_atomic({"head": head.state_dict(), "summary": summary}, final)
    print(f"done: {fmt_time(summary['training_seconds'])}; validation {fmt(v, list(v))}", flush=True)
    if a.export:
        do_export(trainer, a, summary)


if __name__ == "__main__":
    main(sys.argv[1:])
