"""Where a conversion writes: never onto its own input, and nothing in place before it is verified.

``check_not_a_source`` refuses a destination that is — through symlinks, relative paths or hard
links (same device and inode) — one of the source's files, or a folder holding one.

:class:`Staging` is a hidden temporary folder beside the destination (``.NAME.*.part/``). The
writer produces the complete output inside it under its final name, ``--verify`` reads it
there, and only then :meth:`Staging.publish` renames it into place. An error, Ctrl-C or a
failed verification removes the folder: nothing that looks complete is left behind.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Iterable

from ..errors import InputError
from ..temporaries import forget, new_temporary


def _identities(files: Iterable[Path]) -> dict[tuple[int, int], Path]:
    """(device, inode) -> path of each regular file among ``files`` (symlinks followed)."""
    found: dict[tuple[int, int], Path] = {}
    for file in files:
        try:
            status = file.stat()
        except OSError:
            continue
        if not file.is_dir():
            found[(status.st_dev, status.st_ino)] = file
    return found


def _files_under(path: Path) -> list[Path]:
    if path.is_dir():
        return [Path(folder) / name for folder, _, names in os.walk(path) for name in names]
    return [path]


def source_paths(source_path: Path, source: object) -> list[Path]:
    """The path the user named plus every file the opened source reads (index shards, rank files)."""
    paths = [Path(source_path)]
    for item in getattr(source, "files", ()):
        item = getattr(item, "path", item)
        if isinstance(item, (str, os.PathLike)):
            paths.append(Path(item))
    return paths


def check_not_a_source(destination: Path, sources: Iterable[Path]) -> None:
    """InputError when writing ``destination`` would overwrite (or put output among) the source's files.

    Compared by (device, inode), so symlinks, relative paths and hard links are seen through: the
    destination file itself, or for a folder the files directly in it (the ones a writer replaces),
    and any source file lying anywhere inside a destination folder.
    """
    destination = Path(destination)
    if not destination.exists():
        return
    folder = destination.is_dir()
    written = _identities(list(destination.iterdir()) if folder else [destination])
    root = os.path.realpath(destination)
    for identity, file in _identities(file for path in sources for file in _files_under(Path(path))).items():
        inside = folder and os.path.commonpath([root, os.path.realpath(file)]) == root
        if identity in written or inside:
            what = "is" if not folder else "holds"
            raise InputError(str(destination), f"{what} the source file {file} (the same file on disk): converting "
                             "would overwrite or mix with the input", "choose a destination outside the source checkpoint")


class Staging:
    """A temporary folder beside ``destination``; ``path`` is where the writer puts the output.

    A device or FIFO destination (``/dev/null``, a pipe) is written directly: it has no folder to
    stage in and cannot be re-read (the CLI refuses ``--verify`` for it).
    """

    def __init__(self, destination: Path | str):
        from ..output_checks import output_kind

        self.destination = Path(destination)
        self.folder: Path | None = None
        self.path = self.destination
        if output_kind(self.destination) == "stream":
            return
        if not self.destination.parent.is_dir():
            raise InputError(str(self.destination), f"folder {self.destination.parent} does not exist", "create it first")
        self.folder, _ = new_temporary(self.destination, ".part", folder=True)
        self.path = self.folder / self.destination.name

    def publish(self, files: list[Path]) -> list[Path]:
        """Rename the staged output into place; ``files`` come back at their final paths.

        A file replaces the destination file; a folder replaces the destination whole (the old one
        is moved aside first and removed after, as the Hugging Face folder writer does).
        """
        if self.folder is None:
            return files
        from .hf_folder import swap_in

        final = [self.destination / file.relative_to(self.path) if file != self.path else self.destination
                 for file in files]
        try:
            if self.path.is_dir():
                swap_in(self.path, self.destination)
            else:
                os.replace(self.path, self.destination)
        except OSError as error:
            raise InputError(str(self.destination), f"cannot move the output into place ({error.strerror})",
                             "remove or rename what is there, or choose another destination") from None
        return final

    def discard(self) -> None:
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            forget(self.folder)

    def __enter__(self) -> "Staging":
        return self

    def __exit__(self, *exc) -> None:
        self.discard()
