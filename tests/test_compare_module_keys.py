"""Module-format detection tries one match key per group of paths (workbench/spec/module_keys.py): the fits it
finds (matched counts and the unmatched paths, in order) equal trying every path against every template, on
paths made from every architecture's own templates with indices that are plain, literal-looking (``1``, ``2``:
``linear_fc1`` spells them), zero-padded, huge or non-ASCII, and on paths with a literal's digits changed. A
resolver's per-template memo resolves those paths as resolving each alone does."""
from __future__ import annotations

import random
import re

import pytest

from workbench.spec.loader import available_archs, load_arch
from workbench.spec.model_params import ModelParams
from workbench.spec.module_keys import keys_and_runs, literal_runs, match_keys, stand_in
from workbench.spec.modules import (_cached, detect_module_format, module_fits, module_resolver, module_templates,
                                    resolve_ref)
from workbench.spec.templates import skeleton_of

INDICES = ["0", "1", "2", "3", "4", "7", "10", "12", "31", "100", "01", "00", "007", "99999999999999999999", "٣", "1٣"]


def _reference_fits(paths: list[str], archs) -> list[tuple]:
    """The plain way: every distinct path against the templates of its skeleton, in every format."""
    paths = list(dict.fromkeys(paths))
    found = []
    for arch_name in archs:
        arch = load_arch(arch_name)
        for fmt in arch.formats:
            index = _cached(arch, fmt)[2]
            unmatched = tuple(p for p in paths if not any(m.template.match(p) is not None
                                                          for m in index.get(skeleton_of(p), ())))
            found.append((arch_name, fmt, len(paths) - len(unmatched), unmatched))
    return found


def _paths(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    texts = [m.template.text for arch_name in available_archs() for arch in (load_arch(arch_name),)
             for fmt in arch.formats for m in module_templates(arch, fmt)]
    paths = []
    for _ in range(count):
        text = rng.choice(texts)
        path = text.replace("{i}", rng.choice(INDICES)).replace("{e}", rng.choice(INDICES))
        if rng.random() < 0.2:                    # a literal's digits changed: linear_fc1 -> linear_fc12, fc01, fc٣
            path = path.replace("1", rng.choice(["12", "01", "2", "٣", ""]), 1)
        paths.append(path)
    return paths


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fits_equal_every_path_against_every_template(seed):
    paths = _paths(seed, 1500)
    archs = available_archs()
    fits = [(f.arch, f.format, f.matched, f.unmatched) for f in module_fits(paths, archs)]
    assert fits == _reference_fits(paths, archs)
    assert any(f[2] for f in fits) and any(f[3] for f in fits)         # both outcomes were exercised


def test_detection_on_many_layers_resolves_like_one_layer():
    megatron = [f"decoder.layers.{n}.self_attention.linear_qkv" for n in range(3000)] + \
               [f"decoder.layers.{n}.mlp.linear_fc1" for n in range(3000)]
    assert detect_module_format(megatron, ["llama"]) == ("llama", "megatron")
    odd = ["decoder.layers.05.mlp.linear_fc1", "decoder.layers.5.mlp.linear_fc12", "decoder.layers.5.mlp.linear_fc1"]
    fits = {(f.arch, f.format): f for f in module_fits(odd, ["llama"])}
    assert fits["llama", "megatron"].unmatched == tuple(odd[:2])          # padded index, changed literal: no match
    assert [(f.arch, f.format, f.matched, f.unmatched) for f in fits.values()] == _reference_fits(odd, ["llama"])


def test_keys_keep_literal_runs_and_zero_padding():
    literals = literal_runs(["decoder.layers.{i}.mlp.linear_fc1", "model.layers.{i}.feed_forward.w2"])
    assert literals == {"1", "2"} and stand_in(literals) == "3"
    assert match_keys(["decoder.layers.17.mlp.linear_fc1", "decoder.layers.2.mlp.linear_fc12",
                       "decoder.layers.007.x", "layers.٣"], literals) == \
        ["decoder.layers.3.mlp.linear_fc1", "decoder.layers.2.mlp.linear_fc3", "decoder.layers.007.x", "layers.٣"]


@pytest.mark.parametrize("params", [None, ModelParams(num_layers=6, num_experts=4, first_dense_layers=1),
                                    ModelParams(num_layers=8, num_experts=3, moe_layer_freq=2)])
def test_resolver_memo_per_template_equals_resolving_each_path_alone(params):
    """A resolver keeps what depends on the template alone (stacked or not, a parent's groups when no layer set is
    chosen): every path of every format resolves as the plain per-path resolution does, layer sets included."""
    paths = [p for p in _paths(7, 3000) if p.isascii()]
    kinds = set()
    for arch_name in available_archs():
        arch = load_arch(arch_name)
        for fmt in arch.formats:
            index = _cached(arch, fmt)[2]
            resolve = module_resolver(arch, fmt, params)
            for path in paths:
                plain = next((resolve_ref(arch, m, env, params) for m in index.get(skeleton_of(path), ())
                              for env in (m.template.match(path),) if env is not None), None)
                assert resolve(path) == plain, (arch_name, fmt, path)
                kinds.add(plain.kind if plain is not None else None)
    assert kinds >= {"same", "fused", "stacked", "group", "root", None}


def _keys_one_by_one(paths: list[str], literals: frozenset[str]) -> list[str]:
    """match_keys as it was: each digit run of each path decided by a function call."""
    import re

    index = stand_in(literals)
    return [re.sub(r"[0-9]+", lambda m: m.group() if m.group() in literals or (m.group()[0] == "0" and len(m.group()) > 1)
                   else index, path) for path in paths]


@pytest.mark.parametrize("literals", [frozenset(), frozenset({"1", "2", "12", "0", "00", "123"}), frozenset({"3"})])
def test_keys_of_joined_paths_equal_path_by_path(literals):
    """The paths joined and split once, each distinct run decided once, equal deciding each run of each path;
    a path holding a newline (then each path is substituted alone) too."""
    rng = random.Random(len(literals))
    for trial in range(300):
        paths = ["".join(rng.choice("0123456789.a_b٣\n") for _ in range(rng.randint(0, 12)))
                 for _ in range(rng.randint(0, 20))]
        if trial % 3:
            paths = [p.replace("\n", "") for p in paths]
        assert match_keys(paths, literals) == _keys_one_by_one(paths, literals), paths
        keys, runs = keys_and_runs(paths, literals)
        assert keys == match_keys(paths, literals) and runs == [r for p in paths for r in re.findall("[0-9]+", p)]


def test_module_paths_of_a_table_distinct_sorted_without_missing_or_empty():
    import pandas as pd

    from workbench.dumps.compare_run import _module_paths

    table = pd.DataFrame({"module_path": pd.array(["b.1", None, "", "a", "b.1", "a.0"], dtype="string")})
    assert _module_paths(table) == ["a", "a.0", "b.1"]
    assert _module_paths(table.iloc[:0]) == []


MANY_PARAMS = [None, ModelParams(num_layers=6, num_experts=4, first_dense_layers=1),
               ModelParams(num_layers=8, num_experts=3, moe_layer_freq=2, mtp_layers=1)]


@pytest.mark.parametrize("params", MANY_PARAMS)
def test_resolving_many_paths_equals_resolving_each_alone(params):
    """``resolve.many`` (a template per match key, each path's indices read from its digit runs; module_batch.py)
    equals the plain per-path resolution on every format's paths: padded, literal-looking, huge and non-ASCII
    indices, changed literals, repeats, a newline, and layers on both sides of the dense/MoE/MTP boundaries
    (a layer set that ``params`` chooses is decided per path, not per key)."""
    paths = _paths(11, 2500) + ["", "decoder.layers.3.mlp\ndecoder.layers.4.mlp", "decoder.layers.3.mlp"]
    paths += [f"{prefix}.layers.{n}.{leaf}" for n in range(10) for prefix in ("decoder", "model")
              for leaf in ("mlp", "mlp.experts", "mlp.router", "feed_forward", "mlp.linear_fc1")]
    kinds = set()
    for arch_name in available_archs():
        arch = load_arch(arch_name)
        for fmt in arch.formats:
            index = _cached(arch, fmt)[2]
            plain = [next((resolve_ref(arch, m, env, params) for m in index.get(skeleton_of(path), ())
                           for env in (m.template.match(path),) if env is not None), None) for path in paths]
            assert module_resolver(arch, fmt, params).many(paths) == plain, (arch_name, fmt)
            kinds |= {ref.kind if ref is not None else None for ref in plain}
    assert kinds >= {"same", "fused", "stacked", "group", "root", None}
    assert module_resolver("llama", "megatron", params).many([]) == []


def test_resolving_many_layers_reads_each_path_own_layer():
    resolve = module_resolver("deepseek_v3", "megatron", ModelParams(num_layers=6, num_experts=4, first_dense_layers=1))
    refs = resolve.many([f"decoder.layers.{n}.mlp" for n in (0, 1, 12, 3)] + ["decoder.layers.1.mlp.linear_fc1"])
    assert [ref.logical for ref in refs[:3]] == [("layers.0.mlp",), ("layers.1.moe",), ("layers.12.mlp", "layers.12.moe")]
    assert [ref.layer for ref in refs] == [0, 1, 12, 3, 1] and refs[4].kind == "fused"
