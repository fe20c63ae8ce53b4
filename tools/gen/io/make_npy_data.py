#!/usr/bin/python3
"""Writes the .npy goldens in tests/data/io/ with numpy.save, so the C++ writer's bytes can be compared with
numpy's and the reader can be checked on files numpy produced."""
import os
import sys

import numpy as np

out = sys.argv[1] if len(sys.argv) > 1 else "tests/data/io"
np.save(os.path.join(out, "numpy_2x3.npy"), np.arange(6, dtype=np.float32).reshape(2, 3) * 0.5)
np.save(os.path.join(out, "numpy_5.npy"), np.arange(5, dtype=np.float32) - 2)
np.save(os.path.join(out, "numpy_f64_2x2.npy"), np.array([[1.5, -2], [3.25, 1e-3]], dtype=np.float64))
