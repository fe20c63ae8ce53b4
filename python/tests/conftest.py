"""Shared fixtures of the aerie package's tests: the checkpoints the suite ships (models/) and the `aerie`
command, whose own output is the reference. CTest (python/CMakeLists.txt) sets the paths; run by hand,
they default to the source tree and its build/ folder:

    PYTHONPATH=build/python /usr/bin/python3 -m pytest -q python/tests
"""

import json
import os
import subprocess
from pathlib import Path

import pytest

SOURCE = Path(os.environ.get("AERIE_SOURCE", Path(__file__).resolve().parents[2]))
AERIE = os.environ.get("AERIE_BINARY", str(SOURCE / "build" / "aerie"))
MODELS = Path(os.environ.get("AERIE_MODELS", SOURCE / "models"))
CHAT_TOKENIZER = Path(os.environ.get("AERIE_CHAT_TOKENIZER", SOURCE / "build" / "tests" / "capi" / "chat_tokenizer"))
MODEL = str(MODELS / "aerie-tiny-llama")
HEAD = str(MODELS / "aerie-tiny-llama-eagle3")
DEEPSEEK = str(MODELS / "aerie-tiny-deepseek")
PROMPTS = ["Once upon a time", "The sea was", "It is a truth universally acknowledged, that"]


def run_aerie(*args):
    """`aerie <args> --json`'s JSON object (the reference run)."""
    done = subprocess.run([AERIE, *args, "--json"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"aerie {' '.join(args)} failed:\n{done.stderr}"
    return json.loads(done.stdout)


@pytest.fixture(scope="session")
def llm():
    """The tiny Llama, plain decoding."""
    from aerie import LLM

    with LLM(model=MODEL, n_threads=2) as engine:
        yield engine


@pytest.fixture(scope="session")
def spec_llm():
    """The tiny Llama drafted by its EAGLE-3 head, K = 2."""
    from aerie import LLM

    with LLM(model=MODEL, draft=HEAD, num_speculative_tokens=2, n_threads=2) as engine:
        yield engine
