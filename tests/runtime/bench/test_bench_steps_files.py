"""CPU: every ``python -m gcmoe_runtime.bench`` command in the GPU calls' steps files (``results/operator/steps``)
parses with the bench's command line as it is now. A steps file is often written in one session and run in a later
one (``s48-a.steps``: prepared without a device); an option renamed in between would only show on the GPU machine,
after its start, on device time."""
from __future__ import annotations

import contextlib
import io
import shlex
from pathlib import Path

import pytest

from gcmoe_runtime.bench.__main__ import parser

STEPS = Path(__file__).resolve().parents[3] / "results" / "operator" / "steps"
_OPS = set(";&|<>()")


def bench_commands(steps_text: str) -> list[tuple[str, list[str]]]:
    """(step name, the bench's arguments) of every bench command in a steps file (``name | timeout | command``;
    the arguments end at the shell's first operator or redirection)."""
    found = []
    for line in steps_text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        name, _, cmd = (x.strip() for x in line.split("|", 2))
        lex = shlex.shlex(cmd, posix=True, punctuation_chars=True)
        lex.whitespace_split = True
        words = list(lex)
        for i, w in enumerate(words):
            if w == "gcmoe_runtime.bench" and i and words[i - 1] == "-m":
                args = []
                for a in words[i + 1:]:
                    if set(a) <= _OPS:
                        if args and args[-1].isdigit() and a.startswith(">"):
                            args.pop()  # the file descriptor of `2>&1`
                        break
                    args.append(a)
                found.append((name, args))
    return found


def test_bench_commands_are_found_up_to_the_shell_operators():
    text = ("# comment | 1 | python3 -m gcmoe_runtime.bench sweep\n"
            "a | 90 | X=1 python3 -m gcmoe_runtime.bench timeline --model glm-5.2 --out $WORK/tl/a\n"
            "b | 90 | cd x && python3 -m gcmoe_runtime.bench tasks --model m --out o 2>&1; gzip -9 y\n"
            "c | 90 | python3 other.py gcmoe_runtime.bench\n")
    assert bench_commands(text) == [("a", ["timeline", "--model", "glm-5.2", "--out", "$WORK/tl/a"]),
                                    ("b", ["tasks", "--model", "m", "--out", "o"])]


@pytest.mark.parametrize("path", sorted(STEPS.glob("*.steps")), ids=lambda p: p.name)
def test_every_bench_command_of_a_steps_file_parses(path):
    for name, args in bench_commands(path.read_text()):
        err = io.StringIO()
        try:
            with contextlib.redirect_stderr(err):
                parser().parse_args(args)
        except SystemExit:
            pytest.fail(f"{path.name} step {name}: {err.getvalue().strip().splitlines()[-1]}")
