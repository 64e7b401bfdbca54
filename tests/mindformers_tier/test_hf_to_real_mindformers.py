"""Hugging Face weights -> MindFormers legacy checkpoint -> REAL MindFormers 2.1.0 logits == HF logits.

A tiny random ``transformers`` Llama (and Qwen2, q/k/v bias) is saved with ``save_pretrained``,
converted by the project's converter, ``workbench convert HF_DIR OUT.ckpt --to mindformers``
(``workbench/convert/``), loaded strictly into the real legacy ``LlamaForCausalLM`` (CPU), and its fp32
logits are compared with HF's (max abs < 1e-4, cosine > 0.99999).

The hand mapping below (:func:`hand_convert_hf_to_mindformers`) was this test's conversion before
``workbench convert`` existed; it stays as an independent oracle: the same check through it, and
the converter's checkpoint must equal it tensor for tensor. (When ``workbench.convert`` is not
importable, the converter tests skip and the hand-mapping test still runs.) The mapping (no
permutation: HF q/k use the rotate-half RoPE layout, and so does MindFormers legacy with
``use_rope_slice``)::

    model.embed_tokens.weight                          model.tok_embeddings.embedding_weight
    model.layers.N.input_layernorm.weight              model.layers.N.attention_norm.weight
    model.layers.N.self_attn.{q,k,v}_proj.weight|bias  model.layers.N.attention.w{q,k,v}.weight|bias
    model.layers.N.self_attn.o_proj.weight             model.layers.N.attention.wo.weight
    model.layers.N.post_attention_layernorm.weight     model.layers.N.ffn_norm.weight
    model.layers.N.mlp.{gate,up,down}_proj.weight      model.layers.N.feed_forward.w{1,3,2}.weight
    model.norm.weight                                  model.norm_out.weight
    lm_head.weight                                     lm_head.weight
"""
from __future__ import annotations

import importlib.util
import re

import numpy as np
import pytest

pytest.importorskip("mindformers", reason="real MindFormers is not installed in this venv: the MindFormers "
                                          "tier runs with scripts/test-mindformers.sh")
torch = pytest.importorskip("torch", reason="needs torch (the torch extra)")
transformers = pytest.importorskip("transformers", reason="needs transformers (the transformers extra)")

import mindspore as ms  # noqa: E402
import real_mindformers as real  # noqa: E402

_LAYER = re.compile(r"^model\.layers\.(\d+)\.(.+)$")
_LAYER_NAMES = {
    "input_layernorm.weight": "attention_norm.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "self_attn.o_proj.weight": "attention.wo.weight",
    "mlp.gate_proj.weight": "feed_forward.w1.weight",
    "mlp.up_proj.weight": "feed_forward.w3.weight",
    "mlp.down_proj.weight": "feed_forward.w2.weight",
    **{f"self_attn.{p}_proj.{kind}": f"attention.w{p}.{kind}" for p in "qkv" for kind in ("weight", "bias")},
}
_GLOBAL_NAMES = {"model.embed_tokens.weight": "model.tok_embeddings.embedding_weight",
                 "model.norm.weight": "model.norm_out.weight", "lm_head.weight": "lm_head.weight"}


def hand_convert_hf_to_mindformers(state_dict) -> dict[str, np.ndarray]:
    """HF Llama/Qwen2 state dict -> MindFormers legacy name -> fp32 array (see the module docstring)."""
    out = {}
    for name, tensor in state_dict.items():
        layer = _LAYER.match(name)
        if layer and layer.group(2) in _LAYER_NAMES:
            target = f"model.layers.{layer.group(1)}.{_LAYER_NAMES[layer.group(2)]}"
        elif name in _GLOBAL_NAMES:
            target = _GLOBAL_NAMES[name]
        else:
            raise KeyError(f"no MindFormers legacy name for the HF tensor {name}")
        out[target] = tensor.detach().to(torch.float32).numpy().copy()
    return out


def mindformers_config_from_hf(config) -> dict:
    """The LlamaConfig dict (MindFormers legacy yaml ``model_config``) of an HF Llama/Qwen2 config."""
    rope = getattr(config, "rope_parameters", None) or {}
    return dict(real.TINY_LLAMA_CONFIG,
                seq_length=config.max_position_embeddings, hidden_size=config.hidden_size,
                num_layers=config.num_hidden_layers, num_heads=config.num_attention_heads,
                n_kv_heads=config.num_key_value_heads, intermediate_size=config.intermediate_size,
                vocab_size=config.vocab_size, rms_norm_eps=config.rms_norm_eps,
                theta=float(rope.get("rope_theta", getattr(config, "rope_theta", 10000.0))),
                qkv_has_bias=config.model_type == "qwen2" or bool(getattr(config, "attention_bias", False)),
                tie_word_embeddings=bool(config.tie_word_embeddings))


def tiny_hf_model(family: str, seed: int = 0):
    """A tiny random HF model matching the tier's model; norms and biases randomised too."""
    sizes = dict(vocab_size=128, hidden_size=64, intermediate_size=176, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32,
                 rms_norm_eps=1e-5, tie_word_embeddings=False)
    config_class, model_class = {"llama": (transformers.LlamaConfig, transformers.LlamaForCausalLM),
                                 "qwen2": (transformers.Qwen2Config, transformers.Qwen2ForCausalLM)}[family]
    config = config_class(**sizes)
    config._attn_implementation = "eager"
    torch.manual_seed(seed)
    model = model_class(config).to(torch.float32).eval()
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("norm.weight"):
                param.copy_(1.0 + 0.1 * torch.randn_like(param))
            elif name.endswith(".bias"):
                param.copy_(0.05 * torch.randn_like(param))
    return model


def assert_close(ours: np.ndarray, theirs: np.ndarray) -> None:
    assert theirs.shape == ours.shape == (2, 32, 128)
    diff = float(np.abs(ours - theirs).max())
    cosine = float((ours * theirs).sum() / (np.linalg.norm(ours) * np.linalg.norm(theirs)))
    assert diff < 1e-4 and cosine > 0.99999, f"max abs diff {diff:.3g}, cosine {cosine:.8f}"


def hf_logits(hf, tokens: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        return hf(input_ids=torch.from_numpy(tokens.astype(np.int64))).logits.float().numpy()


def workbench_convert(source, destination) -> None:
    """``workbench convert SOURCE DESTINATION --to mindformers`` (the CLI, in-process)."""
    if importlib.util.find_spec("workbench.convert.run") is None:
        pytest.skip("workbench.convert is not available in this checkout")
    from workbench.cli.main import main

    status = main(["convert", str(source), str(destination), "--to", "mindformers"])
    assert status == 0, f"workbench convert exited {status}"


@pytest.mark.parametrize("family", ["llama", "qwen2"])
def test_workbench_convert_hf_to_mindformers_gives_the_same_logits_in_real_mindformers(
        family, tmp_path, real_mindformers_logits):
    hf = tiny_hf_model(family)
    hf.save_pretrained(tmp_path / "hf")
    ckpt = tmp_path / "model.ckpt"
    workbench_convert(tmp_path / "hf", ckpt)
    model_config = mindformers_config_from_hf(hf.config)
    tokens = real.default_tokens(model_config, batch=2, seed=1)
    assert_close(hf_logits(hf, tokens), real_mindformers_logits(ckpt, model_config, tokens))  # strict load


@pytest.mark.parametrize("family", ["llama", "qwen2"])
def test_workbench_convert_output_equals_the_hand_mapping(family, tmp_path):
    hf = tiny_hf_model(family)
    hf.save_pretrained(tmp_path / "hf")
    workbench_convert(tmp_path / "hf", tmp_path / "model.ckpt")
    converted = {name: param.asnumpy() for name, param in ms.load_checkpoint(str(tmp_path / "model.ckpt")).items()}
    expected = hand_convert_hf_to_mindformers(hf.state_dict())
    assert sorted(converted) == sorted(expected)
    for name, value in expected.items():
        assert converted[name].dtype == np.float32 and np.array_equal(converted[name], value), name


@pytest.mark.parametrize("family", ["llama", "qwen2"])
def test_hand_mapped_hf_weights_give_the_same_logits_in_real_mindformers(family, tmp_path, real_mindformers_logits):
    hf = tiny_hf_model(family)
    model_config = mindformers_config_from_hf(hf.config)
    ckpt = real.save_numpy_checkpoint(hand_convert_hf_to_mindformers(hf.state_dict()), tmp_path / "model.ckpt")
    tokens = real.default_tokens(model_config, batch=2, seed=1)
    assert_close(hf_logits(hf, tokens), real_mindformers_logits(ckpt, model_config, tokens))  # strict load
