"""A CPU stand-in for the gc-moe operator API, to test the benchmark's plumbing (not its numbers).

`FakeApi` has the three functions `impl_gcmoe` calls. The partition comes from the real
`gcmoe_runtime.green` code over the fake driver (132 SMs, alignment 8: H200), the weight transform
is the real `moe.transform_weights_for_gc_moe`; only the layer call is fake: it checks its
arguments as the real call's host checks do and writes y = the dequantised staged input rows
(so a test can tell that the right token rows were staged). Timings of a run with it mean nothing.

Factories for `--impl` / `make()`: `fake_gcmoe:gc_moe`, `...:gc_moe_nooverlap`, `...:gc_moe_serial`,
`...:gc_moe_streams`, each taking an optional `@REQUEST`.
"""
from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(__file__)))  # tests/runtime: fake_cuda

from fake_cuda import FakeDriver  # noqa: E402

from gcmoe_runtime import green  # noqa: E402
from gcmoe_runtime import moe  # noqa: E402
from gcmoe_runtime.bench.impl_gcmoe import GcMoeBench  # noqa: E402
from gcmoe_runtime.numerics.quant import dequantize_e4m3_fp32_k128  # noqa: E402

DRIVER = FakeDriver()  # one per process: partitions are created on it and never destroyed here


def fake_split(device, request):
    return green.full_device_partition(device, request, drv=DRIVER)


class FakeBuffer:
    def __init__(self, group, E, cap, k, H, I, shared, partition, overlap, bundle, timeout_ns):
        if group is None:
            self.rank, self.world_size = 0, 1
        else:
            import torch.distributed as dist

            self.rank, self.world_size = dist.get_rank(group), dist.get_world_size(group)
        self.num_experts, self.capacity, self.topk, self.hidden, self.intermediate = E, cap, k, H, I
        self.shared_experts, self.partition, self.overlap, self.bundle = shared, partition, overlap, bundle
        self.timeout_ns = timeout_ns
        self.device = torch.device("cpu")
        self.x = torch.zeros(cap, H, dtype=torch.float8_e4m3fn)
        self.x_sf = torch.zeros(cap, H // 128, dtype=torch.float32)
        self.topk_idx = torch.full((cap, k), -1, dtype=torch.int32)
        self.topk_weights = torch.zeros(cap, k, dtype=torch.float32)
        self.calls = 0
        self.checked = 0
        self.k_interleave = False

    def check_errors(self):
        self.checked += 1


class FakeApi:
    buffers: list = []

    def get_symm_buffer_for_gc_moe(self, group, num_experts, capacity, topk, hidden, intermediate, *, bundle,
                                   shared_experts=False, dispatch_sms=None, device=None, timeout_ns=0,
                                   green_contexts=True, overlap=True):
        assert os.path.isfile(bundle), bundle
        gp = (green.get_partition(0, dispatch_sms, drv=DRIVER) if green_contexts
              else green.full_device_partition(0, dispatch_sms, drv=DRIVER))
        b = FakeBuffer(group, num_experts, capacity, topk, hidden, intermediate, shared_experts, gp, overlap,
                       bundle, timeout_ns)
        FakeApi.buffers.append(b)
        return b

    def transform_weights_for_gc_moe(self, l1, l2, shared_weights=None, shared_recipe=(1, 128, 128),
                                     k_interleave=False):
        return moe.transform_weights_for_gc_moe(l1, l2, shared_weights=shared_weights, shared_recipe=shared_recipe,
                                                k_interleave=k_interleave)

    def fp8_fp4_gc_moe(self, y, w1, w2, buffer, *, shared_weights=None, activation_alpha=1.0,
                       activation_clamp=10.0, **_):
        T = y.shape[0]
        assert y.dtype == torch.bfloat16 and y.shape[1] == buffer.hidden and T <= buffer.capacity
        e_loc = buffer.num_experts // buffer.world_size
        assert (w1.experts, w1.rows, w1.k) == (e_loc, 2 * buffer.intermediate, buffer.hidden)
        assert (w2.experts, w2.rows, w2.k) == (e_loc, buffer.hidden, buffer.intermediate)
        assert w1.k_interleave == w2.k_interleave == buffer.k_interleave
        assert (shared_weights is not None) == buffer.shared_experts
        if shared_weights is not None:  # the real call's layout check: untransformed weights are refused
            moe._check_shared_layout(shared_weights.args(), buffer)
        idx = buffer.topk_idx[:T]
        assert bool(((idx >= 0) & (idx < buffer.num_experts)).all()), "staged top-k ids out of range"
        assert torch.allclose(buffer.topk_weights[:T].sum(1), torch.ones(T))
        y.copy_(dequantize_e4m3_fp32_k128(buffer.x[:T], buffer.x_sf[:T]).to(torch.bfloat16))
        buffer.calls += 1
        return y


API = FakeApi()


def _factory(mode):
    def make(arg=None):
        return GcMoeBench(mode, arg, api=API, split=fake_split)
    return make


gc_moe = _factory("gc-moe")
gc_moe_nooverlap = _factory("gc-moe-nooverlap")
gc_moe_serial = _factory("gc-moe-serial")
gc_moe_streams = _factory("gc-moe-streams")


def fake_bundle_file(path, shape, ranks, splits, shared=True):
    """A verified bundle whose records carry the variant params impl_gcmoe matches on (fake cubins)."""
    import hashlib

    from gcmoe_runtime.artifacts.bundle import write_bundle
    from gcmoe_runtime.artifacts.record import ArtifactRecord, LaunchFacts, ParamSpec, sha256_hex
    from gcmoe_runtime.artifacts.store import Store

    ident = {"test": "bench-gcmoe"}
    params = (ParamSpec(0, "n", "u32", 4, 4, 0),)
    store = Store(path.parent / (path.stem + "-store"))
    keys = []
    for P in ranks:
        for d, c in splits:
            base = {"ranks": P, "hidden": shape.hidden, "experts": shape.experts, "top_k": shape.top_k,
                    "capacity": shape.capacity, "dispatch_sms": d, "compute_sms": c}
            roles = [("role1", {**base, "bm": 8}), ("role2", {**base, "bm": 8, "intermediate": shape.intermediate}),
                     ("role3", base)]
            if shared:
                roles.append(("role4", {"hidden": shape.hidden, "intermediate": shape.intermediate,
                                        "capacity": shape.capacity, "dispatch_sms": d, "compute_sms": c, "bm": 8}))
            for role, v in roles:
                seed = f"{role}-{sorted(v.items())}".encode()
                cubin = b"\x7fELF" + hashlib.sha512(seed).digest() * 4
                rec = ArtifactRecord(
                    key=sha256_hex(b"key-" + seed), role=role, arch="sm_90a", kernel_name=f"gcmoe_{role}_0",
                    variant=v, manifest=f"{shape.name}.yaml", compiler_identity=sha256_hex(b"bench-identity"),
                    cubin_sha256=sha256_hex(cubin), cubin_size=len(cubin), ptx_sha256=sha256_hex(b"ptx" + seed),
                    params=params, launch=LaunchFacts(block=(128, 1, 1)))
                if rec.key not in keys:
                    store.put_artifact(rec, cubin, ident)
                    keys.append(rec.key)
    write_bundle(path, store, keys, {f"{shape.name}.yaml": b"name: x\n"})
    return path
