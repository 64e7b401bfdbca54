"""`workbench localnorm` matching and verdicts on synthetic norms with a known truth."""
import numpy as np
import pandas as pd
import pytest

from workbench import spec
from workbench.errors import InputError
from workbench.logs.localnorm_compare import NormThresholds, compare_local_norms
from workbench.logs.schema import LOCAL_NORM_COLUMNS, LogSeries
from workbench.spec.relation import logical_names

LLAMA = spec.load_arch("llama")
SIZES = spec.ModelParams(num_layers=2)


def truth(seed: int = 0) -> dict[str, float]:
    """Sum of squares per logical tensor."""
    names = {item for fmt in ("megatron",) for parts in
             logical_names(spec.resolve_names(list(LLAMA.expected_names(fmt, SIZES)), LLAMA, fmt), LLAMA, SIZES).values()
             for item in parts}
    rng = np.random.default_rng(seed)
    return {name: float(rng.uniform(0.5, 2.0)) for name in sorted(names)}


def log_of(fmt: str, sums: dict[str, float], definition="sum_sq_step", noise=0.0, seed=1, ranks=(-1,),
           scale: dict[str, float] | None = None) -> LogSeries:
    names = list(LLAMA.expected_names(fmt, SIZES))
    parts = logical_names(spec.resolve_names(names, LLAMA, fmt), LLAMA, SIZES)
    rng = np.random.default_rng(seed)
    rows = []
    for rank in ranks:
        for position, name in enumerate(names):
            value = sum(sums[p] for p in parts[name]) * (1 + noise * rng.standard_normal())
            value *= (scale or {}).get(name, 1.0)
            value /= 1 if "layernorm" in name else len(ranks)      # norms are replicated, the rest split
            value = np.sqrt(value) if definition.startswith("l2") else value
            rows.append((f"{fmt}.log", rank, 1, -1, position, name, -1, value, definition, 0))
    return LogSeries(f"{fmt}.log", fmt, local_norms=pd.DataFrame(rows, columns=list(LOCAL_NORM_COLUMNS)))


def test_fused_megatron_tensors_compare_with_the_sum_of_the_mindformers_parts():
    sums = truth()
    result = compare_local_norms(log_of("megatron", sums), log_of("mindformers", sums, noise=1e-7))
    assert result.verdict == "PASS" and result.exit_code == 0
    table = result.tables["parameters"]
    qkv = table.set_index("label").loc["layers.1.attn.[q,k,v]"]
    assert qkv["reference_names"] == "decoder.layers.1.self_attention.linear_qkv.weight"
    assert qkv["candidate_names"].count(" + ") == 2 and qkv["relative_difference"] < 1e-6
    assert len(table) == 15 and set(table["status"]) == {"pass"}


def test_the_one_parameter_computed_differently_is_the_top_outlier_by_name():
    sums = truth()
    candidate = log_of("mindformers", sums, noise=1e-6, scale={"model.tok_embeddings.embedding_weight": 1.01})
    result = compare_local_norms(log_of("megatron", sums, definition="l2_reduced"), candidate)
    assert result.verdict == "FAIL"
    top = result.tables["parameters"].iloc[0]
    assert top["label"] == "embed" and top["status"] == "outlier"
    assert (result.tables["parameters"]["status"] == "outlier").sum() == 1
    assert result.summary[1].startswith("outlier: embed")


def test_tensor_parallel_ranks_are_summed_for_split_tensors_only():
    sums = truth()
    result = compare_local_norms(log_of("megatron", sums, ranks=(0, 1)), log_of("mindformers", sums),
                                 thresholds=NormThresholds(floor=1e-9))
    assert result.verdict == "PASS"
    assert result.tables["parameters"]["relative_difference"].max() < 1e-12


def test_micro_step_norms_and_nameless_norms_are_refused():
    sums = truth()
    with pytest.raises(InputError, match="per micro step"):
        compare_local_norms(log_of("megatron", sums, definition="l2_micro_step"), log_of("mindformers", sums))
    nameless = log_of("mindformers", sums)
    nameless.local_norms["param"] = ""
    with pytest.raises(InputError, match="without parameter names"):
        compare_local_norms(log_of("megatron", sums), nameless)
