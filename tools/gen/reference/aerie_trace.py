"""The reference side of aerie's tracing hook (src/io/trace.h): the PyTorch references write the same named
intermediates as `AERIE_TRACE_DIR=DIR aerie logits ...`, so that compare_logits.py --trace-a/--trace-b can
name the first tensor where the two computations part.

Files: DIR/<scope>.<name>.npy (no layer) or DIR/<scope>.L<layer:02d>.<name>.npy, float32 [rows, cols];
DIR/index.txt lists the stems in the order first written. Names used by the forwards (per layer unless said):
  target (Llama):     embed (no layer), attn_norm, q, k, v (q/k after RoPE), attn_out (after o_proj),
                      ffn_norm, ffn_out, out (the residual stream leaving the layer), final_norm, logits
  target (DeepSeek):  as Llama, plus q_latent (q_a_proj after its norm), kv_latent (kv_a_proj's latent part
                      after its norm), k_rope; MoE layers: router_logits, experts (chosen ids, in the order
                      routed), expert_weights, shared_out
  head (EAGLE/MLA):   fc (the fused input), then the layer's names as above, and logits
"""
import os

import numpy as np

NO_LAYER = None


class Tracer:
    """Writes named intermediates into a folder; a Tracer(None) writes nothing (tracing off)."""

    def __init__(self, folder):
        self.folder = folder
        self.written = set()
        if folder:
            os.makedirs(folder, exist_ok=True)
            open(os.path.join(folder, "index.txt"), "w").close()

    def __bool__(self):
        return bool(self.folder)

    def __call__(self, scope, layer, name, value):
        if not self.folder:
            return
        stem = f"{scope}.{name}" if layer is NO_LAYER else f"{scope}.L{layer:02d}.{name}"
        arr = value.detach().float().numpy() if hasattr(value, "detach") else np.asarray(value, np.float32)
        arr = np.ascontiguousarray(arr.reshape(arr.shape[0], -1) if arr.ndim != 2 else arr, dtype=np.float32)
        np.save(os.path.join(self.folder, stem + ".npy"), arr)
        if stem not in self.written:
            self.written.add(stem)
            with open(os.path.join(self.folder, "index.txt"), "a") as index:
                index.write(stem + "\n")


def read_index(folder):
    with open(os.path.join(folder, "index.txt")) as index:
        return [line.strip() for line in index if line.strip()]
