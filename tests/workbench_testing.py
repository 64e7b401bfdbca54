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
