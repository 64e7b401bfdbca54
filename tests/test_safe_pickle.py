"""The one allow-list unpickler (workbench/safe_pickle.py) against crafted pickles, built by hand
from pickle opcodes, through the real CLI and the real readers."""
from __future__ import annotations

import io
import pickle
import struct
import zipfile

import pytest

from workbench.cli.main import main
from workbench.config.megatron_checkpoint import read_checkpoint_args
from workbench.errors import InputError
from workbench.safe_pickle import SafeUnpickler, read_limited, unpickle_allowed

DCP_FILESYSTEM = "torch.distributed.checkpoint.filesystem"       # imports os: reachable as "os.system"


def text(value: str) -> bytes:
    raw = value.encode()
    return pickle.SHORT_BINUNICODE + bytes([len(raw)]) + raw


def stack_global_call(module: str, name: str, argument: str) -> bytes:
    """Protocol 4: STACK_GLOBAL (module, name), then call it with one string argument."""
    return (pickle.PROTO + b"\x04" + text(module) + text(name) + pickle.STACK_GLOBAL + text(argument)
            + pickle.TUPLE1 + pickle.REDUCE + pickle.STOP)


def global_call(module: str, name: str, argument: str) -> bytes:
    """Protocol 2: GLOBAL 'module\\nname\\n', then call it with one string argument."""
    return (pickle.PROTO + b"\x02" + pickle.GLOBAL + f"{module}\n{name}\n".encode() + text(argument)
            + pickle.TUPLE1 + pickle.REDUCE + pickle.STOP)


def torch_dist_folder(tmp_path, metadata: bytes):
    folder = tmp_path / "iter_0000005"
    folder.mkdir()
    (folder / ".metadata").write_bytes(metadata)
    (folder / "metadata.json").write_text('{"sharded_backend": "torch_dist"}')
    return folder


def assert_refused(capsys, code: int, *needles: str) -> str:
    err = capsys.readouterr().err
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    for needle in needles:
        assert needle in err, err
    return err


@pytest.mark.parametrize("build", [stack_global_call, global_call], ids=["protocol4-STACK_GLOBAL", "GLOBAL"])
def test_dotted_name_in_an_allowed_module_runs_nothing_through_convert(tmp_path, capsys, monkeypatch, build):
    pytest.importorskip("torch")
    monkeypatch.chdir(tmp_path)
    marker = tmp_path / "MARKER"
    folder = torch_dist_folder(tmp_path, build(DCP_FILESYSTEM, "os.system", f"touch {marker}"))
    out = tmp_path / "out"
    code = main(["convert", str(folder), str(out), "--to", "hf"])
    assert_refused(capsys, code, f"{folder / '.metadata'}: refusing to unpickle global {DCP_FILESYSTEM} 'os.system'",
                   "dotted name")
    assert not marker.exists()
    assert not out.exists()


def test_save_root_tracker_and_weights_diff_refuse_the_same_payload(tmp_path, capsys, monkeypatch):
    pytest.importorskip("torch")
    monkeypatch.chdir(tmp_path)
    marker = tmp_path / "MARKER"
    torch_dist_folder(tmp_path, stack_global_call(DCP_FILESYSTEM, "os.system", f"touch {marker}"))
    (tmp_path / "latest_checkpointed_iteration.txt").write_text("5\n")
    code = main(["weights", "diff", str(tmp_path), str(tmp_path)])
    assert_refused(capsys, code, "iter_0000005/.metadata: refusing to unpickle global", "os.system")
    assert not marker.exists()


@pytest.mark.parametrize("build", [stack_global_call, global_call], ids=["protocol4-STACK_GLOBAL", "GLOBAL"])
@pytest.mark.parametrize("module, name", [("os", "system"), ("posix", "system"), ("builtins", "eval"),
                                          ("__builtin__", "exec"), ("os", "path.join")])
def test_a_crafted_os_system_payload_runs_nothing_without_torch(tmp_path, build, module, name):
    """The base unpickler itself, with an allow-list that names other pairs: ``os.system`` (and its siblings) is
    refused by name, in both opcode forms, and the command it carries never runs."""
    marker = tmp_path / "MARKER"
    payload = build(module, name, f"touch {marker}")
    with pytest.raises(InputError, match="refusing to unpickle global") as caught:
        unpickle_allowed(payload, SafeUnpickler, "crafted.pkl", "fix", classes={("collections", "OrderedDict")},
                         callables={("os.path", "join")})
    assert "crafted.pkl" in str(caught.value)
    assert not marker.exists()


def test_a_module_off_the_list_is_refused_by_name(tmp_path, capsys):
    pytest.importorskip("torch")
    folder = torch_dist_folder(tmp_path, global_call("subprocess", "getoutput", "true"))
    code = main(["convert", str(folder), str(tmp_path / "out"), "--to", "hf"])
    assert_refused(capsys, code, "refusing to unpickle global subprocess.getoutput: not on the allow-list")


def test_reader_classes_of_an_allowed_module_are_not_allowed(tmp_path, capsys):
    """Every name of torch.distributed.checkpoint.filesystem used to pass: FileSystemWriter(path) makes folders."""
    pytest.importorskip("torch")
    folder = torch_dist_folder(tmp_path, stack_global_call(DCP_FILESYSTEM, "FileSystemWriter", str(tmp_path / "made")))
    code = main(["convert", str(folder), str(tmp_path / "out"), "--to", "hf"])
    assert_refused(capsys, code, f"refusing to unpickle global {DCP_FILESYSTEM}.FileSystemWriter")
    assert not (tmp_path / "made").exists()


def test_a_listed_class_must_be_a_class():
    with pytest.raises(InputError, match=r"x\.pkl: refusing to unpickle global os\.system: allowed as a class, "
                                         r"but it is a builtin_function_or_method"):
        unpickle_allowed(global_call("os", "system", "true"), SafeUnpickler, "x.pkl", "fix", classes={("os", "system")})


def test_a_listed_callable_is_returned_and_a_stand_in_is_never_imported():
    value = unpickle_allowed(global_call("builtins", "len", "abc"), SafeUnpickler, "x.pkl", "fix", callables={("builtins", "len")})
    assert value == 3
    value = unpickle_allowed(global_call("os", "system", "true"), SafeUnpickler, "x.pkl", "fix",
                 stand_ins={("os", "system"): lambda command: f"stand-in got {command}"})
    assert value == "stand-in got true"


class Target:
    """An allowed class a crafted BUILD would modify."""


def test_build_cannot_set_attributes_on_an_allowed_class():
    # GLOBAL Target; BUILD with (None, {"attribute": "set"}) -> setattr(Target, "attribute", "set")
    payload = (pickle.PROTO + b"\x02" + pickle.GLOBAL + f"{__name__}\nTarget\n".encode() + pickle.NONE
               + pickle.EMPTY_DICT + text("attribute") + text("set") + pickle.SETITEM + pickle.TUPLE2
               + pickle.BUILD + pickle.STOP)
    with pytest.raises(InputError, match=r"refusing to unpickle BUILD on Target: state can only be set on instances"):
        unpickle_allowed(payload, SafeUnpickler, "x.pkl", "fix", classes={(__name__, "Target")})
    assert not hasattr(Target, "attribute")
    # the same state on an instance is fine
    instance = pickle.PROTO + b"\x02" + pickle.GLOBAL + f"{__name__}\nTarget\n".encode() + pickle.EMPTY_TUPLE \
        + pickle.NEWOBJ + pickle.EMPTY_DICT + text("attribute") + text("set") + pickle.SETITEM + pickle.BUILD \
        + pickle.STOP
    assert unpickle_allowed(instance, SafeUnpickler, "x.pkl", "fix", classes={(__name__, "Target")}).attribute == "set"


def test_malformed_pickles_are_one_error_naming_the_file():
    for payload in (b"", b"\x80\x04\xff", pickle.PROTO + b"\x04" + pickle.BINBYTES8 + struct.pack("<Q", 1 << 40)):
        with pytest.raises(InputError, match=r"^x\.pkl: not a readable pickle \(.*\) \(fix\)$"):
            unpickle_allowed(payload, SafeUnpickler, "x.pkl", "fix")


def test_read_limited_refuses_more_than_the_limit():
    assert read_limited(io.BytesIO(b"12345"), "x", limit=5) == b"12345"
    with pytest.raises(InputError, match=r"^x: pickle larger than"):
        read_limited(io.BytesIO(b"123456"), "x", limit=5)
    with pytest.raises(InputError, match=r"^x: pickle larger than"):
        read_limited(io.BytesIO(b""), "x", limit=5, declared=6)


def checkpoint_zip(path, data_pkl: bytes, declared_size: int | None = None) -> None:
    """A torch.save-shaped zip (``archive/data.pkl``); ``declared_size`` overwrites the sizes the headers claim."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("archive/data.pkl", data_pkl)
    if declared_size is not None:
        raw = bytearray(path.read_bytes())
        local, central = raw.find(b"PK\x03\x04"), raw.find(b"PK\x01\x02")
        struct.pack_into("<I", raw, local + 22, declared_size)
        struct.pack_into("<I", raw, central + 24, declared_size)
        path.write_bytes(bytes(raw))


def test_args_reader_refuses_a_dotted_name(tmp_path):
    marker = tmp_path / "MARKER"
    checkpoint_zip(tmp_path / "model_optim_rng.pt", stack_global_call("argparse", "_os.system", f"touch {marker}"))
    with pytest.raises(InputError, match=r"model_optim_rng\.pt: refusing to unpickle global argparse '_os\.system'"):
        read_checkpoint_args(tmp_path / "model_optim_rng.pt")
    assert not marker.exists()


def test_args_reader_zip_bomb_is_refused_before_decompressing(tmp_path):
    """data.pkl claims 2 GiB (the issue's 9 MB bomb): refused from the declared size, nothing inflated."""
    path = tmp_path / "model_optim_rng.pt"
    checkpoint_zip(path, pickle.dumps({"args": None}), declared_size=(2 << 30) - 1)
    with pytest.raises(InputError, match=r"model_optim_rng\.pt: pickle larger than the 256 MiB the workbench reads"):
        read_checkpoint_args(path)


def test_args_reader_size_lie_is_a_clean_error(tmp_path):
    """Sizes claiming less than the entry holds: the read stays bounded by the claim and the zip check fails."""
    path = tmp_path / "model_optim_rng.pt"
    checkpoint_zip(path, pickle.dumps({"args": {"x": "y" * 10_000}}), declared_size=10)
    with pytest.raises(InputError, match=r"model_optim_rng\.pt: (damaged zip archive|not a readable pickle)"):
        read_checkpoint_args(path)


def test_weights_only_refusal_names_the_global_not_the_workaround(tmp_path, capsys):
    torch = pytest.importorskip("torch")

    class Evil:
        def __reduce__(self):
            import os

            return os.system, (f"touch {tmp_path / 'MARKER'}",)

    torch.save({"w": torch.ones(2), "evil": Evil()}, tmp_path / "evil.bin")
    code = main(["convert", str(tmp_path / "evil.bin"), str(tmp_path / "out"), "--to", "hf"])
    err = assert_refused(capsys, code, "evil.bin: refusing to unpickle global ", ".system: not on the allow-list")
    message = err.replace(str(tmp_path), "")
    assert "weights_only" not in message and "False" not in message
    assert not (tmp_path / "MARKER").exists()


@pytest.mark.parametrize("unpickler", ["torch_dist", "checkpoint_args"])
@pytest.mark.parametrize("build", [global_call, stack_global_call])
def test_every_project_unpickler_refuses_a_plain_os_system_payload(tmp_path, unpickler, build):
    """The two unpicklers the readers use, fed `os.system("touch MARKER")` by GLOBAL and by STACK_GLOBAL:
    refused by name, nothing runs."""
    from workbench.config.megatron_checkpoint import _Unpickler
    from workbench.tensors.torch_dist import _MetadataUnpickler

    marker = tmp_path / "MARKER"
    cls = {"torch_dist": _MetadataUnpickler, "checkpoint_args": _Unpickler}[unpickler]
    with pytest.raises(InputError, match=r"refusing to unpickle global (os|posix)\.system: not on the allow-list"):
        unpickle_allowed(build("os", "system", f"touch {marker}"), cls, "x.pkl", "fix")
    assert not marker.exists()
