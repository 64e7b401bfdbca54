"""`workbench convert` and `workbench weights diff` end to end, on real models and real files.

Tiny real Hugging Face models (transformers, random weights) saved sharded → converted →
loaded into the project's MindSpore reference model → the same fp32 logits as the HF model.
"""
from __future__ import annotations

import json

import numpy as np
import pytest
from workbench_testing import tiny_deepseek_v3_config

torch = pytest.importorskip("torch", reason="needs torch (test extra)")
transformers = pytest.importorskip("transformers", reason="needs transformers (test extra)")
pytest.importorskip("mindspore", reason="needs mindspore (test extra)")

from workbench.cli.main import main  # noqa: E402
from workbench.reference import ms_model, torch_model  # noqa: E402
from workbench.reference.config import ModelConfig, PrecisionConfig, synthetic_batches  # noqa: E402
from workbench.reference.hf_io import hf_config, save_hf_safetensors  # noqa: E402

FAMILIES = {"llama": ModelConfig(), "qwen2": ModelConfig(qkv_bias=True), "qwen3": ModelConfig(qk_norm=True),
            "mixtral": ModelConfig(num_experts=4, moe_router_topk=2, moe_ffn_hidden_size=32)}


def hf_model(family: str, folder, seed: int = 3):
    """A real transformers model with random weights, saved sharded (several safetensors + index)."""
    config = FAMILIES[family]
    hf_cfg = transformers.AutoConfig.for_model(**hf_config(config))
    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_config(hf_cfg, dtype=torch.float32).eval()
    model.save_pretrained(folder, max_shard_size="100KB", safe_serialization=True)
    assert len(list(folder.glob("*.safetensors"))) > 1 and (folder / "model.safetensors.index.json").exists()
    return model


def hf_logits(model, tokens: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        return model(input_ids=torch.from_numpy(tokens)).logits.float().numpy()


def mindspore_logits(ckpt, config: ModelConfig, tokens: np.ndarray) -> np.ndarray:
    import mindspore as ms

    net = ms_model.build_model(config, seed=0)
    ms_model.set_weights(net, {name: value.asnumpy() for name, value in ms.load_checkpoint(str(ckpt)).items()})
    return net.logits(ms.Tensor(tokens.astype(np.int32))).asnumpy()


@pytest.mark.parametrize("family", list(FAMILIES))
def test_hf_to_mindformers_gives_the_hf_logits(family, tmp_path):
    model = hf_model(family, tmp_path / "hf")
    assert main(["convert", str(tmp_path / "hf"), str(tmp_path / "mf.ckpt"), "--to", "mindformers", "--verify"]) == 0
    tokens = synthetic_batches(FAMILIES[family], 1, micro_batch_size=2, seed=9)[0]["tokens"]
    ours, theirs = mindspore_logits(tmp_path / "mf.ckpt", FAMILIES[family], tokens), hf_logits(model, tokens)
    assert np.abs(ours - theirs).max() < 1e-4
    assert (ours * theirs).sum() / (np.linalg.norm(ours) * np.linalg.norm(theirs)) > 0.99999


@pytest.mark.parametrize("family", ["llama", "qwen3", "mixtral"])
def test_hf_to_mindformers_to_hf_is_bit_exact(family, tmp_path):
    hf_model(family, tmp_path / "hf")
    assert main(["convert", str(tmp_path / "hf"), str(tmp_path / "mf.safetensors"), "--to", "mindformers"]) == 0
    assert main(["convert", str(tmp_path / "mf.safetensors"), str(tmp_path / "back"), "--to", "hf",
                 "--arch", family, "--config", str(tmp_path / "hf" / "config.json")]) == 0
    from safetensors.numpy import load_file

    original = {}
    for shard in (tmp_path / "hf").glob("*.safetensors"):
        original.update(load_file(shard))
    again = {}
    for shard in (tmp_path / "back").glob("*.safetensors"):
        again.update(load_file(shard))
    assert set(original) == set(again)
    assert all(np.array_equal(original[name].view(np.uint8), again[name].view(np.uint8)) for name in original)


def test_megatron_tp2_pp2_to_mindformers_equals_hf_to_mindformers(tmp_path):
    from workbench.reference.megatron_io import save_megatron_legacy

    config = ModelConfig()
    state = torch_model.build_model(config, PrecisionConfig(), seed=5).state_dict()
    save_megatron_legacy(state, config, tmp_path / "megatron", iteration=7, tensor_parallel=2, pipeline_parallel=2)
    save_hf_safetensors(state, config, tmp_path / "hf")
    assert main(["convert", str(tmp_path / "megatron"), str(tmp_path / "from_megatron.ckpt"), "--to", "mindformers"]) == 0
    assert main(["convert", str(tmp_path / "hf"), str(tmp_path / "from_hf.ckpt"), "--to", "mindformers"]) == 0
    assert main(["weights", "diff", str(tmp_path / "from_megatron.ckpt"), str(tmp_path / "from_hf.ckpt"),
                 "--format", "json", "--out", str(tmp_path / "diff.json")]) == 0
    report = json.loads((tmp_path / "diff.json").read_text())
    counts = report["facts"]["counts"]
    assert report["verdict"] == "MATCH" and counts["all_match"] and counts["match"] == len(report["tables"]["tensors"])


def test_bf16_output_keeps_bf16(tmp_path):
    hf_model("llama", tmp_path / "hf")
    assert main(["convert", str(tmp_path / "hf"), str(tmp_path / "mf.ckpt"), "--to", "mindformers", "--dtype", "bf16",
                 "--verify"]) == 0
    import mindspore as ms

    loaded = ms.load_checkpoint(str(tmp_path / "mf.ckpt"))
    assert {value.dtype for value in loaded.values()} == {ms.bfloat16}


def test_weights_diff_reports_mismatches_and_one_sided_tensors(tmp_path, capsys):
    config = ModelConfig()
    state = torch_model.build_model(config, PrecisionConfig(), seed=5).state_dict()
    save_hf_safetensors(state, config, tmp_path / "a")
    changed = dict(state)
    changed["output_layer.weight"] = changed["output_layer.weight"] + 1e-3
    save_hf_safetensors(changed, config, tmp_path / "b")
    assert main(["weights", "diff", str(tmp_path / "a"), str(tmp_path / "b"), "--format", "csv"]) == 1
    rows = capsys.readouterr().out.splitlines()
    assert rows[0].startswith("name,status,shape_a,shape_b")
    assert sum(",mismatch," in row for row in rows) == 1 and any(row.startswith("lm_head.weight,mismatch") for row in rows)
    assert main(["weights", "diff", str(tmp_path / "a"), str(tmp_path / "b"), "--atol", "2e-3", "--format", "md"]) == 0
    capsys.readouterr()
    page = tmp_path / "diff.html"                      # the shared report: verdict, and the bars figure embedded
    assert main(["weights", "diff", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(page)]) == 1
    html = page.read_text()
    assert "MISMATCH" in html and html.count("data:image/png;base64,") == 1 and "lm_head.weight" in html
    assert main(["weights", "diff", str(tmp_path / "a"), str(tmp_path / "b"), "--format", "json"]) == 1
    document = json.loads(capsys.readouterr().out)
    assert document["schema"] == "workbench.weights_diff/1" and document["verdict"] == "MISMATCH"


def test_bad_conversions_fail_cleanly(tmp_path, capsys):
    hf_model("llama", tmp_path / "hf")
    out = tmp_path / "out.ckpt"
    out.write_text("existing")
    assert main(["convert", str(tmp_path / "hf"), str(out), "--to", "mindformers"]) == 2
    assert "--force" in capsys.readouterr().err and out.read_text() == "existing"
    assert main(["convert", str(tmp_path / "hf"), str(tmp_path / "x.ckpt"), "--to", "no_such_format"]) == 2
    assert not (tmp_path / "x.ckpt").exists()
    assert main(["convert", str(tmp_path / "missing"), str(tmp_path / "y.ckpt"), "--to", "mindformers"]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 2


def test_hf_bin_source_converts_like_safetensors(tmp_path):
    model = FAMILIES["llama"]
    hf_cfg = transformers.AutoConfig.for_model(**hf_config(model))
    torch.manual_seed(4)
    hf = transformers.AutoModelForCausalLM.from_config(hf_cfg, dtype=torch.float32).eval()
    hf.save_pretrained(tmp_path / "st")
    (tmp_path / "bin").mkdir()  # transformers 5 writes only safetensors: write the classic .bin as older releases did
    torch.save(hf.state_dict(), tmp_path / "bin" / "pytorch_model.bin")
    (tmp_path / "bin" / "config.json").write_text((tmp_path / "st" / "config.json").read_text())
    assert main(["convert", str(tmp_path / "bin"), str(tmp_path / "a.ckpt"), "--to", "mindformers"]) == 0
    assert main(["convert", str(tmp_path / "st"), str(tmp_path / "b.ckpt"), "--to", "mindformers"]) == 0
    assert main(["weights", "diff", str(tmp_path / "a.ckpt"), str(tmp_path / "b.ckpt"), "--format", "csv"]) == 0


def test_real_deepseek_v3_round_trips_through_mindformers_mcore(tmp_path):
    config = tiny_deepseek_v3_config()
    torch.manual_seed(0)
    transformers.AutoModelForCausalLM.from_config(config).save_pretrained(tmp_path / "hf")
    assert main(["convert", str(tmp_path / "hf"), str(tmp_path / "mcore"), "--to", "mindformers_mcore",
                 "--arch", "deepseek_v3", "--verify"]) == 0
    assert main(["convert", str(tmp_path / "mcore"), str(tmp_path / "back"), "--to", "hf", "--arch", "deepseek_v3",
                 "--from", "mindformers_mcore", "--config", str(tmp_path / "hf" / "config.json")]) == 0
    assert main(["weights", "diff", str(tmp_path / "hf"), str(tmp_path / "back"), "--arch", "deepseek_v3",
                 "--format", "csv"]) == 0


def test_pad_vocab_to_adds_zero_rows(tmp_path):
    config = ModelConfig()
    state = torch_model.build_model(config, PrecisionConfig(), seed=2).state_dict()
    save_hf_safetensors(state, config, tmp_path / "hf")
    assert main(["convert", str(tmp_path / "hf"), str(tmp_path / "mf.ckpt"), "--to", "mindformers",
                 "--pad-vocab-to", "144", "--verify"]) == 0
    import mindspore as ms

    loaded = {name: value.asnumpy() for name, value in ms.load_checkpoint(str(tmp_path / "mf.ckpt")).items()}
    for name, source in (("model.tok_embeddings.embedding_weight", "embedding.word_embeddings.weight"),
                         ("lm_head.weight", "output_layer.weight")):
        assert loaded[name].shape == (144, config.hidden_size)
        np.testing.assert_array_equal(loaded[name][:config.vocab_size], state[source].numpy())
        assert not loaded[name][config.vocab_size:].any()


def test_unmapped_source_tensor_is_named_or_skipped_on_request(tmp_path, capsys):
    from safetensors.torch import save_file

    config = ModelConfig()
    state = torch_model.build_model(config, PrecisionConfig(), seed=2).state_dict()
    save_hf_safetensors(state, config, tmp_path / "hf")
    extra = tmp_path / "hf" / "model.safetensors"
    from safetensors.torch import load_file
    tensors = load_file(extra)
    tensors["model.layers.0.self_attn.surprise.weight"] = torch.zeros(2, 2)
    save_file(tensors, extra)
    assert main(["convert", str(tmp_path / "hf"), str(tmp_path / "a.ckpt"), "--to", "mindformers"]) == 2
    error = capsys.readouterr().err
    assert "model.layers.0.self_attn.surprise.weight" in error and not (tmp_path / "a.ckpt").exists()
    assert main(["convert", str(tmp_path / "hf"), str(tmp_path / "b.ckpt"), "--to", "mindformers",
                 "--allow-unmapped"]) == 0
    assert "skipped 1 unmapped source tensors: model.layers.0.self_attn.surprise.weight" in capsys.readouterr().err
