"""The torch-side gradient capture (workbench/replay/grad_capture.py): one AdamW update of the torch reference
model, wrapped in DDP-style ``module.`` wrappers, captured by name through the step store and read back."""
from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the capture hooks into a torch training step")

from workbench.cli.main import main  # noqa: E402
from workbench.errors import InputError  # noqa: E402
from workbench.reference.megatron_parallel import shard_tensor_parallel, split_pipeline  # noqa: E402
from workbench.reference.layouts import split_grouped_qkv  # noqa: E402
from workbench.reference.config import ModelConfig, PrecisionConfig, TrainConfig, synthetic_batches  # noqa: E402
from workbench.reference.torch_model import build_model, loss_fn  # noqa: E402
from workbench.reference.torch_train import MegatronStyleTrainer  # noqa: E402
from workbench.replay.grad_capture import (GradCaptureWarning, capture_after_step, capture_gradients,  # noqa: E402
                                           megatron_train_step_snippet, unwrapped_name)
from workbench.tensors.open import open_source  # noqa: E402

CONFIG = ModelConfig(num_layers=1, hidden_size=32, num_attention_heads=4, num_kv_heads=2, ffn_hidden_size=48,
                     vocab_size=64, seq_length=16)
SCRIPT = ("torchrun pretrain_gpt.py --num-layers 1 --hidden-size 32 --num-attention-heads 4 --group-query-attention "
          "--num-query-groups 2 --ffn-hidden-size 48 --swiglu --normalization RMSNorm --seq-length 16\n")


from optim_capture import Wrapper  # noqa: E402  (Megatron's DDP / Float16Module stand-in)


def backward(model, seed: int = 0):
    batch = synthetic_batches(CONFIG, 1, seed=seed)[0]
    logits = model(torch.as_tensor(batch["tokens"], dtype=torch.int64))
    loss_fn(logits, torch.as_tensor(batch["labels"], dtype=torch.int64), torch.as_tensor(batch["loss_mask"])).backward()


def read(folder) -> tuple[dict, dict]:
    with open_source(folder) as source:
        return {name: np.array(source.read(name)) for name in source.metas()}, source.meta


@pytest.fixture
def adamw_step(tmp_path):
    """Capture around one plain torch AdamW step with Megatron's grouping (no decay for 1-D), 2 wrappers deep."""
    net = build_model(CONFIG, PrecisionConfig(), seed=0)
    model = Wrapper(Wrapper(net))
    named = dict(net.named_parameters())
    decayed = [p for p in named.values() if p.ndim >= 2]
    plain = [p for p in named.values() if p.ndim < 2]
    optimizer = torch.optim.AdamW([{"params": decayed, "weight_decay": 0.1}, {"params": plain, "weight_decay": 0.0}],
                                  lr=3e-4, betas=(0.9, 0.95), eps=1e-8, foreach=False)
    backward(model)
    grads = {name: p.grad.clone() for name, p in named.items()}
    before = {name: p.detach().clone() for name, p in named.items()}
    root = tmp_path / "capture"
    written = capture_gradients(model, root, 1, optimizer, params=True, loss_scale=1.0, grad_norm=2.5)
    optimizer.step()
    written.update(capture_after_step(model, optimizer, root, 1, grad_norm=2.5, clip_grad=1.0))
    return dict(net=net, optimizer=optimizer, grads=grads, before=before, root=root, written=written)


def test_names_are_unwrapped_and_grads_equal_param_grad_bit_for_bit(adamw_step):
    grads, meta = read(adamw_step["root"] / "step_1" / "grads")
    names = [name for name, _ in adamw_step["net"].named_parameters()]
    assert list(grads) == names and not any(name.startswith("module.") for name in grads)
    for name, grad in adamw_step["grads"].items():
        assert np.array_equal(grads[name], grad.numpy()) and grads[name].dtype == np.float32
    assert meta["iteration"] == 1 and meta["side"] == "megatron" and meta["no_grad"] == []
    assert (meta["loss_scale"], meta["grad_norm"]) == (1.0, 2.5)
    before, _ = read(adamw_step["root"] / "step_1" / "params_before")
    for name, weight in adamw_step["before"].items():
        assert np.array_equal(before[name], weight.numpy())
    assert unwrapped_name("module.module.decoder.x.module.w") == "decoder.x.module.w"


def test_params_after_and_adam_state_equal_the_optimizer(adamw_step):
    net, optimizer = adamw_step["net"], adamw_step["optimizer"]
    after, meta = read(adamw_step["root"] / "step_1" / "params_after")
    first, state_meta = read(adamw_step["root"] / "step_1" / "exp_avg")
    second, _ = read(adamw_step["root"] / "step_1" / "exp_avg_sq")
    for name, param in net.named_parameters():
        assert not np.array_equal(after[name], adamw_step["before"][name].numpy())   # the step moved it
        assert np.array_equal(after[name], param.detach().numpy())
        assert np.array_equal(first[name], optimizer.state[param]["exp_avg"].numpy())
        assert np.array_equal(second[name], optimizer.state[param]["exp_avg_sq"].numpy())
    assert state_meta["optimizer_step"] == 1 and state_meta["no_state"] == []
    assert meta["clip_coeff"] == pytest.approx(1.0 / (2.5 + 1e-6))                # Megatron's coefficient


def test_lr_and_weight_decay_per_group_are_recorded(adamw_step):
    _, meta = read(adamw_step["root"] / "step_1" / "grads")
    groups = meta["param_groups"]
    names = dict(adamw_step["net"].named_parameters())
    assert [(g["lr"], g["weight_decay"]) for g in groups] == [(3e-4, 0.1), (3e-4, 0.0)] and meta["lr"] == 3e-4
    assert groups[0]["params"] == [n for n, p in names.items() if p.ndim >= 2]
    assert groups[1]["params"] == [n for n, p in names.items() if p.ndim < 2] and groups[1]["params"]


def test_the_capture_converts_to_mindformers_names(adamw_step, tmp_path, capsys):
    (tmp_path / "pretrain.sh").write_text(SCRIPT)
    out = tmp_path / "grads_mf.ckpt"
    assert main(["convert", str(adamw_step["root"] / "step_1" / "grads"), str(out), "--to", "mindformers",
                 "--verify", "--config", str(tmp_path / "pretrain.sh")]) == 0, capsys.readouterr().err
    grads = {name: grad.numpy() for name, grad in adamw_step["grads"].items()}
    _, _, v = split_grouped_qkv(grads["decoder.layers.0.self_attention.linear_qkv.weight"], 4, 2)
    with open_source(out) as converted:
        assert {"model.layers.0.attention.wq.weight", "model.layers.0.attention.wk.weight", "lm_head.weight",
                "model.layers.0.feed_forward.w1.weight", "model.layers.0.feed_forward.w3.weight"} <= set(converted.metas())
        assert not any("linear_qkv" in name or name.startswith("module.") for name in converted.metas())
        assert np.array_equal(converted.read("model.layers.0.attention.wv.weight"), v)        # the fused qkv split
        assert np.array_equal(converted.read("model.tok_embeddings.embedding_weight"),
                              grads["embedding.word_embeddings.weight"])


def test_main_grad_wins_over_grad_and_half_tensors_are_widened(tmp_path):
    net = build_model(CONFIG, PrecisionConfig(), seed=0)
    backward(net)
    name, param = next(iter(net.named_parameters()))
    param.main_grad = torch.full(param.shape, 7.0, dtype=torch.float32)                # Megatron's fp32 grad buffer
    last_name, last = list(net.named_parameters())[-1]
    last.grad = last.grad.to(torch.bfloat16).to(last.dtype)
    last.main_grad = last.grad.to(torch.bfloat16)
    capture_gradients(net, tmp_path, 3)
    grads, meta = read(tmp_path / "step_3" / "grads")
    assert np.all(grads[name] == 7.0) and not np.array_equal(grads[name], param.grad.numpy())
    assert grads[last_name].dtype == np.float32 and np.array_equal(grads[last_name], last.grad.numpy())
    assert meta["widened_to_fp32"] == [last_name] and "lr" not in meta


def test_a_parameter_without_a_gradient_is_reported(tmp_path):
    net = build_model(CONFIG, PrecisionConfig(), seed=0)
    backward(net)
    name, param = list(net.named_parameters())[1]
    param.grad = None
    with pytest.warns(GradCaptureWarning, match=f"1 trainable parameter.*without a gradient.*{name}"):
        capture_gradients(net, tmp_path, 1)
    grads, meta = read(tmp_path / "step_1" / "grads")
    assert meta["no_grad"] == [name] and name not in grads and len(grads) == len(list(net.parameters())) - 1


def test_megatron_style_trainer_fp32_masters_are_captured(tmp_path):
    """bf16 parameters with fp32 masters: the weights written are the optimizer's fp32 copies (the trainer's masters)."""
    train = TrainConfig(steps=1, lr=1e-3)
    trainer = MegatronStyleTrainer(build_model(CONFIG, PrecisionConfig(param_dtype="bf16", compute_dtype="bf16"), 0),
                                   train)
    # Megatron's Float16OptimizerWithFloat16Params: the torch optimizer as .optimizer, model ↔ master pairing
    optimizer = SimpleNamespace(optimizer=trainer.optimizer,
                                float16_groups=[[trainer.params[n] for n in trainer.order]],
                                fp32_from_float16_groups=[[trainer.masters[n] for n in trainer.order]])
    trainer.step(synthetic_batches(CONFIG, 1)[0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        capture_after_step(Wrapper(trainer.model), optimizer, tmp_path, 1)
    after, meta = read(tmp_path / "step_1" / "params_after")
    for name in trainer.order:
        assert np.array_equal(after[name], trainer.masters[name].detach().numpy())
        assert not np.array_equal(after[name], trainer.params[name].detach().float().numpy())  # not the bf16 copy
    assert "widened_to_fp32" not in meta
    assert [g["weight_decay"] for g in meta["param_groups"]] == [0.1, 0.0] and "?" not in json.dumps(meta)


def test_the_snippet_is_valid_python_calling_the_real_functions():
    body = "\n".join(line[4:] if line.startswith("    ") else line for line in megatron_train_step_snippet.splitlines())
    compile(body, "snippet", "exec")
    assert "capture_gradients(" in body and "capture_after_step(" in body and "curr_iteration + 1" in body
    assert sys.modules["workbench.replay.grad_capture"]


def test_importing_the_capture_does_not_import_torch():
    import subprocess

    code = "import sys, workbench.replay.grad_capture; assert 'torch' not in sys.modules, 'torch imported'"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[1]).returncode == 0


def test_a_chained_optimizer_is_unwrapped_and_the_distributed_optimizer_refused(adamw_step, tmp_path):
    net, optimizer = adamw_step["net"], adamw_step["optimizer"]
    chained = SimpleNamespace(chained_optimizers=[SimpleNamespace(optimizer=optimizer)])   # Megatron's ChainedOptimizer
    capture_after_step(Wrapper(net), chained, tmp_path, 2)
    first, meta = read(tmp_path / "step_2" / "exp_avg")
    assert set(first) == {name for name, _ in net.named_parameters()} and meta["optimizer_step"] == 1
    DistributedOptimizer = type("DistributedOptimizer", (), {"optimizer": optimizer})
    with pytest.raises(ValueError, match="without --use-distributed-optimizer"):
        capture_after_step(net, DistributedOptimizer(), tmp_path / "dist", 1)
    assert not (tmp_path / "dist").exists()


# ----------------------------------------------------------------------------- tensor / pipeline parallel ranks

KINDS = ("grads", "params_before", "params_after", "exp_avg", "exp_avg_sq")
DEEP = ModelConfig(num_layers=2, hidden_size=32, num_attention_heads=4, num_kv_heads=2, ffn_hidden_size=48,
                   vocab_size=64, seq_length=16)


def module_of(params: dict) -> torch.nn.Module:
    """A real module tree holding ``params`` under their dotted names (what one Megatron rank holds)."""
    root = torch.nn.Module()
    for name, param in params.items():
        *path, leaf = name.split(".")
        node = root
        for part in path:
            if not hasattr(node, part):
                node.add_module(part, torch.nn.Module())
            node = getattr(node, part)
        node.register_parameter(leaf, param)
    return root


def full_step(tmp_path) -> dict:
    """The TP=1 capture of one AdamW update of the reference model: kind -> {name: full tensor}."""
    net = build_model(DEEP, PrecisionConfig(), seed=0)
    optimizer = torch.optim.AdamW(net.parameters(), lr=3e-4, betas=(0.9, 0.95), foreach=False)
    batch = synthetic_batches(DEEP, 1, seed=0)[0]
    loss_fn(net(torch.as_tensor(batch["tokens"], dtype=torch.int64)), torch.as_tensor(batch["labels"], dtype=torch.int64),
            torch.as_tensor(batch["loss_mask"])).backward()
    capture_gradients(net, tmp_path / "tp1", 1, optimizer, params=True)
    optimizer.step()
    capture_after_step(net, optimizer, tmp_path / "tp1", 1)
    return {kind: {name: torch.from_numpy(array.copy()) for name, array in read(tmp_path / "tp1" / "step_1" / kind)[0].items()}
            for kind in KINDS}


def capture_rank(root, full: dict, tp: int, pp: int, tp_rank: int, pp_rank: int) -> None:
    """What rank (tp_rank, pp_rank) of a TP x PP run holds (Megatron's shards, stage-local names), captured by the hook."""
    def shard(kind):
        stage = split_pipeline(full[kind], DEEP.num_layers, pp)[pp_rank]
        return shard_tensor_parallel(stage, DEEP, tp)[tp_rank]

    grads, before, after, first, second = (shard(kind) for kind in KINDS)
    params = {name: torch.nn.Parameter(tensor.clone()) for name, tensor in before.items()}
    for name, param in params.items():
        param.grad = grads[name].clone()
    optimizer = torch.optim.AdamW(list(params.values()), lr=3e-4)
    ranks = dict(tp_rank=tp_rank, tp_size=tp, pp_rank=pp_rank, pp_size=pp, swiglu=True)
    capture_gradients(module_of(params), root, 1, optimizer, params=True, **ranks)
    for name, param in params.items():                                 # the rank's optimizer.step()
        param.data = after[name].clone()
        optimizer.state[param] = {"exp_avg": first[name], "exp_avg_sq": second[name], "step": torch.tensor(1.0)}
    capture_after_step(module_of(params), optimizer, root, 1, **ranks)


@pytest.mark.parametrize("tp,pp", [(2, 1), (2, 2)])
def test_a_capture_from_a_tp2_run_merges_to_the_tp1_one(tmp_path, tp, pp):
    full = full_step(tmp_path)
    for tp_rank in range(tp):
        for pp_rank in range(pp):
            capture_rank(tmp_path / "tp2", full, tp, pp, tp_rank, pp_rank)
    assert (tmp_path / "tp2" / "step_1" / "grads" / "mp_rank_01_000" / "manifest.json").is_file()
    for kind in KINDS:
        merged, meta = read(tmp_path / "tp2" / "step_1" / kind)
        assert set(merged) == set(full[kind])
        for name, tensor in full[kind].items():
            assert np.array_equal(merged[name], tensor.numpy()), (kind, name)
        assert (meta["tp_size"], meta["pp_size"], meta["swiglu"]) == (tp, pp, True)
    shard, meta = read(tmp_path / "tp2" / "step_1" / "grads" / "mp_rank_01_000")     # one rank folder alone
    assert meta["tp_rank"] == 1 and all(shard[name].shape[0] <= full["grads"][name].shape[0] for name in shard)


def test_a_missing_rank_shard_names_the_folder(tmp_path, capsys):
    full = full_step(tmp_path)
    capture_rank(tmp_path / "tp2", full, 2, 1, 0, 0)                    # rank 1 never wrote
    kind = tmp_path / "tp2" / "step_1" / "grads"
    with pytest.raises(InputError, match=r"missing: 1 of the tp 2 x pp 1 rank folders") as error:
        open_source(kind)
    assert error.value.where == str(kind / "mp_rank_01_000")
    assert main(["weights", "diff", str(kind), str(tmp_path / "tp1" / "step_1" / "grads")]) == 2
    assert "mp_rank_01_000" in capsys.readouterr().err


def test_a_rank_folder_holding_another_ranks_manifest_is_refused(tmp_path):
    full = full_step(tmp_path)
    for tp_rank in range(2):
        capture_rank(tmp_path / "tp2", full, 2, 1, tp_rank, 0)
    kind = tmp_path / "tp2" / "step_1" / "exp_avg"
    (kind / "mp_rank_00_000").rename(kind / "swap")
    (kind / "mp_rank_01_000").rename(kind / "mp_rank_00_000")
    (kind / "swap").rename(kind / "mp_rank_01_000")
    with pytest.raises(InputError, match=r"rank \(tp, pp\) \(0, 0\) does not fit meta tp 1/2") as error:
        open_source(kind)
    assert "mp_rank_00_000" in error.value.where


def test_rank_keywords_come_from_megatron_args_and_are_checked(tmp_path):
    from workbench.replay.grad_capture import parallel_ranks

    args = SimpleNamespace(tensor_model_parallel_size=2, pipeline_model_parallel_size=1, swiglu=True)
    assert parallel_ranks(args, tp_rank=1) == {"tp_rank": 1, "tp_size": 2, "pp_rank": 0, "pp_size": 1, "swiglu": True}
    assert parallel_ranks(SimpleNamespace(tensor_model_parallel_size=1, pipeline_model_parallel_size=1)) == {}
    with pytest.raises(ValueError, match="pass swiglu="):
        parallel_ranks(tp_rank=0, tp_size=2)
    with pytest.raises(ValueError, match="outside 0..1"):
        parallel_ranks(tp_rank=2, tp_size=2, swiglu=False)


def test_rank_folders_that_disagree_on_sizes_are_refused(tmp_path):
    full = full_step(tmp_path)
    capture_rank(tmp_path / "tp2", full, 2, 1, 0, 0)
    capture_rank(tmp_path / "tp2", full, 2, 2, 1, 0)                    # another run's rank 1 (PP=2)
    kind = tmp_path / "tp2" / "step_1" / "grads"
    with pytest.raises(InputError, match=r"rank folders disagree on meta.pp_size") as error:
        open_source(kind)
    assert error.value.where == str(kind)


def test_a_tp2_capture_converts_like_the_tp1_one(tmp_path, capsys):
    full = full_step(tmp_path)
    for tp_rank in range(2):
        capture_rank(tmp_path / "tp2", full, 2, 1, tp_rank, 0)
    script = tmp_path / "pretrain.sh"
    script.write_text(SCRIPT.replace("--num-layers 1", "--num-layers 2"))
    outputs = {}
    for run in ("tp1", "tp2"):
        outputs[run] = tmp_path / f"{run}.ckpt"
        assert main(["convert", str(tmp_path / run / "step_1" / "grads"), str(outputs[run]), "--to", "mindformers",
                     "--config", str(script)]) == 0, capsys.readouterr().err
    with open_source(outputs["tp1"]) as one, open_source(outputs["tp2"]) as two:
        assert one.metas() == two.metas() and "model.layers.1.feed_forward.w3.weight" in one.metas()
        assert all(np.array_equal(one.read(name), two.read(name)) for name in one.metas())
