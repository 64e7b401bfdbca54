"""Megatron's own ``--save-wgrads-interval`` capture (workbench/tensors/megatron_wgrads.py): a wgrads folder
written here with torch.save in exactly Megatron's layout (``save_grads`` in megatron/training/checkpointing.py)
from the torch reference model's gradients, sharded the way Megatron shards them, merges back bit for bit."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="Megatron writes its captures with torch.save")

from workbench.cli.main import main  # noqa: E402
from workbench.errors import InputError  # noqa: E402
from workbench.reference.config import ModelConfig, PrecisionConfig, synthetic_batches  # noqa: E402
from workbench.reference.layouts import split_grouped_qkv  # noqa: E402
from workbench.reference.megatron_io import save_megatron_legacy  # noqa: E402
from workbench.reference.megatron_parallel import shard_tensor_parallel, split_pipeline  # noqa: E402
from workbench.reference.torch_model import build_model, loss_fn  # noqa: E402
from workbench.tensors.megatron_wgrads import MegatronCaptureSource  # noqa: E402
from workbench.tensors.open import open_source  # noqa: E402

CONFIG = ModelConfig(num_layers=2, hidden_size=32, num_attention_heads=4, num_kv_heads=2, ffn_hidden_size=48,
                     vocab_size=64, seq_length=16)
SCRIPT = ("torchrun pretrain_gpt.py --num-layers 2 --hidden-size 32 --num-attention-heads 4 --group-query-attention "
          "--num-query-groups 2 --ffn-hidden-size 48 --swiglu --normalization RMSNorm --seq-length 16 "
          "--tensor-model-parallel-size {tp} --pipeline-model-parallel-size {pp}\n")
ITERATION = 5


@pytest.fixture(scope="module")
def gradients() -> dict:
    """One backward of the torch reference model: its parameters' gradients by Megatron name (TP=1)."""
    net = build_model(CONFIG, PrecisionConfig(), seed=0)
    batch = synthetic_batches(CONFIG, 1, seed=0)[0]
    logits = net(torch.as_tensor(batch["tokens"], dtype=torch.int64))
    loss_fn(logits, torch.as_tensor(batch["labels"], dtype=torch.int64), torch.as_tensor(batch["loss_mask"])).backward()
    return {name: param.grad.detach().clone() for name, param in net.named_parameters()}


def save_wgrads(save: object, grads: dict, tp: int = 2, pp: int = 1, iteration: int = ITERATION, label="wgrads"):
    """Megatron's ``save_grads``: ``{save}/{label}/iter_{it:07d}/mp_rank_{tp:02d}[_{pp:03d}].pth`` of
    ``{"model_chunk0": {name: tensor}}``, stage-local layer numbers, each rank its own TP shard."""
    folder = save / label / f"iter_{iteration:07d}"
    folder.mkdir(parents=True)
    for pp_rank, stage in enumerate(split_pipeline(grads, CONFIG.num_layers, pp)):
        for tp_rank, shard in enumerate(shard_tensor_parallel(stage, CONFIG, tp)):
            name = f"mp_rank_{tp_rank:02d}" + (f"_{pp_rank:03d}" if pp > 1 else "")
            torch.save({"model_chunk0": shard}, folder / f"{name}.pth")
    return folder


def script(tmp_path, tp: int = 2, pp: int = 1):
    path = tmp_path / "pretrain.sh"
    path.write_text(SCRIPT.format(tp=tp, pp=pp))
    return path


def assert_merges_to(source, grads: dict) -> None:
    assert set(source.metas()) == set(grads)
    for name, grad in grads.items():
        merged = np.asarray(source.read(name))
        assert merged.shape == tuple(grad.shape) and np.array_equal(merged, grad.numpy()), name


@pytest.mark.parametrize("tp,pp", [(2, 1), (2, 2), (1, 2)])
def test_a_tp_pp_capture_merges_to_the_tp1_gradients_bit_for_bit(tmp_path, gradients, tp, pp):
    save_wgrads(tmp_path, gradients, tp, pp)
    with open_source(tmp_path / "wgrads", config=script(tmp_path, tp, pp)) as source:   # the root: newest iteration
        assert isinstance(source, MegatronCaptureSource) and source.iteration == ITERATION
        assert source.kind == "wgrads" and source.tensor_parallel == tp
        assert_merges_to(source, gradients)


def test_args_come_from_the_checkpoint_of_the_same_save_folder(tmp_path, gradients):
    weights = {name: torch.zeros_like(grad) for name, grad in gradients.items()}
    save_megatron_legacy(weights, CONFIG, tmp_path, iteration=ITERATION, tensor_parallel=2)
    save_wgrads(tmp_path, gradients, tp=2)
    with open_source(tmp_path / "wgrads" / f"iter_{ITERATION:07d}") as source:              # no --config
        assert source.args.swiglu is True
        assert_merges_to(source, gradients)


def test_args_come_from_a_torch_dist_checkpoints_common_pt_and_config_overrides_swiglu(tmp_path, gradients):
    import argparse

    (tmp_path / f"iter_{ITERATION:07d}").mkdir()
    torch.save({"args": argparse.Namespace(swiglu=True, tensor_model_parallel_size=2, num_layers=2)},
               tmp_path / f"iter_{ITERATION:07d}" / "common.pt")                # torch_dist's common state
    (tmp_path / "latest_checkpointed_iteration.txt").write_text(str(ITERATION))
    save_wgrads(tmp_path, gradients, tp=2)
    with open_source(tmp_path / "wgrads") as source:
        assert source.args.swiglu is True and source.args.num_layers == 2
        assert_merges_to(source, gradients)
    (tmp_path / "gelu.sh").write_text(SCRIPT.format(tp=2, pp=1).replace(" --swiglu", ""))
    with open_source(tmp_path / "wgrads", config=tmp_path / "gelu.sh") as source:   # the user's config wins
        assert source.args.swiglu is False and source.args.num_layers == 2


def test_the_newest_iteration_is_read_and_params_are_read_too(tmp_path, gradients):
    save_wgrads(tmp_path, {name: grad * 0 for name, grad in gradients.items()}, iteration=2)
    save_wgrads(tmp_path, gradients, iteration=10)
    save_wgrads(tmp_path, gradients, iteration=10, label="params")
    with open_source(tmp_path / "wgrads", config=script(tmp_path)) as source:
        assert source.iteration == 10
        assert_merges_to(source, gradients)
    with open_source(tmp_path / "params", config=script(tmp_path)) as source:
        assert source.kind == "params"


def test_one_rank_file_of_a_tp1_capture_opens_alone(tmp_path, gradients):
    folder = save_wgrads(tmp_path, gradients, tp=1)
    with open_source(folder / "mp_rank_00.pth") as source:
        assert_merges_to(source, gradients)


def test_one_rank_file_of_a_tp2_capture_is_refused(tmp_path, gradients):
    folder = save_wgrads(tmp_path, gradients, tp=2)
    with pytest.raises(InputError, match="one of the 2 rank files of this iteration") as error:
        open_source(folder / "mp_rank_00.pth")
    assert error.value.where == str(folder / "mp_rank_00.pth")


def test_convert_gives_mindformers_names(tmp_path, gradients, capsys):
    save_wgrads(tmp_path, gradients, tp=2)
    out = tmp_path / "grads_mf.ckpt"
    assert main(["convert", str(tmp_path / "wgrads"), str(out), "--to", "mindformers", "--verify",
                 "--config", str(script(tmp_path))]) == 0, capsys.readouterr().err
    grads = {name: grad.numpy() for name, grad in gradients.items()}
    _, _, v = split_grouped_qkv(grads["decoder.layers.1.self_attention.linear_qkv.weight"], 4, 2)
    gate, up = np.split(grads["decoder.layers.0.mlp.linear_fc1.weight"], 2)
    with open_source(out) as converted:
        assert np.array_equal(converted.read("model.layers.1.attention.wv.weight"), v)
        assert np.array_equal(converted.read("model.layers.0.feed_forward.w1.weight"), gate)
        assert np.array_equal(converted.read("model.layers.0.feed_forward.w3.weight"), up)


def test_weights_diff_of_a_capture_with_itself_is_clean(tmp_path, gradients, capsys):
    save_wgrads(tmp_path, gradients, tp=2)
    capture = str(tmp_path / "wgrads")
    assert main(["weights", "diff", capture, capture, "--config", str(script(tmp_path))]) == 0, capsys.readouterr().err


# ----------------------------------------------------------------------------- hostile captures

def run_cli(tmp_path, capsys, path, config: bool = True) -> str:
    argv = ["convert", str(path), str(tmp_path / "out.ckpt"), "--to", "mindformers"]
    code = main(argv + (["--config", str(script(tmp_path))] if config else []))
    err = capsys.readouterr().err.strip()
    assert code == 2 and "Traceback" not in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "out.ckpt").exists()
    return err


def test_a_tp_capture_without_args_names_the_flag_that_settles_it(tmp_path, gradients, capsys):
    folder = save_wgrads(tmp_path, gradients, tp=2)
    err = run_cli(tmp_path, capsys, tmp_path / "wgrads", config=False)
    assert str(folder) in err and "--swiglu" in err and "--config" in err


def test_a_truncated_rank_file_is_named(tmp_path, gradients, capsys):
    folder = save_wgrads(tmp_path, gradients, tp=2)
    data = (folder / "mp_rank_01.pth").read_bytes()
    (folder / "mp_rank_01.pth").write_bytes(data[: len(data) // 2])
    assert "mp_rank_01.pth" in run_cli(tmp_path, capsys, folder)


@pytest.mark.parametrize("payload,problem", [
    ([1, 2], "holds a list"),
    ({"model": {}}, "no 'model_chunk0' entry"),
    ({"model_chunk0": [1]}, "expected a mapping of parameter name to tensor"),
    ({"model_chunk0": {}, "model_chunk1": {}}, "virtual pipeline"),
    ({"model_chunk0": {b"\xff\xfe": torch.zeros(2)}}, "not a Megatron parameter name"),
    ({"model_chunk0": {"decoder.layers.0\n.x": torch.zeros(2)}}, "not a Megatron parameter name"),
    ({"model_chunk0": {"decoder.x": "text"}}, "not a tensor (str)"),
])
def test_wrong_top_level_types_and_odd_names_are_named(tmp_path, gradients, capsys, payload, problem):
    folder = save_wgrads(tmp_path, gradients, tp=2)
    torch.save(payload, folder / "mp_rank_01.pth")
    err = run_cli(tmp_path, capsys, folder)
    assert "mp_rank_01.pth" in err and problem in err


def test_shards_that_do_not_merge_name_the_tensor(tmp_path, gradients, capsys):
    folder = save_wgrads(tmp_path, gradients, tp=2)
    payload = torch.load(folder / "mp_rank_01.pth", weights_only=True)
    name = "decoder.layers.0.self_attention.linear_proj.weight"
    payload["model_chunk0"][name] = payload["model_chunk0"][name][:3]                    # rows of a row-parallel
    torch.save(payload, folder / "mp_rank_01.pth")
    err = run_cli(tmp_path, capsys, folder)
    assert name in err and "cannot be joined" in err


@pytest.mark.parametrize("settled_by", ["checkpoint", "config"])
def test_a_missing_rank_file_is_named_when_the_args_say_tp2(tmp_path, gradients, capsys, settled_by):
    if settled_by == "checkpoint":
        save_megatron_legacy({n: torch.zeros_like(g) for n, g in gradients.items()}, CONFIG, tmp_path,
                             iteration=ITERATION, tensor_parallel=2)
    folder = save_wgrads(tmp_path, gradients, tp=2)
    (folder / "mp_rank_01.pth").unlink()
    err = run_cli(tmp_path, capsys, folder, config=settled_by == "config")
    assert str(folder) in err and "tensor_model_parallel_size 2" in err


def test_dgrads_are_refused_with_the_reason(tmp_path, gradients):
    save_wgrads(tmp_path, gradients, tp=1, label="dgrads")
    with pytest.raises(InputError, match="activation gradients"):
        open_source(tmp_path / "dgrads")
