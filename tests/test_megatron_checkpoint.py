"""read_checkpoint_args on real torch.save checkpoints, without torch on the reading side."""
from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from workbench.config.megatron_checkpoint import TensorStub, find_checkpoint_file, read_checkpoint_args
from workbench.errors import InputError

ROOT = Path(__file__).resolve().parents[1]
ENUMS = "import enum\n\nclass AttnBackend(enum.Enum):\n    flash = 1\n    auto = 5\n"


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def _fake_megatron_enum(tmp_path: Path):
    """AttnBackend.auto from a throw-away megatron.core.transformer.enums, then forgotten."""
    pkg = tmp_path / "fake_site" / "megatron" / "core" / "transformer"
    pkg.mkdir(parents=True)
    for folder in (pkg, pkg.parent, pkg.parent.parent):
        (folder / "__init__.py").write_text("")
    (pkg / "enums.py").write_text(ENUMS)
    sys.path.insert(0, str(tmp_path / "fake_site"))
    importlib.invalidate_caches()
    try:
        return importlib.import_module("megatron.core.transformer.enums").AttnBackend.auto
    finally:
        sys.path.remove(str(tmp_path / "fake_site"))


def _forget_megatron():
    for name in [m for m in sys.modules if m == "megatron" or m.startswith("megatron.")]:
        del sys.modules[name]


def _save_checkpoint(torch, root: Path, args: object, iteration: int = 10) -> Path:
    folder = root / f"iter_{iteration:07d}" / "mp_rank_00"
    folder.mkdir(parents=True)
    path = folder / "model_optim_rng.pt"
    state = {"args": args, "iteration": iteration, "checkpoint_version": 3.0,
             "model": {"w": torch.zeros(3, 4), "b": torch.nn.Parameter(torch.ones(4, dtype=torch.bfloat16))},
             "rng_state": [{"torch_rng_state": torch.get_rng_state()}]}
    torch.save(state, path)
    (root / "latest_checkpointed_iteration.txt").write_text(str(iteration))
    return path


def test_reads_args_from_checkpoint_root(torch, tmp_path):
    auto = _fake_megatron_enum(tmp_path)
    try:
        args = argparse.Namespace(num_layers=2, lr=1e-4, params_dtype=torch.bfloat16, bf16=True,
                                  betas=[0.9, 0.95], load=None, attention_backend=auto,
                                  tokenizer_model="/models/tok", split="969,30,1")
        path = _save_checkpoint(torch, tmp_path / "ckpt", args)
    finally:
        _forget_megatron()
    assert find_checkpoint_file(tmp_path / "ckpt") == path
    assert find_checkpoint_file(path.parent.parent) == path
    read = read_checkpoint_args(tmp_path / "ckpt")
    assert read == {"num_layers": 2, "lr": 1e-4, "params_dtype": "torch.bfloat16", "bf16": True,
                    "betas": [0.9, 0.95], "load": None, "attention_backend": "AttnBackend(5)",
                    "tokenizer_model": "/models/tok", "split": "969,30,1"}


def test_reading_needs_neither_torch_nor_megatron(torch, tmp_path):
    auto = _fake_megatron_enum(tmp_path)
    try:
        _save_checkpoint(torch, tmp_path / "ckpt", argparse.Namespace(attention_backend=auto, hidden_size=8))
    finally:
        _forget_megatron()
    code = ("import json, sys\n"
            "from workbench.config.megatron_checkpoint import read_checkpoint_args\n"
            f"args = read_checkpoint_args({str(tmp_path / 'ckpt')!r})\n"
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'numpy', 'megatron'))\n"
            "print(json.dumps([args, bad]))\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    args, imported = json.loads(out.stdout)
    assert args == {"attention_backend": "AttnBackend(5)", "hidden_size": 8}
    assert imported == []


def test_tensors_become_stubs_without_reading_data(torch, tmp_path):
    path = tmp_path / "model_optim_rng.pt"
    torch.save({"args": argparse.Namespace(w=torch.ones(2, 3, dtype=torch.float16))}, path)
    assert read_checkpoint_args(path) == {"w": TensorStub((2, 3), "torch.float16")}


def test_malicious_pickle_is_refused_and_not_run(torch, tmp_path):
    marker = tmp_path / "MARKER"

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))
    path = tmp_path / "model_optim_rng.pt"
    torch.save({"args": argparse.Namespace(lr=1.0), "extra": Evil()}, path)
    with pytest.raises(InputError) as info:
        read_checkpoint_args(path)
    assert "refusing to unpickle global" in str(info.value) and "system" in str(info.value)
    assert str(path) in str(info.value)
    assert not marker.exists()


def test_eval_global_is_refused(torch, tmp_path):
    class Evil:
        def __reduce__(self):
            return (eval, ("1 + 1",))
    path = tmp_path / "model_optim_rng.pt"
    torch.save({"args": Evil()}, path)
    with pytest.raises(InputError, match=r"refusing to unpickle global builtins\.eval"):
        read_checkpoint_args(path)


def test_legacy_pickle_format(torch, tmp_path):
    path = tmp_path / "model_optim_rng.pt"
    torch.save({"args": argparse.Namespace(lr=1.0)}, path, _use_new_zipfile_serialization=False)
    with pytest.raises(InputError, match=r"legacy torch<1\.6 .*torch>=1\.6"):
        read_checkpoint_args(path)


def test_missing_args_key(torch, tmp_path):
    path = tmp_path / "model_optim_rng.pt"
    torch.save({"iteration": 3, "model": {}}, path)
    with pytest.raises(InputError, match=r"no 'args' in the checkpoint \(found: iteration, model\)"):
        read_checkpoint_args(path)


def test_torch_dist_common_pt(torch, tmp_path):
    folder = tmp_path / "ckpt" / "iter_0000005"
    folder.mkdir(parents=True)
    torch.save({"args": argparse.Namespace(use_dist_ckpt=True)}, folder / "common.pt")
    (folder / "__0_0.distcp").write_bytes(b"")
    (tmp_path / "ckpt" / "latest_checkpointed_iteration.txt").write_text("5\n")
    assert find_checkpoint_file(tmp_path / "ckpt") == folder / "common.pt"
    assert read_checkpoint_args(folder) == {"use_dist_ckpt": True}


def test_bad_paths(tmp_path):
    with pytest.raises(InputError, match="file not found"):
        find_checkpoint_file(tmp_path / "missing")
    (tmp_path / "latest_checkpointed_iteration.txt").write_text("7")
    with pytest.raises(InputError, match=r"latest_checkpointed_iteration\.txt:1: names iter_0000007, which does not exist"):
        find_checkpoint_file(tmp_path)
    empty = tmp_path / "iter_0000001"
    empty.mkdir()
    with pytest.raises(InputError, match="model_optim_rng.pt"):
        find_checkpoint_file(empty)
    text = tmp_path / "notes.pt"
    text.write_text("hello")
    with pytest.raises(InputError, match="not a torch.save checkpoint"):
        read_checkpoint_args(text)
