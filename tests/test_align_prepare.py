"""``workbench align prepare``: the written runs are aligned by the CheckList, every change is commented,
the inputs stay untouched, the plan names every artifact, and bad input is one line (exit 2)."""
from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from workbench_testing import fixtures_dir

from workbench.align.plan import read_plan
from workbench.align.prepare import prepare
from workbench.align.prepare_runs import load_runs
from workbench.align.stages import load_stages
from workbench.audit.engine import run_checklist
from workbench.cli.main import main
from workbench.errors import InputError

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE_M = ROOT / "checklists/examples/llama_tiny_megatron.sh"
EXAMPLE_F = ROOT / "checklists/examples/llama_tiny_mindformers.yaml"
LLAMA2_M = "megatron/mindspeed_llm_v2.2.0__pretrain_llama2_7b_ptd.sh"
LLAMA2_F = "mindformers/legacy_llama2_pretrain_llama2_7b.yaml"


def _pairs(out: Path) -> list[tuple[Path, Path]]:
    return [(out / f"megatron/{name}.sh", out / f"mindformers/{name}.yaml")
            for name, run in load_runs().runs.items() if "mindformers" in run.sides]


def _assert_aligned(out: Path) -> None:
    planned = {entry["item"] for entry in read_plan(out).differences}
    for megatron, mindformers in _pairs(out):
        report = run_checklist(megatron, mindformers)
        left = [(item.id, item.verdict, item.message) for item in report.items
                if item.verdict in ("MISMATCH", "RISK") and item.id not in planned]
        assert left == [], f"{megatron.name}: {left}"
        assert report.counts()["MISMATCH"] == 0


@pytest.fixture(scope="module")
def example(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("align") / "example"
    assert main(["align", "prepare", "--megatron", str(EXAMPLE_M), "--mindformers", str(EXAMPLE_F),
                 "--out", str(out)]) == 0
    return out


def test_example_pair_is_aligned(example):
    _assert_aligned(example)


def test_llama2_pair_is_aligned(tmp_path):
    configs = fixtures_dir("configs")
    megatron, mindformers = configs / LLAMA2_M, configs / LLAMA2_F
    before = {path: hashlib.sha256(path.read_bytes()).hexdigest() for path in (megatron, mindformers)}
    result = prepare(megatron, mindformers, tmp_path / "llama2")
    assert result.unresolved == []
    _assert_aligned(tmp_path / "llama2")
    assert {path: hashlib.sha256(path.read_bytes()).hexdigest() for path in (megatron, mindformers)} == before
    step12 = run_checklist(tmp_path / "llama2/megatron/step12.sh", tmp_path / "llama2/mindformers/step12.yaml")
    # the fused kernels legacy MindFormers cannot use were dropped on the Megatron side
    assert step12.megatron.value("fused.rope") is False and step12.megatron.value("fused.swiglu") is False
    assert step12.megatron.value("parallel.pipeline") == 1 and step12.megatron.value("other.deterministic") is True
    assert step12.mindformers.value("train.global_batch_size") == step12.megatron.value("train.global_batch_size") == 256
    # PP 2 -> 1 on 8 devices would double DP: torchrun's world becomes the reference's DP 4 instead
    assert step12.megatron.value("parallel.data") == step12.mindformers.value("parallel.data") == 4
    assert "--nproc_per_node 4" in (tmp_path / "llama2/megatron/step12.sh").read_text()


def test_step12_settings(example):
    report = run_checklist(example / "megatron/step12.sh", example / "mindformers/step12.yaml")
    for config in (report.megatron, report.mindformers):
        assert config.value("train.steps") == 2
        assert config.value("lr.decay_style") == "constant"
        assert config.value("lr.warmup_steps") == 0
        assert config.value("optimizer.eps") == 1e-8
        assert config.value("other.deterministic") is True
        assert config.value("parallel.optimizer_sharding") is False
    text = (example / "mindformers/step12.yaml").read_text()
    assert "local_norm: True" in text and "type: MegatronReplayDataset" in text
    assert f"load_checkpoint: {example.resolve()}/checkpoints/mindformers_init.ckpt" in text
    assert "--save-wgrads-interval 1" in (example / "megatron/step12.sh").read_text()


def test_long_runs(example, tmp_path):
    lr0 = run_checklist(example / "megatron/lr0.sh", example / "mindformers/lr0.yaml")
    assert lr0.megatron.value("optimizer.lr") == 0 and lr0.mindformers.value("optimizer.lr") == 0
    long = run_checklist(example / "megatron/long.sh", example / "mindformers/long.yaml")
    assert long.megatron.value("lr.decay_style") == "cosine"        # the user's own schedule
    assert long.megatron.value("train.steps") == 1000
    rerun = run_checklist(example / "megatron/rerun.sh", example / "mindformers/long.yaml")
    assert rerun.megatron.value("other.deterministic") is False
    assert "WORKBENCH_DETERMINISTIC=0" in (example / "megatron/rerun.sh").read_text()


def test_layers_option(tmp_path):
    prepare(EXAMPLE_M, EXAMPLE_F, tmp_path / "out", layers=1, long_steps=50)
    report = run_checklist(tmp_path / "out/megatron/step12.sh", tmp_path / "out/mindformers/step12.yaml")
    assert report.megatron.value("model.num_layers") == report.mindformers.value("model.num_layers") == 1
    long = run_checklist(tmp_path / "out/megatron/long.sh", tmp_path / "out/mindformers/long.yaml")
    assert long.mindformers.value("train.steps") == 50


def _changed_lines(original: Path, written: Path) -> list[tuple[int, str]]:
    import difflib

    old, new = original.read_text().splitlines(), written.read_text().splitlines()
    changed = []
    for tag, _, _, j1, j2 in difflib.SequenceMatcher(a=old, b=new, autojunk=False).get_opcodes():
        if tag in ("replace", "insert"):
            changed.extend((index, new[index]) for index in range(j1, j2))
    return changed


@pytest.mark.parametrize("name", ["step12", "lr0", "long", "rerun"])
def test_every_changed_line_is_commented(example, name):
    script = example / f"megatron/{name}.sh"
    lines = script.read_text().splitlines()
    for index, line in _changed_lines(EXAMPLE_M, script):
        if "# workbench:" in line or not line.strip(" \\"):
            continue
        if line.startswith(("ALIGN_DIR=", "source ", "export ", "exec ")):
            pytest.fail(f"{script.name}:{index + 1}: header line without a comment: {line}")
        flags = re.findall(r"--[\w-]+", line)
        above = [text for text in lines[:index] if "# workbench:" in text]
        assert flags and all(any(flag in text for text in above) for flag in flags), f"{script.name}:{index + 1}: {line}"
    if name != "rerun":
        yaml_file = example / f"mindformers/{name}.yaml"
        for index, line in _changed_lines(EXAMPLE_F, yaml_file):
            owner = next(text for text in reversed(yaml_file.read_text().splitlines()[:index + 1])
                         if not text.startswith(" " * (len(line) - len(line.lstrip()) + 1)) or text == line)
            assert "# workbench:" in line or "# workbench:" in owner or line.lstrip().startswith("#") or \
                _inside_commented_block(yaml_file, index), f"{yaml_file.name}:{index + 1}: {line}"


def _inside_commented_block(path: Path, index: int) -> bool:
    """A line of a block written whole (its key line carries the comment)."""
    lines = path.read_text().splitlines()
    indent = len(lines[index]) - len(lines[index].lstrip())
    for text in reversed(lines[:index]):
        if text.strip() and len(text) - len(text.lstrip()) < indent:
            return "# workbench:" in text
    return False


def test_written_scripts_are_valid_bash(example):
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("bash is not installed")
    for script in sorted(example.rglob("*.sh")):
        subprocess.run([bash, "-n", str(script)], check=True)


def test_plan_names_every_artifact(example):
    plan = read_plan(example)
    assert set(plan.artifacts) == set(load_stages().artifacts)
    assert set(plan.runs) == set(load_runs().runs)
    assert plan.runs["step12"]["megatron"] == "megatron/step12.sh"
    assert plan.relative("megatron_config") == "megatron/step12.sh"
    assert plan.relative("mindformers_step_log") == plan.runs["step12"]["mindformers_log"]
    assert "WORKBENCH_CAPTURE_DIR" in (example / "megatron/step12.sh").read_text()
    env = (example / "env/megatron.sh").read_text()
    assert "CUBLAS_WORKSPACE_CONFIG=:4096:8" in env and "NCCL_ALGO=" in env and "PYTHONHASHSEED=1234" in env


def test_keep_parallel_lists_differences(tmp_path):
    configs = fixtures_dir("configs")
    result = prepare(configs / LLAMA2_M, configs / LLAMA2_F, tmp_path / "out", keep_parallel=True)
    items = {entry["item"] for entry in result.differences}
    assert items and all(entry["why"].endswith("(align prepare --keep-parallel)") for entry in result.differences)
    report = run_checklist(tmp_path / "out/megatron/step12.sh", tmp_path / "out/mindformers/step12.yaml")
    assert report.megatron.value("parallel.pipeline") == report.mindformers.value("parallel.pipeline") == 2
    assert {entry["item"] for entry in read_plan(tmp_path / "out").differences} == items


# ------------------------------------------------------------------------------------------ bad input
def _run_cli(capsys, *args: str) -> tuple[int, str]:
    code = main(["align", "prepare", *args])
    return code, capsys.readouterr().err


def test_megatron_that_is_not_a_script(tmp_path, capsys):
    flat = tmp_path / "args.json"
    flat.write_text('{"num_layers": 2, "hidden_size": 64}')
    code, err = _run_cli(capsys, "--megatron", str(flat), "--mindformers", str(EXAMPLE_F), "--out", str(tmp_path / "o"))
    assert code == 2 and "args.json" in err and "launch script" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "o").exists()


def test_non_utf8_and_truncated_inputs(tmp_path, capsys):
    script = tmp_path / "train.sh"
    script.write_bytes(EXAMPLE_M.read_bytes().replace(b"--seed 1234", b"--seed \xff\xfe"))
    code, err = _run_cli(capsys, "--megatron", str(script), "--mindformers", str(EXAMPLE_F), "--out", str(tmp_path / "o"))
    assert code == 2 and "train.sh" in err and "UTF-8" in err
    truncated = tmp_path / "run.yaml"
    truncated.write_text(EXAMPLE_F.read_text()[:200] + "\n  - [unclosed")
    code, err = _run_cli(capsys, "--megatron", str(EXAMPLE_M), "--mindformers", str(truncated), "--out", str(tmp_path / "o"))
    assert code == 2 and "run.yaml" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "o").exists() and not list(tmp_path.glob(".o.*"))


def test_existing_output_needs_force(tmp_path, capsys):
    out = tmp_path / "o"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    code, err = _run_cli(capsys, "--megatron", str(EXAMPLE_M), "--mindformers", str(EXAMPLE_F), "--out", str(out))
    assert code == 2 and "--force" in err and (out / "keep.txt").read_text() == "mine"
    code, _ = _run_cli(capsys, "--megatron", str(EXAMPLE_M), "--mindformers", str(EXAMPLE_F), "--out", str(out), "--force")
    assert code == 0 and not (out / "keep.txt").exists() and (out / "plan.yaml").is_file()


@pytest.mark.parametrize("option", [["--layers", "0"], ["--long-steps", "1"]])
def test_bad_options(tmp_path, capsys, option):
    code, err = _run_cli(capsys, "--megatron", str(EXAMPLE_M), "--mindformers", str(EXAMPLE_F),
                         "--out", str(tmp_path / "o"), *option)
    assert code == 2 and option[0] in err and not (tmp_path / "o").exists()


def test_out_path_unsafe_for_scripts(tmp_path, capsys):
    code, err = _run_cli(capsys, "--megatron", str(EXAMPLE_M), "--mindformers", str(EXAMPLE_F),
                         "--out", str(tmp_path / "my runs"))
    assert code == 2 and "my runs" in err and "spaces" in err


@pytest.mark.parametrize("body, key", [
    ("kind: align_runs\nruns:\n  step12: {title: t, sides: [megatron], steps: 0}\n", "runs.step12.steps"),
    ("kind: align_runs\nevery_run:\n  optimizer.nope: 1\nruns:\n  a: {title: t, sides: [megatron], steps: 2}\n",
     "every_run.optimizer.nope"),
    ("kind: align_runs\nruns:\n  a: {title: t, sides: [gpu], steps: 2}\n", "runs.a.sides"),
    ("kind: align_runs\nruns:\n  a: {title: t, sides: [megatron], steps: 2, from: b}\n", "runs.a.from"),
])
def test_runs_file_mistakes_name_file_and_line(tmp_path, body, key):
    path = tmp_path / "align_runs.yaml"
    path.write_text(body)
    with pytest.raises(InputError) as error:
        load_runs(path)
    assert "align_runs.yaml:" in str(error.value) and key in str(error.value)


@pytest.mark.parametrize("name, body", [
    ("deep.yaml", "a:\n" + "".join("  " * depth + "- \n" for depth in range(1, 2)) + "[" * 5000 + "]" * 5000 + "\n"),
    ("types.yaml", "model: [1, 2]\noptimizer: 3\n"),
    ("empty.yaml", ""),
    ("huge.yaml", "seed: 1\n" + "#" * (70 * 1024 * 1024) + "\n"),
])
def test_hostile_mindformers_yaml(tmp_path, capsys, name, body):
    path = tmp_path / name
    path.write_text(body)
    code, err = _run_cli(capsys, "--megatron", str(EXAMPLE_M), "--mindformers", str(path), "--out", str(tmp_path / "o"))
    assert code == 2 and name in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not (tmp_path / "o").exists()


def test_script_without_an_argument_list(tmp_path, capsys):
    script = tmp_path / "one_line.sh"
    script.write_text("#!/bin/bash\ntorchrun pretrain_gpt.py --num-layers 2 --hidden-size 64 --num-attention-heads 4 "
                      "--seq-length 32 --lr 1e-3 --train-iters 5 --micro-batch-size 1\n")
    code, err = _run_cli(capsys, "--megatron", str(script), "--mindformers", str(EXAMPLE_F), "--out", str(tmp_path / "o"))
    assert code == 2 and "one_line.sh" in err and "several lines" in err
    assert not (tmp_path / "o").exists() and not list(tmp_path.glob(".o.*"))
