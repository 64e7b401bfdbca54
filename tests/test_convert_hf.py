"""`workbench convert --to hf` writes a complete Hugging Face folder that real transformers loads.

Every architecture in converters/ goes to an HF folder and back into `AutoModelForCausalLM.from_pretrained`
(tiny generated models, random weights); tied embeddings convert both ways; destination names with
dots; HF config values of the wrong type are one-line errors; the hf_config blocks are validated.
"""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from workbench_testing import tiny_deepseek_v3_config

torch = pytest.importorskip("torch", reason="needs torch (test extra)")
transformers = pytest.importorskip("transformers", reason="needs transformers (test extra)")

from workbench.cli.main import main  # noqa: E402
from workbench.errors import InputError  # noqa: E402
from workbench.reference import torch_model  # noqa: E402
from workbench.reference.config import ModelConfig, PrecisionConfig, synthetic_batches  # noqa: E402
from workbench.reference.hf_io import save_hf_safetensors  # noqa: E402
from workbench.reference.megatron_io import save_megatron_legacy  # noqa: E402

# settings off the HF defaults, so a config.json that fell back to a default gives other logits
SETTINGS = {"rotary_base": 50000.0, "norm_epsilon": 1e-6}
FAMILIES = {"llama": ModelConfig(**SETTINGS), "qwen2": ModelConfig(qkv_bias=True, **SETTINGS),
            "qwen3": ModelConfig(qk_norm=True, **SETTINGS),
            "mixtral": ModelConfig(num_experts=4, moe_router_topk=2, moe_ffn_hidden_size=32, **SETTINGS)}


def logits_of(model, tokens: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        if isinstance(model, transformers.PreTrainedModel):
            return model(input_ids=torch.from_numpy(tokens)).logits.float().numpy()
        return model(torch.from_numpy(tokens)).float().numpy()          # the torch reference model


def load_hf(folder):
    return transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()


def safetensors_of(folder) -> dict:
    from safetensors.numpy import load_file

    tensors = {}
    for shard in sorted(folder.glob("*.safetensors")):
        tensors.update(load_file(shard))
    return tensors


@pytest.mark.parametrize("family", list(FAMILIES))
def test_megatron_checkpoint_to_hf_folder_loads_in_transformers(family, tmp_path, capsys):
    config = FAMILIES[family]
    reference = torch_model.build_model(config, PrecisionConfig(), seed=7)
    save_megatron_legacy(reference.state_dict(), config, tmp_path / "megatron", iteration=3, tensor_parallel=2)
    out = tmp_path / f"{family.capitalize()}2.5-7B.hf"              # dots in a folder name
    assert main(["convert", str(tmp_path / "megatron"), str(out), "--to", "hf", "--verify"]) == 0
    assert "assumed" not in capsys.readouterr().err                  # the checkpoint's args state every setting
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "model.safetensors"]
    written = json.loads((out / "config.json").read_text())
    assert written["model_type"] == family and written["tie_word_embeddings"] is False
    assert written["rope_theta"] == SETTINGS["rotary_base"] and written["rms_norm_eps"] == SETTINGS["norm_epsilon"]
    hf = load_hf(out)
    assert type(hf).__name__ == written["architectures"][0]
    tokens = synthetic_batches(config, 1, micro_batch_size=2, seed=4)[0]["tokens"]
    ours, theirs = logits_of(reference, tokens), logits_of(hf, tokens)
    assert np.abs(ours - theirs).max() < 1e-4


def test_deepseek_v3_to_hf_folder_loads_with_or_without_its_config(tmp_path, capsys):
    config = tiny_deepseek_v3_config()
    torch.manual_seed(0)
    original = transformers.AutoModelForCausalLM.from_config(config).eval()
    original.save_pretrained(tmp_path / "hf")
    assert main(["convert", str(tmp_path / "hf"), str(tmp_path / "mcore"), "--to", "mindformers_mcore",
                 "--arch", "deepseek_v3"]) == 0
    back = ["convert", str(tmp_path / "mcore"), "--to", "hf", "--arch", "deepseek_v3", "--from", "mindformers_mcore"]
    args = tmp_path / "megatron_args.yaml"          # a flat Megatron args file: only the sizes shapes cannot tell
    args.write_text("num_layers: 2\nhidden_size: 64\nnum_attention_heads: 4\nqk_head_dim: 16\nv_head_dim: 16\n"
                    "ffn_hidden_size: 96\nmoe_ffn_hidden_size: 32\n")
    assert main([*back[:2], str(tmp_path / "bare"), *back[2:], "--config", str(args)]) == 0
    err = capsys.readouterr().err                                     # no key for group routing: defaults named
    assert "assumed" in err and "n_group=8" in err and "--config" in err
    bare = json.loads((tmp_path / "bare" / "config.json").read_text())
    assert (bare["n_routed_experts"], bare["n_shared_experts"], bare["first_k_dense_replace"]) == (4, 1, 1)
    load_hf(tmp_path / "bare")
    expected = safetensors_of(tmp_path / "hf")
    again = safetensors_of(tmp_path / "bare")
    assert set(again) == set(expected) and all(np.array_equal(again[n], expected[n]) for n in expected)
    assert main([*back[:2], str(tmp_path / "full"), *back[2:], "--config", str(tmp_path / "hf" / "config.json")]) == 0
    tokens = np.arange(16, dtype=np.int64).reshape(2, 8) * 7 % 128
    assert np.abs(logits_of(load_hf(tmp_path / "full"), tokens) - logits_of(original, tokens)).max() < 1e-5


def test_sharded_hf_folder_loads_in_transformers(tmp_path):
    config = FAMILIES["llama"]
    reference = torch_model.build_model(config, PrecisionConfig(), seed=2)
    save_hf_safetensors(reference.state_dict(), config, tmp_path / "hf", shard_bytes=40_000)
    index = json.loads((tmp_path / "hf" / "model.safetensors.index.json").read_text())
    assert len(set(index["weight_map"].values())) > 1 and not (tmp_path / "hf" / "model.safetensors").exists()
    tokens = synthetic_batches(config, 1, micro_batch_size=2, seed=4)[0]["tokens"]
    assert np.abs(logits_of(reference, tokens) - logits_of(load_hf(tmp_path / "hf"), tokens)).max() < 1e-4


@pytest.mark.parametrize("target,out,head", [("megatron", "megatron_dir", "output_layer.weight"),
                                             ("mindformers", "mf.ckpt", "lm_head.weight")])
def test_tied_embeddings_convert_both_ways(tmp_path, capsys, target, out, head):
    hf_cfg = transformers.LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True)
    torch.manual_seed(1)
    original = transformers.AutoModelForCausalLM.from_config(hf_cfg).eval()
    original.save_pretrained(tmp_path / "hf")
    assert "lm_head.weight" not in safetensors_of(tmp_path / "hf")      # transformers leaves the tied head out
    assert main(["convert", str(tmp_path / "hf"), str(tmp_path / out), "--to", target, "--verify"]) == 0
    assert "tied: lm_head" in capsys.readouterr().err
    from workbench.tensors.open import open_source

    written = open_source(tmp_path / out)
    names = set(written.metas())
    written.close()
    assert head not in names and any("embed" in name for name in names)
    assert main(["convert", str(tmp_path / out), str(tmp_path / "back"), "--to", "hf", "--arch", "llama", "--from", target,
                 "--config", str(tmp_path / "hf" / "config.json")]) == 0
    config = json.loads((tmp_path / "back" / "config.json").read_text())
    assert config["tie_word_embeddings"] is True
    tokens = np.arange(16, dtype=np.int64).reshape(2, 8) * 5 % 128
    assert np.abs(logits_of(load_hf(tmp_path / "back"), tokens) - logits_of(original, tokens)).max() < 1e-5


def test_destination_names(tmp_path, capsys):
    config = FAMILIES["llama"]
    save_hf_safetensors(torch_model.build_model(config, PrecisionConfig(), seed=1).state_dict(), config, tmp_path / "hf")
    source = str(tmp_path / "hf")
    assert main(["convert", source, str(tmp_path / "x.safetensors"), "--to", "hf"]) == 2
    assert "--to hf writes a Hugging Face model folder" in capsys.readouterr().err
    assert main(["convert", source, str(tmp_path / "x.pt"), "--to", "megatron"]) == 2
    assert "cannot write .pt" in capsys.readouterr().err
    assert not any(p.name.startswith("x") for p in tmp_path.iterdir())
    assert main(["convert", source, str(tmp_path / "Qwen2.5-mcore"), "--to", "mindformers_mcore"]) == 0
    assert (tmp_path / "Qwen2.5-mcore" / "model.safetensors").is_file()
    assert not (tmp_path / "Qwen2.5-mcore" / "config.json").exists()      # config.json only for hf
    (tmp_path / "empty.hf").mkdir()                                        # an empty folder is used as is
    assert main(["convert", source, str(tmp_path / "empty.hf"), "--to", "hf"]) == 0


def test_existing_folder_needs_force_and_is_replaced_whole(tmp_path, capsys):
    config = FAMILIES["llama"]
    save_hf_safetensors(torch_model.build_model(config, PrecisionConfig(), seed=1).state_dict(), config, tmp_path / "hf")
    out = tmp_path / "out"
    out.mkdir()
    (out / "model-00001-of-00009.safetensors").write_text("stale")
    assert main(["convert", str(tmp_path / "hf"), str(out), "--to", "hf"]) == 2
    assert "--force" in capsys.readouterr().err and (out / "model-00001-of-00009.safetensors").exists()
    assert main(["convert", str(tmp_path / "hf"), str(out), "--to", "hf", "--force"]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "model.safetensors"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hf", "out"]     # no staging or old copy left


def test_a_failed_write_leaves_no_folder(tmp_path):
    from workbench.convert.hf_folder import FolderSink
    from workbench.tensors.base import TensorMeta

    metas = [TensorMeta("a", (2,), "fp32"), TensorMeta("b", (2,), "fp32")]
    sink = FolderSink(tmp_path / "out.hf", metas, config={"model_type": "llama"})
    sink.write("a", np.zeros(2, np.float32))
    with pytest.raises(InputError, match="expected fp32"):
        sink.write("b", np.zeros(3, np.float32))
    assert list(tmp_path.iterdir()) == []


BAD_VALUES = [("num_attention_heads", "x", "num_attention_heads is a string"),
              ("head_dim", float("nan"), "head_dim is a number (nan)"),
              ("hidden_size", True, "hidden_size is true/false"),
              ("num_hidden_layers", 0, "num_hidden_layers is 0"),
              ("rms_norm_eps", float("inf"), "rms_norm_eps is inf, expected a finite number"),
              ("text_config", 5, "text_config is an integer")]


@pytest.mark.parametrize("key,value,message", BAD_VALUES, ids=[case[0] for case in BAD_VALUES])
def test_hf_config_values_of_the_wrong_type_are_one_line_errors(tmp_path, capsys, key, value, message):
    config = FAMILIES["llama"]
    save_hf_safetensors(torch_model.build_model(config, PrecisionConfig(), seed=1).state_dict(), config, tmp_path / "hf")
    bad = json.loads((tmp_path / "hf" / "config.json").read_text())
    bad[key] = value
    (tmp_path / "bad.json").write_text(json.dumps(bad))                  # json writes NaN / Infinity as Python does
    assert main(["convert", str(tmp_path / "hf"), str(tmp_path / "out.ckpt"), "--to", "mindformers",
                 "--config", str(tmp_path / "bad.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "bad.json" in err and message in err and "Traceback" not in err
    assert not (tmp_path / "out.ckpt").exists()


def test_unsupported_dtype_is_named(tmp_path, capsys):
    from safetensors.torch import load_file, save_file

    config = FAMILIES["llama"]
    save_hf_safetensors(torch_model.build_model(config, PrecisionConfig(), seed=1).state_dict(), config, tmp_path / "hf")
    tensors = load_file(tmp_path / "hf" / "model.safetensors")
    name = "model.layers.0.mlp.down_proj.weight"
    tensors[name] = tensors[name].to(torch.float8_e4m3fn)
    save_file(tensors, tmp_path / "hf" / "model.safetensors", metadata={"format": "pt"})
    assert main(["convert", str(tmp_path / "hf"), str(tmp_path / "out.ckpt"), "--to", "mindformers"]) == 2
    err = capsys.readouterr().err
    assert name in err and "F8_E4M3 is not supported" in err and "no converter spec" not in err


def _spec_folder(tmp_path, edit):
    from workbench.spec.loader import converters_dir

    folder = tmp_path / "converters"
    folder.mkdir()
    for name in ("_hub.yaml", "llama.yaml"):
        shutil.copy(converters_dir() / name, folder / name)
    path = folder / "llama.yaml"
    path.write_text(edit(path.read_text()))
    return folder


HF_BLOCK_ERRORS = [("  model_type: llama\n", "  model_type: llama\n  colour: red\n", "unknown hf_config key 'colour'"),
                   ("    head_dim: head_dim\n", "    head_dim: heads\n", "expected a size parameter"),
                   ("    head_dim: head_dim\n", "    head_dim: moe_ffn\n", "which this arch does not have"),
                   ("{from: model.rotary_base,", "{from: model.rotary_bass,", "'model.rotary_bass' is not a canonical key"),
                   ("  architectures: [LlamaForCausalLM]\n", "  architectures: LlamaForCausalLM\n",
                    "architectures must be a list")]


@pytest.mark.parametrize("old,new,message", HF_BLOCK_ERRORS, ids=[case[2][:24] for case in HF_BLOCK_ERRORS])
def test_hf_config_blocks_are_validated_at_load_time(tmp_path, old, new, message):
    from workbench.spec.loader import load_arch

    folder = _spec_folder(tmp_path, lambda text: text.replace(old, new, 1))
    with pytest.raises(InputError, match=message) as caught:
        load_arch("llama", folder)
    assert str(caught.value).startswith(f"{folder / 'llama.yaml'}:")      # file:line [key]


def test_hub_tied_to_is_validated(tmp_path):
    from workbench.spec.loader import load_arch

    folder = _spec_folder(tmp_path, lambda text: text)
    hub = folder / "_hub.yaml"
    hub.write_text(hub.read_text().replace("tied_to: embed", "tied_to: final_norm"))
    with pytest.raises(InputError, match="tied_to: 'final_norm' must name a hub tensor of the same shape"):
        load_arch("llama", folder)


def test_written_config_reads_back_as_the_same_sizes(tmp_path):
    """The hf_config sizes and the HF reader (spec/config_params.py) agree for every family."""
    from workbench import spec
    from workbench.reference.hf_io import spec_params

    for family, config in FAMILIES.items():
        save_hf_safetensors(torch_model.build_model(config, PrecisionConfig(), seed=1).state_dict(), config,
                            tmp_path / family)
        arch = spec.load_arch(family)
        expected = {name: value for name, value in spec_params(config).env().items() if name in arch.params}
        stated = spec.params_from_config(tmp_path / family)
        assert {name: stated[name] for name in arch.params} == expected, family
