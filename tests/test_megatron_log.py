"""read_arguments_block: the block Megatron's _print_args writes at start-up."""
from __future__ import annotations

from pathlib import Path

import pytest

from workbench.config.megatron_log import has_arguments_block, parse_value, read_arguments_block
from workbench.errors import InputError


def _arg(name: str, value: str) -> str:
    """One line exactly as megatron/training/arguments.py::_print_args formats it."""
    return "  {} {} {}".format(name, "." * (48 - len(name)), value)


def _block(prefix: str, values: dict[str, str]) -> list[str]:
    lines = [f"{prefix}------------------------ arguments ------------------------"]
    lines += [prefix + _arg(k, v) for k, v in sorted(values.items(), key=lambda kv: kv[0].lower())]
    return lines + [f"{prefix}-------------------- end of arguments ---------------------"]


FIRST = {
    "adam_beta2": "0.95", "attention_backend": "AttnBackend.auto", "bf16": "True", "data_path":
    "['1.0', '/data/a b']", "fp16": "False", "lr": "1e-05", "moe_layer_freq": "1", "num_layers": "32",
    "params_dtype": "torch.bfloat16", "split": "969,30,1", "tokenizer_model": "/models/tok.model",
    "load": "None", "loss_scale_window": "inf",
    "inference_dynamic_batching_buffer_overflow_factor": "None",   # 49 chars: no dots at all
}


def test_prefixed_log_with_two_copies(tmp_path: Path):
    lines = ["2024-05-01 10:00:00 [rank3]: using world size: 8", "[rank0]: > building tokenizer ..."]
    lines += [f"[2024-05-01 10:00:0{k % 10}] [rank0]:" + line[len("[rank0]:"):]
              for k, line in enumerate(_block("[rank0]:", FIRST))]
    lines.insert(6, "[2024-05-01 10:00:04] [rank1]:" + _arg("num_layers", "99"))    # another rank
    lines.insert(7, "Loading checkpoint ...")                                       # untagged noise
    second = dict(FIRST, num_layers="64")
    lines += ["[rank0]: training ..."] + _block("[default0]:", second)
    path = tmp_path / "train.log"
    path.write_text("\n".join(lines) + "\n")
    args = read_arguments_block(path)
    expected_line = 1 + next(k for k, l in enumerate(lines) if "[rank0]:  num_layers ...." in l)
    assert args["num_layers"] == (32, expected_line)
    assert set(args) == set(FIRST)
    assert args["adam_beta2"][0] == 0.95 and args["lr"][0] == 1e-05
    assert args["bf16"][0] is True and args["fp16"][0] is False and args["load"][0] is None
    assert args["params_dtype"][0] == "torch.bfloat16"
    assert args["attention_backend"][0] == "AttnBackend.auto"
    assert args["data_path"][0] == ["1.0", "/data/a b"]
    assert args["split"][0] == "969,30,1"
    assert args["tokenizer_model"][0] == "/models/tok.model"
    assert args["loss_scale_window"][0] == float("inf")
    assert args["inference_dynamic_batching_buffer_overflow_factor"][0] is None
    first_line = lines.index(next(l for l in lines if "------ arguments" in l)) + 1
    assert args["adam_beta2"][1] == first_line + 1


def test_unfinished_first_block_then_complete_one(tmp_path: Path):
    lines = _block("", {"lr": "0.1"})[:-1] + _block("", {"lr": "0.2"})
    path = tmp_path / "restart.log"
    path.write_text("\n".join(lines))
    assert read_arguments_block(path) == {"lr": (0.2, 4)}


def test_missing_end_marker_names_start_line(tmp_path: Path):
    path = tmp_path / "cut.log"
    path.write_text("\n".join(["start", "more"] + _block("[rank0]: ", FIRST)[:-1]))
    with pytest.raises(InputError) as info:
        read_arguments_block(path)
    assert str(info.value).startswith(f"{path}:3: ") and "end of arguments" in str(info.value)


def test_no_block(tmp_path: Path):
    path = tmp_path / "none.log"
    path.write_text(" iteration 1/ 10 | lm loss: 1.0E+01 |\n")
    with pytest.raises(InputError, match="no Megatron arguments block"):
        read_arguments_block(path)


def test_has_arguments_block():
    assert has_arguments_block("x\n[rank0]: ------------------------ arguments ------------------------\n")
    assert not has_arguments_block("-------------------- end of arguments ---------------------\n")
    assert not has_arguments_block("{ Epoch:[  1/  2], step:[    2/   19], loss: 10.633")


@pytest.mark.parametrize("raw, value", [
    ("None", None), ("32", 32), ("-1", -1), ("3e-05", 3e-05), ("[0.9, 0.95]", [0.9, 0.95]),
    ("(1, 2)", (1, 2)), ("cosine", "cosine"), ("torch.float32", "torch.float32"), ("", ""),
    ("__import__('os').system('true')", "__import__('os').system('true')"),
])
def test_parse_value(raw, value):
    assert parse_value(raw) == value
