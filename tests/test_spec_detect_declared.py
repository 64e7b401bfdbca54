"""Architecture detection told by the checkpoint's own config.json (``model_type``): the spec declaring it
answers when it fits every name perfectly, without building the other specs; otherwise detection is what
it is without a config."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from test_convert_safety import hf_llama
from workbench import spec
from workbench.convert.run import describe_source
from workbench.errors import InputError
from workbench.spec import loader
from workbench.tensors.open import open_source

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def built(monkeypatch) -> dict:
    """The specs built from here on (the loader's per-process cache, emptied first)."""
    specs: dict = {}
    monkeypatch.setattr(loader, "_SPECS", specs)
    return specs


def built_archs(specs: dict) -> set[str]:
    return {path.stem for path, _ in specs}


def llama_names(tmp_path) -> list[str]:
    with open_source(hf_llama(tmp_path / "hf")) as source:
        return list(source.metas())


def test_every_shipped_spec_is_found_by_the_model_type_it_declares():
    for arch in spec.available_archs():
        block = spec.load_arch(arch).hf_config
        if block is not None:
            assert arch in loader.archs_declaring(block.model_type), arch
    assert loader.archs_declaring("no_such_model_type") == []


def test_declared_model_types_follow_extends_and_survive_cycles_and_broken_files(tmp_path):
    files = {"a": "arch: a\nhf_config: {model_type: fam}\n", "b": "arch: b\nextends: a\n",
             "c": "arch: c\nextends: d\n", "d": "arch: d\nextends: c\n", "e": "arch: e\nlogical: [unclosed\n",
             "f": "arch: f\nhf_config: {model_type: 5}\n", "g": "arch: g\nextends: missing\n",
             "h": "arch: h\nhf_config: [fam]\n"}
    for name, text in files.items():
        (tmp_path / f"{name}.yaml").write_text(text)
    (tmp_path / "i.yaml").write_bytes(b"arch: i\nhf_config: {model_type: \xff\xfe}\n")
    assert loader.archs_declaring("fam", tmp_path) == ["a", "b"]
    assert loader.archs_declaring("5", tmp_path) == []


def test_a_declared_perfect_fit_builds_only_its_own_spec(tmp_path, built):
    names = llama_names(tmp_path)
    built.clear()
    assert spec.detect_arch(names, model_type="llama") == "llama"
    assert built_archs(built) == {"llama"}
    built.clear()
    assert spec.detect_arch(names) == "llama"                      # the same answer the long way
    assert built_archs(built) == set(spec.available_archs())


def test_a_wrong_model_type_changes_nothing(tmp_path, built):
    names = llama_names(tmp_path)
    # Qwen2's HF format fits Llama's names too (its bias rules left unused): not a perfect fit, so every
    # spec is tried and Llama wins as it does without a config
    assert spec.detect_arch(names, model_type="qwen2") == "llama"
    assert spec.detect_arch(names, model_type="bert") == "llama"
    with pytest.raises(InputError, match="no converter spec matches every name"):
        spec.detect_arch(["model.foo.weight"], model_type="llama")


def test_convert_reads_the_model_type_from_the_checkpoints_config_json(tmp_path, built):
    folder = hf_llama(tmp_path / "hf")
    built.clear()
    described = describe_source(folder)
    described.source.close()
    assert described.arch.name == "llama" and described.format == "hf"
    assert built_archs(built) == {"llama"}


def test_the_declared_model_type_settles_a_tie_the_names_cannot(tmp_path, monkeypatch, built):
    knowledge = tmp_path / "knowledge"
    for base in ("checklists", "converters", "datasets"):
        shutil.copytree(ROOT / base, knowledge / base)
    twin = (knowledge / "converters" / "llama.yaml").read_text()
    twin = twin.replace("arch: llama\n", "arch: llama_twin\n").replace("model_type: llama\n", "model_type: llama_twin\n")
    (knowledge / "converters" / "llama_twin.yaml").write_text(twin)
    monkeypatch.setenv("WORKBENCH_KNOWLEDGE", str(knowledge))
    names = llama_names(tmp_path)
    with pytest.raises(InputError, match="names fit several architectures equally: llama .*llama_twin"):
        spec.detect_arch(names)
    assert spec.detect_arch(names, model_type="llama_twin") == "llama_twin"
    assert spec.detect_arch(names, model_type="llama") == "llama"
