"""CPU: ci/gpu_session.sh, the batch runner of every GPU call (steps file parsing, per-step timeouts, the global
deadline, the summary table kept in logs/summary.md, the tree recorded in 00-env.log). Run with its
`source ci/gpu_env.sh` line (which installs the carried wheels on the GPU machine) removed and a fake nvidia-smi."""
from __future__ import annotations

import os
import subprocess
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(tmp_path: Path, steps: str, deadline: int = 60) -> tuple[str, Path]:
    script = (ROOT / "ci" / "gpu_session.sh").read_text()
    assert "source ci/gpu_env.sh || exit 1" in script
    (tmp_path / "gs.sh").write_text(script.replace("source ci/gpu_env.sh || exit 1", "true"))
    (tmp_path / "bin").mkdir()
    smi = tmp_path / "bin" / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho fake-gpu\n")
    smi.chmod(0o755)
    (tmp_path / "s.steps").write_text(steps)
    env = dict(os.environ, PATH=f"{tmp_path / 'bin'}:{os.environ['PATH']}", OUT=str(tmp_path / "out"),
               WORK=str(tmp_path / "work"), GCMOE_GIT_COMMIT="abc1234", GCMOE_SESSION_DEADLINE_S=str(deadline))
    r = subprocess.run(["bash", str(tmp_path / "gs.sh"), str(tmp_path / "s.steps")], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout, tmp_path / "work"


def test_steps_run_in_order_with_timeouts_and_a_kept_summary(tmp_path):
    out, work = _run(tmp_path, "# a comment with it's quote | 1 | false\n"
                               "ok1 | 5 | echo hello\n"
                               "\n"
                               "bad | 5 | exit 3\n"
                               "slow | 1 | sleep 5\n")
    assert "| ok1 | ok |" in out and "| bad | FAIL rc=3 |" in out and "| slow | TIMEOUT |" in out
    assert "comment" not in out.split("| step |")[1]  # comments are not steps
    summary = (work / "logs" / "summary.md").read_text()
    assert summary.splitlines()[0] == "| step | result | wall |" and "| slow | TIMEOUT |" in summary
    assert "hello" in (work / "logs" / "ok1.log").read_text()
    env = (work / "logs" / "00-env.log").read_text()
    assert "fake-gpu" in env and "tree (GCMOE_GIT_COMMIT): abc1234" in env and "s.steps" in env
    with tarfile.open(tmp_path / "out" / "session.tar.gz") as tf:
        names = tf.getnames()
    assert "./logs/summary.md" in names and "./logs/ok1.log" in names


def test_steps_that_cannot_start_before_the_deadline_are_skipped(tmp_path):
    out, _ = _run(tmp_path, "first | 5 | true\nsecond | 5 | true\n", deadline=10)  # < 20 s left at the start
    assert "| first | skipped (deadline) | - |" in out and "| second | skipped (deadline) | - |" in out
