"""TensorBoard event files (Megatron ``--tensorboard-dir``, MindFormers' monitor) to series.

Read through the ``tensorboard`` package (the optional ``tensorboard`` extra), scalars only.
Tag meanings per framework are in ``datasets/series_sources.yaml``; the framework is the one
whose tags the events hold more of. Tags nobody declared are kept under their own name.
"""
from __future__ import annotations

from pathlib import Path

from ..errors import InputError
from .schema import LOCAL_NORM_COLUMNS, SERIES_COLUMNS, LogSeries
from .sources import TagMeaning, load_sources
from .tables import frame


def event_files(path: Path) -> list[Path]:
    files = sorted(path.rglob("events.out.tfevents.*")) if path.is_dir() else [path]
    if not files:
        raise InputError(str(path), "no events.out.tfevents.* file", "pass the TensorBoard log folder of one run")
    return files


def _scalars(file: Path):
    """(tag, step, value) of every scalar in one event file (simple values and tensor scalars)."""
    try:
        from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
        from tensorboard.util import tensor_util
    except ImportError:
        raise InputError(str(file), "reading TensorBoard files needs the tensorboard package",
                         "pip install 'workbench[tensorboard]'") from None
    try:
        for event in EventFileLoader(str(file)).Load():
            for value in event.summary.value:
                if value.HasField("simple_value"):
                    yield value.tag, int(event.step), float(value.simple_value)
                elif value.HasField("tensor") and not value.tensor.tensor_shape.dim:
                    yield value.tag, int(event.step), float(tensor_util.make_ndarray(value.tensor))
    except Exception as error:  # the loader raises its own and protobuf errors on damaged files
        raise InputError(str(file), f"unreadable event file ({type(error).__name__}: {str(error)[:120]})",
                         "pass an events.out.tfevents.* file TensorBoard can open") from None


def framework_of(tags: set[str]) -> str:
    boards = load_sources().tensorboard
    def score(framework: str) -> int:
        return sum(1 for tag in tags if tag in boards[framework] or any(
            tag.startswith(prefix) for prefix in boards[framework] if prefix.endswith("/")))
    return max(boards, key=score)


def _meaning(tag: str, meanings: dict[str, TagMeaning]) -> tuple[TagMeaning | None, str]:
    if tag in meanings:
        return meanings[tag], ""
    for prefix, meaning in meanings.items():
        if prefix.endswith("/") and tag.startswith(prefix):
            return meaning, tag[len(prefix):]
    return None, ""


def read_tensorboard(path: Path | str, run: str | None = None, rank: int = -1) -> LogSeries:
    path = Path(path)
    scalars = [item for file in event_files(path) for item in _scalars(file)]
    framework = framework_of({tag for tag, _, _ in scalars})
    meanings = load_sources().tensorboard[framework]
    label = run or path.name
    series, norms, positions, unknown = [], [], {}, set()
    for tag, step, value in scalars:
        meaning, param = _meaning(tag, meanings)
        if meaning is None:
            unknown.add(tag)
            series.append((label, rank, step, tag, value, 0))
        elif meaning.definition:
            position = positions.setdefault((step, param), len([k for k in positions if k[0] == step]))
            norms.append((label, rank, step, -1, position, param, -1, value, meaning.definition, 0))
        else:
            series.append((label, rank, step + (1 if meaning.step == "next" else 0), meaning.metric, value, 0))
    notes = [f"TensorBoard tags read as {framework}'s"]
    if unknown:
        notes.append(f"tags kept under their own names: {', '.join(sorted(unknown))[:300]}")
    return LogSeries(str(path), f"tensorboard:{framework}", frame(series, SERIES_COLUMNS),
                     frame(norms, LOCAL_NORM_COLUMNS), {"framework": framework}, notes)
