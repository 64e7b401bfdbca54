"""The cache of parsed knowledge YAML: the same document as a fresh parse (data with its key types, every
line), only for knowledge files, and any damaged, foreign or unsuitable entry ignored, never trusted."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from workbench import yaml_cache
from workbench.knowledge import knowledge_dir
from workbench.yamlio import load_yaml, parse_yaml, read_text

KNOWLEDGE_FILES = sorted(path for base in ("checklists", "converters", "datasets")
                         for path in knowledge_dir(base).rglob("*.yaml"))


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache" / "yaml"


def typed(value):
    """``value`` with every type spelled out: True == 1 == 1.0 for ``==``, not here."""
    if isinstance(value, dict):
        return ("dict", [(typed(key), typed(item)) for key, item in value.items()])
    if isinstance(value, list):
        return ("list", [typed(item) for item in value])
    return (type(value).__name__, value)


def fresh(path: Path):
    return parse_yaml(read_text(path), path)


def test_every_knowledge_file_comes_back_from_the_cache_as_parsed(cache):
    assert len(KNOWLEDGE_FILES) > 10
    for path in KNOWLEDGE_FILES:
        first, second, parsed = load_yaml(path), load_yaml(path), fresh(path)
        for doc in (first, second):
            assert typed(doc.data) == typed(parsed.data), path
            assert {dotted: doc.lines[dotted] for dotted in parsed.lines} == \
                {dotted: parsed.lines[dotted] for dotted in parsed.lines}, path
    assert len(list(cache.glob("*.json"))) == len(KNOWLEDGE_FILES)


def test_non_string_keys_keep_their_types(cache):
    keys = knowledge_dir("checklists") / "keys.yaml"
    load_yaml(keys)
    cached = load_yaml(keys)
    key_types = {type(key) for value in _walk(cached.data) if isinstance(value, dict) for key in value}
    assert key_types == {str, int, bool}          # keys.yaml maps 0/1 and true/false: both survive as they were


def _walk(value):
    pending = [value]
    while pending:
        item = pending.pop()
        yield item
        pending.extend(item.values() if isinstance(item, dict) else item if isinstance(item, list) else [])


def knowledge_copy(tmp_path, monkeypatch, text: str) -> Path:
    root = tmp_path / "knowledge"
    for base in ("checklists", "converters", "datasets"):
        (root / base).mkdir(parents=True)
    monkeypatch.setenv("WORKBENCH_KNOWLEDGE", str(root))
    path = root / "datasets" / "probe.yaml"
    path.write_text(text)
    return path


def test_an_edited_file_is_parsed_again(cache, tmp_path, monkeypatch):
    path = knowledge_copy(tmp_path, monkeypatch, "kind: probe\nvalue: 1\n")
    assert load_yaml(path).data["value"] == 1
    path.write_text("kind: probe\n\nvalue: 2\n")
    doc = load_yaml(path)
    assert doc.data["value"] == 2 and doc.lines["value"] == 3
    assert len(list(cache.glob("*.json"))) == 2


@pytest.mark.parametrize("damage", [
    lambda text: text[: len(text) // 2],                                   # truncated
    lambda text: "[" * 100_000 + "]" * 100_000,                            # nested deeper than json recurses
    lambda text: json.dumps({"data": {"value": 99}, "lines": {"value": "three"}}),     # a line that is no number
    lambda text: json.dumps({"data": {"value": 99}}),                      # no lines
    lambda text: json.dumps({"data": {yaml_cache.PAIRS: [[[1], 2]]}, "lines": {}}),   # an unhashable key
    lambda text: json.dumps({"data": {yaml_cache.PAIRS: 5}, "lines": {}}),
    lambda text: "\udcff",                                                 # not UTF-8 once written
])
def test_a_damaged_entry_is_ignored_and_replaced(cache, tmp_path, monkeypatch, damage):
    path = knowledge_copy(tmp_path, monkeypatch, "kind: probe\nmap: {0: zero, true: yes}\nvalue: 1\n")
    load_yaml(path)
    (entry,) = cache.glob("*.json")
    entry.write_bytes(damage(entry.read_text()).encode("utf-8", "surrogateescape"))
    doc = load_yaml(path)
    assert typed(doc.data) == typed(fresh(path).data) and doc.lines["value"] == 3
    assert json.loads(entry.read_text())["data"]["value"] == 1         # written again, whole


def test_what_json_cannot_hold_is_not_cached_and_user_configs_never_are(cache, tmp_path, monkeypatch):
    for text in ("kind: probe\nwhen: 2024-01-01\n", "kind: probe\nx: .nan\n", "kind: probe\ns: !!set {a: null}\n",
                 "kind: probe\nb: !!binary aGVsbG8=\n"):
        path = knowledge_copy(tmp_path / str(abs(hash(text))), monkeypatch, text)
        assert typed(load_yaml(path).data) == typed(fresh(path).data) or "nan" in text
    user = tmp_path / "mindformers.yaml"
    user.write_text("model: {}\n")
    load_yaml(user)
    assert not cache.exists() or not list(cache.glob("*.json"))


def test_off_or_unwritable_the_cache_changes_nothing(tmp_path, monkeypatch):
    path = knowledge_copy(tmp_path, monkeypatch, "kind: probe\nvalue: 1\n")
    monkeypatch.setenv("WORKBENCH_CACHE_DIR", "off")
    assert load_yaml(path).data["value"] == 1
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("WORKBENCH_CACHE_DIR", str(blocker / "below"))
    assert load_yaml(path).data["value"] == 1 and blocker.read_text() == ""


def test_an_absurdly_large_entry_is_not_read(cache, tmp_path, monkeypatch):
    path = knowledge_copy(tmp_path, monkeypatch, "kind: probe\nvalue: 1\n")
    load_yaml(path)
    (entry,) = cache.glob("*.json")
    with open(entry, "r+b") as handle:                  # a sparse 65 MiB file: nothing is allocated to make it
        handle.truncate(yaml_cache.MAX_ENTRY_BYTES + 1)
    assert load_yaml(path).data["value"] == 1
    assert entry.stat().st_size < 1000                  # replaced by a fresh entry


@pytest.mark.skipif(os.getuid() != 0, reason="giving an entry to another user needs root")
def test_an_entry_of_another_user_is_not_read(cache, tmp_path, monkeypatch):
    path = knowledge_copy(tmp_path, monkeypatch, "kind: probe\nvalue: 1\n")
    load_yaml(path)
    (entry,) = cache.glob("*.json")
    entry.write_text(json.dumps({"data": {"kind": "probe", "value": 666}, "lines": {}}))
    os.chown(entry, 65534, 65534)
    assert load_yaml(path).data["value"] == 1


def test_the_cache_folder_is_private_and_keeps_the_newest_entries(cache, tmp_path, monkeypatch):
    monkeypatch.setattr(yaml_cache, "MAX_ENTRIES", 3)
    for value in range(5):
        path = knowledge_copy(tmp_path / str(value), monkeypatch, f"kind: probe\nvalue: {value}\n")
        load_yaml(path)
        entry = max(cache.glob("*.json"), key=lambda file: file.stat().st_mtime_ns)
        os.utime(entry, ns=(value * 10**9, value * 10**9))
    assert cache.stat().st_mode & 0o777 == 0o700
    kept = sorted(json.loads(entry.read_text())["data"]["value"] for entry in cache.glob("*.json"))
    assert kept == [2, 3, 4]
