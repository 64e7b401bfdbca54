"""Read the ``args`` Namespace of a Megatron checkpoint without torch and without running it.

A ``torch.save`` file (torch >= 1.6) is a zip archive: ``<name>/data.pkl`` holds the object
tree, ``<name>/data/<key>`` hold the raw tensor bytes. Only ``data.pkl`` is read, through
:class:`_Unpickler`, so ``args`` comes back in milliseconds however large the weights are,
with no torch, numpy or megatron installed.

Why this is as safe as ``torch.load(weights_only=True)`` with an allow-list:

* The pickle VM can only call something it first obtained as a *global*; every global
  (``GLOBAL``, ``STACK_GLOBAL``, ``INST``/``OBJ``, the ``EXT*`` registry) is resolved by
  ``find_class`` of :class:`workbench.safe_pickle.SafeUnpickler` (the project's one allow-list
  mechanism: no dotted names, ``BUILD`` never on an allowed global). Ours never imports
  anything: it looks the (module, name) pair up in an explicit table of small builders
  defined here, and refuses everything else (``os.system``, ``builtins.eval``,
  ``subprocess.*``, any unknown class) with an :class:`InputError` before anything runs.
  ``REDUCE``/``NEWOBJ``/``BUILD`` can therefore only call those builders or set state on the
  inert placeholder objects they return.
* ``data.pkl`` is decompressed only up to :data:`ARGS_PICKLE_LIMIT` (its declared size is
  checked first), so a zip bomb is refused before it takes memory.
* ``persistent_load`` (how torch refers to tensor storages) returns a placeholder and never
  reads storage bytes; tensors become :class:`TensorStub` (shape, dtype) only.
* This is the same design as torch's ``_weights_only_unpickler`` (an allow-list over the
  pickle opcodes); the difference is that our allow-list maps torch/numpy/megatron names to
  local stand-ins instead of the real functions, so even allowed names execute no torch code.
  Megatron enums (``megatron.*``/``mindspeed*`` classes) become the string ``"Name(value)"``.
* The stand-in classes are sealed (no attribute can be set on them through ``BUILD``), and
  every object a pickle can reach is plain data or one of these stand-ins.
"""
from __future__ import annotations

import collections
import pickle
import re
import struct
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

from workbench import safe_pickle
from workbench.errors import InputError, location
from workbench.input_files import input_stat
from workbench.safe_pickle import SafeUnpickler, zip_member
from workbench.tensors.megatron_files import TRACKER_FILE, read_tracker

ARGS_PICKLE_LIMIT = 256 << 20
"""Most bytes of ``data.pkl`` decompressed (declared size checked first, then read bounded)."""

_TORCH_DTYPES = {
    "float32", "float", "float64", "double", "float16", "half", "bfloat16", "complex64", "cfloat",
    "complex128", "cdouble", "uint8", "int8", "int16", "short", "int32", "int", "int64", "long",
    "bool", "uint16", "uint32", "uint64", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz",
    "float8_e5m2fnuz", "strided", "sparse_coo", "sparse_csr", "contiguous_format", "channels_last",
    "preserve_format"}
_STORAGE_DTYPES = {
    "FloatStorage": "float32", "DoubleStorage": "float64", "HalfStorage": "float16",
    "BFloat16Storage": "bfloat16", "LongStorage": "int64", "IntStorage": "int32",
    "ShortStorage": "int16", "CharStorage": "int8", "ByteStorage": "uint8", "BoolStorage": "bool",
    "ComplexFloatStorage": "complex64", "ComplexDoubleStorage": "complex128",
    "UntypedStorage": "uint8", "TypedStorage": "uint8"}
_NUMPY_SCALARS = {"f8": "d", "f4": "f", "f2": "e", "i8": "q", "i4": "i", "i2": "h", "i1": "b",
                  "u8": "Q", "u4": "I", "u2": "H", "u1": "B", "b1": "?"}
_ENUM_MODULES = re.compile(r"(megatron|mindspeed\w*)(\.|\Z)")


@dataclass(frozen=True)
class TensorStub:
    """A tensor seen in the pickle; its data was never read."""

    shape: tuple[int, ...]
    dtype: str                     # e.g. "torch.bfloat16"


class _Sealed(type):
    """Metaclass of the stand-ins: a pickle ``BUILD`` cannot set attributes on the classes."""

    def __setattr__(cls, name: str, value: object) -> None:
        raise pickle.UnpicklingError(f"refusing to modify {cls.__name__}.{name}")


class _Storage:
    """What ``persistent_load`` hands back for a storage record: its dtype, no bytes."""

    def __init__(self, dtype: str):
        self.dtype = dtype


class _StorageType(metaclass=_Sealed):
    def __init__(self, name: str):
        self.dtype = "torch." + _STORAGE_DTYPES[name]


class _Namespace(metaclass=_Sealed):
    """Stand-in for argparse.Namespace / types.SimpleNamespace: keeps the attribute dict."""

    def __new__(cls, *args: object, **kwargs: object) -> _Namespace:
        obj = super().__new__(cls)
        obj.state = {}              # NEWOBJ calls __new__ only, then BUILD -> __setstate__
        return obj

    def __init__(self, **kwargs: object):
        self.state.update(kwargs)

    def __setstate__(self, state: object) -> None:
        self.state.update(state if isinstance(state, dict) else {})


class _Inert(metaclass=_Sealed):
    """Stand-in for a class that is only passed around (torch.Tensor, numpy.ndarray)."""

    def __setstate__(self, state: object) -> None:
        pass


class _NumpyArray(_Inert):
    """numpy array placeholder (e.g. the numpy RNG state): shape and dtype only."""

    shape: tuple = ()

    def __setstate__(self, state: object) -> None:
        if isinstance(state, tuple) and len(state) == 5:
            self.shape, self.dtype = tuple(state[1]), state[2]


class _NumpyDType(metaclass=_Sealed):
    def __init__(self, spec: str = "", align: bool = False, copy: bool = False):
        self.spec, self.order = str(spec), "<"

    def __setstate__(self, state: object) -> None:
        if isinstance(state, tuple) and len(state) > 1 and state[1] in "<>|=":
            self.order = "<" if state[1] in "|=" else state[1]


class _EnumValue(metaclass=_Sealed):
    """A class from megatron.* / mindspeed*: only ``Name(value)`` calls (Enum pickles) pass."""

    def __init__(self, qualname: str):
        self.name = qualname.rsplit(".", 1)[-1]

    def __call__(self, value: object = None) -> str:
        return f"{self.name}({value!r})"


def _tensor(storage: object, offset: object, size: object, *rest: object) -> TensorStub:
    return TensorStub(tuple(size), getattr(storage, "dtype", "unknown"))


def _tensor_v3(storage, offset, size, stride, grad, hooks, dtype, *rest) -> TensorStub:
    return TensorStub(tuple(size), dtype if isinstance(dtype, str) else "unknown")


def _meta_tensor(dtype: object, size: object, *rest: object) -> TensorStub:
    return TensorStub(tuple(size), dtype if isinstance(dtype, str) else "unknown")


def _from_type(func: object, new_type: object, args: object, state: object = None) -> object:
    return func(*args) if callable(func) and isinstance(args, tuple) else None


def _encode(text: str, encoding: str = "utf-8") -> bytes:
    if encoding not in ("latin1", "latin-1", "utf-8", "utf8"):
        raise pickle.UnpicklingError(f"_codecs.encode with encoding {encoding!r}")
    return text.encode(encoding)


def _numpy_scalar(dtype: object, data: object = None) -> object:
    code = _NUMPY_SCALARS.get(getattr(dtype, "spec", ""))
    if code and isinstance(data, bytes) and len(data) == struct.calcsize(code):
        return struct.unpack(dtype.order + code, data)[0]
    return f"numpy.{getattr(dtype, 'spec', '?')} scalar"


def _reconstruct(cls: object, shape: object, dtype: object) -> _NumpyArray:
    return _NumpyArray()


_ALLOWED = {
    ("argparse", "Namespace"): _Namespace, ("types", "SimpleNamespace"): _Namespace,
    ("collections", "OrderedDict"): collections.OrderedDict,
    ("builtins", "set"): set, ("builtins", "frozenset"): frozenset, ("builtins", "complex"): complex,
    ("_codecs", "encode"): _encode,
    ("torch", "Size"): lambda items=(): tuple(items),
    ("torch", "device"): lambda kind="cpu", index=None: kind if index is None else f"{kind}:{index}",
    ("torch", "Tensor"): _Inert, ("torch.nn.parameter", "Parameter"): _Inert,
    ("torch.serialization", "_get_layout"): lambda name: str(name),
    ("torch._utils", "_rebuild_tensor"): _tensor, ("torch._utils", "_rebuild_tensor_v2"): _tensor,
    ("torch._utils", "_rebuild_tensor_v3"): _tensor_v3,
    ("torch._utils", "_rebuild_parameter"): lambda data, *rest: data,
    ("torch._utils", "_rebuild_parameter_with_state"): lambda data, *rest: data,
    ("torch._utils", "_rebuild_meta_tensor_no_storage"): _meta_tensor,
    ("torch._tensor", "_rebuild_from_type_v2"): _from_type,
    ("torch._utils", "_rebuild_from_type_v2"): _from_type,
    ("numpy", "ndarray"): _NumpyArray, ("numpy", "dtype"): _NumpyDType,
}
for _module in ("numpy.core.multiarray", "numpy._core.multiarray"):
    _ALLOWED[(_module, "_reconstruct")] = _reconstruct
    _ALLOWED[(_module, "scalar")] = _numpy_scalar


class _Unpickler(SafeUnpickler):
    """Resolves globals to the local stand-ins of :data:`_ALLOWED` only; see the module docstring."""

    def __init__(self, file, where: str):
        super().__init__(file, where, stand_ins=_ALLOWED)

    def resolve_family(self, module: str, name: str) -> object | None:
        if module == "torch" and name in _TORCH_DTYPES:
            return f"torch.{name}"
        if module in ("torch", "torch.storage") and name in _STORAGE_DTYPES:
            return _StorageType(name)
        if _ENUM_MODULES.match(module):
            return _EnumValue(name)
        return None

    def persistent_load(self, pid: object) -> _Storage:
        if isinstance(pid, tuple) and pid and pid[0] == "storage" and len(pid) >= 2:
            return _Storage(getattr(pid[1], "dtype", "unknown"))
        raise InputError(self.where, f"unexpected persistent id {str(pid)[:80]}",
                         "this is not a torch.save checkpoint")


def find_checkpoint_file(path: Path | str) -> Path:
    """The file holding ``args``: model_optim_rng.pt itself, inside an ``iter_*`` dir, or the
    iteration named by ``latest_checkpointed_iteration.txt`` in a checkpoint root."""
    path = Path(path)
    if not path.is_dir():
        input_stat(path, regular=True)     # missing, looping symlink, FIFO: each named
        return path
    if (path / "model_optim_rng.pt").is_file():
        return path / "model_optim_rng.pt"
    tracked = read_tracker(path)
    if tracked is not None:
        if not (path / tracked.folder).is_dir():
            raise InputError(location(path / TRACKER_FILE, 1), f"names {tracked.folder}, which does not exist",
                             "pass an existing iter_XXXXXXX directory")
        return _in_iteration(path / tracked.folder)
    iterations = sorted(p for p in path.glob("iter_*") if p.is_dir())
    return _in_iteration(iterations[-1] if iterations else path)


def _in_iteration(folder: Path) -> Path:
    ranks = sorted(p / "model_optim_rng.pt" for p in folder.glob("mp_rank_*"))
    for candidate in ranks + [folder / "common.pt"]:
        if candidate.is_file():
            return candidate
    raise InputError(location(folder), "no checkpoint file found (expected mp_rank_00[_000]/"
                     "model_optim_rng.pt, or common.pt of a torch_dist checkpoint)",
                     "pass model_optim_rng.pt, an iter_XXXXXXX directory, or a checkpoint root "
                     "with latest_checkpointed_iteration.txt")


def _data_pkl(archive: zipfile.ZipFile) -> str:
    names = [n for n in archive.namelist() if n == "data.pkl" or (n.endswith("/data.pkl") and n.count("/") == 1)]
    if not names:
        raise KeyError("data.pkl")
    return names[0]


def read_checkpoint_args(path: Path | str) -> dict[str, object]:
    """``vars(args)`` of a Megatron checkpoint, read safely (see the module docstring)."""
    file = find_checkpoint_file(path)
    where = location(file)
    if not zipfile.is_zipfile(file):
        with open(file, "rb") as handle:
            legacy = handle.read(1) == b"\x80"
        problem = ("legacy torch<1.6 serialization (not a zip archive): its args cannot be read "
                   "without unpickling everything" if legacy else "not a torch.save checkpoint (not a zip archive)")
        raise InputError(where, problem, "pass the training log or launch script instead, or re-save the "
                         "checkpoint with torch>=1.6 on a machine where you trust it")
    try:
        with zipfile.ZipFile(file) as archive:
            data = zip_member(archive, _data_pkl(archive), where, ARGS_PICKLE_LIMIT)
    except KeyError:
        raise InputError(where, "zip archive without data.pkl: not a torch.save file",
                         "pass the model_optim_rng.pt written by Megatron") from None
    except (zipfile.BadZipFile, zlib.error, OSError, EOFError, ValueError, NotImplementedError) as error:
        raise InputError(where, f"damaged zip archive ({type(error).__name__}: {error})",
                         "pass the training log or launch script instead") from None
    state = safe_pickle.unpickle_allowed(data, _Unpickler, where, "pass the training log or launch script instead")
    args = state.get("args") if isinstance(state, dict) else None
    if isinstance(args, _Namespace):
        args = args.state
    if not isinstance(args, dict):
        keys = ", ".join(map(str, list(state)[:8])) if isinstance(state, dict) else type(state).__name__
        raise InputError(where, f"no 'args' in the checkpoint (found: {keys})",
                         "pass the training log or the launch script instead")
    return {k: (v.state if isinstance(v, _Namespace) else v) for k, v in args.items()}
