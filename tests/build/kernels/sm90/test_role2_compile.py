"""CPU: the SM90 role2 GEMM kernels compile for sm_90a through the project chain (CuTe DSL ->
PTX -> locked ptxas) and the PTX has the instructions the design needs: register-A
``wgmma.mma_async m64n<BM>k32 .f32.e4m3.e4m3``, EVICT_FIRST 16-byte weight loads, no local memory."""
from __future__ import annotations

import re

import pytest

BMS = (8, 16, 32, 48, 64, 80)
_RS_WGMMA = re.compile(
    r"wgmma\.mma_async\.sync\.aligned\.m64n(\d+)k32\.f32\.e4m3\.e4m3\s+\{[^}]*\},\s*"
    r"\{%r\d+, %r\d+, %r\d+, %r\d+\},\s*%rd\d+")


@pytest.fixture(scope="module")
def built():
    from gcmoe_build.frontend.dsl import import_dsl

    import_dsl("sm_90a")
    from gcmoe_build.kernels.sm90.role2_devbuild import compile_one
    from gcmoe_build.kernels.sm90.role2_config import Role2GemmConfig

    out = {}
    for bm in BMS:
        for mode, k, rows in (("w1", 1024, 1024), ("w2", 512, 1024)):
            for pipe in (False, True):
                cfg = Role2GemmConfig(mode=mode, k=k, rows=rows, bm=bm, pipelined=pipe)
                name = f"role2_{mode}_test_bm{bm}" + ("_p" if pipe else "")
                out[(mode, bm, pipe)] = (cfg,) + compile_one(name, cfg)
    return out


@pytest.mark.parametrize("pipe", [False, True])
@pytest.mark.parametrize("mode", ["w1", "w2"])
@pytest.mark.parametrize("bm", BMS)
def test_ptx_has_register_a_e4m3_wgmma(built, mode, bm, pipe):
    cfg, ptx, cubin, entry = built[(mode, bm, pipe)]
    assert cubin[:4] == b"\x7fELF"
    assert ".target sm_90a" in ptx and entry == f"role2_{mode}_test_bm{bm}" + ("_p" if pipe else "") + "_0"
    shapes = _RS_WGMMA.findall(ptx)
    # one K128 step is unrolled twice per loop iteration, 2 slots x 4 K32 each
    assert shapes and set(shapes) == {str(bm)}, shapes
    assert len(shapes) == 16, len(shapes)
    assert "createpolicy.fractional.L2::evict_first" in ptx
    if pipe:  # producer warpgroup: bulk copies on full/empty mbarriers, register split
        assert ".reqntid 384" in ptx and ".minnctapersm 1" in ptx
        assert len(re.findall(r"cp\.async\.bulk\.shared::cluster\.global\.mbarrier::complete_tx::bytes"
                              r"\.L2::cache_hint", ptx)) == 8  # 4 slabs x (codes, scales)
        prod, cons = cfg.setmaxnreg  # 40 / 232, from BM 48 24 / 240 (session 35)
        assert (prod, cons) == ((24, 240) if bm >= 48 else (40, 232))
        assert f"setmaxnreg.dec.sync.aligned.u32 {prod}" in ptx and f"setmaxnreg.inc.sync.aligned.u32 {cons}" in ptx
        assert "mbarrier.try_wait.parity" in ptx and "trap;" in ptx and "%globaltimer" in ptx
        assert len(re.findall(r"ld\.shared\.v4\.u32", ptx)) >= 8 and "ld.shared.v2.u32" in ptx
    else:
        assert len(re.findall(r"ld\.global\.nc\.L1::no_allocate\.L2::cache_hint\.v4\.u32", ptx)) >= 8
    assert "fence.proxy.async.shared::cta" in ptx
    if bm <= 32:
        assert "ld.local" not in ptx and "st.local" not in ptx


def test_config_rejects_bad_shapes():
    from gcmoe_build.frontend.dsl import import_dsl

    import_dsl("sm_90a")
    from gcmoe_build.kernels.sm90.role2_config import Role2GemmConfig

    with pytest.raises(ValueError, match="BM=24"):
        Role2GemmConfig(mode="w1", k=1024, rows=1024, bm=24)
    with pytest.raises(ValueError, match="multiple of 256"):
        Role2GemmConfig(mode="w2", k=1000, rows=1024, bm=16)
    with pytest.raises(ValueError, match="mode"):
        Role2GemmConfig(mode="w3", k=1024, rows=1024, bm=16)


@pytest.mark.parametrize("mode", ["w1", "w2"])
def test_persistent_variant_has_the_ring_handshake(mode):
    from gcmoe_build.frontend.dsl import import_dsl

    import_dsl("sm_90a")
    from gcmoe_build.kernels.sm90.role2_devbuild import compile_one
    from gcmoe_build.kernels.sm90.role2_config import Role2GemmConfig

    k, rows = (1024, 1024) if mode == "w1" else (512, 1024)
    cfg = Role2GemmConfig(mode=mode, k=k, rows=rows, bm=16, pipelined=True)
    ptx, cubin, entry = compile_one(f"role2_{mode}_test_bm16_pp", cfg)
    assert cubin[:4] == b"\x7fELF" and entry == f"role2_{mode}_test_bm16_pp_0"
    assert len(_RS_WGMMA.findall(ptx)) == 16
    assert "ld.acquire.gpu.global.u32" in ptx and "%globaltimer" in ptx and "trap;" in ptx
    assert "st.relaxed.sys.global.u32" in ptx and "fence.sc.sys" in ptx  # trap record
    # the per-task releases are release operations, cumulative over the consumers' barrier: no separate fence
    # (its MEMBAR and L1 invalidation held the other consumer warps, session 12)
    assert "red.release.gpu.global.add.u32" in ptx and "fence.acq_rel.gpu" not in ptx
    if mode == "w1":
        assert "red.release.gpu.global.or.b64" in ptx
    else:
        assert "ld.acquire.gpu.global.u64" in ptx
    with pytest.raises(ValueError, match="pipelined"):
        from gcmoe_build.kernels.sm90.role2_persistent import build_role2_persistent

        build_role2_persistent(Role2GemmConfig(mode=mode, k=k, rows=rows, bm=16))


@pytest.mark.parametrize("mode", ["w1", "w2"])
def test_persistent_signal_warp_takes_the_releases(mode):
    """Role2GemmConfig.signal_warp: the consumers hand each task over at SIGNAL_BAR (W1 after its stores, W2 early:
    after its reads, before its stores) and release nothing; the signal warp, whose code comes before the
    consumers' (setmaxnreg.inc), waits at the same barrier once per task and then releases."""
    from gcmoe_build.frontend.dsl import import_dsl

    import_dsl("sm_90a")
    from gcmoe_build.kernels.sm90.role2_devbuild import compile_one
    from gcmoe_build.kernels.sm90.role2_config import SIGNAL_BAR, SIGNAL_BAR_THREADS, Role2GemmConfig

    kw = dict(mode=mode, k=1024, rows=1024, bm=16, pipelined=True, act_buffers=2, task_records=True,
              w2_early_release=True)
    ptx, cubin, _ = compile_one(f"role2_{mode}_test_bm16_ppks", Role2GemmConfig(**kw, signal_warp=True))
    assert cubin[:4] == b"\x7fELF"
    handover = f"bar.sync {SIGNAL_BAR}, {SIGNAL_BAR_THREADS};"
    cons = ptx.index("setmaxnreg.inc.sync.aligned.u32")
    sig = ptx.index(handover)
    assert sig < cons and ptx.count(handover) == 2  # the signal warp's, then the consumers'
    releases = [m.start() for m in re.finditer(r"red\.release\.gpu", ptx)]
    assert len(releases) == (2 if mode == "w1" else 1) and all(sig < r < cons for r in releases)
    if mode == "w2":  # the hand-over sits after the destination loads and before the stores
        st = ptx.index("st.global.v4.u32", cons)
        assert ptx.index(handover, cons) < st
    # without it, consumer thread 0 releases after the consumers' own barrier
    ptx0, _, _ = compile_one(f"role2_{mode}_test_bm16_ppkef", Role2GemmConfig(**kw))
    assert handover not in ptx0 and ptx0.index("red.release.gpu") > ptx0.index("setmaxnreg.inc.sync.aligned.u32")
    for bad in (dict(dynamic_tasks=True), dict(pipelined=False, act_buffers=1, task_records=False)):
        with pytest.raises(ValueError, match="signal_warp"):
            Role2GemmConfig(**{**kw, **bad}, signal_warp=True)


@pytest.mark.parametrize("mode", ["w1", "w2"])
def test_act_tma_copies_each_chunk_by_tensor_map(mode):
    """``act_tma``: consumer thread 0 fences the tensor map once and issues every chunk as KC/128 boxes (two sites:
    the task's chunk 0 and the next chunk), each after a proxy fence; no consumer cp.async remains; the chunk buffers'
    mbarriers sit after the amax partials; configs without the prefetch buffers are refused."""
    from gcmoe_build.frontend.dsl import import_dsl

    import_dsl("sm_90a")
    from gcmoe_build.kernels.sm90.role2_devbuild import compile_one
    from gcmoe_build.kernels.sm90.role2_chunks import act_tma_phase_flips
    from gcmoe_build.kernels.sm90.role2_config import Role2GemmConfig

    kw = dict(mode=mode, k=2048, rows=1024, bm=32, pipelined=True, act_buffers=2, task_records=True,
              w2_early_release=True, staged_fold_scale=True, signal_warp=True)
    cfg = Role2GemmConfig(**kw, act_tma=True)
    assert cfg.k // cfg.kc == 2  # two chunks: both copy sites stay in the code
    ptx, cubin, _ = compile_one(f"role2_{mode}_test_bm32_ppksa", cfg)
    assert cubin[:4] == b"\x7fELF"
    assert ptx.count("cp.async.bulk.tensor.2d") == 2 * (cfg.kc // 128)
    assert "cp.async.cg.shared.global" not in ptx
    assert ptx.count("fence.proxy.tensormap::generic.acquire.gpu") == 1
    assert ptx.index("fence.proxy.async.global;") < ptx.index("cp.async.bulk.tensor.2d")
    assert cfg.act_bar_bytes == 16 and cfg.misc_bytes == Role2GemmConfig(**kw).misc_bytes + 16
    assert act_tma_phase_flips(cfg) == ((cfg.k // cfg.kc + 1) // 2 & 1) | ((cfg.k // cfg.kc // 2 & 1) << 1)
    with pytest.raises(ValueError, match="act_tma"):
        Role2GemmConfig(mode=mode, k=1024, rows=1024, bm=16, pipelined=True, act_buffers=1, act_tma=True)


def test_two_ctas_per_sm_experiment():
    """The 256-thread kernel built for two CTAs per SM (the measured-next occupancy experiment): ``.minnctapersm 2``
    in the PTX, at most 128 registers and a <= 48 KB activation chunk, so two fit an SM; other counts refused."""
    import subprocess
    import tempfile

    from gcmoe_build.frontend.dsl import import_dsl

    import_dsl("sm_90a")
    from gcmoe_build.kernels.sm90.role2_devbuild import compile_one, configs
    from gcmoe_build.kernels.sm90.role2_config import Role2GemmConfig
    from gcmoe_build.toolchain.ptxas import locate_ptxas

    with pytest.raises(ValueError, match="ctas_per_sm=3"):
        Role2GemmConfig(mode="w1", k=1024, rows=1024, bm=8, ctas_per_sm=3)
    names = [n for n, _ in configs(["glm52"], experiments=True) if n.endswith("_o2")]
    assert names == [f"role2_{m}_glm52_bm{bm}_o2" for bm in (8, 16) for m in ("w1", "w2")]
    cfg = Role2GemmConfig(mode="w1", k=6144, rows=4096, bm=8, ctas_per_sm=2)
    assert cfg.smem_bytes <= 113 * 1024 and cfg.kc * cfg.bm <= 48 * 1024
    ptx, cubin, _ = compile_one("role2_w1_glm52_bm8_o2", cfg)
    assert ".minnctapersm 2" in ptx and cubin[:4] == b"\x7fELF"
    with tempfile.NamedTemporaryFile("w", suffix=".ptx") as f:
        f.write(ptx)
        f.flush()
        out = subprocess.run([locate_ptxas().path, "-arch=sm_90a", "-O3", "-v", f.name, "-o", "/dev/null"],
                             capture_output=True, text=True, check=True)
    regs = int(re.search(r"Used (\d+) registers", out.stderr).group(1))
    assert regs <= 128 and "0 bytes spill stores" in out.stderr


def test_pipelined_two_ctas_per_sm_fit_an_sm():
    """The 384-thread kernel built for two CTAs per SM: each CTA within 113 KB of shared memory with at least three
    weight stages, ``setmaxnreg`` 32 / 104 (128 x 32 + 256 x 104 = 384 x 80, the launch allocation),
    ``.minnctapersm 2`` and the two ``setmaxnreg`` values in the PTX, and a spill-free mainloop at the GLM-5.2 shape."""
    from gcmoe_build import sass
    from gcmoe_build.frontend.dsl import import_dsl

    import_dsl("sm_90a")
    from gcmoe_build.kernels.sm90.role2_devbuild import compile_one
    from gcmoe_build.kernels.sm90.role2_config import Role2GemmConfig

    for ctas in (1, 2):
        c = Role2GemmConfig(mode="w1", k=6144, rows=4096, bm=8, pipelined=True, ctas_per_sm=ctas)
        prod, cons = c.setmaxnreg
        # setmaxnreg moves registers inside the CTA's launch allocation only (24 / 112 at two CTAs hung on the GPU)
        assert c.launch_regs == (168 if ctas == 1 else 80)
        assert 128 * prod + 256 * cons <= 384 * c.launch_regs and prod % 8 == 0 and cons % 8 == 0
    for h, i in ((6144, 2048), (5120, 2304)):
        for bm in (8, 16):
            for mode, k, rows in (("w1", h, 2 * i), ("w2", i, h)):
                cfg = Role2GemmConfig(mode=mode, k=k, rows=rows, bm=bm, pipelined=True, ctas_per_sm=2)
                assert cfg.smem_bytes <= 113 * 1024 and cfg.stages >= 3, (mode, h, bm, cfg.smem_bytes, cfg.stages)
    cfg = Role2GemmConfig(mode="w1", k=6144, rows=4096, bm=8, pipelined=True, ctas_per_sm=2)
    ptx, cubin, _ = compile_one("role2_w1_glm52_bm8_p2", cfg)
    assert ".minnctapersm 2" in ptx and "setmaxnreg.dec.sync.aligned.u32 32" in ptx
    assert "setmaxnreg.inc.sync.aligned.u32 104" in ptx
    loops = sass.innermost_mma_loops(sass.disassemble(cubin))
    assert all(lp.count("STL", "LDL") == 0 for lp in loops)
    # W1 (and W2 since its intermediate scale is per 128, session 8) at two CTAs drains once per K128 (lag 0): its 8
    # QGMMAs chain, one WARPGROUP.DEPBAR per K128. With lag 1 the two steps' A operands do not fit 104 registers and
    # ptxas serialised every wgmma (C7512, a build error)
    assert cfg.lag == 0 and Role2GemmConfig(mode="w2", k=2048, rows=6144, bm=8, pipelined=True, ctas_per_sm=2).lag == 0
    assert Role2GemmConfig(mode="w2", k=2048, rows=6144, bm=8, pipelined=True).lag == 1
    for lp in loops:
        waits = sum(1 for i in lp.insns if i.opcode == "WARPGROUP" and i.modifiers.startswith(".DEPBAR"))
        assert waits * 8 <= lp.count("QGMMA"), (waits, lp.count("QGMMA"))


@pytest.mark.parametrize("groups", [1, 2])
def test_slab_groups_commit_one_group_per_step_and_slab(groups):
    """``slab_groups``: each K128 step's MMAs are committed as two groups (one per 64-row slab, four chained wgmmas
    each) instead of one; at 2 one group stays pending while the other slab is promoted (``wait_group 1`` between the
    commits), at 1 every group is drained before the next slab's decode (only ``wait_group 0``). The BM 32 two-CTA
    build this makes fit keeps its MMA loop spill-free with the wgmmas asynchronous (C7512 would fail the build);
    bad values are refused by name."""
    from gcmoe_build import sass
    from gcmoe_build.frontend.dsl import import_dsl

    import_dsl("sm_90a")
    from gcmoe_build.kernels.sm90.role2_devbuild import ACT2_EXPERIMENTS, compile_one
    from gcmoe_build.kernels.sm90.role2_config import Role2GemmConfig

    sfx, bm, ctas = ("_pp2ksag1", 32, 2) if groups == 1 else ("_ppksag", 64, 1)
    kw = ACT2_EXPERIMENTS[sfx]
    assert kw["slab_groups"] == groups and kw.get("ctas_per_sm", 1) == ctas
    cfg = Role2GemmConfig(mode="w1", k=6144, rows=4096, bm=bm, pipelined=True, **kw)
    base = Role2GemmConfig(mode="w1", k=6144, rows=4096, bm=bm, pipelined=True,
                           **{k: v for k, v in kw.items() if k != "slab_groups"})
    ptx, cubin, _ = compile_one(f"role2_w1_glm52_bm{bm}{sfx}", cfg)
    ptx0, _, _ = compile_one(f"role2_w1_glm52_bm{bm}{sfx[:-1] if groups == 2 else sfx[:-2]}", base)
    mma = ptx.count("wgmma.mma_async")
    assert mma == ptx0.count("wgmma.mma_async")
    assert ptx.count("wgmma.commit_group") == 2 * ptx0.count("wgmma.commit_group") == mma // 4
    assert ("wgmma.wait_group.sync.aligned 1;" in ptx) == (groups == 2)
    loops = sass.innermost_mma_loops(sass.disassemble(cubin))
    assert loops and all(lp.count("STL", "LDL") == 0 for lp in loops)
    assert cfg.smem_bytes <= cfg.smem_limit and cfg.stages >= 3
    with pytest.raises(ValueError, match="slab_groups=3"):
        Role2GemmConfig(mode="w1", k=6144, rows=4096, bm=8, pipelined=True, slab_groups=3)
    with pytest.raises(ValueError, match="slab_groups: .*pipelined=True"):
        Role2GemmConfig(mode="w1", k=6144, rows=4096, bm=8, pipelined=False, slab_groups=1)


@pytest.mark.parametrize("mode", ["w1", "w2"])
def test_slab_passes_one_slab_per_warpgroup_and_pass(mode):
    """``slab_passes = 2`` (dev ``_pp2ksap``, session 16: measured, not shipped): a task runs the K loop twice, each
    warpgroup multiplying one slab per pass (one wgmma per K32: the two-slab build's count, in two loops), the producer
    streaming half-size stages of the pass's two slabs (two 4 KB code copies per stage); pass 0's epilogue values go
    to the shared-memory stash (W1 FP32 SwiGLU outputs, W2 BF16 pairs) and come back in pass 1's epilogue. BM 64 then
    fits two CTAs per SM with every MMA loop spill-free; bad combinations are refused by name."""
    from gcmoe_build import sass
    from gcmoe_build.frontend.dsl import import_dsl

    import_dsl("sm_90a")
    from gcmoe_build.kernels.sm90.role2_devbuild import ACT2_EXPERIMENTS, compile_one
    from gcmoe_build.kernels.sm90.role2_config import STAGE_BYTES, Role2GemmConfig

    k, rows = (6144, 4096) if mode == "w1" else (2048, 6144)
    kw = ACT2_EXPERIMENTS["_pp2ksap"]
    assert kw["slab_passes"] == 2 and kw["ctas_per_sm"] == 2
    cfg = Role2GemmConfig(mode=mode, k=k, rows=rows, bm=64, pipelined=True, **kw)
    assert cfg.stage_bytes == STAGE_BYTES // 2 and cfg.stash_bytes == 256 * 64
    assert cfg.smem_bytes <= cfg.smem_limit and cfg.stages >= 4
    ptx, cubin, _ = compile_one(f"role2_{mode}_glm52_bm64_pp2ksap", cfg)
    assert ptx.count("wgmma.mma_async") == 16  # 2 passes x 2 K128 steps x 4 K32, one slab
    assert ptx.count("cp.async.bulk.shared::cluster.global") == 2 * 2 * 2  # per pass: 2 slabs x (codes, scales)
    stash = "st.shared.f32" if mode == "w1" else "st.shared.b32"
    assert stash in ptx
    summary = sass.summarize(cubin)
    assert summary.spill_ops_in_mma_loops == 0 and summary.qgmma_register_a == summary.qgmma
    with pytest.raises(ValueError, match="slab_passes=3"):
        Role2GemmConfig(mode=mode, k=k, rows=rows, bm=64, pipelined=True, slab_passes=3)
    with pytest.raises(ValueError, match="slab_passes=2: .*act_buffers=2"):
        Role2GemmConfig(mode=mode, k=k, rows=rows, bm=64, pipelined=True, slab_passes=2)
    with pytest.raises(ValueError, match="slab_passes=2 is built by the persistent kernels"):
        from gcmoe_build.kernels.sm90.role2_gemm import build_role2_gemm
        build_role2_gemm(cfg)


@pytest.mark.parametrize("base_sfx, probe_sfx, bm", [("_ppksa", "_ppksax", 8), ("_ppksafw", "_ppksafwx", 64)])
def test_no_decode_probe_feeds_the_raw_code_words(base_sfx, probe_sfx, bm):
    """``dev_no_decode`` (dev ``_ppksax`` / ``_pp2ksag1x`` / ``_pp2ksapx``, session 17; the BM 64 turns form's
    ``_ppksafwx``, session 56: timing probes, never shipped): the form with the stage's raw code words as the wgmma A
    registers, i.e. the same kernel minus the FP4 decode (its table PRMTs and the sign LOP3s), so the probe times
    everything else; the same QGMMAs from registers, no spill in an MMA loop; refused outside the folded pipelined
    kernel."""
    from gcmoe_build import sass
    from gcmoe_build.frontend.dsl import import_dsl

    import_dsl("sm_90a")
    from gcmoe_build.kernels.sm90.role2_devbuild import ACT2_EXPERIMENTS, compile_one
    from gcmoe_build.kernels.sm90.role2_config import Role2GemmConfig

    base = {k: v for k, v in ACT2_EXPERIMENTS[probe_sfx].items() if k != "dev_no_decode"}
    assert base == ACT2_EXPERIMENTS[base_sfx] and ACT2_EXPERIMENTS[probe_sfx]["dev_no_decode"]
    ptx = {}
    for sfx, kw in ((base_sfx, base), (probe_sfx, ACT2_EXPERIMENTS[probe_sfx])):
        cfg = Role2GemmConfig(mode="w1", k=6144, rows=4096, bm=bm, pipelined=True, **kw)
        ptx[sfx], cubin, _ = compile_one(f"role2_w1_glm52_bm{bm}{sfx}", cfg)
        summary = sass.summarize(cubin)
        assert summary.spill_ops_in_mma_loops == 0 and summary.qgmma_register_a == summary.qgmma > 0
    assert ptx[probe_sfx].count("wgmma.mma_async") == ptx[base_sfx].count("wgmma.mma_async")
    assert ptx[probe_sfx].count("prmt.b32") < ptx[base_sfx].count("prmt.b32") // 4
    with pytest.raises(ValueError, match="dev_no_decode"):
        Role2GemmConfig(mode="w1", k=6144, rows=4096, bm=8, pipelined=False, dev_no_decode=True)


def test_activation_prefetch_config():
    """act_buffers = 2 splits the activation budget into two chunk buffers (shared memory unchanged where the chunk
    halves evenly), its bad values and the other session-9 knobs are refused by name, and the prefetching kernel
    copies with ``cp.async`` (zero-fill) and waits for its copies before the barrier that publishes a chunk."""
    from gcmoe_build.frontend.dsl import import_dsl

    import_dsl("sm_90a")
    from gcmoe_build.kernels.sm90.role2_devbuild import compile_one
    from gcmoe_build.kernels.sm90.role2_config import Role2GemmConfig, task_smem_offsets

    one = Role2GemmConfig(mode="w1", k=6144, rows=4096, bm=32, pipelined=True)
    two = Role2GemmConfig(mode="w1", k=6144, rows=4096, bm=32, pipelined=True, act_buffers=2)
    assert (one.kc, two.kc) == (2048, 1024) and two.act_buffer_bytes == one.act_buffer_bytes // 2
    assert two.misc_bytes == one.misc_bytes and two.stages == one.stages
    w2 = Role2GemmConfig(mode="w2", k=2048, rows=6144, bm=32, pipelined=True, act_buffers=2)
    o = task_smem_offsets(two, w2)
    assert o["asc"] == max(2 * two.act_buffer_bytes, 2 * w2.act_buffer_bytes, 32 * 512)
    assert o["amax"] == o["asc"] + max(2 * two.asc_buffer_bytes, 2 * w2.asc_buffer_bytes)
    with pytest.raises(ValueError, match="act_buffers=3"):
        Role2GemmConfig(mode="w1", k=1024, rows=1024, bm=8, act_buffers=3)
    with pytest.raises(ValueError, match="dev_compute_only"):
        Role2GemmConfig(mode="w1", k=1024, rows=1024, bm=8, dev_compute_only=True)
    with pytest.raises(ValueError, match="mma_steps_per_call=4"):
        Role2GemmConfig(mode="w1", k=1024, rows=1024, bm=8, mma_steps_per_call=4)  # 256-thread kernel
    with pytest.raises(ValueError, match="not a multiple of 512"):
        Role2GemmConfig(mode="w2", k=2304, rows=5120, bm=16, pipelined=True, ctas_per_sm=2, act_buffers=2,
                        mma_steps_per_call=4)  # DSV's W2 chunk is 768 columns
    ptx, cubin, _ = compile_one("role2_w1_test_bm16_pd",
                                Role2GemmConfig(mode="w1", k=1024, rows=1024, bm=16, pipelined=True, act_buffers=2))
    assert "cp.async.cg.shared.global" in ptx and cubin[:4] == b"\x7fELF"
    wait = ptx.index("cp.async.wait_all;")
    assert ptx.index("fence.proxy.async.shared::cta;", wait) < ptx.index("bar.sync 1, 256;", wait)


def test_prefetch_schedule_and_w1_epilogue():
    """The next chunk's copies are spread over the first half of a chunk's MMA calls and cover the chunk; in the
    PTX they follow a ``wgmma.commit_group`` (issued under the MMAs), the next chunk's scales are predicated loads (no
    select waits on them), and the W1 epilogue stores E4M3 in 16-byte units with one scale byte and one division per
    token (one reducer thread) — its staging fits the activation area of every build."""
    from gcmoe_build.frontend.dsl import import_dsl

    import_dsl("sm_90a")
    from gcmoe_build.kernels.sm90.role2_devbuild import compile_one
    from gcmoe_build.kernels.sm90.role2_chunks import copy_rounds_per_call
    from gcmoe_build.kernels.sm90.role2_config import CONSUMER_THREADS, SUPPORTED_BM, Role2GemmConfig
    from gcmoe_build.kernels.sm90.role2_epilogue import w1_stage_bytes

    for mode, k, rows in (("w1", 6144, 4096), ("w2", 2048, 6144), ("w1", 5120, 4608), ("w2", 2304, 5120)):
        for bm in SUPPORTED_BM:
            for ctas in (1, 2) if bm <= 16 else (1,):
                cfg = Role2GemmConfig(mode=mode, k=k, rows=rows, bm=bm, pipelined=True, ctas_per_sm=ctas,
                                      act_buffers=2)
                rounds = -(-cfg.act_buffer_bytes // (16 * CONSUMER_THREADS))
                calls = cfg.kc // 256
                per = copy_rounds_per_call(cfg)
                first_half = max(1, calls // 2)
                assert per * first_half >= rounds and per <= rounds, (mode, k, bm, ctas)  # done by mid-chunk
                assert w1_stage_bytes(bm) <= cfg.act_buffer_bytes  # the epilogue's staging reuses buffer 0
    ptx, _, _ = compile_one("role2_w1_test_bm16_pd",  # two 2048-column chunks
                            Role2GemmConfig(mode="w1", k=4096, rows=1024, bm=16, pipelined=True, act_buffers=2))
    first_mma = ptx.index("wgmma.mma_async")
    copies = [i for i in range(len(ptx)) if ptx.startswith("cp.async.cg.shared.global", i)]
    assert copies[0] < first_mma < copies[-1]  # chunk 0 at the top, later chunks under the MMAs
    assert ptx.rindex("wgmma.commit_group", 0, copies[-1]) > first_mma
    assert "@p ld.global.f32" in ptx and "selp.f32" not in ptx[:first_mma]
    epi = ptx[ptx.rindex("wgmma.wait_group"):]
    assert epi.count("st.global.v4.u32") == 1 and epi.count("st.global.u8") == 1 and epi.count("div.rn.f32") == 1


def test_qgmma_probe_builds_register_a_and_shared_a():
    """The dev MMA probe (bench_qgmma.py) issues what it claims: register-A QGMMA for ``rs``, both operands from
    descriptors for ``ss``; 16 per loop iteration (2 K128 steps x 4 K32 x 2 slabs)."""
    from gcmoe_build.frontend.dsl import import_dsl

    import_dsl("sm_90a")
    from cutlass import Int32, Int64

    from gcmoe_build.frontend.dsl import trace_to_ptx
    from gcmoe_build.kernels.sm90.qgmma_probe import build_probe
    from gcmoe_build.sass import disassemble, innermost_mma_loops, qgmma_register_a
    from gcmoe_build.toolchain.ptxas import assemble, effective_options

    for mode in ("rs", "ss"):
        host, kern = build_probe(32, mode)
        res = trace_to_ptx(host, kern, (Int64(0), Int32(1), Int32(1)), f"qgmma_probe_{mode}_n32", "sm_90a")
        sass = disassemble(assemble(res.ptx, effective_options("sm_90a", []), what=mode))
        total, reg_a = qgmma_register_a(sass)
        assert total == 16 and reg_a == (16 if mode == "rs" else 0), (mode, total, reg_a)
        assert [sum(i.opcode == "QGMMA" for i in lp.insns) for lp in innermost_mma_loops(sass)] == [16]


def test_scales_before_wait_rule_and_sass():
    """``Role2GemmConfig.scales_before_wait`` (session 57): a drained step's scales are loaded before its wgmma wait at
    one CTA per SM up to BM 64 and at two only for BM <= 16 (not at lag 1, not at BM 80, not the two-CTA BM 64 slab
    passes: they spilled). In the BM 64 turns form's MMA loops (``_ppksafwr``, the shipped ring kernel's mirror) no
    shared load is left after a loop's last ``WARPGROUP.DEPBAR``; BM 80 keeps its loads there."""
    from gcmoe_build import sass
    from gcmoe_build.frontend.dsl import import_dsl

    import_dsl("sm_90a")
    from gcmoe_build.kernels.sm90.role2_devbuild import ACT2_EXPERIMENTS, compile_one
    from gcmoe_build.kernels.sm90.role2_config import Role2GemmConfig

    def cfg(bm, **kw):
        return Role2GemmConfig(mode="w1", k=6144, rows=4096, bm=bm, pipelined=True, **kw)

    assert [cfg(bm).scales_before_wait for bm in (32, 48, 64, 80)] == [False, False, True, False]
    assert cfg(8, ctas_per_sm=2).scales_before_wait and cfg(16, ctas_per_sm=2).scales_before_wait
    assert not cfg(64, **ACT2_EXPERIMENTS["_pp2ksap"]).scales_before_wait
    assert not cfg(64, mma_lag=1).scales_before_wait
    after = {}
    for bm in (64, 80):
        _, cubin, _ = compile_one(f"role2_w1_glm52_bm{bm}_ppksafwr", cfg(bm, **ACT2_EXPERIMENTS["_ppksafwr"]))
        loops = sass.innermost_mma_loops(sass.disassemble(cubin))
        assert loops and all(lp.count("STL", "LDL") == 0 for lp in loops)
        tails = []
        for lp in loops:
            waits = [i for i, x in enumerate(lp.insns) if x.opcode == "WARPGROUP" and x.modifiers.startswith(".DEPBAR")]
            assert waits, f"BM {bm}: an MMA loop without a wgmma wait"
            tails.append(sum(1 for x in lp.insns[waits[-1]:] if x.opcode == "LDS"))
        after[bm] = tails
    assert all(n == 0 for n in after[64]), after
    assert all(n > 0 for n in after[80]), after


def test_words_ahead_loads_the_next_step_under_the_mmas():
    """``dev_words_ahead`` (dev ``_ppksafwra`` / ``_ppksafwra4``, session 57): the next K128 step of a call waits for its
    stage and loads its words (two ``LDS.128`` per slab) while this step's MMAs are pending — one step of two per call,
    three of four with four steps per call — where the shipped mirror (``_ppksafwr``) loads every step after the last
    wait; no spill in an MMA loop; refused outside the chained stage path."""
    from gcmoe_build import sass
    from gcmoe_build.frontend.dsl import import_dsl

    import_dsl("sm_90a")
    from gcmoe_build.kernels.sm90.role2_devbuild import ACT2_EXPERIMENTS, compile_one
    from gcmoe_build.kernels.sm90.role2_config import Role2GemmConfig

    for sfx, ahead in (("_ppksafwr", 0), ("_ppksafwra", 4), ("_ppksafwra4", 12)):
        cfg = Role2GemmConfig(mode="w1", k=6144, rows=4096, bm=64, pipelined=True, **ACT2_EXPERIMENTS[sfx])
        _, cubin, _ = compile_one(f"role2_w1_glm52_bm64{sfx}", cfg)
        loops = sass.innermost_mma_loops(sass.disassemble(cubin))
        assert len(loops) == 1 and loops[0].count("STL", "LDL") == 0
        assert sass.loads_under_mma(loops[0]) == ahead, sfx
    with pytest.raises(ValueError, match="dev_words_ahead"):
        Role2GemmConfig(mode="w1", k=6144, rows=4096, bm=64, pipelined=True, slab_groups=2, dev_words_ahead=True)
