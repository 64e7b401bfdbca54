"""Hostile launch scripts: ANSI-C quoting edge cases, deep nesting, self-doubling variables, huge
arguments, runaway arithmetic, bad bytes; through parse_launch_script and the real CLI."""
from __future__ import annotations

import json
import os
import random
import shlex
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from workbench_testing import EXAMPLE_MEGATRON, EXAMPLE_MINDFORMERS, ROOT
from workbench.cli.main import main
from workbench.config.shell_ansi_c import expand_ansi_c
from workbench.config.shell_expand import EXPANSION_BUDGET, NESTING_LIMIT
from workbench.config.shell_script import parse_launch_script
from workbench.errors import InputError

LAUNCH = "torchrun pretrain_gpt.py"


def _script(tmp_path: Path, body: str, name: str = "run.sh") -> Path:
    path = tmp_path / name
    path.write_text(body)
    return path


def _args(path: Path) -> dict[str, str]:
    tokens = parse_launch_script(path).script_args
    return {tokens[k].text: tokens[k + 1].text for k in range(0, len(tokens) - 1, 2)}


def _refused(path: Path) -> str:
    with pytest.raises(InputError) as caught:
        parse_launch_script(path)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(str(path)) and len(message) < 1_000
    return message


def test_ansi_c_escapes_without_digits_stay_literal(tmp_path):
    # these crashed the lexer (unicode_escape); bash keeps \x and \u when no hex digit follows
    body = f"A=$'\\x'\nB=$'a\\uq'\nC=$'it\\'s'\nD=$'\\x41\\101\\u00e9\\n'\n{LAUNCH} --a $A --b $B --c \"$C\" --d \"$D\"\n"
    args = _args(_script(tmp_path, body))
    assert args == {"--a": "\\x", "--b": "a\\uq", "--c": "it's", "--d": "AAé\n"}


def test_ansi_c_body_spanning_lines_keeps_later_lines_right(tmp_path):
    body = f"A=$'one\\\ntwo'\n{LAUNCH} --a \"$A\" --lr 1\n"
    tokens = parse_launch_script(_script(tmp_path, body)).script_args
    assert [(t.text, t.line) for t in tokens][-1] == ("1", 3)


def test_unterminated_ansi_c_quote_is_one_line(tmp_path):
    path = _script(tmp_path, f"{LAUNCH} --a $'abc\\'\n")
    assert _refused(path).startswith(f"{path}:1: unterminated $'...' quote")


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash to compare with")
def test_ansi_c_matches_real_bash_on_edge_and_random_bodies():
    rng = random.Random(8)
    letters = list("\\\\\\\\abxuUc0127{}?'\"eEnzé9fF@ ")
    bodies = ["\\x", "a\\ub", "\\x{41}", "\\x{}z", "\\u00e9", "\\U0001F600", "\\ud800", "\\c", "\\cA", "\\c?",
              "\\c\\\\x", "ab\\0cd", "\\101", "\\1234", "\\xff", "\\xc3\\xa9", "\\'", "\\z", "\\x4", "\\x41g",
              "\\u41", "\\c@x", "tail\\\\"]
    bodies += ["".join(rng.choice(letters) for _ in range(rng.randint(1, 10))) for _ in range(400)]
    bodies = [b for b in bodies if _closed(b)]
    script = "".join(f"printf '%s\\0' $'{body}'\n" for body in bodies)
    done = subprocess.run(["bash", "-c", script], capture_output=True, env={"LC_ALL": "C.UTF-8"}, check=True)
    want = [value.decode("utf-8", errors="replace") for value in done.stdout.split(b"\0")[:-1]]
    assert [expand_ansi_c(body) for body in bodies] == want


def _closed(body: str) -> bool:
    """The body's last quote is the one we append (no stray ' and no trailing lone backslash)."""
    index = 0
    while index < len(body):
        if body[index] == "'":
            return False
        index += 2 if body[index] == "\\" else 1
    return index == len(body)


def test_deep_default_nesting_is_refused_not_recursed(tmp_path):
    path = _script(tmp_path, f"{LAUNCH} --x " + "${A:-" * 400 + "v" + "}" * 400 + "\n")
    assert f"nest more than {NESTING_LIMIT} levels" in _refused(path)
    fine = _script(tmp_path, f"{LAUNCH} --x " + "${A:-" * 20 + "v" + "}" * 20 + "\n", "fine.sh")
    assert _args(fine) == {"--x": "v"}


def test_self_doubling_variable_stops_at_the_value_limit_with_its_line(tmp_path):
    path = _script(tmp_path, "A=x\n" + "A=$A$A\n" * 26 + f"{LAUNCH} --x $A\n")
    start = time.perf_counter()
    message = _refused(path)
    assert time.perf_counter() - start < 10
    assert message.startswith(f"{path}:21: a value expanded on this line grows past 1.0 MiB")  # 2**20 characters


def test_append_doubling_is_bounded_too(tmp_path):
    path = _script(tmp_path, "A=xx\n" + 'A+="$A"\n' * 26 + f"{LAUNCH} --x $A\n")
    assert "grows past 1.0 MiB" in _refused(path)


def test_doubling_array_is_bounded_by_the_expansion_budget(tmp_path):
    path = _script(tmp_path, "A=(x)\n" + "A=(${A[@]} ${A[@]})\n" * 26 + f"{LAUNCH} --x ${{A[@]}}\n")
    start = time.perf_counter()
    message = _refused(path)
    assert time.perf_counter() - start < 10
    assert f"exceed {EXPANSION_BUDGET // 1024 // 1024}.0 MiB in all" in message


def test_many_uses_of_a_large_value_are_bounded(tmp_path):
    path = _script(tmp_path, "A=x\n" + "A=$A$A\n" * 19 + LAUNCH + " --x $A" * 100 + "\n")
    assert f"{path}:21: the script's expansions exceed" in _refused(path)


def test_runaway_arithmetic_wraps_or_is_left_unevaluated(tmp_path):
    body = ("A=$(( ((2**64)**64)**64 ))\nB=$(( 9223372036854775807 + 1 ))\n"
            f"C=$(({'1+' * 5000}1))\nD=$(({'(' * 300}1{')' * 300}))\n{LAUNCH} --a $A --b $B --c $C --d $D\n")
    cmd = parse_launch_script(_script(tmp_path, body))
    tokens = {t.text: t for t in cmd.script_args}
    values = [cmd.script_args[k + 1] for k, t in enumerate(cmd.script_args) if t.text in ("--a", "--b", "--c", "--d")]
    assert [v.text for v in values[:2]] == ["0", "-9223372036854775808"]   # bash's 64-bit wrap-around
    assert all(v.unresolved for v in values[2:]) and "--d" in tokens
    assert any("not evaluated" in note for note in cmd.notes)


def test_huge_script_is_refused_before_lexing(tmp_path):
    path = _script(tmp_path, f"{LAUNCH} --x " + "a" * 20_000_000 + "\n")
    start = time.perf_counter()
    message = _refused(path)
    assert time.perf_counter() - start < 2
    assert "more than the 1.0 MiB" in message


def test_non_utf8_script_names_the_line(tmp_path):
    path = tmp_path / "run.sh"
    path.write_bytes(f"A=1\n{LAUNCH} --x \xff\n".encode("latin-1"))
    assert _refused(path).startswith(f"{path}:2: not UTF-8")


def test_cli_refuses_a_doubling_script_in_one_line(tmp_path, capsys):
    path = _script(tmp_path, "A=x\n" + "A=$A$A\n" * 26 + f"{LAUNCH} --x $A\n")
    out = tmp_path / "report.md"
    assert main(["checklist", str(path), str(EXAMPLE_MINDFORMERS), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{path}:21:" in err and "Traceback" not in err
    assert not out.exists()


# ----------------------------------------------------------------- inputs read once (pipes)
def _run_cli(*args: str | Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "workbench", *map(str, args)], capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=120)   # a second open of a drained FIFO would hang: timeout


def _fifo(folder: Path, like: Path) -> Path:
    """A FIFO named like ``like`` whose writer thread sends ``like``'s content once."""
    path = folder / like.name
    os.mkfifo(path)

    def write() -> None:
        with open(path, "w") as handle:
            handle.write(like.read_text())
    threading.Thread(target=write, daemon=True).start()
    return path


def test_checklist_reads_each_fifo_once_like_regular_files(tmp_path):
    regular = _run_cli("checklist", EXAMPLE_MEGATRON, EXAMPLE_MINDFORMERS, "--format", "md")
    assert regular.returncode == 0, regular.stderr
    megatron, mindformers = _fifo(tmp_path, EXAMPLE_MEGATRON), _fifo(tmp_path, EXAMPLE_MINDFORMERS)
    piped = _run_cli("checklist", megatron, mindformers, "--format", "md")
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout.replace(str(tmp_path), str(EXAMPLE_MEGATRON.parent)) == regular.stdout


@pytest.mark.skipif(shutil.which("bash") is None, reason="process substitution needs bash")
def test_process_substitution_as_in_the_issue():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = (f"{shlex.quote(sys.executable)} -m workbench checklist <(cat {shlex.quote(str(EXAMPLE_MEGATRON))}) "
               f"<(cat {shlex.quote(str(EXAMPLE_MINDFORMERS))}) --format json")
    done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)


def test_a_fifo_with_a_bad_yaml_is_named_not_called_missing(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: &a [1, *a]\n")
    pipe_dir = tmp_path / "pipes"
    pipe_dir.mkdir()
    fifo = _fifo(pipe_dir, bad)
    done = _run_cli("checklist", EXAMPLE_MEGATRON, fifo)
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert f"{fifo}:1: alias *a is recursive" in done.stderr and "not found" not in done.stderr
