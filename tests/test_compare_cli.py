"""`workbench compare` end to end on the real msprobe fixtures (torch vs MindSpore, ../shared/fixtures/dumps):
the report, its units across ranks, --workers, --part i/n with `compare merge`, and bad arguments and parts
as one-line errors."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from workbench_testing import fixtures_dir

from workbench.cli.main import main


def dump_tree(root: Path, framework: str, ranks: int = 1) -> Path:
    """The fixture's dump.json / construct.json laid out as msprobe writes them: step0/rank{r}/."""
    source = fixtures_dir("dumps", f"msprobe_{framework}", "out_statistics_mix")
    for rank in range(ranks):
        folder = root / framework / "step0" / f"rank{rank}"
        folder.mkdir(parents=True)
        shutil.copy(source / "dump.full.json", folder / "dump.json")
        shutil.copy(source / "construct.full.json", folder / "construct.json")
    return root / framework


def report(capsys, *argv: str) -> tuple[int, dict]:
    code = main(["compare", *argv, "--format", "json"])
    return code, json.loads(capsys.readouterr().out)


def one_line(capsys, *argv: str) -> str:
    assert main(["compare", *argv]) == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def rows(document: dict, table: str) -> list[tuple]:
    return sorted(tuple(sorted((k, str(v)) for k, v in row.items())) for row in document["tables"][table])


def test_torch_against_mindspore_every_row_is_paired_or_has_a_reason(capsys, tmp_path):
    code, document = report(capsys, str(dump_tree(tmp_path, "pytorch")), str(dump_tree(tmp_path, "mindspore")))
    assert document["schema"] == "workbench.compare/1"
    pairs, unmatched = document["tables"]["pairs"], document["tables"]["unmatched"]
    assert len(pairs) > 30 and all(row["reason"] for row in unmatched)
    assert not any("dtype" in str(row.get("note", "")).lower() and row["status"] == "error" for row in pairs)
    assert document["facts"]["units"] == [[0, 0]]
    # the two fixture runs were fed different random inputs: never a PASS, and said where it starts
    assert (code, document["verdict"]) == (1, "INPUTS DIFFER")
    assert "inputs already differ" in document["summary"][1] and "layer_norm" in document["summary"][1]


def test_workers_and_parts_give_the_whole_comparison(capsys, tmp_path):
    a, b = dump_tree(tmp_path, "pytorch", ranks=4), dump_tree(tmp_path, "mindspore", ranks=4)
    _, whole = report(capsys, str(a), str(b))
    _, pooled = report(capsys, str(a), str(b), "--workers", "2")
    assert whole["facts"]["units"] == [[0, r] for r in range(4)]
    assert rows(pooled, "pairs") == rows(whole, "pairs") and rows(pooled, "unmatched") == rows(whole, "unmatched")
    parts = []
    for index in (1, 2):
        out = tmp_path / f"part{index}.json"
        assert main(["compare", str(a), str(b), "--part", f"{index}/2", "--out", str(out)]) in (0, 1)
        parts.append(out)
    assert json.loads(parts[0].read_text())["facts"]["units"] == [[0, 0], [0, 2]]
    code, merged = report(capsys, "merge", *map(str, parts))
    assert rows(merged, "pairs") == rows(whole, "pairs") and rows(merged, "unmatched") == rows(whole, "unmatched")
    assert merged["summary"][:2] == whole["summary"][:2] and code == (1 if whole["verdict"] != "PASS" else 0)
    line = one_line(capsys, "merge", str(parts[0]), str(parts[0]))
    assert "part1.json" in line and "(0, 0)" in line


def test_bad_arguments_and_parts_are_one_line(capsys, tmp_path):
    a, b = dump_tree(tmp_path, "pytorch"), dump_tree(tmp_path, "mindspore")
    assert "--part" in one_line(capsys, str(a), str(b), "--part", "3/2")
    assert "--part" in one_line(capsys, str(a), str(b), "--part", "x")
    assert "--workers" in one_line(capsys, str(a), str(b), "--workers", "0")
    assert "two dumps" in one_line(capsys, str(a))
    assert "no part reports" in one_line(capsys, "merge")
    assert "no (step, rank)" in one_line(capsys, str(a), str(b), "--rank", "5")
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema": "workbench.loss/1"}')
    assert "bad.json" in one_line(capsys, "merge", str(bad)) and "schema" in one_line(capsys, "merge", str(bad))
    for text, words in (('{"schema": "workbench.compare/1", "tables": {"pairs": [', "bad.json"),          # truncated
                        ('{"schema": "workbench.compare/1", "tables": {"pairs": 3, "unmatched": []}, "facts": {}, '
                         '"sources": {}}', "tables.pairs"),                                            # wrong type
                        ('{"schema": "workbench.compare/1", "tables": {"pairs": [1], "unmatched": []}, '
                         '"facts": {}, "sources": {}}', "not objects"),                                # rows not objects
                        ("[" * 100_000, "bad.json")):                                                  # deep nesting
        bad.write_text(text)
        assert words in one_line(capsys, "merge", str(bad))
    bad.write_bytes(b'{"schema": "workbench.compare/1\xff"}')                                          # non-UTF-8
    line = one_line(capsys, "merge", str(bad))
    assert "bad.json" in line and "schema" not in line                  # refused as text, not as a wrong schema


def test_logits_through_the_command_name_the_first_failing_token(capsys, tmp_path):
    import numpy as np

    rng = np.random.default_rng(0)
    reference = rng.standard_normal((8, 50)).astype(np.float32)
    candidate = reference + rng.standard_normal(reference.shape).astype(np.float32) * 1e-6
    candidate[5] = rng.standard_normal(50)                  # token 5 computed wrongly
    np.save(tmp_path / "ref.npy", reference)
    np.save(tmp_path / "cand.npy", candidate)
    plot = tmp_path / "kl.png"
    code, document = report(capsys, str(tmp_path / "ref.npy"), str(tmp_path / "cand.npy"), "--logits", "--plot", str(plot))
    assert (code, document["schema"], document["facts"]["first_failing_token"]) == (1, "workbench.logits/1", 5)
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "--logits" in one_line(capsys, str(tmp_path / "ref.npy"), str(tmp_path / "cand.npy"), "--plot", str(plot))


def test_compare_asks_openblas_for_one_thread_unless_the_user_chose(tmp_path):
    """OpenBLAS's helper threads only spin in a comparison (no matrix algebra): compare asks for one before numpy's
    first import in a fresh process; a number the user set stays; a process that imported numpy already (a test,
    a library caller) keeps its environment."""
    script = ("import os, sys\n{first}from workbench.cli.main import main\n"
              "code = main(['compare', sys.argv[1]])\n"
              "print(code, os.environ.get('OPENBLAS_NUM_THREADS'))\n")
    cases = [({}, "", "2 1"), ({"OPENBLAS_NUM_THREADS": "4"}, "", "2 4"), ({}, "import numpy\n", "2 None")]
    for extra, first, expected in cases:
        env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"} | extra
        done = subprocess.run([sys.executable, "-c", script.format(first=first), str(tmp_path / "a")], env=env,
                              capture_output=True, text=True, cwd=Path(__file__).resolve().parents[1], timeout=120)
        assert done.stdout.split() == expected.split(), done.stderr


def test_an_unknown_arch_is_the_same_note_with_the_pool(capsys, tmp_path):
    """The parent loads the specs before the pool forks; a bad --arch still reaches the units, which say so."""
    a, b = dump_tree(tmp_path, "pytorch", ranks=2), dump_tree(tmp_path, "mindspore", ranks=2)
    found = {workers: report(capsys, str(a), str(b), "--arch", "no_such_arch", "--workers", workers)
             for workers in ("1", "2")}
    assert found["1"] == found["2"]
    assert any("no_such_arch" in note for note in found["2"][1]["notes"])
