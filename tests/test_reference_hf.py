"""The torch reference computes what real Hugging Face models compute: its HF export, loaded by
`transformers` (Llama, Qwen2, Qwen3, Mixtral), gives the same fp32 logits."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="needs torch (test extra)")
transformers = pytest.importorskip("transformers", reason="needs transformers (test extra)")

from workbench.reference import torch_model  # noqa: E402
from workbench.reference.config import ModelConfig, PrecisionConfig, synthetic_batches  # noqa: E402
from workbench.reference.hf_io import save_hf_safetensors  # noqa: E402

FAMILIES = {"llama": ModelConfig(), "qwen2": ModelConfig(qkv_bias=True), "qwen3": ModelConfig(qk_norm=True),
            "mixtral": ModelConfig(num_experts=4, moe_router_topk=2, moe_ffn_hidden_size=32)}


@pytest.mark.parametrize("family", list(FAMILIES))
def test_hf_model_loaded_from_the_export_gives_the_same_logits(family, tmp_path):
    config = FAMILIES[family]
    reference = torch_model.build_model(config, PrecisionConfig(), seed=11)
    save_hf_safetensors(reference.state_dict(), config, tmp_path / "hf")
    hf = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "hf", dtype=torch.float32)
    hf.eval()
    assert hf.config.model_type == family
    tokens = torch.from_numpy(synthetic_batches(config, 1, micro_batch_size=2, seed=5)[0]["tokens"])
    with torch.no_grad():
        ours = reference(tokens).float().numpy()
        theirs = hf(input_ids=tokens).logits.float().numpy()
    assert np.abs(ours - theirs).max() < 1e-4
    cosine = (ours * theirs).sum() / (np.linalg.norm(ours) * np.linalg.norm(theirs))
    assert cosine > 0.99999
