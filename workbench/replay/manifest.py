"""Reading a capture's JSON files (step-and-rank ``manifest.json``, the root marker): bounded in size
and nesting by :mod:`workbench.input_files`, every field type-checked before the store trusts it."""
from __future__ import annotations

from pathlib import Path

from ..errors import InputError
from ..input_files import expect, expect_count, input_stat, read_json
from ..tensors.sizes import check_shape
from .npy_files import CaptureError

MANIFEST_LIMIT = 64 * 1024 * 1024
"""The largest manifest or marker read (a manifest lists a few files per micro-batch)."""
_RECAPTURE = "the manifest is damaged: re-capture this step"


def capture_json(path: Path, what: str) -> dict:
    """A capture's JSON object (manifest, marker), bounded in size and nesting; errors are CaptureErrors."""
    try:
        input_stat(path, regular=True)       # a FIFO would block the reader
        return expect(read_json(path, limit=MANIFEST_LIMIT, what=what), dict, str(path), f"the {what}")
    except CaptureError:
        raise
    except InputError as error:
        raise CaptureError(error.where, error.problem, error.fix, check="manifest") from None


def check_manifest(data: dict, where: str) -> None:
    """Every field of a step-and-rank manifest has the type BatchCapture writes (else one InputError)."""
    expect_count(data.get("micro_batches"), where, "micro_batches", minimum=1, fix=_RECAPTURE)
    files = expect(data.get("files"), dict, where, "files", _RECAPTURE)
    for relative, entry in files.items():
        key = f"files.{relative}"
        expect(entry, dict, where, key, _RECAPTURE)
        expect_count(entry.get("micro_batch", 0), where, f"{key}.micro_batch", fix=_RECAPTURE)
        check_shape(entry.get("shape"), where, f"{key}.shape")
        expect(entry.get("dtype"), str, where, f"{key}.dtype", _RECAPTURE)
        expect(entry.get("sha256", ""), str, where, f"{key}.sha256", _RECAPTURE)
