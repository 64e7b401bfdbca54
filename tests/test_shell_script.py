"""parse_launch_script on the real MindSpeed-LLM / Megatron scripts and on synthetic bash."""
from __future__ import annotations

from pathlib import Path

import pytest

from workbench.config.shell_script import Token, parse_launch_script
from workbench.errors import InputError

FIXTURES = Path(__file__).resolve().parents[1].parent / "shared" / "fixtures" / "configs" / "megatron"
needs_fixtures = pytest.mark.skipif(not FIXTURES.is_dir(), reason=f"shared fixtures not found at {FIXTURES}")


def _texts(tokens: list[Token]) -> list[str]:
    return [t.text for t in tokens]


def _after(tokens: list[Token], flag: str) -> Token:
    """The token right after the (last) occurrence of ``flag``."""
    texts = _texts(tokens)
    assert flag in texts, f"{flag} missing from {texts}"
    index = len(texts) - 1 - texts[::-1].index(flag)
    return tokens[index + 1]


def _script(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "run.sh"
    path.write_text(body)
    return path


@needs_fixtures
def test_mindspeed_llama2_multiline_quoted_variables():
    cmd = parse_launch_script(FIXTURES / "mindspeed_llm_v2.2.0__pretrain_llama2_7b_ptd.sh")
    assert (cmd.launcher, cmd.script, cmd.line) == ("torchrun", "pretrain_gpt.py", 89)
    texts = _texts(cmd.script_args)
    # after the blank line inside GPT_ARGS, and the last flag of the variable
    assert "--no-masked-softmax-fusion" in texts and "--bf16" in texts
    assert texts.index("--no-masked-softmax-fusion") == texts.index("--use-flash-attn") + 1
    flag = cmd.script_args[texts.index("--tensor-model-parallel-size")]
    assert flag.line == 30                      # inside GPT_ARGS="..." (lines 28-75)
    value = _after(cmd.script_args, "--tensor-model-parallel-size")
    assert (value.text, value.line, value.unresolved) == ("1", 17, None)   # TP=1 on line 17
    assert _after(cmd.script_args, "--tokenizer-model").text == "your tokenizer path"
    assert _after(cmd.launcher_args, "--nproc_per_node").text == "8"
    assert _after(cmd.script_args, "--distributed-backend").line == 93
    assert "tee" not in texts and "|" not in texts
    assert any("your tokenizer path" in n and "kept as one argument" in n for n in cmd.notes)


@needs_fixtures
def test_upstream_mixtral_bash_arrays():
    cmd = parse_launch_script(FIXTURES / "extra__megatron_core_v0.12.1__train_mixtral_8x7b_distributed.sh")
    texts = _texts(cmd.script_args)
    for flag in ("--use-mcore-models", "--rotary-base", "--num-experts", "--overlap-grad-reduce",
                 "--tokenizer-type", "--split", "--bf16", "--sequence-parallel", "--no-load-rng"):
        assert flag in texts, flag
    load = _after(cmd.script_args, "--load")
    assert load.unresolved == "1" and load.text == "$1" and load.line == 15
    tb = _after(cmd.script_args, "--tensorboard-dir")
    assert (tb.text, tb.unresolved) == ("$1/tensorboard", "1")
    assert _after(cmd.script_args, "--tokenizer-model").unresolved == "2"
    assert "--wandb-project" not in texts
    assert any(n.startswith("line 103:") and "LOGGING_ARGS+=(...)" in n and "not applied" in n
               for n in cmd.notes), cmd.notes
    assert _after(cmd.launcher_args, "--nnodes").text == "1"           # ${SLURM_NNODES:-"1"}
    assert _after(cmd.launcher_args, "--master_addr").text == "localhost"
    assert _after(cmd.script_args, "--lr").line == 71
    assert _after(cmd.script_args, "--log-interval").text == "1"       # stray backslashes ignored


@needs_fixtures
def test_mindspeed_mixtral_negative_values_and_single_quotes():
    cmd = parse_launch_script(FIXTURES / "mindspeed_llm_v2.2.0__pretrain_mixtral_8x7b_ptd.sh")
    freq = _after(cmd.script_args, "--moe-layer-freq")
    assert (freq.text, freq.line) == ("-1", 43)
    algo = _after(cmd.script_args, "--context-parallel-algo")
    assert (algo.text, algo.line) == ("megatron_cp_algo", 31)
    assert _after(cmd.script_args, "--num-layers").text == "32"
    assert _texts(cmd.script_args)[:2] == ["--num-experts", "8"]        # $MOE_ARGS comes first


def test_repeated_flags_kept_in_order(tmp_path):
    cmd = parse_launch_script(_script(tmp_path, 'A="--lr 1"\ntorchrun train.py $A --lr 2 \\\n  --lr 3\n'))
    assert [(t.text, t.line) for t in cmd.script_args] == [
        ("--lr", 1), ("1", 1), ("--lr", 2), ("2", 2), ("--lr", 3), ("3", 3)]


def test_default_values_and_assignments(tmp_path):
    body = ('X=${NOT_SET:-"fall back"}\nY=${NOT_SET:-7}\nZ=5\nW=${Z:-9}\n'
            'torchrun train.py --x "$X" --y $Y --w $W\n')
    cmd = parse_launch_script(_script(tmp_path, body))
    assert _texts(cmd.script_args) == ["--x", "fall back", "--y", "7", "--w", "5"]
    assert all(t.unresolved is None for t in cmd.script_args)
    assert _after(cmd.script_args, "--w").line == 3


def test_arithmetic(tmp_path):
    body = "A=4\nB=2\nWORLD=$(( $A * $B ))\nHALF=$((A/3))\nBAD=$(( $A * $NODES ))\n" \
           "python pretrain_gpt.py --world $WORLD --half $HALF --bad $BAD\n"
    cmd = parse_launch_script(_script(tmp_path, body))
    assert _after(cmd.script_args, "--world") == Token("8", 3, None)
    assert _after(cmd.script_args, "--half").text == "1"
    bad = _after(cmd.script_args, "--bad")
    assert bad.unresolved == "NODES" and bad.line == 5


def test_unresolved_environment_variable(tmp_path):
    body = 'torchrun pretrain_gpt.py --data-path $DATA_ROOT --out "${OUT_DIR}/ckpt" --n 1\n'
    cmd = parse_launch_script(_script(tmp_path, body))
    assert _after(cmd.script_args, "--data-path") == Token("$DATA_ROOT", 1, "DATA_ROOT")
    assert _after(cmd.script_args, "--out") == Token("${OUT_DIR}/ckpt", 1, "OUT_DIR")
    assert _texts(cmd.script_args)[-2:] == ["--n", "1"]        # nothing vanished
    resolved = parse_launch_script(cmd.path, environ={"DATA_ROOT": "/data"})
    assert _after(resolved.script_args, "--data-path").text == "/data"


def test_positional_values_when_given(tmp_path):
    path = _script(tmp_path, 'CKPT=$1\ntorchrun pretrain_gpt.py --load $CKPT\n')
    assert _after(parse_launch_script(path).script_args, "--load").unresolved == "1"
    assert _after(parse_launch_script(path, positional=["/ckpt"]).script_args, "--load").text == "/ckpt"


def test_word_splitting_and_quoted_arrays(tmp_path):
    body = ('EXTRA="--a 1   --b 2"\nARR=( --c "x y"  # comment\n  --d )\nARR+=(--e)\n'
            'torchrun pretrain_gpt.py $EXTRA "$EXTRA" "${ARR[@]}" ${ARR[@]}\n')
    cmd = parse_launch_script(_script(tmp_path, body))
    assert _texts(cmd.script_args) == ["--a", "1", "--b", "2", "--a 1   --b 2",
                                       "--c", "x y", "--d", "--e", "--c", "x", "y", "--d", "--e"]


def test_stops_at_pipes_redirections_and_separators(tmp_path):
    body = "torchrun pretrain_gpt.py --a 1 2>&1 | tee log.txt\n" \
           "mkdir -p out && python -m torch.distributed.launch --nproc_per_node 2 train.py --b 1 > out/x; echo done\n"
    cmd = parse_launch_script(_script(tmp_path, body))
    assert _texts(cmd.script_args) == ["--a", "1"]
    assert any("python -m torch.distributed.launch train.py" in n and "ignored" in n for n in cmd.notes)


def test_conditional_blocks_and_heredocs_are_not_applied(tmp_path):
    body = ("MODE=base\nif [ -n \"$X\" ]; then\n  MODE=cond\nfi\nfor i in 1 2; do N=$i; done\n"
            "setup() {\n  MODE=func\n}\ncat > cfg.txt <<EOF\ntorchrun evil.py --x\nEOF\n"
            "nohup torchrun --nnodes 1 pretrain_gpt.py --mode $MODE --n $N &\n")
    cmd = parse_launch_script(_script(tmp_path, body))
    assert cmd.script == "pretrain_gpt.py" and cmd.line == 12
    assert _after(cmd.script_args, "--mode").text == "base"
    assert _after(cmd.script_args, "--n").unresolved == "N"
    assert "line 3: MODE=... inside `if` not applied" in cmd.notes
    assert any(n.startswith("line 5:") and "`for`" in n for n in cmd.notes)
    assert any(n.startswith("line 7:") and "`function`" in n for n in cmd.notes)


def test_command_substitution_is_never_run(tmp_path):
    marker = tmp_path / "MARKER"
    cmd = parse_launch_script(_script(tmp_path, f'H=$(touch {marker})\ntorchrun pretrain_gpt.py --h $H\n'))
    assert _after(cmd.script_args, "--h").unresolved == f"$(touch {marker})"
    assert not marker.exists()


def test_no_launch_command(tmp_path):
    path = _script(tmp_path, 'echo "torchrun pretrain_gpt.py"\npython -c "print(1)"\n')
    with pytest.raises(InputError) as info:
        parse_launch_script(path)
    message = str(info.value)
    assert str(path) in message and "torchrun" in message and "*.py" in message


def test_unterminated_quote_names_its_line(tmp_path):
    with pytest.raises(InputError, match=r"run\.sh:2: unterminated double quote"):
        parse_launch_script(_script(tmp_path, 'A=1\nB="--x 1\ntorchrun pretrain_gpt.py $B\n'))
