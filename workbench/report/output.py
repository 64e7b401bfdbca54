"""Kept for callers written before :mod:`workbench.fileio`: the same functions, re-exported."""
from __future__ import annotations

from ..fileio import atomic_path, check_output, write_text

check_writable = check_output
write_text_atomic = write_text

__all__ = ["atomic_path", "check_writable", "write_text_atomic"]
