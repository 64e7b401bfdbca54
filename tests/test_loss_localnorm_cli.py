"""`workbench loss` and `workbench localnorm` end to end on logs the reference trainers really wrote.

The torch reference (Megatron side) trains the tiny GPT; its log goes through `read_log`, the
step alignment, the noise band and the verdicts, exactly as a user's logs would.
"""
from __future__ import annotations

import json

import pytest

from workbench.cli.main import main

torch = pytest.importorskip("torch")

STEPS = 40


def _megatron_log(path, *, seed: int, lr: float = 1e-3, steps: int = STEPS, local_norms: bool = False,
                  embedding_grad_dtype=None):
    """Train the torch reference for ``steps`` and return its Megatron-format log."""
    from workbench.reference.config import ModelConfig, PrecisionConfig, TrainConfig, synthetic_batches
    from workbench.reference.torch_model import build_model
    from workbench.reference.torch_train import MegatronStyleTrainer

    cfg = ModelConfig()
    train = TrainConfig(steps=steps, lr=lr, min_lr=lr, warmup_steps=0, decay_style="constant",
                        log_local_norms=local_norms)
    model = build_model(cfg, PrecisionConfig(), seed=seed)
    batches = synthetic_batches(cfg, 4, seed=0) * (steps // 4 + 1)   # four batches again and again: learnable
    trainer = MegatronStyleTrainer(model, train)
    if embedding_grad_dtype is None:
        trainer.train(steps, batches[:steps], log_path=path)
        return path
    original = torch.nn.functional.embedding
    torch.nn.functional.embedding = _low_precision_embedding(embedding_grad_dtype)   # the planted fault, undone below
    try:
        trainer.train(steps, batches[:steps], log_path=path)
    finally:
        torch.nn.functional.embedding = original
    return path


def _low_precision_embedding(dtype):
    """The method's own case: the embedding's gradient accumulated in ``dtype`` (bf16) instead of fp32 --
    each token's gradient row is added into a bf16 table, as a bf16 embedding on one side does."""
    class Embedding(torch.autograd.Function):
        @staticmethod
        def forward(ctx, tokens, weight):
            ctx.save_for_backward(tokens)
            ctx.shape = weight.shape
            return weight[tokens]

        @staticmethod
        def backward(ctx, grad_output):
            (tokens,) = ctx.saved_tensors
            table = torch.zeros(ctx.shape, dtype=dtype)
            table.index_add_(0, tokens.reshape(-1), grad_output.reshape(-1, ctx.shape[1]).to(dtype))
            return None, table.to(grad_output.dtype)

    return lambda tokens, weight, *args, **kwargs: Embedding.apply(tokens, weight)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("runs")
    return {"reference": _megatron_log(folder / "reference.log", seed=0),
            "rerun_1": _megatron_log(folder / "rerun_1.log", seed=1),
            "rerun_2": _megatron_log(folder / "rerun_2.log", seed=2),
            "lr_offset": _megatron_log(folder / "lr_offset.log", seed=0, lr=2e-3)}


def _json(capsys, argv):
    code = main(argv + ["--format", "json"])
    return code, json.loads(capsys.readouterr().out)


def _checks(document):
    return {row["check"]: row for row in document["tables"]["checks"]}


def test_reruns_with_other_seeds_give_a_noise_band_and_stay_inside_it(runs, capsys):
    code, document = _json(capsys, ["loss", str(runs["reference"]), str(runs["rerun_1"]),
                                    "--baseline", str(runs["rerun_2"]), "--metric", "lm_loss",
                                    "--step1-rtol", "0.5", "--mean-rtol", "0.5"])
    band = [row["noise_band"] for row in document["tables"]["steps"]]
    assert any(value and value > 0 for value in band), "two seeds must give a non-zero noise band"
    checks = _checks(document)
    assert checks["divergence start"]["status"] == "PASS", checks
    assert code == 0 and document["verdict"] == "PASS"


def test_a_planted_lr_offset_is_biased_and_diverging(runs, capsys):
    code, document = _json(capsys, ["loss", str(runs["reference"]), str(runs["lr_offset"]),
                                    "--baseline", str(runs["rerun_1"]), "--baseline", str(runs["rerun_2"]),
                                    "--metric", "lm_loss"])
    checks = _checks(document)
    assert code == 1 and document["verdict"] == "FAIL"
    assert checks["bias (sign test)"]["status"] == "FAIL" and "biased" in checks["bias (sign test)"]["detail"]
    assert checks["divergence start"]["status"] == "FAIL" and checks["divergence start"]["value"] >= 1
    assert checks["step 1 relative difference"]["status"] == "PASS"   # same weights, same data: step 1 agrees


def test_loss_html_embeds_its_figure(runs, tmp_path, capsys):
    out = tmp_path / "loss.html"
    assert main(["loss", str(runs["reference"]), str(runs["lr_offset"]), "--baseline", str(runs["rerun_1"]),
                 "--metric", "lm_loss", "--out", str(out)]) == 1
    page = out.read_text()
    assert page.count("data:image/png;base64,") == 1 and "reference.log" in page and "lr_offset.log" in page


@pytest.fixture(scope="module")
def norm_runs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("norms")
    return {"clean_a": _megatron_log(folder / "a.log", seed=0, steps=2, local_norms=True),
            "clean_b": _megatron_log(folder / "b.log", seed=0, steps=2, local_norms=True),
            "bf16_embedding": _megatron_log(folder / "bf16.log", seed=0, steps=2, local_norms=True,
                                            embedding_grad_dtype=torch.bfloat16)}


def test_localnorm_names_the_bf16_embedding_first(norm_runs, capsys):
    # Same weights and data on the CPU are bit-identical except for the plant, so the outlier floor can sit
    # near fp32 precision (the default 1e-4 is for cross-framework pairs); the ranking needs no threshold.
    code, document = _json(capsys, ["localnorm", str(norm_runs["clean_a"]), str(norm_runs["bf16_embedding"]),
                                    "--step", "1", "--floor", "1e-6"])
    rows = [row for row in document["tables"]["parameters"] if row.get("relative_difference") is not None]
    top = max(rows, key=lambda row: row["relative_difference"])
    assert "embedding" in top["reference_names"] and top["status"] == "outlier", top
    assert [row for row in rows if row["status"] == "outlier"] == [top]
    assert code == 1


def test_localnorm_clean_pair_has_no_outlier(norm_runs, capsys):
    code, document = _json(capsys, ["localnorm", str(norm_runs["clean_a"]), str(norm_runs["clean_b"])])
    assert code == 0 and {row["status"] for row in document["tables"]["parameters"]} <= {"pass"}


def test_localnorm_html_renders_bars_and_heatmap(norm_runs, tmp_path):
    out = tmp_path / "norms.html"
    main(["localnorm", str(norm_runs["clean_a"]), str(norm_runs["bf16_embedding"]), "--out", str(out)])
    assert out.read_text().count("data:image/png;base64,") >= 2


def test_loss_bad_input_is_one_line(tmp_path, capsys):
    bogus = tmp_path / "not_a_log.txt"
    bogus.write_bytes(b"\x00\x01 nothing here\n")
    assert main(["loss", str(bogus), str(bogus)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and str(bogus) in err


def test_both_commands_html_render_in_chromium(runs, norm_runs, tmp_path, capsys):
    from browser import render

    pages = {"loss": ["loss", str(runs["reference"]), str(runs["lr_offset"]), "--baseline", str(runs["rerun_1"]),
                      "--metric", "lm_loss"],
             "localnorm": ["localnorm", str(norm_runs["clean_a"]), str(norm_runs["bf16_embedding"]),
                           "--floor", "1e-6"]}
    for name, argv in pages.items():
        page = tmp_path / f"{name}.html"
        assert main(argv + ["--out", str(page)]) == 1
        shown = render(page, tmp_path / f"browser_{name}")
        assert shown.images and set(shown.images) == {"ok"}, (name, shown.images)   # every figure decodes
        assert shown.console == [] and 'id="verdict"' in shown.dom and "FAIL" in shown.dom
