"""Names for nameless local norms, recovered for the reference models of both sides: from the run's own
checkpoint put in optimizer order, equal to the names the trainers' optimizers really use; a list
whose order differs is detected by position, never guessed."""
from __future__ import annotations

import pytest

from workbench.errors import InputError
from workbench.logs import read_log
from workbench.logs.param_names import attach_names, names_from_checkpoint, optimizer_order


def _one_step(side: str, out, **extra):
    from workbench.reference.config import ModelConfig, TrainConfig
    from workbench.reference.runner import RunSpec, run

    save = ("megatron",) if side == "megatron" else ("mindspore",)
    return run(RunSpec(side, ModelConfig(), TrainConfig(steps=1, log_local_norms=True), out, save=save, **extra))


def test_megatron_patch_list_gets_the_optimizer_names_back(tmp_path):
    pytest.importorskip("torch")
    from workbench.reference.config import ModelConfig, PrecisionConfig
    from workbench.reference.torch_model import build_model
    from workbench.reference.torch_train import megatron_param_groups

    result = _one_step("megatron", tmp_path / "run")
    decayed, rest = megatron_param_groups(build_model(ModelConfig(), PrecisionConfig(), seed=0))
    truth = decayed + rest                                  # the order the trainer's optimizer holds them in
    named = read_log(result.log).local_norms.set_index("param")["value"]
    patch = tmp_path / "patched_megatron.log"               # what the method's print_rank_0 patch writes
    patch.write_text("[" + ", ".join(f"tensor({named[name]!r}, device='cuda:0')" for name in truth) + "]\n"
                     " [2025-01-01 00:00:00] iteration        1/       1 | lm loss: 4.0 |\n")
    nameless = read_log(patch)
    assert set(nameless.local_norms["param"]) == {""}
    checkpoint = next(path for path in result.checkpoints if path.name == "model_optim_rng.pt")
    recovered = attach_names(nameless, optimizer_order(names_from_checkpoint(checkpoint)), str(checkpoint))
    assert recovered.local_norms["param"].tolist() == truth
    assert list(recovered.local_norms["param"].cat.categories) == sorted(truth)    # a text column: Categorical
    assert recovered.local_norms["value"].tolist() == pytest.approx([named[name] for name in truth])
    short = tmp_path / "short.log"                          # a list from another model: the count disagrees
    short.write_text("[" + ", ".join(f"tensor({named[name]!r})" for name in truth[:-1]) + "]\n"
                     " [2025-01-01 00:00:00] iteration        1/       1 | lm loss: 4.0 |\n")
    with pytest.raises(InputError, match=f"{len(truth) - 1} local norms but .* lists {len(truth)}"):
        attach_names(read_log(short), optimizer_order(names_from_checkpoint(checkpoint)), str(checkpoint))


def test_mindformers_block_gets_names_from_the_checkpoint_and_a_reordered_block_is_detected(tmp_path):
    pytest.importorskip("mindspore")
    from workbench.reference.mindformers_log import format_local_norm_message, format_loss_message, line_prefix

    result = _one_step("mindformers", tmp_path / "run", jit=False)
    logged = read_log(result.log)                           # names from the run's own Param groups block
    truth = logged.local_norms["param"].tolist()
    assert list(logged.local_norms["param"].cat.categories) == sorted(truth)        # set_texts: every name, sorted
    values = logged.local_norms["value"].tolist()
    checkpoint = next(path for path in result.checkpoints if path.suffix == ".ckpt")
    order = optimizer_order(names_from_checkpoint(checkpoint))
    assert [name for name, _ in order] == truth             # checkpoint + grouping rule = the optimizer's order
    sizes = [numel for _, numel in order]

    def block_log(path, sizes, values):                     # an older MindFormers: the block without Param groups
        path.write_text(line_prefix() + format_local_norm_message(sizes, values) + "\n"
                        + line_prefix() + format_loss_message(1, 1, 1, 1, 4.0, 100.0, 1e-3, 1.0) + "\n")
        return read_log(path)

    nameless = block_log(tmp_path / "block.log", sizes, values)
    recovered = attach_names(nameless, order, str(checkpoint))
    assert recovered.local_norms["param"].tolist() == truth
    first, other = 0, next(i for i, size in enumerate(sizes) if size != sizes[0])
    swapped = list(sizes)
    swapped[first], swapped[other] = swapped[other], swapped[first]
    reordered = block_log(tmp_path / "reordered.log", swapped, values)
    with pytest.raises(InputError, match=f"position {first}: the log says {sizes[other]} elements"):
        attach_names(reordered, order, str(checkpoint))
