"""ci/pack_logs.py: a session's logs/ folder becomes one deterministic logs.tar.gz holding the same bytes."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location("pack_logs", Path(__file__).resolve().parents[2] / "ci/pack_logs.py")
pack_logs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(pack_logs)


def _session(root: Path) -> dict[str, bytes]:
    files = {"call-a/logs/00-env.log": b"H200\n", "call-a/logs/step one.log": b"x" * 700,
             "call-a/logs/sub/summary.md": b"| a |\n", "call-a/json/keep.json": b"{}"}
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    return files


def test_pack_replaces_the_folder_with_an_identical_deterministic_archive(tmp_path):
    archives = []
    for run in ("a", "b"):
        root = tmp_path / run
        files = _session(root)
        assert pack_logs.main([str(root)]) == 0
        archive = root / "call-a" / pack_logs.ARCHIVE
        assert not (root / "call-a/logs").exists() and (root / "call-a/json/keep.json").read_bytes() == b"{}"
        got = pack_logs.unpacked(archive)
        assert got == {k.removeprefix("call-a/"): v for k, v in files.items() if "/logs/" in k}
        archives.append(archive.read_bytes())
    assert archives[0] == archives[1]  # no time, owner or order in it


def test_pack_refuses_to_overwrite_and_check_finds_loose_logs(tmp_path):
    _session(tmp_path)
    assert pack_logs.main([str(tmp_path)]) == 0
    (tmp_path / "call-a/logs").mkdir()
    (tmp_path / "call-a/logs/late.log").write_bytes(b"late")
    assert pack_logs.main(["--check", str(tmp_path)]) == 1
    with pytest.raises(FileExistsError, match="already packed"):
        pack_logs.main([str(tmp_path)])
    assert (tmp_path / "call-a/logs/late.log").read_bytes() == b"late"  # nothing lost
