"""``workbench data verify|show|diff`` as :class:`Result` objects for the shared output layer."""
from __future__ import annotations

from pathlib import Path

from ..report.result import Result


def verify_result(report, with_loss_mask: bool = False) -> Result:
    """A :class:`workbench.replay.verify.VerifyReport`: PASS unless an error was found."""
    summary = report.summary()
    masked = summary["fraction_masked"]
    lines = [f"{report.path}: layout {report.layout}, {summary['steps']} step(s) ({summary['step_range']}), "
             f"dp_world {report.dp_world}, {report.micro_batches_read} micro-batch(es) read",
             "fields: " + ", ".join(f"{k} {report.dtypes[k]} {report.shapes[k]}" for k in report.dtypes),
             f"ids: {list(report.id_range) if report.id_range else '-'}"
             + (f" (vocab {report.vocab_size})" if report.vocab_size else " (no --vocab-size: only negatives checked)")]
    if masked:
        lines.append(f"loss mask: fraction masked min {masked['min']:.4g}, mean {masked['mean']:.4g}, "
                     f"max {masked['max']:.4g} per step and rank")
    lines.append(f"{summary['errors']} error(s), {summary['warnings']} warning(s)")
    tables = {"problems": report.problems_frame()}
    if with_loss_mask:
        tables["loss mask"] = report.loss_mask_frame()
    return Result(kind="data_verify", title=f"data verify: {Path(report.path).name}",
                  verdict="PASS" if report.ok else "FAIL", exit_code=0 if report.ok else 1, summary=lines,
                  tables=tables, sources={"capture": str(report.path)}, facts=summary,
                  terminal_columns={"problems": ("severity", "check", "where", "position", "message")})


def show_result(frame, folder: Path | str, step: int, rank: int, micro_batch: int) -> Result:
    """One captured micro-batch, one row per position."""
    return Result(kind="data_show", title=f"{folder} step {step} rank {rank} micro-batch {micro_batch}",
                  verdict="OK", tables={"batch": frame}, sources={"capture": str(folder)},
                  facts={"step": step, "rank": rank, "micro_batch": micro_batch})


def diff_result(diff, a: Path | str, b: Path | str, limit: int = 0) -> Result:
    """A :class:`workbench.replay.diff_data.DataDiff`: the first difference, then the rows (``limit`` on a screen)."""
    summary = diff.summary()
    frame = diff.frame()
    first = diff.first
    if first is None:
        lines = [f"identical: {diff.steps_compared} step(s), {diff.comparisons} comparison(s) ({diff.mode})"]
    else:
        lines = ["first difference: step " + str(first.step)
                 + (f", rank {first.rank}" if first.rank is not None else "")
                 + (f", micro-batch {first.micro_batch}" if first.micro_batch is not None else "")
                 + (f", field {first.field}" if first.field else "")
                 + (f", position {list(first.position)}: A {first.a} vs B {first.b}" if first.position else "")
                 + f" ({first.status})"]
    lines.append(f"{diff.steps_compared} step(s) compared, {diff.steps_identical} identical; only in A: "
                 f"{summary['only_in_a'] or '-'}; only in B: {summary['only_in_b'] or '-'}")
    notes = []
    if limit and len(frame) > limit:
        notes.append(f"first {limit} of {len(frame)} rows shown; --limit 0 for all")
        frame = frame.head(limit)
    return Result(kind="data_diff", title=f"data diff: {a} vs {b} ({diff.mode})",
                  verdict="IDENTICAL" if diff.identical else "DIFFERENT", exit_code=0 if diff.identical else 1,
                  summary=lines, tables={"differences": frame}, sources={"A": str(a), "B": str(b)},
                  facts=summary, notes=notes)
