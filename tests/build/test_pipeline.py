"""Pipeline orchestration with a fast fake chain: planning, cache hits, no-kernel roles, failures,
the process pool, progress output. (The real chain runs in test_cli.py's end-to-end test.)"""
from __future__ import annotations

import dataclasses
import io
import sys
from pathlib import Path

import pytest

from gcmoe_runtime.artifacts.store import Store

from gcmoe_build import pipeline
from gcmoe_build.pipeline import CACHED, COMPILED, FAILED, NO_KERNEL, PipelineError

sys.path.insert(0, str(Path(__file__).parent))
from fake_backend import FakeBackend, write_manifest  # noqa: E402

VARIANTS = [
    {"role": "role1", "BM": 64, "P": 2},
    {"role": "role1", "BM": 128, "P": 2},
    {"role": "role2", "BM": 64, "P": 2},
    {"role": "role3", "P": 2},  # no kernel yet
]


@pytest.fixture
def manifest(tmp_path):
    return write_manifest(tmp_path / "tiny.json", VARIANTS)


def _run(manifest, store, backend, jobs=1, **kw):
    err = io.StringIO()
    report = pipeline.run([manifest], store, jobs=jobs, backend=backend, stream=err, **kw)
    return report, err.getvalue()


def test_cold_then_warm(tmp_path, manifest):
    calls = tmp_path / "calls"
    backend = FakeBackend(calls_file=str(calls))
    store = Store(tmp_path / "store")
    report, err = _run(manifest, store, backend)
    assert [r.status for r in report.results] == [COMPILED, COMPILED, COMPILED, NO_KERNEL]
    assert report.ok and len(store.keys()) == 3
    assert len(calls.read_text().splitlines()) == 3
    for r in report.by_status(COMPILED):
        assert store.get_record(r.planned.key) == r.record
        assert store.get_object(r.record.ptx_sha256).startswith(b"// fake ptx")  # PTX kept in the store
    assert "[3/3" in err and "role3" not in err  # the bar counts what is built

    report2, _ = _run(manifest, store, backend)
    assert [r.status for r in report2.results] == [CACHED, CACHED, CACHED, NO_KERNEL]
    assert len(calls.read_text().splitlines()) == 3  # nothing recompiled
    text = report2.summary()
    assert "3 cached" in text and "1 no kernel yet" in text and "store" in text and "KiB" in text
    assert report2.store_bytes == store.size_bytes() > 0


def test_no_kernel_variants_are_listed_not_compiled(tmp_path, manifest):
    report, _ = _run(manifest, Store(tmp_path / "s"), FakeBackend())
    nk = report.by_status(NO_KERNEL)
    assert len(nk) == 1 and nk[0].planned.key is None and nk[0].record is None
    assert "no kernel yet (not compiled): role3 x1" in report.summary()


def test_parallel_pool(tmp_path, manifest):
    calls = tmp_path / "calls"
    store = Store(tmp_path / "store")
    report, _ = _run(manifest, store, FakeBackend(calls_file=str(calls), delay_s=0.2), jobs=2)
    assert report.ok and len(store.keys()) == 3 and report.jobs == 2
    pids = {ln.split()[0] for ln in calls.read_text().splitlines()}
    assert len(pids) == 2  # compiled in two worker processes
    assert all(r.seconds >= 0.2 for r in report.by_status(COMPILED))


def test_variant_shared_by_two_manifests_is_built_once(tmp_path):
    a = write_manifest(tmp_path / "a.json", VARIANTS[:2])
    b = write_manifest(tmp_path / "b.json", VARIANTS[1:3])
    calls = tmp_path / "calls"
    store = Store(tmp_path / "s")
    report = pipeline.run([a, b], store, jobs=1, backend=FakeBackend(calls_file=str(calls)), progress=False)
    assert [r.status for r in report.results] == [COMPILED, COMPILED, pipeline.SAME_AS_EARLIER, COMPILED]
    assert len(calls.read_text().splitlines()) == 3 and len(store.keys()) == 3
    assert report.results[2].record == report.results[1].record
    assert "1 same as an earlier manifest's" in report.summary()
    keys, _, _ = pipeline.bundle_plan([a, b], store, backend=FakeBackend())
    assert sorted(keys) == store.keys()


def test_failure_is_reported_and_others_still_build(tmp_path):
    m = write_manifest(tmp_path / "m.json", [{"role": "role1", "BM": 64, "fail": True}, {"role": "role2", "BM": 64}])
    store = Store(tmp_path / "s")
    report, _ = _run(m, store, FakeBackend())
    assert [r.status for r in report.results] == [FAILED, COMPILED]
    assert not report.ok
    assert "PTX did not match" in report.results[0].error and "PTX did not match" in report.summary()
    assert store.keys() == [report.results[1].planned.key]


class KeyDisagrees(FakeBackend):
    def compile(self, variant):
        art = super().compile(variant)
        return dataclasses.replace(art, record=dataclasses.replace(art.record, key="0" * 64))


def test_key_disagreement_is_a_failure(tmp_path, manifest):
    store = Store(tmp_path / "s")
    report, _ = _run(manifest, store, KeyDisagrees())
    assert all(r.status in (FAILED, NO_KERNEL) for r in report.results)
    assert "key derivation disagrees" in report.results[0].error
    assert store.keys() == []


def test_arch_filter_and_dedup(tmp_path):
    m = write_manifest(tmp_path / "m.json", VARIANTS[:2], arch=("sm_90a", "sm_100a"))
    b = FakeBackend()
    assert len(pipeline.plan([m], backend=b)) == 4
    assert {p.variant.arch for p in pipeline.plan([m], "sm_100a", b)} == {"sm_100a"}
    twice = pipeline.plan([m, m], backend=b)
    assert len(twice) == 8 and [p.same_as is not None for p in twice] == [False] * 4 + [True] * 4
    with pytest.raises(PipelineError, match="no variants for --arch sm_103a.*sm_100a"):
        pipeline.plan([m], "sm_103a", b)


def test_bundle_plan_requires_compiled(tmp_path, manifest):
    store = Store(tmp_path / "s")
    b = FakeBackend()
    with pytest.raises(PipelineError, match="(?s)3 variant\\(s\\) are not compiled.*gcmoe-build compile"):
        pipeline.bundle_plan([manifest], store, backend=b)
    _run(manifest, store, b)
    keys, no_kernel, _ = pipeline.bundle_plan([manifest], store, backend=b)
    assert sorted(keys) == store.keys() and [p.variant.role for p in no_kernel] == ["role3"]


def test_damaged_cached_object_is_detected(tmp_path, manifest):
    store = Store(tmp_path / "s")
    b = FakeBackend()
    report, _ = _run(manifest, store, b)
    rec = report.results[0].record
    store.object_path(rec.cubin_sha256).write_bytes(b"garbage")
    report2, _ = _run(manifest, store, b)
    assert [r.status for r in report2.results][:2] == [COMPILED, CACHED]
    assert "store entry was damaged" in report2.results[0].note and "damaged" in report2.summary()
    assert store.get_object(rec.cubin_sha256)  # healed
    report3, _ = _run(manifest, store, b)
    assert report3.results[0].status == CACHED


def test_progress_tty_and_quiet(tmp_path, manifest):
    class Tty(io.StringIO):
        def isatty(self):
            return True

    s = Tty()
    bar = pipeline.Progress(2, s)
    bar.step("a", COMPILED, 1.0)
    bar.step("b", CACHED, 0.0)
    assert s.getvalue().count("\r") == 2 and "[" + "#" * 30 + "] 2/2" in s.getvalue()
    q = io.StringIO()
    pipeline.run([manifest], Store(tmp_path / "s2"), jobs=1, backend=FakeBackend(), progress=False, stream=q)
    assert q.getvalue() == ""


KILLED_RUN = """
import sys
sys.path.insert(0, {here!r})
from pathlib import Path
from fake_backend import FakeBackend
from gcmoe_build import pipeline
from gcmoe_runtime.artifacts.store import Store
pipeline.run([Path({manifest!r})], Store({root!r}), jobs=1, backend=FakeBackend(delay_s=0.3), progress=True)
"""


def test_killed_compile_leaves_consistent_store(tmp_path):
    import os
    import signal
    import subprocess

    variants = [{"role": "role1", "BM": bm} for bm in (8, 16, 32, 64, 128, 256)]
    m = write_manifest(tmp_path / "m.json", variants)
    root = tmp_path / "store"
    code = KILLED_RUN.format(here=str(Path(__file__).parent), manifest=str(m), root=str(root))
    proc = subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE, text=True)
    proc.stderr.readline()  # the first variant is in the store
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    store = Store(root)
    done = store.keys()
    assert 1 <= len(done) < len(variants)
    for key in done:  # every visible record is whole and has its verified object
        store.get_object(store.get_record(key).cubin_sha256)
    report = pipeline.run([m], store, jobs=1, backend=FakeBackend(), progress=False)
    statuses = [r.status for r in report.results]
    assert statuses.count(CACHED) == len(done) and statuses.count(COMPILED) == len(variants) - len(done)
    assert report.ok and len(store.keys()) == len(variants)


class DiesOnFail(FakeBackend):
    def compile(self, variant):
        if variant.params.get("fail"):
            import os

            os._exit(9)  # a worker dying (as a segfaulting compiler would)
        return super().compile(variant)


def test_dead_worker_is_a_reported_failure(tmp_path):
    m = write_manifest(tmp_path / "m.json", [{"role": "role1", "BM": 8, "fail": True}, {"role": "role2", "BM": 8}])
    report, _ = _run(m, Store(tmp_path / "s"), DiesOnFail(), jobs=2)
    assert not report.ok
    assert any("compile process failed" in (r.error or "") for r in report.results)
