import pytest

pytest.importorskip("cuda.bindings")

from fake_bundle import PARAMS, make_bundle, record  # noqa: E402
from fake_cuda import FakeDriver  # noqa: E402

from gcmoe_runtime.artifacts.record import LaunchFacts  # noqa: E402
from gcmoe_runtime.loader import KernelLoader, LoaderError, VariantNotInBundle  # noqa: E402
from gcmoe_runtime.params import ParamSchemaError  # noqa: E402

INFO = [(p.offset, p.size) for p in PARAMS]


def loader(tmp_path, artifacts, **info):
    d = FakeDriver(param_info=info or {r.kernel_name: INFO for r, _ in artifacts})
    return KernelLoader.open(str(make_bundle(tmp_path, artifacts)), drv=d), d


def test_load_checks_schema_and_caches(tmp_path):
    arts = [record("role1"), record("role2", launch=LaunchFacts(block=(384, 1, 1), cluster=(2, 1, 1), dynamic_smem=200_000))]
    ld, d = loader(tmp_path, arts)
    k = ld.kernel("role2", bm=16)
    assert k.param_info == tuple(INFO) and k.name == "gcmoe_role2_0"
    assert ld.kernel("role2", bm=16) is k
    assert d.calls.count("cuLibraryLoadData") == 1
    ld.configure(k, 0)
    ld.configure(k, 0)
    assert len(d.kernel_attrs) == 1 and d.kernel_attrs[0][1] == 200_000
    a = k.args({"tm_x": b"\0" * 128, "peers": b"\0" * 592, "ws": 1, "n": 2})
    assert len(a.packed) == 732
    ld.unload_all()
    assert d.live_count("library") == 0


def test_missing_variant_names_it_and_the_manifest(tmp_path):
    ld, _ = loader(tmp_path, [record("role1", bm=16)])
    with pytest.raises(VariantNotInBundle, match=r"bm=32.*test-tiny.yaml.*gcmoe-build compile"):
        ld.kernel("role1", bm=32)
    with pytest.raises(VariantNotInBundle, match="no 'role3' kernels"):
        ld.kernel("role3", bm=16)


def test_driver_schema_mismatch_refused_and_library_unloaded(tmp_path):
    rec, cub = record("role1")
    bad = list(INFO)
    bad[2] = (724, 8)
    ld, d = loader(tmp_path, [(rec, cub)], **{rec.kernel_name: bad})
    with pytest.raises(ParamSchemaError, match="'ws'.*cuKernelGetParamInfo says offset 724"):
        ld.kernel("role1", bm=16)
    assert d.live_count("library") == 0


def test_cubin_with_extra_or_fewer_params_refused(tmp_path):
    rec, cub = record("role1")
    ld, _ = loader(tmp_path, [(rec, cub)], **{rec.kernel_name: INFO + [(736, 8)]})
    with pytest.raises(ParamSchemaError, match="more than the 4 recorded"):
        ld.kernel("role1", bm=16)
    ld2, _ = loader(tmp_path / "b", [(rec, cub)], **{rec.kernel_name: INFO[:3]})
    with pytest.raises(ParamSchemaError, match="only 3"):
        ld2.kernel("role1", bm=16)


def test_ptx_payload_is_never_handed_to_the_driver(tmp_path):
    rec, cub = record("role1", cubin=b"//\n.version 9.4\n.target sm_90a\n")
    ld, d = loader(tmp_path, [(rec, cub)])
    with pytest.raises(LoaderError, match="not an ELF cubin; the runtime never JIT-compiles"):
        ld.kernel("role1", bm=16)
    assert "cuLibraryLoadData" not in d.calls
