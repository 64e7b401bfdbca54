"""Megatron-LM / MindSpeed-LLM configs through read_config + resolve: every form, the
defaults, the named derivations and the errors (docs/framework-facts.md §2).

Expected numbers are computed here from the documented formulas, never copied from a run.
"""
from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import pytest

from workbench.config import read_config, resolve
from workbench.errors import InputError

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT.parent / "shared" / "fixtures" / "configs" / "megatron"
EXAMPLE_MINDFORMERS = ROOT / "checklists" / "examples" / "llama_tiny_mindformers.yaml"
needs_fixtures = pytest.mark.skipif(not FIXTURES.is_dir(), reason=f"shared fixtures not found at {FIXTURES}")

LLAMA2 = FIXTURES / "mindspeed_llm_v2.2.0__pretrain_llama2_7b_ptd.sh"
MIXTRAL = FIXTURES / "extra__megatron_core_v0.12.1__train_mixtral_8x7b_distributed.sh"
YAML_CFG = FIXTURES / "megatron_core_v0.12.1_gpt_config.yaml"

# a small model every synthetic script starts from (overridable: the last flag wins)
BASE = ["--num-layers 2", "--hidden-size 64", "--num-attention-heads 4", "--seq-length 32",
        "--max-position-embeddings 32", "--micro-batch-size 1", "--train-iters 100", "--lr 1e-3"]


# ------------------------------------------------------------------------- helpers
def write_script(tmp_path: Path, flags: list[str], launcher: str = "torchrun --nproc_per_node 8",
                 base: bool = True, prelude: str = "", name: str = "run.sh") -> Path:
    lines = ["#!/bin/bash", *prelude.splitlines(), f"{launcher} pretrain_gpt.py \\"]
    args = (BASE if base else []) + flags
    lines += [f"    {arg} \\" for arg in args[:-1]] + [f"    {args[-1]}"]
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return path


def line_of(path: Path, text: str, occurrence: int = 1) -> int:
    """1-based line of the ``occurrence``-th line containing ``text``."""
    hits = [n for n, line in enumerate(path.read_text().splitlines(), 1) if text in line]
    return hits[occurrence - 1]


def megatron(tmp_path: Path, *flags: str, **kwargs):
    return resolve(read_config(write_script(tmp_path, list(flags), **kwargs), "megatron"))


def swiglu_ffn(hidden: int) -> int:
    return int((4 * hidden * 2 / 3) / 64) * 64


def padded(vocab: int, divisor: int, tp: int) -> int:
    return math.ceil(vocab / (divisor * tp)) * divisor * tp


def log_line(name: str, value: object) -> str:
    """One line of Megatron's _print_args: name, dots up to 48 columns, str(value)."""
    return f"  {name} {'.' * (48 - len(name))} {value}"


# ------------------------------------------------------------------------- flag dests and defaults
def test_disable_bias_linear_sets_add_bias_linear_false(tmp_path):
    config = megatron(tmp_path, "--disable-bias-linear")
    item = config["model.add_bias_linear"]
    assert (item.value, item.kind) == (False, "set")
    assert "--disable-bias-linear" in item.source
    assert f"run.sh:{line_of(tmp_path / 'run.sh', '--disable-bias-linear')}" in item.source


def test_untie_embeddings_flag(tmp_path):
    assert megatron(tmp_path)["model.untie_embeddings"].value is False
    item = megatron(tmp_path, "--untie-embeddings-and-output-weights")["model.untie_embeddings"]
    assert (item.value, item.kind) == (True, "set")


@pytest.mark.parametrize("key, value", [
    ("model.normalization", "layernorm"), ("model.norm_epsilon", 1e-5), ("model.hidden_dropout", 0.1),
    ("model.attention_dropout", 0.1), ("model.position_embedding", "learned_absolute"),
    ("model.rotary_base", 10000), ("optimizer.beta1", 0.9), ("optimizer.beta2", 0.999),
    ("optimizer.eps", 1e-8), ("optimizer.weight_decay", 0.01), ("lr.decay_style", "linear"),
    ("optimizer.min_lr", 0.0), ("optimizer.clip_grad", 1.0), ("other.seed", 1234),
    ("model.add_bias_linear", True), ("optimizer.bias_correction", True),
])
def test_absent_flags_take_core_v0_12_1_defaults(tmp_path, key, value):
    item = megatron(tmp_path)[key]
    assert item.kind == "default"
    assert item.value == pytest.approx(value) if isinstance(value, float) else item.value == value
    assert "core_v0.12.1" in item.source


# ------------------------------------------------------------------------- derivations
@pytest.mark.parametrize("hidden", [64, 1000, 4096, 5120])
def test_ffn_without_swiglu_is_4h(tmp_path, hidden):
    item = megatron(tmp_path, f"--hidden-size {hidden}", "--num-attention-heads 8")["model.ffn_hidden_size"]
    assert (item.value, item.kind) == (4 * hidden, "derived")


@pytest.mark.parametrize("hidden", [64, 1000, 4096, 5120])
def test_ffn_with_swiglu_is_two_thirds_rounded_down_to_64(tmp_path, hidden):
    item = megatron(tmp_path, f"--hidden-size {hidden}", "--num-attention-heads 8", "--swiglu")["model.ffn_hidden_size"]
    assert (item.value, item.kind) == (swiglu_ffn(hidden), "derived")


def test_explicit_ffn_hidden_size_wins_over_swiglu_rule(tmp_path):
    item = megatron(tmp_path, "--swiglu", "--ffn-hidden-size 176")["model.ffn_hidden_size"]
    assert (item.value, item.kind) == (176, "set")


def test_num_query_groups_ignored_without_group_query_attention(tmp_path):
    config = megatron(tmp_path, "--num-attention-heads 8", "--num-query-groups 2")
    assert config["model.num_kv_heads"].value == 8


def test_num_query_groups_used_with_group_query_attention(tmp_path):
    config = megatron(tmp_path, "--num-attention-heads 8", "--group-query-attention", "--num-query-groups 2")
    item = config["model.num_kv_heads"]
    assert (item.value, item.kind) == (2, "set")
    assert "--num-query-groups" in item.source


def test_head_dim_is_hidden_over_heads_unless_kv_channels(tmp_path):
    assert megatron(tmp_path, "--hidden-size 96", "--num-attention-heads 6")["model.head_dim"].value == 96 // 6
    item = megatron(tmp_path, "--hidden-size 96", "--num-attention-heads 6", "--kv-channels 32")["model.head_dim"]
    assert (item.value, item.kind) == (32, "set")


@pytest.mark.parametrize("vocab, divisor, tp", [(32001, 128, 2), (32000, 128, 1), (151936, 128, 4), (50257, 64, 8)])
def test_padded_vocab_rounds_up_to_divisor_times_tp(tmp_path, vocab, divisor, tp):
    config = megatron(tmp_path, f"--vocab-size {vocab}", f"--make-vocab-size-divisible-by {divisor}",
                      f"--tensor-model-parallel-size {tp}", launcher="torchrun --nproc_per_node 8")
    item = config["model.padded_vocab_size"]
    assert (item.value, item.kind) == (padded(vocab, divisor, tp), "derived")


def test_padded_vocab_unknown_without_vocab_size(tmp_path):
    item = megatron(tmp_path)["model.padded_vocab_size"]
    assert item.kind == "unknown" and item.value is None
    assert "--vocab-size" in item.settle


def test_padded_vocab_size_flag_wins(tmp_path):
    item = megatron(tmp_path, "--vocab-size 32001", "--padded-vocab-size 32768")["model.padded_vocab_size"]
    assert (item.value, item.kind) == (32768, "set")


@pytest.mark.parametrize("per_node, nodes, tp, pp, cp", [(8, 1, 1, 1, 1), (8, 2, 2, 2, 1), (16, 4, 4, 2, 2)])
def test_data_parallel_is_world_over_tp_pp_cp(tmp_path, per_node, nodes, tp, pp, cp):
    config = megatron(tmp_path, f"--tensor-model-parallel-size {tp}", f"--pipeline-model-parallel-size {pp}",
                      f"--context-parallel-size {cp}", launcher=f"torchrun --nproc_per_node {per_node} --nnodes {nodes}")
    item = config["parallel.data"]
    assert (item.value, item.kind) == (per_node * nodes // (tp * pp * cp), "derived")


def test_global_batch_defaults_to_micro_batch_times_dp(tmp_path):
    config = megatron(tmp_path, "--micro-batch-size 3", "--tensor-model-parallel-size 2",
                      launcher="torchrun --nproc_per_node 8 --nnodes 2")
    item = config["train.global_batch_size"]
    assert (item.value, item.kind) == (3 * (8 * 2 // 2), "derived")


def test_data_parallel_unknown_when_world_size_is_unresolved(tmp_path):
    item = megatron(tmp_path, launcher="torchrun --nproc_per_node $GPUS")["parallel.data"]
    assert item.kind == "unknown" and "nproc_per_node" in item.settle


def test_elastic_nnodes_range_makes_data_parallel_unknown_not_a_crash(tmp_path):
    item = megatron(tmp_path, launcher="torchrun --nproc_per_node 8 --nnodes 1:4")["parallel.data"]
    assert item.kind == "unknown"


def test_sequence_parallel_is_switched_off_at_tp1(tmp_path):
    off = megatron(tmp_path, "--sequence-parallel")["parallel.sequence"]
    assert off.value is False and "--sequence-parallel" in off.source
    on = megatron(tmp_path, "--sequence-parallel", "--tensor-model-parallel-size 2")["parallel.sequence"]
    assert on.value is True


def test_bf16_sets_compute_dtype_and_fp32_grad_reduction(tmp_path):
    config = megatron(tmp_path, "--bf16")
    assert (config["precision.compute_dtype"].value, config["precision.compute_dtype"].kind) == ("bf16", "set")
    assert config["precision.param_dtype"].value == "bf16"
    assert config["precision.grad_reduce_dtype"].value == "fp32"


def test_no_precision_flag_means_fp32(tmp_path):
    config = megatron(tmp_path)
    assert config["precision.compute_dtype"].value == "fp32"
    assert config["precision.compute_dtype"].kind == "default"


@pytest.mark.parametrize("fraction, iters", [(0.01, 5000), (0.1, 333), (0.05, 120)])
def test_warmup_from_fraction_times_decay_iters(tmp_path, fraction, iters):
    config = megatron(tmp_path, f"--train-iters {2 * iters}", f"--lr-decay-iters {iters}",
                      f"--lr-warmup-fraction {fraction}")
    assert config["lr.decay_steps"].value == iters
    assert config["lr.warmup_steps"].value == pytest.approx(fraction * iters)


def test_warmup_from_warmup_iters(tmp_path):
    config = megatron(tmp_path, "--lr-warmup-iters 7")
    item = config["lr.warmup_steps"]
    assert (item.value, item.kind) == (7, "set")
    assert config["lr.warmup_fraction"].value == pytest.approx(7 / 100)


def test_decay_steps_default_to_train_iters(tmp_path):
    item = megatron(tmp_path, "--train-iters 1234")["lr.decay_steps"]
    assert (item.value, item.kind) == (1234, "derived")
    assert "--train-iters" in item.source


@pytest.mark.parametrize("flags, expected", [
    ([], True),                                            # bias everywhere by default
    (["--disable-bias-linear"], False),
    (["--disable-bias-linear", "--add-qkv-bias"], True),   # --add-qkv-bias alone adds the qkv bias
])
def test_qkv_bias(tmp_path, flags, expected):
    assert megatron(tmp_path, *flags)["model.qkv_bias"].value is expected


# ------------------------------------------------------------------------- script handling
def test_repeated_flag_last_wins_and_note_names_both_lines(tmp_path):
    path = write_script(tmp_path, ["--adam-beta2 0.95", "--weight-decay 0.1", "--adam-beta2 0.98"])
    config = resolve(read_config(path, "megatron"))
    first, last = line_of(path, "--adam-beta2", 1), line_of(path, "--adam-beta2", 2)
    assert config["optimizer.beta2"].value == pytest.approx(0.98)
    assert f"run.sh:{last}" in config["optimizer.beta2"].source
    note = next(n for n in config.notes if "--adam-beta2" in n)
    assert "more than once" in note and str(first) in note and str(last) in note


def test_unknown_mindspeed_flag_is_listed_as_not_interpreted(tmp_path):
    from workbench.audit.engine import run_checklist

    path = write_script(tmp_path, ["--some-unknown-flag", "--save /tmp/ckpt", "--disable-bias-linear"])
    report = run_checklist(path, EXAMPLE_MINDFORMERS)
    assert "some_unknown_flag" in report.megatron.not_interpreted
    assert "num_layers" not in report.megatron.not_interpreted        # read by the resolver
    assert "save" not in report.megatron.not_interpreted              # paths never change the math
    assert "add_bias_linear" not in report.megatron.not_interpreted


def test_unresolved_variable_makes_key_unknown_naming_the_variable(tmp_path):
    item = megatron(tmp_path, "--num-layers ${NUM_LAYERS}")["model.num_layers"]
    assert item.kind == "unknown" and item.value is None
    assert "NUM_LAYERS" in item.settle


@pytest.mark.parametrize("flags, key, variable", [
    (["--hidden-size ${HIDDEN}"], "model.ffn_hidden_size", "HIDDEN"),
    (["--global-batch-size ${GBS}"], "parallel.micro_batches", "GBS"),
    (["--train-iters ${ITERS}"], "train.steps", "ITERS"),
    (["--train-iters ${ITERS}", "--lr-warmup-fraction 0.01"], "lr.warmup_steps", "ITERS"),
    (["--lr-warmup-fraction ${WARMUP}"], "lr.warmup_steps", "WARMUP"),
    (["--group-query-attention", "--num-query-groups ${GROUPS}"], "model.num_kv_heads", "GROUPS"),
    (["--tensor-model-parallel-size ${TP}"], "parallel.data", "TP"),
    (["--tensor-model-parallel-size ${TP}", "--vocab-size 1000"], "model.padded_vocab_size", "TP"),
    (["--tensor-model-parallel-size ${TP}", "--sequence-parallel"], "parallel.sequence", "TP"),
])
def test_unresolved_input_of_a_derivation_makes_it_unknown(tmp_path, flags, key, variable):
    item = megatron(tmp_path, *flags)[key]
    assert item.kind == "unknown" and item.value is None
    assert variable in item.settle


def test_variable_defined_in_script_is_resolved_with_its_line(tmp_path):
    path = write_script(tmp_path, ["--num-layers ${NUM_LAYERS}"], prelude="NUM_LAYERS=6")
    item = resolve(read_config(path, "megatron"))["model.num_layers"]
    assert (item.value, item.kind) == (6, "set")


def test_non_numeric_value_is_input_error_naming_flag_and_line(tmp_path):
    path = write_script(tmp_path, ["--num-layers abc"])
    with pytest.raises(InputError) as error:
        resolve(read_config(path, "megatron"))
    text = str(error.value)
    assert "--num-layers" in text and "abc" in text
    assert f"run.sh:{line_of(path, '--num-layers abc')}" in text


def test_missing_file_is_input_error(tmp_path):
    with pytest.raises(InputError, match="not found"):
        read_config(tmp_path / "nope.sh", "megatron")


# ------------------------------------------------------------------------- log form
LOG_EQUIVALENT = ["--tensor-model-parallel-size 2", "--micro-batch-size 2", "--group-query-attention",
                  "--num-query-groups 2", "--swiglu", "--disable-bias-linear", "--bf16", "--vocab-size 1000",
                  "--untie-embeddings-and-output-weights", "--lr-warmup-iters 5", "--normalization RMSNorm"]
COMPARED = ["model.num_layers", "model.hidden_size", "model.num_attention_heads", "model.num_kv_heads",
            "model.head_dim", "model.ffn_hidden_size", "model.normalization", "model.add_bias_linear",
            "model.qkv_bias", "model.untie_embeddings", "model.activation", "model.padded_vocab_size",
            "precision.compute_dtype", "precision.grad_reduce_dtype", "parallel.data", "parallel.tensor",
            "parallel.sequence", "train.global_batch_size", "train.steps", "lr.warmup_steps", "lr.decay_steps",
            "optimizer.lr", "optimizer.weight_decay"]


def _equivalent_log(tmp_path: Path) -> Path:
    """What Megatron prints for the LOG_EQUIVALENT script on 8 GPUs (after validate_args)."""
    world, tp, mbs, hidden, heads, vocab = 8, 2, 2, 64, 4, 1000
    args = {
        "num_layers": 2, "hidden_size": hidden, "num_attention_heads": heads, "seq_length": 32,
        "max_position_embeddings": 32, "micro_batch_size": mbs, "train_iters": 100, "lr": 0.001,
        "tensor_model_parallel_size": tp, "pipeline_model_parallel_size": 1, "context_parallel_size": 1,
        "world_size": world, "data_parallel_size": world // tp, "global_batch_size": mbs * world // tp,
        "group_query_attention": True, "num_query_groups": 2, "swiglu": True, "add_bias_linear": False,
        "add_qkv_bias": False, "bf16": True, "fp16": False, "params_dtype": "torch.bfloat16",
        "accumulate_allreduce_grads_in_fp32": True, "vocab_size": vocab, "make_vocab_size_divisible_by": 128,
        "padded_vocab_size": padded(vocab, 128, tp), "untie_embeddings_and_output_weights": True,
        "ffn_hidden_size": swiglu_ffn(hidden), "kv_channels": hidden // heads, "normalization": "RMSNorm",
        "lr_warmup_iters": 5, "lr_warmup_fraction": None, "lr_warmup_samples": 0, "lr_decay_iters": None,
        "lr_decay_samples": None, "train_samples": None, "weight_decay": 0.01, "sequence_parallel": False,
        "transformer_impl": "transformer_engine", "use_flash_attn": False, "split": "969,30,1",
    }
    body = sorted((log_line(k, v) for k, v in args.items()), key=str.lower)
    lines = ["using world size: 8, data-parallel size: 4 ...",
             "------------------------ arguments ------------------------", *body,
             "-------------------- end of arguments ---------------------", " iteration 1/100 | loss 10.3"]
    path = tmp_path / "train.log"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_log_arguments_block_gives_same_values_as_script(tmp_path):
    script = resolve(read_config(write_script(tmp_path, LOG_EQUIVALENT), "megatron"))
    log_raw = read_config(_equivalent_log(tmp_path), "megatron")
    assert log_raw.form == "log"
    log = resolve(log_raw)
    for key in COMPARED:
        assert log[key].known and script[key].known, key
        assert log[key].value == script[key].value, key


def test_log_value_source_names_the_log_line(tmp_path):
    path = _equivalent_log(tmp_path)
    item = resolve(read_config(path, "megatron"))["model.num_layers"]
    assert item.kind == "set"
    assert f"train.log:{line_of(path, log_line('num_layers', 2))}" in item.source


# ------------------------------------------------------------------------- --yaml-cfg form
def _yaml_cfg_key(key: str):
    """One canonical key of the real --yaml-cfg fixture (resolved lazily, key by key)."""
    from workbench.config.registry import load_registry
    from workbench.config.resolver import Resolver

    raw = read_config(YAML_CFG, "megatron")
    assert raw.form == "yaml-cfg"
    return Resolver(raw, load_registry()).key(key)


@needs_fixtures
def test_yaml_cfg_layernorm_epsilon_maps_to_norm_epsilon():
    item = _yaml_cfg_key("model.norm_epsilon")
    assert (item.value, item.kind) == (pytest.approx(1e-5), "set")
    assert "language_model.layernorm_epsilon" in item.source
    assert f"{YAML_CFG.name}:{line_of(YAML_CFG, 'layernorm_epsilon:')}" in item.source


@needs_fixtures
@pytest.mark.parametrize("key, value", [
    ("model.activation", "swiglu"), ("model.num_layers", 24), ("model.untie_embeddings", True),
    ("precision.compute_dtype", "bf16"), ("model.rotary_percent", 0.5), ("model.normalization", "layernorm"),
    ("model.add_bias_linear", False), ("model.ffn_hidden_size", swiglu_ffn(1024)),
])
def test_yaml_cfg_fixture_values(key, value):
    assert _yaml_cfg_key(key).value == value


@needs_fixtures
def test_yaml_cfg_fixture_resolves_as_a_whole():
    config = resolve(read_config(YAML_CFG, "megatron"))
    assert config.form == "yaml-cfg"
    assert config["model.num_layers"].value == 24
    # sample-based schedule: lr_decay_samples / GBS (Megatron steps its scheduler in samples)
    assert config["lr.decay_steps"].value == pytest.approx(255126953 / 128)


def test_yaml_cfg_activation_func_swiglu_alone_implies_swiglu(tmp_path):
    path = tmp_path / "cfg.yaml"
    path.write_text("language_model:\n  num_layers: 2\n  hidden_size: 256\n  num_attention_heads: 4\n"
                    "  activation_func: swiglu\n  ffn_hidden_size: null\nmodel_parallel:\n  bf16: true\n")
    config = resolve(read_config(path, "megatron"))
    assert config["model.activation"].value == "swiglu"
    assert config["model.ffn_hidden_size"].value == swiglu_ffn(256)


def test_yaml_cfg_activation_func_decides_over_top_level_swiglu(tmp_path):
    # yaml_arguments.py builds the MLP (and the default ffn size) from language_model.activation_func
    path = tmp_path / "cfg.yaml"
    path.write_text("language_model:\n  num_layers: 2\n  hidden_size: 256\n  num_attention_heads: 4\n"
                    "  activation_func: gelu\n  ffn_hidden_size: null\nswiglu: true\n")
    config = resolve(read_config(path, "megatron"))
    assert config["model.activation"].value == "gelu"
    assert config["model.ffn_hidden_size"].value == 4 * 256


# ------------------------------------------------------------------------- flat YAML / JSON
def test_flat_yaml_with_dashed_and_prefixed_keys(tmp_path):
    path = tmp_path / "args.yaml"
    path.write_text("num-layers: 3\n--hidden-size: 128\nnum_attention_heads: 8\nswiglu: true\n")
    raw = read_config(path, "megatron")
    assert raw.form == "flat-yaml"
    config = resolve(raw)
    assert config["model.num_layers"].value == 3
    assert config["model.hidden_size"].value == 128
    assert config["model.ffn_hidden_size"].value == swiglu_ffn(128)
    assert "args.yaml:2" in config["model.hidden_size"].source


def test_flat_json_with_dashed_and_prefixed_keys(tmp_path):
    path = tmp_path / "args.json"
    path.write_text(json.dumps({"num-layers": 3, "--hidden-size": 128, "num_attention_heads": 8, "bf16": True}))
    raw = read_config(path, "megatron")
    assert raw.form == "json"
    config = resolve(raw)
    assert (config["model.num_layers"].value, config["model.hidden_size"].value) == (3, 128)
    assert config["precision.compute_dtype"].value == "bf16"


def test_flat_yaml_flag_style_key_uses_the_flag_table(tmp_path):
    path = tmp_path / "args.yaml"
    path.write_text("--num-layers: 2\n--hidden-size: 64\n--num-attention-heads: 4\n--disable-bias-linear: true\n")
    assert resolve(read_config(path, "megatron"))["model.add_bias_linear"].value is False


def test_json_syntax_error_names_line_and_column(tmp_path):
    text = '{\n  "num-layers": 2,\n  "hidden-size": 64,\n}\n'
    path = tmp_path / "args.json"
    path.write_text(text)
    with pytest.raises(json.JSONDecodeError) as expected:
        json.loads(text)
    with pytest.raises(InputError) as error:
        read_config(path, "megatron")
    assert f"args.json:{expected.value.lineno}:{expected.value.colno}" in str(error.value)


def test_mindformers_yaml_given_as_megatron_is_rejected(tmp_path):
    path = tmp_path / "mf.yaml"
    path.write_text("model:\n  model_config:\n    num_layers: 2\n")
    with pytest.raises(InputError, match="MindFormers"):
        read_config(path, "megatron")


# ------------------------------------------------------------------------- checkpoint form
def test_checkpoint_directory_args_are_resolved(tmp_path):
    torch = pytest.importorskip("torch")
    args = argparse.Namespace(num_layers=2, hidden_size=64, num_attention_heads=4, ffn_hidden_size=None,
                              swiglu=True, bf16=True, fp16=False, params_dtype=torch.bfloat16,
                              micro_batch_size=2, global_batch_size=8, train_iters=10, lr=1e-3,
                              tensor_model_parallel_size=1, pipeline_model_parallel_size=1, world_size=4,
                              data_parallel_size=4, add_bias_linear=False, group_query_attention=False,
                              num_query_groups=1)
    folder = tmp_path / "ckpt" / "iter_0000005" / "mp_rank_00"
    folder.mkdir(parents=True)
    torch.save({"args": args, "iteration": 5, "model": {"embedding.word_embeddings.weight": torch.zeros(8, 64)}},
               folder / "model_optim_rng.pt")
    (tmp_path / "ckpt" / "latest_checkpointed_iteration.txt").write_text("5")

    raw = read_config(tmp_path / "ckpt", "megatron")
    assert raw.form == "checkpoint"
    config = resolve(raw)
    assert config["model.num_layers"].value == 2 and config["model.num_layers"].kind == "set"
    assert "args.num_layers" in config["model.num_layers"].source
    ffn = config["model.ffn_hidden_size"]                 # None in the Namespace means absent
    assert (ffn.value, ffn.kind) == (swiglu_ffn(64), "derived")
    assert config["precision.compute_dtype"].value == "bf16"
    assert config["model.add_bias_linear"].value is False
    assert config["model.num_kv_heads"].value == 4
    assert config["parallel.data"].value == 4


# ------------------------------------------------------------------------- real fixtures
@needs_fixtures
def test_mindspeed_llama2_fixture():
    config = resolve(read_config(LLAMA2, "megatron"))
    assert config.form == "shell"
    assert config["optimizer.lr"].value == pytest.approx(1.25e-6)
    assert config["optimizer.min_lr"].value == pytest.approx(1.25e-7)
    assert config["optimizer.weight_decay"].value == pytest.approx(0.1)
    assert config["train.global_batch_size"].value == 256
    assert (config["model.ffn_hidden_size"].value, config["model.ffn_hidden_size"].kind) == (11008, "set")
    tp, pp = config["parallel.tensor"].value, config["parallel.pipeline"].value
    assert (tp, pp) == (1, 2)
    assert config["parallel.data"].value == 8 // (tp * pp)
    assert config["runtime.hardware"].value == "ascend"
    assert config["parallel.sequence"].value is False          # --sequence-parallel at TP=1
    assert config["lr.warmup_steps"].value == pytest.approx(0.01 * 5000)


@needs_fixtures
def test_upstream_mixtral_fixture_bash_arrays():
    raw = read_config(MIXTRAL, "megatron")
    config = resolve(raw)
    assert config["moe.num_experts"].value == 8
    assert config["model.num_kv_heads"].value == 8
    assert config["parallel.pipeline"].value == 4
    assert config["runtime.hardware"].value == "gpu"
    assert raw.values["load"].unresolved == "1"                 # --load $CHECKPOINT_PATH = $1
