"""Logits of two inference runs, token by token: KL divergence, cosine, top-k agreement, the first token
that fails (Result kind ``logits``, with a figure of the per-token KL).

A dump is one ``.npy`` of ``[tokens, vocab]`` (a leading batch dimension of 1 is dropped) or a folder of
``.npy`` files, one ``[vocab]`` (or ``[1, vocab]``) per token, taken in natural name order
(``token_2`` before ``token_10``). Arrays are memory-mapped after their headers are checked against the
file sizes; one token's row is in memory at a time.
"""
from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from ..errors import InputError
from ..replay.npy_files import npy_layout
from ..report.result import Figure, Result

TOKEN_COLUMNS = ("token", "kl", "cosine", "topk_agreement", "top1_reference", "top1_candidate", "max_abs_diff",
                 "status")
FIX = "pass a [tokens, vocab] .npy, or a folder of one [vocab] .npy per token"


@dataclass(frozen=True)
class LogitsThresholds:
    kl_max: float = 1e-3              # KL(reference || candidate) of the softmax, nats
    cosine_min: float = 0.999         # cosine of the raw logits
    top_k: int = 5
    topk_min: float = 0.8             # shared fraction of the two top-k sets


class LogitsDump:
    """Per-token logits rows of a file or folder, read lazily."""

    def __init__(self, path: Path | str):
        self.path = Path(path)
        if self.path.is_dir():
            self.files = sorted((p for p in self.path.iterdir() if p.suffix == ".npy"), key=_natural)
            if not self.files:
                raise InputError(str(self.path), "holds no .npy file", FIX)
            self.vocab = _vocab_of(self.files[0])
            self.tokens = len(self.files)
        else:
            shape, dtype, offset = _layout(self.path)
            if len(shape) == 3 and shape[0] == 1:
                shape = shape[1:]
            if len(shape) != 2 or 0 in shape:
                raise InputError(str(self.path), f"has shape {list(shape)}, expected [tokens, vocab]", FIX)
            self.tokens, self.vocab = shape
            self.array = np.memmap(self.path, dtype=dtype, mode="r", offset=offset, shape=shape)

    def row(self, index: int) -> np.ndarray:
        if self.path.is_dir():
            path = self.files[index]
            vocab = _vocab_of(path)
            if vocab != self.vocab:
                raise InputError(str(path), f"holds {vocab} logits, the first token's file {self.vocab}",
                                 "every token's file needs the same vocabulary size")
            _, dtype, offset = _layout(path)
            return np.asarray(np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=(vocab,)), dtype=np.float64)
        return np.asarray(self.array[index], dtype=np.float64)


def _natural(path: Path):
    return [int(piece) if piece.isdigit() else piece for piece in re.split(r"(\d+)", path.name)]


def _layout(path: Path):
    try:
        shape, dtype, offset = npy_layout(path, c_order=True)
    except InputError as error:
        raise InputError(error.where, error.problem, FIX) from None
    if dtype.kind not in "fiu":
        raise InputError(str(path), f"holds {dtype} values, expected floating-point logits", FIX)
    return shape, dtype, offset


def _vocab_of(path: Path) -> int:
    shape, _, _ = _layout(path)
    dims = [n for n in shape if n != 1] or [1]
    if len(dims) != 1:
        raise InputError(str(path), f"has shape {list(shape)}, expected one token's [vocab] logits", FIX)
    return dims[0]


def token_metrics(reference: np.ndarray, candidate: np.ndarray, top_k: int) -> dict:
    """KL(ref || cand) of the softmaxes, cosine of the logits, top-k overlap, top-1 of each."""
    log_p, log_q = _log_softmax(reference), _log_softmax(candidate)
    with np.errstate(invalid="ignore", over="ignore"):
        kl = float(np.sum(np.exp(log_p) * (log_p - log_q)))
        norms = float(np.linalg.norm(reference) * np.linalg.norm(candidate))
        cosine = float(np.dot(reference, candidate) / norms) if norms else (1.0 if not reference.any() and
                                                                             not candidate.any() else 0.0)
    k = min(top_k, reference.shape[0])
    top_ref = set(np.argpartition(-reference, k - 1)[:k].tolist())
    top_cand = set(np.argpartition(-candidate, k - 1)[:k].tolist())
    return {"kl": max(kl, 0.0) if math.isfinite(kl) else math.nan, "cosine": cosine,
            "topk_agreement": len(top_ref & top_cand) / k, "top1_reference": int(np.argmax(reference)),
            "top1_candidate": int(np.argmax(candidate)),
            "max_abs_diff": float(np.max(np.abs(reference - candidate)))}


def _log_softmax(values: np.ndarray) -> np.ndarray:
    shifted = values - np.max(values)
    return shifted - np.log(np.sum(np.exp(shifted)))


def _passes(row: dict, t: LogitsThresholds) -> bool:
    return bool(row["kl"] <= t.kl_max and row["cosine"] >= t.cosine_min and row["topk_agreement"] >= t.topk_min)


def compare_logits(reference: Path | str, candidate: Path | str,
                   thresholds: LogitsThresholds = LogitsThresholds()) -> Result:
    """Two per-token logits dumps → Result ``logits``: per-token table, first failing token, KL figure."""
    import pandas as pd

    ref, cand = LogitsDump(reference), LogitsDump(candidate)
    notes = []
    vocab = min(ref.vocab, cand.vocab)
    if ref.vocab != cand.vocab:
        notes.append(f"vocabulary sizes differ ({ref.vocab} vs {cand.vocab}): the first {vocab} logits are "
                     "compared (padded vocabulary rows are dropped)")
    tokens = min(ref.tokens, cand.tokens)
    if ref.tokens != cand.tokens:
        notes.append(f"token counts differ ({ref.tokens} vs {cand.tokens}): the first {tokens} are compared")
    rows = []
    for token in range(tokens):
        row = {"token": token, **token_metrics(ref.row(token)[:vocab], cand.row(token)[:vocab], thresholds.top_k)}
        row["status"] = "PASS" if _passes(row, thresholds) else "FAIL"
        rows.append(row)
    table = pd.DataFrame(rows, columns=list(TOKEN_COLUMNS))
    failed = table[table["status"] == "FAIL"]
    first = int(failed["token"].iloc[0]) if len(failed) else None
    summary = _summary(table, first, thresholds)
    return Result(kind="logits", title=f"logits: {ref.path.name} (reference) vs {cand.path.name}",
                  verdict="FAIL" if first is not None else "PASS", exit_code=int(first is not None),
                  summary=summary, tables={"tokens": table}, figures=[_figure(table, ref.path, cand.path, thresholds)],
                  sources={"reference": str(ref.path), "candidate": str(cand.path)},
                  facts={"thresholds": asdict(thresholds), "tokens": tokens, "vocab": vocab,
                         "first_failing_token": first}, notes=notes)


def _summary(table, first: int | None, t: LogitsThresholds) -> list[str]:
    if not len(table):
        return ["no token to compare"]
    worst = table.loc[table["kl"].fillna(math.inf).idxmax()]
    lines = [f"{len(table)} tokens; {int((table['status'] == 'FAIL').sum())} fail (KL > {t.kl_max:g}, cosine < "
             f"{t.cosine_min:g} or top-{t.top_k} agreement < {t.topk_min:g})",
             f"largest KL {worst['kl']:.3g} at token {int(worst['token'])}"]
    if first is not None:
        row = table.iloc[first]
        lines.insert(0, f"first failing token: {first} (KL {row['kl']:.3g}, cosine {row['cosine']:.6f}, top-{t.top_k} "
                        f"agreement {row['topk_agreement']:.2f}, top-1 {int(row['top1_reference'])} vs "
                        f"{int(row['top1_candidate'])})")
    else:
        lines.insert(0, "every token within the thresholds")
    return lines


def _figure(table, reference: Path, candidate: Path, t: LogitsThresholds) -> Figure:
    def draw():
        from ..report.figures import HIGHLIGHT, new_figure

        fig, (axis,) = new_figure()
        kl = table["kl"].to_numpy(dtype=float)
        failed = table["status"].to_numpy() == "FAIL"
        axis.plot(table["token"], np.maximum(kl, 1e-16), marker=".", label="KL(reference || candidate)")
        axis.scatter(table["token"][failed], np.maximum(kl[failed], 1e-16), color=HIGHLIGHT, zorder=3, label="fails")
        axis.axhline(t.kl_max, color="grey", linestyle="--", label=f"threshold {t.kl_max:g}")
        axis.set_yscale("log")
        axis.set_xlabel("token position")
        axis.set_ylabel("KL divergence (nats)")
        axis.set_title(f"per-token KL: {candidate.name} vs the reference {reference.name}")
        axis.legend()
        return fig

    return Figure("logits_kl", "per-token KL divergence of the candidate's softmax from the reference's", draw)
