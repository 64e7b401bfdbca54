"""``read_log``: the one entry point from a path to a :class:`LogSeries`.

    read_log("megatron_train.log")             # Megatron / MindSpeed-LLM text log
    read_log("output/log/rank_0/info.log")     # MindFormers text log (rank from rank_N/)
    read_log("tb/")                            # TensorBoard events (either framework)
    read_log("save/wgrads/")                   # Megatron --save-wgrads-interval folders
    read_log("monitor_output/...-rank0-x/")    # msprobe monitor CSVs
    read_log("loss.csv")                       # CSV / JSONL series

A text log's format is detected from its first ``SNIFF`` bytes (the message, not the prefix);
``format=`` forces one of ``FORMATS``.
"""
from __future__ import annotations

from pathlib import Path

from ..errors import InputError
from ..input_files import input_stat
from .schema import LogSeries

TEXT_FORMATS = ("megatron", "mindformers")
FORMATS = TEXT_FORMATS + ("megatron_patch", "tensorboard", "wgrads", "msprobe_monitor", "table")


def detect_text(sample: bytes) -> str | None:
    """``megatron`` / ``mindformers`` / ``megatron_patch`` from the start of a log, else ``None``."""
    from .formats import load_formats

    formats = load_formats()
    scores = {}
    for name in TEXT_FORMATS:
        marked = set()
        for marks in formats[name].detect:
            first, *rest = (mark.encode() for mark in marks)
            marked.update(_lines_with(sample, first, rest))
        scores[name] = len(marked)
    if name := max(scores, key=scores.get) if any(scores.values()) else None:
        return name
    if b"[tensor(" in sample:
        return "megatron_patch"
    return None


def _lines_with(sample: bytes, first: bytes, rest: list[bytes]):
    """The start offsets of the lines of ``sample`` holding ``first`` and every one of ``rest``
    (found from the occurrences of ``first``, not line by line)."""
    at = sample.find(first)
    while at >= 0:
        start = sample.rfind(b"\n", 0, at) + 1
        end = sample.find(b"\n", at)
        end = len(sample) if end < 0 else end
        if all(mark in sample[start:end] for mark in rest):
            yield start
        at = sample.find(first, end)


def _folder_format(path: Path) -> str:
    from .megatron_grads import WGRADS_ITERATION

    if WGRADS_ITERATION.match(path.name) or any(WGRADS_ITERATION.match(p.name) for p in path.iterdir() if p.is_dir()):
        return "wgrads"
    if next(path.rglob("events.out.tfevents.*"), None) is not None:
        return "tensorboard"
    if next(path.glob("*.csv"), None) is not None:
        return "msprobe_monitor"
    raise InputError(str(path), "a folder with no training log this tool reads (no iter_* wgrads folders, "
                     "TensorBoard events or msprobe monitor CSVs)", "pass the log file, or one of those folders")


def _file_format(path: Path) -> str:
    from .lines import head
    from .sources import MONITOR_FILE

    if path.name.startswith("events.out.tfevents."):
        return "tensorboard"
    if path.suffix.lower() in (".jsonl", ".ndjson"):
        return "table"
    if path.suffix.lower() == ".csv":
        return "msprobe_monitor" if MONITOR_FILE.match(path.name) else "table"
    found = detect_text(head(path))
    if found is None:
        raise InputError(str(path), "no Megatron iteration line ('iteration N/ T | ...') and no MindFormers step "
                         "line ('{ Epoch:[...], step:[...], loss: ...') in the first "
                         f"{_sniff_kib()} KiB", "pass the training log itself (stdout of rank 0 or "
                         "output/log/rank_0/info.log), or --format")
    return found


def _sniff_kib() -> int:
    from .lines import SNIFF

    return SNIFF >> 10


def read_log(path: Path | str, run: str | None = None, format: str | None = None) -> LogSeries:  # noqa: A002
    """The series and local norms of one log (file or folder), format detected unless given."""
    path = Path(path)
    if format is not None and format not in FORMATS:
        raise InputError("--format", f"unknown log format {format!r}", f"use one of {', '.join(FORMATS)}")
    try:
        input_stat(path, regular=True)                    # missing, looping link, pipe: one-line errors
    except InputError:
        if not path.is_dir():
            raise
        kind = format or _folder_format(path)
    else:
        kind = format or _file_format(path)
    return _READERS[kind](path, run)


def _megatron(path: Path, run: str | None) -> LogSeries:
    from .formats import load_formats
    from .megatron import read_megatron

    return read_megatron(path, load_formats()["megatron"], run)


def _mindformers(path: Path, run: str | None) -> LogSeries:
    from .formats import load_formats
    from .mindformers import read_mindformers

    return read_mindformers(path, load_formats()["mindformers"], run)


def _lazy(module: str, function: str):
    def read(path: Path, run: str | None) -> LogSeries:
        from importlib import import_module

        return getattr(import_module(f"workbench.logs.{module}"), function)(path, run)
    return read


_READERS = {
    "megatron": _megatron,
    "mindformers": _mindformers,
    "megatron_patch": _lazy("megatron_grads", "read_patch_lists"),
    "wgrads": _lazy("megatron_grads", "read_wgrads"),
    "tensorboard": _lazy("tensorboard_io", "read_tensorboard"),
    "msprobe_monitor": _lazy("sources", "read_msprobe_monitor"),
    "table": _lazy("sources", "read_table"),
}
