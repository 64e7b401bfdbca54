"""The step store (datasets/step_store.yaml): save_step_tensors → StepStoreSource round trip; the reference
runner's --grads read back, converted to MindFormers names by `workbench convert` and compared with the
MindSpore side's own gradients by `workbench weights diff`; hostile folders refused in one line."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from workbench.cli.main import main
from workbench.errors import InputError
from workbench.replay.step_kinds import load_step_layout
from workbench.replay.step_store import read_step_manifest, save_step_tensors
from workbench.tensors.open import open_source
from workbench.tensors.step_store import StepStoreSource

NAMES = ("embedding.word_embeddings.weight", "decoder.layers.0.self_attention.linear_qkv.weight",
         "decoder.final_layernorm.weight")


def grads_store(root: Path, step: int = 1, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    tensors = {name: rng.standard_normal(shape).astype(np.float32)
               for name, shape in zip(NAMES, ((64, 16), (48, 16), (16,)), strict=True)}
    return save_step_tensors(root, step, "grads", tensors, {"lr": 1e-3, "grad_norm": 2.5, "side": "megatron"})


def one_error_line(capsys, argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("workbench: error: ") and "Traceback" not in err, err
    return lines[0]


def diff_error(capsys, tmp_path: Path, folder: Path) -> str:
    """`weights diff` of a damaged folder against a good one: exit 2, one line, no report left behind."""
    good = grads_store(tmp_path / "good")
    out = tmp_path / "diff.json"
    line = one_error_line(capsys, ["weights", "diff", str(folder), str(good), "--out", str(out)])
    assert not out.exists() and not list(tmp_path.glob(".diff.json*"))
    return line


# ----------------------------------------------------------------------------- round trip

def test_round_trip_every_dtype_is_read_back_lazily_and_equal(tmp_path):
    torch = pytest.importorskip("torch", reason="a bf16 torch tensor is one of the inputs")
    tensors = {"w.fp32": np.arange(12, dtype=np.float32).reshape(3, 4), "w.fp16": np.ones((2, 2), np.float16),
               "w.empty": np.zeros((0, 4), np.float32), "w.bf16": torch.tensor([1.5, -2.0], dtype=torch.bfloat16)}
    folder = save_step_tensors(tmp_path / "store", 7, "params_after", tensors, {"lr": 3e-4, "iteration": 7})
    assert folder == tmp_path / "store" / "step_7" / "params_after"
    with open_source(folder) as source:
        assert isinstance(source, StepStoreSource) and (source.step, source.kind) == (7, "params_after")
        assert source.meta == {"lr": 3e-4, "iteration": 7}
        assert {n: (m.shape, m.dtype) for n, m in source.metas().items()} == {
            "w.fp32": ((3, 4), "fp32"), "w.fp16": ((2, 2), "fp16"), "w.empty": ((0, 4), "fp32"),
            "w.bf16": ((2,), "fp32")}                               # bf16 is stored as fp32 (exact)
        assert isinstance(source.read("w.fp32"), np.memmap)         # memory-mapped, one tensor at a time
        for name in ("w.fp32", "w.fp16", "w.empty"):
            np.testing.assert_array_equal(source.read(name), tensors[name])
        np.testing.assert_array_equal(source.read("w.bf16"), [1.5, -2.0])
    save_step_tensors(tmp_path / "store", 7, "params_after", {"w.fp32": np.zeros(2, np.float32)})
    with open_source(folder) as source:                              # written again: the old tensors are gone
        assert list(source.metas()) == ["w.fp32"] and sorted(p.name for p in folder.iterdir()) == [
            "manifest.json", "w.fp32.npy"]


def test_save_grads_writes_through_the_store_and_load_grads_reads_it_back(tmp_path):
    from workbench.reference.artifacts import load_grads, save_grads

    grads = {"w": np.arange(6, dtype=np.float64).reshape(2, 3), "b": np.ones(3, np.float32)}
    folder = save_grads(tmp_path / "grads", 4, grads, {"lr": np.float32(0.5), "grad_norm": np.float64(2.0)})
    assert folder == tmp_path / "grads" / "step_4" / "grads"
    assert read_step_manifest(folder).meta == {"iteration": 4, "lr": 0.5, "grad_norm": 2.0}
    loaded = load_grads(tmp_path / "grads", 4)
    assert list(loaded) == ["w", "b"] and loaded["w"].dtype == np.float32
    np.testing.assert_array_equal(loaded["w"], grads["w"])


def test_the_writer_refuses_before_writing_anything(tmp_path):
    root = tmp_path / "store"
    with pytest.raises(InputError, match="not a plain parameter name"):
        save_step_tensors(root, 1, "grads", {"../escape": np.ones(2, np.float32)})
    with pytest.raises(InputError, match="unknown step-store kind 'weights'"):
        save_step_tensors(root, 1, "weights", {"w": np.ones(2, np.float32)})
    with pytest.raises(InputError, match=r"meta.lr is a string"):
        save_step_tensors(root, 1, "grads", {"w": np.ones(2, np.float32)}, {"lr": "1e-3"})
    with pytest.raises(InputError, match="dtype int64 is not floating"):
        save_step_tensors(root, 1, "exp_avg", {"w": np.ones(2, np.int64)})
    assert not root.exists()


# ----------------------------------------------------------------------------- the reference runner

@pytest.fixture(scope="module")
def reference_grads(tmp_path_factory):
    """Both reference sides from the same weights (a Megatron checkpoint) on the same batch, with --grads."""
    pytest.importorskip("torch", reason="the Megatron-side reference needs torch")
    pytest.importorskip("mindspore", reason="the MindSpore-side reference needs mindspore")
    from workbench.reference.__main__ import main as reference

    root = tmp_path_factory.mktemp("runs")
    assert reference(["batches", "--steps", "2", "--out", str(root / "b.npz")]) == 0
    common = ["--steps", "1", "--batches", str(root / "b.npz"), "--grads"]
    assert reference(["train", "--side", "megatron", *common, "--save", "megatron", "--tp", "2",
                      "--out", str(root / "start")]) == 0
    init = ["--init", str(root / "start" / "megatron_checkpoint")]
    assert reference(["train", "--side", "megatron", *common, *init, "--out", str(root / "torch")]) == 0
    assert main(["convert", str(root / "start" / "megatron_checkpoint"), str(root / "start.ckpt"),
                 "--to", "mindformers"]) == 0                          # the MindSpore side starts from the same weights
    assert reference(["train", "--side", "mindformers", *common, "--init", str(root / "start.ckpt"), "--no-jit",
                      "--out", str(root / "ms")]) == 0
    return root


def only_folder(root: Path) -> Path:
    folders = sorted(root.glob("grads/step_*/grads"))
    assert len(folders) == 1, folders
    return folders[0]


def test_reference_grads_convert_to_the_mindspore_sides_names_and_values(reference_grads, tmp_path, capsys):
    torch_grads, ms_grads = only_folder(reference_grads / "torch"), only_folder(reference_grads / "ms")
    manifest = read_step_manifest(torch_grads)
    assert manifest.meta["side"] == "megatron" and manifest.meta["grad_norm"] > 0
    out = tmp_path / "grads_mf.ckpt"
    assert main(["convert", str(torch_grads), str(out), "--to", "mindformers", "--verify",
                 "--config", str(reference_grads / "start" / "megatron_checkpoint")]) == 0
    assert "megatron → mindformers (llama)" in capsys.readouterr().err
    with open_source(out) as converted, open_source(ms_grads) as mindspore_side:
        assert set(converted.metas()) == set(mindspore_side.metas())       # fused qkv split into wq, wk, wv
        assert any(".attention.wk." in name for name in converted.metas())
        for name, meta in mindspore_side.metas().items():
            assert converted.metas()[name].shape == meta.shape
    assert main(["weights", "diff", str(out), str(ms_grads), "--rtol", "1e-3", "--atol", "1e-6",
                 "--format", "json"]) == 0                                # same weights and batch: same gradients
    assert json.loads(capsys.readouterr().out)["verdict"] == "MATCH"


def test_weights_diff_of_two_grads_folders(tmp_path, capsys):
    a, b = grads_store(tmp_path / "a", seed=1), grads_store(tmp_path / "b", seed=1)
    assert main(["weights", "diff", str(a), str(b), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["verdict"] == "MATCH"
    c = grads_store(tmp_path / "c", seed=2)
    assert main(["weights", "diff", str(a), str(c), "--format", "json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["verdict"] == "MISMATCH" and report["facts"]["counts"]["mismatch"] == len(NAMES)


# ----------------------------------------------------------------------------- hostile folders

def test_a_step_without_its_manifest_is_refused_as_incomplete(tmp_path, capsys):
    folder = grads_store(tmp_path / "store")
    (folder / "manifest.json").unlink()
    (folder / ".x.npy.abc.part").write_bytes(b"half")
    line = diff_error(capsys, tmp_path, folder)
    assert f"{folder / 'manifest.json'}: incomplete step: no manifest" in line and ".x.npy.abc.part" in line


def test_a_truncated_npy_is_named_with_its_parameter(tmp_path, capsys):
    folder = grads_store(tmp_path / "store")
    victim = folder / f"{NAMES[1]}.npy"
    victim.write_bytes(victim.read_bytes()[:-100])
    line = diff_error(capsys, tmp_path, folder)
    assert f"{victim} [{NAMES[1]}]: truncated or corrupt .npy: its header (float32 [48, 16]) claims 3.0 KiB " \
           "(3072 bytes) of data, the file holds 2.9 KiB (2972 bytes)" in line


def test_a_changed_file_fails_its_manifest_sha256(tmp_path, capsys):
    folder = grads_store(tmp_path / "store")
    victim = folder / f"{NAMES[0]}.npy"
    data = bytearray(victim.read_bytes())
    data[-1] ^= 0xFF                                      # same size, same header: only the digest can tell
    victim.write_bytes(bytes(data))
    line = diff_error(capsys, tmp_path, folder)
    assert f"{victim} [{NAMES[0]}]" in line and "sha256" in line and "differs from manifest.json's" in line


def rewrite_manifest(folder: Path, change) -> Path:
    path = folder / "manifest.json"
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("change, words", [
    (lambda d: d.update(tensors=[]), "tensors is a list ([]), expected a mapping"),
    (lambda d: d["tensors"][NAMES[2]].update(shape="16"), f"tensors.{NAMES[2]}.shape is a string"),
    (lambda d: d["tensors"][NAMES[2]].update(shape=[2 ** 62]), "shape[0] is 4611686018427387904, expected 0 to 2**40"),
    (lambda d: d["tensors"][NAMES[2]].update(dtype=4), f"tensors.{NAMES[2]}.dtype is an integer"),
    (lambda d: d["tensors"][NAMES[2]].update(dtype="object"), "dtype object is not floating"),
    (lambda d: d["tensors"][NAMES[2]].update(sha256=None), f"tensors.{NAMES[2]}.sha256 is null"),
    (lambda d: d.update(step=True), "step is true/false"),
    (lambda d: d["meta"].update(lr="fast"), "meta.lr is a string ('fast'), expected a number"),
    (lambda d: d.update(kind="params"), "unknown step-store kind 'params'"),
    (lambda d: d.update(step=3), "step is 3 but the folder is step_1/"),
    (lambda d: d["tensors"][NAMES[2]].update(shape=[17]), "holds float32 [16], manifest.json says float32 [17]"),
])
def test_wrong_types_in_the_manifest_name_the_key(tmp_path, capsys, change, words):
    folder = grads_store(tmp_path / "store")
    path = rewrite_manifest(folder, change)
    line = diff_error(capsys, tmp_path, folder)
    assert (str(path) in line or str(folder / f"{NAMES[2]}.npy") in line) and words in line, line


@pytest.mark.parametrize("name", ["../../outside", "sub/dir.weight", "a..b", ".hidden"])
def test_a_tensor_name_that_is_not_one_file_in_the_folder_is_refused(tmp_path, capsys, name):
    folder = grads_store(tmp_path / "store")
    path = rewrite_manifest(folder, lambda d: d["tensors"].update({name: d["tensors"].pop(NAMES[2])}))
    line = diff_error(capsys, tmp_path, folder)
    assert str(path) in line and f"{name!r} is not a plain parameter name" in line


def test_an_npy_the_manifest_does_not_list_is_refused(tmp_path, capsys):
    folder = grads_store(tmp_path / "store")
    np.save(folder / "planted.weight.npy", np.ones(3, np.float32))
    line = diff_error(capsys, tmp_path, folder)
    assert f"{folder / 'planted.weight.npy'}: not listed in manifest.json" in line


@pytest.mark.parametrize("content, words", [
    (b"[" * 100_000 + b"]" * 100_000, "nest"),
    (b"\xff\xfe{}", "UTF-8"),
    (b'{"format": "workbench.step_store.manifest/1", "step": 1', "invalid manifest"),
])
def test_a_hostile_manifest_file_is_one_line(tmp_path, capsys, content, words):
    folder = grads_store(tmp_path / "store")
    (folder / "manifest.json").write_bytes(content)
    line = diff_error(capsys, tmp_path, folder)
    assert str(folder / "manifest.json") in line and words in line, line


def test_the_kinds_file_is_validated_with_file_and_line(tmp_path):
    source = (load_step_layout().source)
    text = Path(source).read_text().replace("dtype: floating\n    meta: &step_meta", "dtype: complex\n    meta: &step_meta")
    (tmp_path / "step_store.yaml").write_text(text)
    with pytest.raises(InputError) as caught:
        load_step_layout(tmp_path)
    line = text.splitlines().index("  grads:") + 1
    assert caught.value.where == f"{tmp_path / 'step_store.yaml'}:{line} [kinds.grads]"
    assert "dtype must be one or more of integer, floating, bool, found ['complex']" in caught.value.problem


def test_a_lazy_mapping_is_written_one_tensor_at_a_time(tmp_path):
    """Memory follows the largest tensor: each tensor the writer asked for is gone before it asks for the next."""
    import gc
    import weakref
    from collections.abc import Mapping

    class Lazy(Mapping):
        def __init__(self):
            self.alive = []

        def __getitem__(self, name):
            gc.collect()
            assert not any(ref() is not None for ref in self.alive), f"{name}: an earlier tensor is still held"
            array = np.full((64, 64), float(NAMES.index(name)), np.float32)
            self.alive.append(weakref.ref(array))
            return array

        def __iter__(self):
            return iter(NAMES)

        def __len__(self):
            return len(NAMES)

    folder = save_step_tensors(tmp_path, 1, "grads", Lazy())
    with open_source(folder) as source:
        assert [float(source.read(name)[0, 0]) for name in NAMES] == [0.0, 1.0, 2.0]
