"""Compile the optional native scanners (``workbench/native/*.c``) into ``_<name>.so`` beside them.

Standard library only: the wheel's build hook (``hatch_build.py``) loads this file by path inside
pip's isolated build environment, where ``workbench`` itself is not importable. Each library is a
plain C shared object loaded with ``ctypes`` (no Python headers needed); it exports
``workbench_source_hash()``, the SHA-256 of the source it was built from, so that a library older
than its source is never loaded (``workbench.native.library`` checks it). A missing compiler or a
failed build is not an error: every caller has an exact pure-Python path.

    python workbench/native/build.py          # rebuild every library in place
"""
from __future__ import annotations

import hashlib
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
FLAGS = ("-O2", "-std=c99", "-fPIC", "-shared", "-Wall", "-Wextra", "-Werror")


LOCAL_INCLUDE = re.compile(rb'^[ \t]*#[ \t]*include[ \t]*"([A-Za-z0-9_.-]+)"', re.MULTILINE)


def source_hash(source: Path) -> str:
    """SHA-256 of the source and of the headers beside it that it includes (``#include "x.h"``)."""
    text = source.read_bytes()
    digest = hashlib.sha256(text)
    for name in LOCAL_INCLUDE.findall(text):
        digest.update(source.with_name(name.decode()).read_bytes())
    return digest.hexdigest()


def library_path(source: Path) -> Path:
    return source.with_name(f"_{source.stem}.so")


def compile_library(source: Path, target: Path | None = None) -> Path:
    """Build one library; raises ``RuntimeError`` with the compiler's message when it fails."""
    target = target or library_path(source)
    compiler = shlex.split(os.environ.get("CC", "cc"))
    partial = target.with_name(f".{target.name}.{os.getpid()}.part")
    try:
        stamp = source_hash(source)
    except OSError as error:
        raise RuntimeError(f"{source.name}: {error.strerror}: {error.filename}") from None
    command = [*compiler, *FLAGS, f'-DWORKBENCH_SOURCE_HASH="{stamp}"', "-o", str(partial), str(source)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, check=False)
    except OSError as error:
        raise RuntimeError(f"{compiler[0]}: {error.strerror}") from None
    if done.returncode != 0:
        partial.unlink(missing_ok=True)
        raise RuntimeError(done.stderr.strip() or f"{compiler[0]} exited {done.returncode}")
    os.replace(partial, target)
    return target


def build_all(directory: Path = HERE) -> tuple[list[Path], list[str]]:
    """Every ``*.c`` in ``directory``: the libraries built and one line per library that was not."""
    built, failed = [], []
    for source in sorted(directory.glob("*.c")):
        try:
            built.append(compile_library(source))
        except RuntimeError as error:
            failed.append(f"{source.name}: not built, the pure-Python path will be used ({error})")
    return built, failed


if __name__ == "__main__":
    made, problems = build_all()
    for path in made:
        print(f"built {path}")
    for line in problems:
        print(line, file=sys.stderr)
