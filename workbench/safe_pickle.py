"""The one allow-list mechanism for every pickle the workbench reads (see docs/checkpoint-safety.md).

A pickle is a program: it can call anything it can name as a *global*. Every global
(``GLOBAL``, ``STACK_GLOBAL``, ``INST``, ``EXT*``) is resolved by ``find_class``; ours resolves a
``(module, name)`` pair only when it is listed explicitly, and refuses everything else with one
:class:`~workbench.errors.InputError` naming the global, before anything runs:

* ``name`` with a dot is refused: with protocol >= 4 Python's own ``find_class`` walks a dotted
  name attribute by attribute, so an allowed module plus ``"os.system"`` reaches ``os.system``;
* a listed pair resolves to a *class* (``isinstance(obj, type)``), unless it is listed among
  the callables (small functions a reader needs, e.g. torch's tensor rebuild helpers), or it
  maps to a local stand-in object (:attr:`SafeUnpickler.stand_ins`) that is never imported;
* ``BUILD`` (set state on the object below it) is refused on anything ``find_class`` handed
  out, so a pickle cannot set attributes on an allowed class (``setattr(SomeClass, ...)``).

The pure-Python unpickler is used because the C one cannot guard ``BUILD``; the payload is read
into memory first, bounded (:func:`read_limited`), so no length claim inside the pickle can make
the reader allocate more than the file holds.

``torch.load(weights_only=True)`` has its own allow-list (torch's weights-only unpickler);
:func:`torch_safe_globals` checks the extra entries we hand it the same way (classes only).
"""
from __future__ import annotations

import importlib
import io
import pickle
import zipfile
from typing import Any, BinaryIO, Iterable, Mapping

from .errors import InputError

PICKLE_LIMIT = 1 << 30
"""Most bytes of one pickle payload read into memory (a ``.metadata`` or a ``data.pkl``)."""

Pair = tuple[str, str]
_REFUSE_FIX = "nothing was executed; the file is damaged or crafted, or holds a type the workbench does not read"


class SafeUnpickler(pickle._Unpickler):
    """An unpickler that resolves only allow-listed globals (see the module docstring).

    ``classes``: pairs imported and returned, each must be a class; ``callables``: pairs imported
    and returned as they are (functions, dtype objects); ``stand_ins``: pairs mapped to local
    objects without importing anything. Subclasses may add :meth:`resolve_family` for families
    of names (e.g. every ``torch.<dtype>``).
    """

    dispatch = dict(pickle._Unpickler.dispatch)

    def __init__(self, file: BinaryIO, where: str, classes: Iterable[Pair] = (), callables: Iterable[Pair] = (),
                 stand_ins: Mapping[Pair, Any] | None = None):
        super().__init__(file)
        self.where = where
        self.classes, self.callables = frozenset(classes), frozenset(callables)
        self.stand_ins = dict(stand_ins or {})
        self._handed_out: set[int] = set()
        self._keep: list[Any] = []              # handed-out objects stay alive while ids are compared

    def refuse(self, what: str, why: str) -> InputError:
        return InputError(self.where, f"refusing to unpickle {what}: {why}", _REFUSE_FIX)

    def find_class(self, module: str, name: str) -> Any:
        if not isinstance(module, str) or not isinstance(name, str):
            raise self.refuse("a global", f"module and name must be strings, found {type(module).__name__}, "
                              f"{type(name).__name__}")
        module = "builtins" if module == "__builtin__" else module
        if "." in name or not name:
            raise self.refuse(f"global {module} {name!r}", "a dotted name is never resolved")
        found = self._resolve(module, name)
        self._handed_out.add(id(found))
        self._keep.append(found)
        return found

    def _resolve(self, module: str, name: str) -> Any:
        pair = (module, name)
        if pair in self.stand_ins:
            return self.stand_ins[pair]
        if pair in self.classes or pair in self.callables:
            try:
                found = getattr(importlib.import_module(module), name)
            except (ImportError, AttributeError) as error:
                raise self.refuse(f"global {module}.{name}", f"cannot be found here ({error})") from None
            if pair in self.classes and not isinstance(found, type):
                raise self.refuse(f"global {module}.{name}", f"allowed as a class, but it is a {type(found).__name__}")
            return found
        family = self.resolve_family(module, name)
        if family is not None:
            return family
        raise self.refuse(f"global {module}.{name}", "not on the allow-list")

    def resolve_family(self, module: str, name: str) -> Any | None:
        """An object for a family of allowed names, or None (refused). The base allows no family."""
        return None

    def _guarded_build(self) -> None:
        target = self.stack[-2] if len(self.stack) >= 2 else None
        if id(target) in self._handed_out or isinstance(target, type):
            raise self.refuse(f"BUILD on {getattr(target, '__name__', type(target).__name__)}",
                              "state can only be set on instances, never on an allowed class or function")
        pickle._Unpickler.load_build(self)

    dispatch[pickle.BUILD[0]] = _guarded_build


def read_limited(handle: BinaryIO, where: str, limit: int = PICKLE_LIMIT, declared: int | None = None) -> bytes:
    """At most ``limit`` bytes of ``handle``; more (or a ``declared`` size over the limit) is an InputError."""
    too_big = InputError(where, f"pickle larger than the {limit >> 20} MiB the workbench reads",
                         "this is not a checkpoint file the workbench can read safely (a damaged or crafted archive?)")
    if declared is not None and declared > limit:
        raise too_big
    data = handle.read(limit + 1)
    if len(data) > limit:
        raise too_big
    return data


def zip_member(archive: zipfile.ZipFile, name: str, where: str, limit: int = PICKLE_LIMIT) -> bytes:
    """One archive member, its declared size checked before reading and its actual size bounded."""
    info = archive.getinfo(name)
    with archive.open(info) as handle:
        return read_limited(handle, where, limit, declared=info.file_size)


def unpickle_allowed(data: bytes, unpickler: SafeUnpickler | type, where: str, fix: str, **kwargs: Any) -> Any:
    """Unpickle ``data`` with ``unpickler`` (a SafeUnpickler subclass); any failure is one InputError."""
    try:
        return unpickler(io.BytesIO(data), where, **kwargs).load()
    except InputError:
        raise
    except Exception as error:          # a malformed pickle raises anything; none of it is the user's bug
        text = str(error).strip().splitlines()[0][:200] if str(error).strip() else ""
        raise InputError(where, f"not a readable pickle ({type(error).__name__}{': ' + text if text else ''})",
                         fix) from None


def torch_safe_globals(entries: Iterable[Any]) -> list[Any]:
    """Extra globals for ``torch.load(weights_only=True)``: classes (or (class, "module.Name") pairs) only."""
    checked = []
    for entry in entries:
        cls = entry[0] if isinstance(entry, tuple) else entry
        if not isinstance(cls, type):
            raise TypeError(f"only classes may be allow-listed for torch.load, not {entry!r}")
        checked.append(entry)
    return checked
