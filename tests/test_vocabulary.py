"""The one size vocabulary: canonical keys and their aliases (keys.yaml ``aliases:``), validated at load,
translated by key (workbench/config/vocabulary.py), and extended by YAML alone."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from workbench.config import registry as registry_module
from workbench.config import vocabulary
from workbench.config.registry import parse_registry
from workbench.errors import InputError
from workbench.reference.config import ModelConfig, PrecisionConfig, TrainConfig
from workbench.yamlio import parse_yaml

KEYS_YAML = Path(__file__).resolve().parent.parent / "checklists" / "keys.yaml"
SIZE = "    type: int\n    megatron: {arg: x}\n"


def registry_from(text: str, tmp_path: Path):
    path = tmp_path / "keys.yaml"
    path.write_text(text)
    return parse_registry(parse_yaml(text, path))


def clear_caches() -> None:
    for cached in (registry_module.load_registry, registry_module.container_paths,
                   registry_module.raw_value_rules, registry_module.load_framework):
        cached.cache_clear()


@pytest.fixture
def knowledge(tmp_path, monkeypatch):
    """A copy of checklists/ that WORKBENCH_KNOWLEDGE points at; returns its keys.yaml."""
    shutil.copytree(KEYS_YAML.parent, tmp_path / "knowledge" / "checklists")
    monkeypatch.setenv("WORKBENCH_KNOWLEDGE", str(tmp_path / "knowledge"))
    clear_caches()
    yield tmp_path / "knowledge" / "checklists" / "keys.yaml"
    clear_caches()


def add_aliases(keys_yaml: Path, key: str, aliases: str) -> None:
    """Declare ``aliases`` on ``key`` in a keys.yaml copy (a line after its type:)."""
    text = keys_yaml.read_text()
    head = f"  {key}:\n    type: int\n"
    assert head in text
    keys_yaml.write_text(text.replace(head, head + f"    aliases: {aliases}\n"))


# ----------------------------------------------------------------------------- hostile aliases

@pytest.mark.parametrize("aliases,line,needle", [
    ("3", 4, "aliases must be a mapping of kind -> name, found int"),
    ("{megatron: x}", 4, "unknown alias kind 'megatron'"),
    ("{spec: 5}", 4, "expected a name or {name: P, stated: true, fallback: true, map: {...}}, found int 5"),
    ("{spec: hidden, hf: [1]}", 4, "hf must be a name, found int 1"),
    ("{spec: hidden, hf: {a: b}}", 4, "hf must be a name, found dict"),
    ("{spec: {name: hidden, stated: yes please}}", 4, "stated must be true or false"),
    ("{spec: {name: hidden, colour: red}}", 4, "unknown field(s) ['colour'] in an alias"),
    ("{spec: {stated: true}}", 4, "the alias has no 'name'"),
    ("{spec: {name: hidden, map: [1, 2]}}", 4, "map must be a mapping"),
    ("{reference: {field: model.num_experts, map: {1: 0, 2: 0}}}", 4, "cannot be read back"),
    ("{reference: {field: model.num_layers, map: {1: [0]}}}", 4, "map values must be plain values"),
    ("{reference: {field: model.num_layers, unset: [0]}}", 4, "unset must be a plain value"),
    ("{reference: {field: model.num_layers, requires: [a]}}", 4, "requires must be a canonical key"),
    ("{reference: hidden_size}", 4, "'hidden_size' is not section.field"),
    ("{spec: hiddne}", 4, "spec parameter 'hiddne' is not a size of the converter specs"),
    ("{reference: model.hidden}", 4, "ModelConfig has no field 'hidden'"),
    ("{reference: optim.lr}", 4, "reference section 'optim' is unknown"),
    ("{hf: [hidden_size]}", 4, "an hf alias needs a spec alias"),
    ("{spec: {name: vocab, fallback: true}}", 4, "fallback for spec parameter 'vocab', which no key owns"),
    ("{reference: {field: model.moe_router_topk, requires: a.c}}", 4, "requires 'a.c', which is not a key"),
])
def test_bad_aliases_are_named_with_file_and_line(tmp_path, aliases, line, needle):
    text = f"keys:\n  a.b:\n    type: int\n    aliases: {aliases}\n    megatron: {{arg: x}}\n"
    with pytest.raises(InputError) as error:
        registry_from(text, tmp_path)
    assert needle in str(error.value)
    assert f"keys.yaml:{line}" in str(error.value)


@pytest.mark.parametrize("second,needle", [
    ("{spec: hidden}", "spec alias 'hidden' is already the alias of a.b"),
    ("{spec: ffn, hf: [hidden_size]}", "hf alias 'hidden_size' is already the alias of a.b"),
    ("{reference: model.hidden_size}", "reference alias 'model.hidden_size' is already the alias of a.b"),
])
def test_a_name_belongs_to_one_key(tmp_path, second, needle):
    text = (f"keys:\n  a.b:\n{SIZE}    aliases: {{spec: hidden, hf: [hidden_size], reference: model.hidden_size}}\n"
            f"  a.c:\n{SIZE}    aliases: {second}\n")
    with pytest.raises(InputError) as error:
        registry_from(text, tmp_path)
    assert needle in str(error.value)
    assert "keys.yaml:9 [keys.a.c.aliases]" in str(error.value)        # the second declaration


def test_sizes_are_int_keys(tmp_path):
    text = "keys:\n  a.b:\n    type: float\n    aliases: {spec: hidden}\n    megatron: {arg: x}\n"
    with pytest.raises(InputError, match=r"a.b is a float key; spec and hf aliases name sizes"):
        registry_from(text, tmp_path)


def test_a_bad_shipped_alias_stops_the_cli_with_one_line(knowledge, capsys):
    from workbench.cli.main import main
    from workbench_testing import EXAMPLE_MEGATRON, EXAMPLE_MINDFORMERS

    add_aliases(knowledge, "mtp.num_layers", "{spec: hidden}")      # hidden is model.hidden_size's
    line = knowledge.read_text().split("\n").index("    aliases: {spec: hidden}") + 1
    assert main(["checklist", str(EXAMPLE_MEGATRON), str(EXAMPLE_MINDFORMERS)]) == 2
    err = capsys.readouterr().err.strip()
    assert f"keys.yaml:{line} [keys.mtp.num_layers.aliases]" in err
    assert "spec alias 'hidden' is already the alias of model.hidden_size" in err
    assert "Traceback" not in err and len(err.splitlines()) == 1


@pytest.mark.parametrize("edit,needle", [
    ("reference", "ModelConfig has no field 'hiddne'"),
    ("derive", "unknown derivation 'no_such_formula'"),
])
def test_names_of_code_in_a_knowledge_folder_are_checked_where_used(knowledge, capsys, tmp_path, edit, needle):
    """keys.yaml's names of code (a reference field, a derivation) are checked by the code that uses them, not
    when the registry loads: a conversion reads sizes without importing the resolver or the reference configs.
    Where they are used (the CheckList resolves both configs) a wrong name is the same one-line error, with the
    file and line."""
    from workbench.cli.main import main
    from workbench.config.registry import load_registry
    from workbench_testing import EXAMPLE_MEGATRON, EXAMPLE_MINDFORMERS

    text = knowledge.read_text()
    if edit == "reference":
        old, new = "reference: model.hidden_size", "reference: model.hiddne"
    else:
        old = next(line for line in text.splitlines() if line.strip().startswith("megatron: {derive: "))
        new = old[:old.index("derive: ") + len("derive: ")] + "no_such_formula}"
    assert old in text
    knowledge.write_text(text.replace(old, new, 1))
    line = next(number for number, text in enumerate(knowledge.read_text().splitlines(), 1) if new in text)
    assert load_registry().vocabulary is not None                     # loading alone does not look at code
    assert vocabulary.hf_to_canonical({"hidden_size": 64})["model.hidden_size"] == 64
    assert main(["checklist", str(EXAMPLE_MEGATRON), str(EXAMPLE_MINDFORMERS)]) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and "Traceback" not in err and len(err.splitlines()) == 1
    assert f"keys.yaml:{line} [keys." in err


# ----------------------------------------------------------------------------- translations

def test_reference_configs_round_trip_through_canonical_values():
    dense = ModelConfig(num_layers=3, qk_norm=True, init_std=0.01)
    moe = ModelConfig(num_experts=4, moe_router_topk=1, moe_ffn_hidden_size=96, shared_expert_size=32)
    train = TrainConfig(steps=5, lr=3e-4, optimizer="adam_weight_decay", decay_style="cosine",
                        precision=PrecisionConfig(compute_dtype="bf16"))
    for model in (dense, moe, ModelConfig(num_experts=2)):
        assert vocabulary.model_config(vocabulary.canonical_values(model)) == model
    values = vocabulary.canonical_values(dense, train)
    assert vocabulary.train_config(values) == TrainConfig(**{**train.__dict__, "schedule_steps": 5})
    assert values["optimizer.bias_correction"] is False and values["precision.compute_dtype"] == "bf16"
    assert values["model.padded_vocab_size"] == 128 and values["model.head_dim"] == 16 and values["train.steps"] == 5


def test_a_dense_model_states_no_moe_sizes_and_unset_fields_state_nothing():
    values = vocabulary.canonical_values(ModelConfig(), TrainConfig(steps=3, schedule_steps=10))
    assert values["moe.num_experts"] == 1                               # the frameworks' "dense"
    assert not {"moe.router_topk", "moe.shared_expert_size", "moe.expert_ffn_size"} & set(values)
    assert values["train.steps"] == 10                                  # the schedule's length, not the run's
    moe = vocabulary.canonical_values(ModelConfig(num_experts=4))
    assert moe["moe.router_topk"] == 2 and "moe.expert_ffn_size" not in moe   # 0: the dense size applies


def test_unsettled_keys_are_named_and_optional_ones_keep_defaults():
    values = vocabulary.canonical_values(ModelConfig(qkv_bias=True), TrainConfig())
    del values["model.qkv_bias"], values["other.seed"]
    assert vocabulary.model_config(values).qkv_bias is False and vocabulary.train_config(values).seed == 1234
    del values["model.hidden_size"]
    with pytest.raises(InputError, match="model.hidden_size is not given"):
        vocabulary.model_config(values)


def test_hf_and_spec_names_by_key():
    config = {"num_hidden_layers": 4, "hidden_size": 64, "n_routed_experts": 8, "moe_intermediate_size": 32,
              "q_lora_rank": None, "vocab_size": 1000}
    values = vocabulary.hf_to_canonical(config)
    assert values == {"model.num_layers": 4, "model.hidden_size": 64, "moe.num_experts": 8,
                      "moe.expert_ffn_size": 32, "model.padded_vocab_size": 1000}
    assert vocabulary.canonical_to_hf(values) == {"num_hidden_layers": 4, "hidden_size": 64, "num_local_experts": 8,
                                                  "moe_intermediate_size": 32, "vocab_size": 1000}
    assert vocabulary.spec_params(values) == {"num_layers": 4, "hidden": 64, "num_experts": 8, "moe_ffn": 32,
                                              "vocab": 1000}
    assert vocabulary.spec_params({"moe.num_experts": 1, "model.vocab_size": 50}) == {"vocab": 50}   # dense; fallback
    stated_only = vocabulary.spec_params({"model.mla_kv_lora_rank": 32, "model.num_layers": 2}, lambda key: False)
    assert stated_only == {"num_layers": 2}


def test_a_stated_mla_size_reaches_the_spec_and_a_default_does_not(tmp_path):
    from workbench import spec
    from workbench_testing import EXAMPLE_MEGATRON

    plain = spec.params_from_config(EXAMPLE_MEGATRON)                  # keys.yaml default kv_lora_rank 32
    assert "kv_lora_rank" not in plain
    script = tmp_path / "mla.sh"
    script.write_text(EXAMPLE_MEGATRON.read_text().replace("--num-layers 2", "--num-layers 2\n    --kv-lora-rank 16"))
    assert spec.params_from_config(script) == {**plain, "kv_lora_rank": 16}


def test_the_reference_of_a_config_takes_every_aliased_key(tmp_path):
    from workbench.reference.from_canonical import configs_from_file
    from workbench_testing import EXAMPLE_MEGATRON

    script = tmp_path / "moe.sh"
    script.write_text(EXAMPLE_MEGATRON.read_text().replace("--num-layers 2", "--num-layers 2\n    --num-experts 4\n"
                      "    --moe-router-topk 2\n    --moe-ffn-hidden-size 96\n    --init-method-std 0.01"))
    model, train = configs_from_file(script, "megatron", steps=3)
    assert (model.num_experts, model.moe_router_topk, model.expert_ffn_size, model.init_std) == (4, 2, 96, 0.01)
    assert (train.steps, train.schedule_steps, train.warmup_steps, train.decay_style) == (3, 20, 2, "cosine")
    dense, _ = configs_from_file(EXAMPLE_MEGATRON, "megatron")
    assert (dense.num_experts, dense.moe_router_topk, dense.moe_ffn_hidden_size) == (0, 2, 0)   # defaults kept


@pytest.mark.parametrize("config,field", [
    (lambda: ModelConfig(init_std=-0.5), "model.init_std"),                  # model.init_method_std (min 0)
    (lambda: ModelConfig(num_experts=2, moe_ffn_hidden_size=-4), "model.moe_ffn_hidden_size"),
    (lambda: TrainConfig(schedule_steps=-1), "train.schedule_steps"),        # train.steps (min 1)
])
def test_reference_fields_obey_the_range_of_their_key(config, field):
    with pytest.raises(InputError, match=field.replace(".", r"\.")):
        config().validate()


def test_unset_values_are_not_range_checked():
    assert TrainConfig(schedule_steps=0).validate().schedule_steps == 0
    assert ModelConfig(num_experts=2, moe_ffn_hidden_size=0).validate().expert_ffn_size == 176


# ----------------------------------------------------------------------------- a new size is a YAML change

def test_a_new_alias_flows_through_hf_and_training_configs(knowledge, tmp_path):
    from workbench import spec
    from workbench_testing import EXAMPLE_MEGATRON

    assert "mtp_layers" not in spec.params_from_config(EXAMPLE_MEGATRON)
    add_aliases(knowledge, "mtp.num_layers", "{spec: {name: mtp_layers, map: {0: null}}, hf: [num_nextn_predict_layers]}")
    clear_caches()
    hf = tmp_path / "config.json"
    hf.write_text(json.dumps({"model_type": "deepseek_v3", "num_hidden_layers": 4, "num_nextn_predict_layers": 1}))
    assert spec.params_from_config(hf)["mtp_layers"] == 1
    script = tmp_path / "mtp.sh"
    script.write_text(EXAMPLE_MEGATRON.read_text().replace("--num-layers 2", "--num-layers 2\n    --mtp-num-layers 2"))
    assert spec.params_from_config(script)["mtp_layers"] == 2
    assert "mtp_layers" not in spec.params_from_config(EXAMPLE_MEGATRON)   # 0 (the default): not given
    assert vocabulary.canonical_to_hf({"mtp.num_layers": 3}) == {"num_nextn_predict_layers": 3}
    hostile = {"num_hidden_layers": 2, "num_nextn_predict_layers": -1}       # the new HF size is checked too
    with pytest.raises(InputError, match="num_nextn_predict_layers"):
        spec.hf_params(hostile)


def test_a_new_reference_alias_is_read_and_written_by_key(knowledge):
    text = knowledge.read_text()
    head = "  model.max_position_embeddings:\n    type: int\n    min: 1\n"
    assert head in text
    knowledge.write_text(text.replace("    aliases: {reference: model.seq_length}\n", "").replace(
        head, head + "    aliases: {reference: model.seq_length}\n"))
    clear_caches()
    values = vocabulary.canonical_values(ModelConfig(seq_length=64))
    assert values["model.max_position_embeddings"] == 64 and "model.seq_length" not in values


def test_a_size_the_reference_computes_must_agree(tmp_path):
    from workbench.reference.from_canonical import configs_from_file
    from workbench_testing import EXAMPLE_MEGATRON

    script = tmp_path / "kv.sh"
    script.write_text(EXAMPLE_MEGATRON.read_text().replace("--num-layers 2", "--num-layers 2\n    --kv-channels 32"))
    with pytest.raises(InputError) as error:
        configs_from_file(script, "megatron")
    assert str(error.value).startswith(f"{script}: model.head_dim is 32; the reference model computes "
                                       "model.head_dim = 16")
