"""Shared test helpers (imported as `workbench_testing`, a name no test folder shadows): the fixtures
folder beside the checkout, and the example pair."""
from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT.parent / "shared" / "fixtures"
EXAMPLES = ROOT / "checklists" / "examples"
EXAMPLE_MEGATRON = EXAMPLES / "llama_tiny_megatron.sh"
EXAMPLE_MINDFORMERS = EXAMPLES / "llama_tiny_mindformers.yaml"


def fixtures_dir(*parts: str) -> Path:
    """A folder of ../shared/fixtures; skips the test when the shared fixtures are absent."""
    path = FIXTURES.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"shared fixtures not found at {path} (they sit beside the checkout in CI)")
    return path


def tiny_deepseek_v3_config():
    """A two-layer DeepSeek-V3 (MLA, one dense and one MoE layer) small enough for CPU tests;
    skips when this transformers has no DeepseekV3."""
    transformers = pytest.importorskip("transformers")
    config_class = getattr(transformers, "DeepseekV3Config", None)
    if config_class is None:
        pytest.skip("this transformers has no DeepseekV3")
    return config_class(vocab_size=128, hidden_size=64, intermediate_size=96, moe_intermediate_size=32,
                        num_hidden_layers=2, first_k_dense_replace=1, num_attention_heads=4, num_key_value_heads=4,
                        n_routed_experts=4, n_shared_experts=1, num_experts_per_tok=2, n_group=1, topk_group=1,
                        q_lora_rank=32, kv_lora_rank=16, qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16,
                        max_position_embeddings=64, tie_word_embeddings=False)
