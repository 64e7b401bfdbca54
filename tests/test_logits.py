"""Logits comparison on the torch reference model's real logits: a clean rerun passes every token; a
planted token-level fault (a wrong input id at one position: causal attention keeps the tokens before it
exact) is found at that token; both dump layouts (one [tokens, vocab] array, a folder per token) and a
padded vocabulary read alike."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the reference logits need torch (test extra)")

from workbench.dumps.logits import LogitsThresholds, compare_logits  # noqa: E402
from workbench.reference import torch_model  # noqa: E402
from workbench.reference.config import ModelConfig, PrecisionConfig  # noqa: E402

FAULT = 19


@pytest.fixture(scope="module")
def logits():
    config = ModelConfig()
    model = torch_model.build_model(config, PrecisionConfig(), seed=3)
    tokens = torch.randint(0, config.vocab_size, (1, config.seq_length), generator=torch.Generator().manual_seed(0))
    faulty = tokens.clone()
    faulty[0, FAULT] = (faulty[0, FAULT] + 7) % config.vocab_size
    with torch.no_grad():
        return model(tokens)[0].numpy(), model(tokens)[0].numpy(), model(faulty)[0].numpy()


def _per_token_folder(path, array):
    path.mkdir()
    for token, row in enumerate(array):                   # token_2 sorts before token_10 (natural order)
        np.save(path / f"token_{token}.npy", row[None, :])
    return path


def test_clean_rerun_passes(tmp_path, logits):
    reference, rerun, _ = logits
    np.save(tmp_path / "reference.npy", reference)
    result = compare_logits(tmp_path / "reference.npy", _per_token_folder(tmp_path / "rerun", rerun))
    assert (result.kind, result.verdict, result.exit_code) == ("logits", "PASS", 0)
    table = result.main_table
    assert len(table) == reference.shape[0] and (table["kl"] < 1e-9).all() and (table["cosine"] > 0.999999).all()
    assert (table["topk_agreement"] == 1.0).all() and result.facts["first_failing_token"] is None


def test_planted_fault_found_at_its_token(tmp_path, logits):
    reference, _, faulty = logits
    np.save(tmp_path / "reference.npy", reference[None])      # [1, tokens, vocab]: the batch of 1 is dropped
    np.save(tmp_path / "faulty.npy", faulty)
    result = compare_logits(tmp_path / "reference.npy", tmp_path / "faulty.npy")
    assert (result.verdict, result.exit_code, result.facts["first_failing_token"]) == ("FAIL", 1, FAULT)
    table = result.main_table
    assert (table["status"][:FAULT] == "PASS").all() and table["status"][FAULT] == "FAIL"
    assert table["kl"][:FAULT].max() == 0.0 and table["kl"][FAULT] > 1e-3
    assert result.summary[0].startswith(f"first failing token: {FAULT} ")
    figure = result.figures[0].draw()
    assert figure.axes[0].get_yscale() == "log" and "KL" in figure.axes[0].get_ylabel()


def test_thresholds_and_metrics_by_hand(tmp_path):
    reference = np.array([[2.0, 1.0, 0.0, -1.0]], np.float32)
    candidate = np.array([[1.0, 2.0, 0.0, -1.0]], np.float32)
    np.save(tmp_path / "a.npy", reference)
    np.save(tmp_path / "b.npy", candidate)
    row = compare_logits(tmp_path / "a.npy", tmp_path / "b.npy", LogitsThresholds(top_k=1)).main_table.iloc[0]
    p = np.exp(reference[0]) / np.exp(reference[0]).sum()
    q = np.exp(candidate[0]) / np.exp(candidate[0]).sum()
    assert row["kl"] == pytest.approx(float(np.sum(p * np.log(p / q))))
    assert row["cosine"] == pytest.approx(5.0 / 6.0)
    assert (row["topk_agreement"], row["top1_reference"], row["top1_candidate"]) == (0.0, 0, 1)


def test_padded_vocabulary_and_token_counts(tmp_path, logits):
    reference, rerun, _ = logits
    padded = np.concatenate([rerun, np.full((rerun.shape[0], 3), -50.0, np.float32)], axis=1)[:-2]
    np.save(tmp_path / "reference.npy", reference)
    np.save(tmp_path / "padded.npy", padded)
    result = compare_logits(tmp_path / "reference.npy", tmp_path / "padded.npy")
    assert result.verdict == "PASS" and len(result.main_table) == reference.shape[0] - 2
    assert any("vocabulary sizes differ" in note for note in result.notes)
    assert any("token counts differ" in note for note in result.notes)
