"""The MindFormers tier: tests against REAL MindFormers 2.1.0 (legacy LlamaForCausalLM, CPU).

Run it with ``scripts/test-mindformers.sh`` (its own venv, .venv-mindformers). In the main venv
mindformers is not installed and every test here skips with that reason: this file imports nothing
heavy, and each test module calls ``pytest.importorskip("mindformers", reason=NOT_INSTALLED)``
before importing ``real_mindformers`` (which imports mindformers and puts MindSpore in PyNative
CPU mode).

Fixtures for later tests (e.g. weight conversion: source -> MindFormers checkpoint -> real logits):
``real_mindformers_logits(ckpt_path, model_config, tokens=None) -> np.ndarray`` and
``tiny_llama_config`` (a fresh copy of the project's tiny model as a LlamaConfig dict).
"""
from __future__ import annotations

import os
import tempfile

import pytest

# MindFormers writes its logs under $LOCAL_DEFAULT_PATH (default ./output, i.e. into the checkout);
# set before any test module imports mindformers.
os.environ.setdefault("LOCAL_DEFAULT_PATH", os.path.join(tempfile.gettempdir(), "mindformers-tier-output"))

NOT_INSTALLED = ("real MindFormers is not installed in this venv: the MindFormers tier runs with "
                 "scripts/test-mindformers.sh")


def _helper():
    pytest.importorskip("mindformers", reason=NOT_INSTALLED)
    import real_mindformers

    return real_mindformers


@pytest.fixture(scope="session")
def real_mindformers_logits():
    """The function ``real_mindformers_logits(ckpt_path, model_config, tokens=None)`` (see real_mindformers)."""
    return _helper().real_mindformers_logits


@pytest.fixture
def tiny_llama_config():
    """The project's tiny model as a LlamaConfig dict (CPU settings and fp32 dtypes included)."""
    return dict(_helper().TINY_LLAMA_CONFIG)
