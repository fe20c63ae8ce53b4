#!/usr/bin/python3
"""Writes tests/data/io/state_dict.bin with torch.save (zip format): tensors whose values follow simple
formulas the C++ test recomputes, including a transposed (non-contiguous) view and two views that share one
storage at different offsets."""
import sys

import torch

out = sys.argv[1] if len(sys.argv) > 1 else "tests/data/io/state_dict.bin"
base = torch.arange(12, dtype=torch.float32) * 0.25  # one storage, viewed twice below
state = {
    "f32": torch.arange(6, dtype=torch.float32).reshape(2, 3) * 0.5,
    "bf16": (torch.arange(8, dtype=torch.float32) - 4).to(torch.bfloat16),
    "f16": (torch.arange(4, dtype=torch.float32) / 4).to(torch.float16),
    "i64": torch.tensor([-3, 0, 7, 1 << 40], dtype=torch.int64),
    "transposed": (torch.arange(6, dtype=torch.float32).reshape(3, 2)).t(),  # [2, 3], strides (1, 2)
    "shared_head": base[:4].view(2, 2),
    "shared_tail": base[6:],
}
torch.save(state, out)
