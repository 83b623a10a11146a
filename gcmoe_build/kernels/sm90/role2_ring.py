"""role2 on sm_90a, the registered kernel: one persistent launch per layer that consumes the token
ring role1 fills (paper §4.3 "Token ring", "Producer-consumer handshake", "Direct partial scatter";
§4.4 Hopper path; Algorithm 1 lines 4-9), W1 and W2 in one task stream.

Arithmetic = the GPU-verified :mod:`.role2_gemm` / :mod:`.role2_persistent` kernels, from the same parts:
register-A ``wgmma m64nBMk32`` e4m3 with in-register FP4 decode, each K32 block's exponent folded into the
decode table (:mod:`.role2_mainloop`, :mod:`.fp4_decode`), the weight streams (:mod:`.role2_stages`: the stage ring,
the 256-thread variant's register stream), the activation chunks (:mod:`.role2_chunks`), the epilogues
(:mod:`.role2_epilogue`, math in :mod:`.role2_math`), the variant (:mod:`.role2_config`). The host side — the
parameter ABI, :class:`Role2RingConfig`, the per-build rules (``*_build``) and the host mirrors of the rules below
(:func:`claimed_task`, :func:`placed_cta`, :func:`prefetch_search`, ...) — is :mod:`.role2_ring_config`. What is new
here is the ring contract (``gcmoe_runtime.operator.ring``, ``gcmoe_runtime.workspace.layout``):

* **Which blocks.** The replay's pool blocks are not a parameter: one warp waits until every
  ``recv_count[parity][e_local][src]`` has its arrival word (high 32 bits) equal to
  ``dispatch_sms`` (role1 publishes the packed counter once all its CTAs added; role3 zeroes the
  parity after use; trap code 12), then ``Q = sum_e ceil(tokens_e / BM)``. Pool block ``q`` is ring block
  ``q % ring_blocks`` of generation ``q // ring_blocks`` (``ring.ring_slot``).
* **Tasks, static split, generation-phased** (:mod:`.role2_schedule`): per ring generation (``ring_blocks``
  consecutive pool blocks), the ``NT1 = 2I/256`` W1 tasks of every block, then the ``NT2 = H/256`` W2 tasks of
  every block (256 weight rows each); CTA ``c`` of ``G`` takes tasks ``c, c+G, ...``. Every task depends only
  on tasks earlier in this order, and all CTAs are co-resident (grid = compute partition x CTAs per SM), so the
  smallest unfinished task can always run: no deadlock. With two CTAs per SM (below) "co-resident" is
  the graph's occupancy check. (The first, block-major order put a block's W2 tasks in
  the same round as the W1 tasks they wait for: 2.7-4.5x the byte floor on the H200.)
  Next step: the paper's scheduler warp (§4.3 "Scheduler": L1 waves pre-published, one-in-one-out
  L2 claims, shared-expert tasks interleaved) instead of this static split.
* **Dynamic tasks (384-thread builds, session 39).** The static split lasts as long as its slowest CTA (tasks
  differ: W1 / W2, narrow / wide blocks, role1's fill order; ``bench tasks`` traces put the span 6-13 % above
  the work spread evenly, session 37). So CTA ``c``'s first :data:`STATIC_ROUNDS` (2) tasks are still the static
  split's, ``c`` and ``c + G`` (since session 41: they place the second round's W1 tasks one per SM), and each
  later one is claimed: when the producer thread has acquired its second or a later task it adds 1 to the launch's
  ``role2_ticket`` (relaxed ``atom.add``) and takes task ``2G + old`` (none if ``>= ntasks``), about one task ahead
  of running it. Claims come in increasing order, so the smallest unfinished task can always run, as above. Each
  CTA makes exactly one failing claim, so a launch makes ``ntasks - G`` claims; the one that returns ``ntasks - G -
  1`` stores 0 for the next launch (a trap ends the context and its workspace; host mirrors :func:`claimed_task`,
  :func:`claim_zeroes_ticket`, run by the CPU protocol model
  ``tests/build/kernels/sm90/test_role2_ring_protocol.py``). The task record carries bit 31 = "the CTA's last
  task", which ends the consumers' task loop and, through the signal record (+4), the signal warp's.
  A split replay (W1 split-K) keeps the static split, and so does a replay with fewer than
  :data:`CLAIM_MIN_TASKS_PER_CTA` tasks per CTA (the producer's ``CLAIMS_OFF`` word, host mirror
  :func:`claims_run`; session 40: there every CTA claims in the same few waves on one contended ticket, the claim
  on the record's publish path, and the claims cost role2 up to 13 %, 2-7 % at most such loads). Why the loops
  look as they do: ptxas keeps the consumers' K loops on the uniform datapath only with the first task static,
  the loop exit through ``redux_min_u32``, a barrier in the zero-task CTAs' branch, the producer's task in shared
  memory, and at BM 64 / 80 32 producer registers (``Role2GemmConfig.producer_claims``; ``tests/build/test_sass.py``
  checks the loops).
* **Acquire.** Before a task touches the block (producer and consumers): ``l1_full_count[rb] >=
  BM*(gen+1)`` (trap code 2); for ``gen > 0`` also ``l2_empty_count[rb] >= (NT2+1)*gen`` (code 10:
  the previous generation's W2 tasks are done and its ``l2_full_mask`` cleared). The block header
  ``ring_block[rb] = (e_local, tokens, pool block, gen)`` is checked against ``(q, gen)`` (code 11).
* **Task records (384-thread builds, session 11).** The producer thread, NS weight stages ahead of the consumers,
  does the task's acquires (l1_full; for a W2 task every W1 mask bit of the block, code 9), reads and checks the
  header, loads the expert factor and publishes ``(task, expert, tokens, factor)`` in a shared-memory task slot
  (``task_queue``: an mbarrier per slot, ``task_slot_count`` slots); the consumers wait on the slot and make no
  global acquire but the ``gen > 0`` l2_empty one. Their dependent chain of acquire + L1 invalidation + loads at
  every task's top was 6-16 % of the persistent kernels' stall samples (ncu, session 11 call E); layer A/B
  -3.5..-5.5 % at T >= 2 (call G). The 256-thread builds (no producer) acquire in the consumers as before.
* **W1** reads ``ring_x[rb][row][H]`` (row stride ``bm_stride``), FP32 scales ``ring_sf[rb][H/128]
  [sf_stride]`` (MN-major), the routing weight from ``ring_meta[rb][row].x``; epilogue: BF16 round,
  clamp, SwiGLU x routing weight, amax over the task's 128 I-columns (``role2_config.L2_SCALE_GROUP``), UE8M0 scale,
  E4M3 -> ``l2_x[rb][row][I]`` (staged in shared memory, 16-byte stores), ``l2_sf[rb][row][I/128]`` (UE8M0 bytes,
  the numerics reference's requantisation); then
  ``red.release.gpu.or l2_full_mask[rb] |= 0b11 << 2*tile`` (its two W1 N128 tiles) after the consumers' barrier
  (384 threads: by the signal warp, below; 256: consumer thread 0): a release operation is cumulative over the
  stores the barrier ordered before it. (Until session 12 a ``fence.acq_rel.gpu`` preceded it: a second MEMBAR and
  an L1 invalidation per task, waited for by the other consumer warps at their next barrier.)
* **W2**, per activation chunk of I-columns ``[k0, k1)`` (256-thread builds): acquire exactly the mask bits of
  the W1 N128 tiles that produced them (code 9); the 384-thread builds' producer acquires all of the block's bits
  before publishing the task record. The chunk is the verified kernels' ``kc`` (a multiple of
  256, up to all of I at small BM), so a chunk waits on 4 or more bits, not the paper's two per W2
  K128 tile: per-K128 staging is a measured-next step. The 384-thread builds copy chunk kc + 1 (by tensor map)
  into a second buffer while chunk kc is multiplied (``Role2GemmConfig.act_buffers = 2``, W1 and W2). Epilogue: BF16
  partials staged through shared memory, then 16-byte ``st.global.v4`` straight into the SOURCE rank's
  ``combine[slot][src_token][H]`` through the peer descriptor (``ring_meta[rb][row] = (weight, src_rank, src_token,
  slot)``). Release: ``atom.release.gpu.add l2_empty_count[rb]``, issued inside the epilogue after the last read of the
  block (``ring_meta``) and before the first combine store (``w2_epilogue``'s ``after_loads``): the counts guard only
  reads (write-after-read: the next generation's W1 rewrites ``l2_x``, role1 ``ring_x`` / ``ring_meta``), so the
  fence in the release has none of the task's stores to wait for. Placed after the stores (session 11 and before,
  with a system-scope fence for the NVLink stores) it held the other seven consumer warps at the next task's first
  barrier (ncu, session 12 call C: 7 % of the persistent W2 kernel's stall samples). The combine stores reach the
  source rank's role3 through the graph: role3 runs after role2 and releases ``combine_ready`` at system scope after
  a system fence (cumulative). The task that completes the generation
  (old == ``(NT2+1)*gen + NT2-1``) clears ``l2_full_mask[rb]``, adds the extra 1 to
  ``l2_empty_count`` and releases ``l1_empty_count[rb] += 1`` (exactly +1 per consumed generation,
  what role1 waits for; W2 is the last reader of ``ring_meta``).

* **Placement (two-CTA builds, session 46; host mirror :func:`placed_cta`).** The static split pairs tasks on SMs by
  the CTAs' indices: ``c`` and ``c + G/2`` share an SM when the launch places them so, and the split puts a round's
  first ``G/2`` tasks (W1 first) one per SM. CTAs that start as another kernel's retire (role4 under the launch-order
  edge, ``gcmoe_runtime.graph``) pair as they come ((0, 1), (2, 3), ... in session 45's trace), which put two W1 tasks
  on one SM where the split meant one. So a two-CTA build's CTA takes its index from where it runs: one thread counts
  the CTA in on its SM (``role2_place``, word ``PLACE_SM + %smid``); the SM's first is class 0, any later one class 1;
  the CTA's rank ``n`` in its class (a second relaxed ``atom.add``) gives ``u = n`` (class 0) or ``G - 1 - n`` (class
  1), a permutation of ``0 .. G-1`` whatever the placement (the classes fill from both ends), and the logical index is
  ``u`` with the upper half reversed (``u >= G/2 -> G - 1 + G/2 - u``, still a permutation), which replaces
  ``blockIdx`` in the task order: correctness never depends on where CTAs run. With two CTAs on every SM, each SM
  holds one index of each half, and the SM whose CTAs came ``k``-th in their classes holds ``k`` and ``G/2 + k``, the
  pairing the launch itself makes (session 46 call A: without the reversal, pairs ``(k, G - 1 - k)`` ran the full-edge
  layer up to 7.5 % slower than the launch's ``(c, c + G/2)`` at T = 2-5). Then it counts itself in at
  ``PLACE_STARTED`` (``atom.acq_rel``: after its class counts); the CTA that reads ``G - 1`` there, the launch's last
  to start, zeroes the region for the next launch (every CTA has counted by then). Runs beside warp 0's wait for the
  receive counts. Only where the runtime asks (``place_ctas`` != 0: role2 after role4's launch-order port,
  ``gcmoe_runtime.graph``, from 2 tokens, ``heuristics.sm90_place_ctas``); elsewhere, and in the one-CTA builds,
  ``blockIdx``. The start count's value only picks the zeroing CTA, yet its round trip held the first barrier (the
  third of three dependent L2 atomics); ``place_ctas`` = 2 (``heuristics.PLACE_CTAS_START_LATE``, session 49) makes it
  a release add whose value warp 1 reads after the barrier, the last starter zeroing behind ``fence.acq_rel`` (the
  release-add plus that fence is the acquire-release). In the 384-thread builds warp 1's register release then
  waits for it, and the consumers' raise for that release, but not the producer thread, whose first stages are in
  flight by then (``gcmoe_build.sass.first_wait`` locates the wait).
  Session 46 (calls A-C): under the full edges (the routed layer, role2 launched at once) the launch's
  own pairing was as good or better (the placed index +2..+6 % at P = 1 GLM-5.2 T = 1-2 and the GLM-5.2 share T =
  2-4); after role4's launch-order port the placed index took the + shared span -0.3..-7.8 % at T = 2-5 against
  session 45's full edge there (the GLM-5.2 share +1.6..+2.0 % at T = 2-4).

* **First weights to L2 (one-GPU 384-thread builds up to ``heuristics.SM90_W1_PREFETCH_MAX_BM``, session 47; kernel
  parameter ``w1_prefetch_steps``).** At small loads on one GPU a CTA's first task (a W1 task) starts several µs after
  the launch: role1 is still counting and filling the ring, and the producer's first stages go out only once the block
  is full. The HBM idles meanwhile (session 23's trace: first claim -> first chunk landed ~9.6 µs at P = 1 GLM-5.2
  T = 1, the first stages ~13 MB of it). So where the runtime asks (``w1_prefetch_steps`` != 0,
  ``heuristics.sm90_w1_prefetch_steps``), warp 2 of the producer warpgroup, beside warp 0's wait for the receive
  counts, reads the rank's routed slots (``topk_idx``, at most 32: one per lane; at P = 1 they name the local
  experts), numbers the pool blocks as role1 will (host mirror :func:`prefetch_search`), finds the CTA's first task
  (the static split's task ``blockIdx``) and, when it is a W1 task of the first ring generation, has every lane
  ``prefetch.global.L2`` its share of the task's first ``w1_prefetch_steps`` K128 steps (four slabs' codes and scales,
  17.4 KB per step); the producer's stages then read those lines from L2. A hint: nothing waits for it, and a wrong
  expert would cost bandwidth, never a result. Only a first-generation W1 task (a W2 task's weights are not needed
  before its block's W1 tasks end: session 18 prefetched those and lost). The same search from the receive counts
  after the first barrier (call B) started too late: the rows arrive ~1 µs after the counts. The search holds the
  CTA's first barrier ~1-2 µs, inside the wait for role1's rows at T <= 2 (routed P = 1: -0.5..-1 % back to back,
  -0.4..+0.1 % with every replay's weights cold), not at larger T, where the window is a smaller part of the first
  task. Two
  SASS traps met on the way: ``cp.async.bulk.prefetch.L2`` in that branch, or the kernel's ``blockIdx`` value used
  there, took every K loop of the two-CTA builds off the uniform datapath (hence per-line prefetches and
  ``ptx_mem.block_coords``).

* **Signal warp (384-thread builds, session 13; ``Role2GemmConfig.signal_warp``).** Every release above runs on
  warp 1 of the producer warpgroup (idle otherwise), not on consumer thread 0, whose ``MEMBAR.GPU`` (the release
  operation's, ~0.3 µs) the other consumer warps waited for at their next barrier (session 13's ``membar_probe``: a
  MEMBAR stalls only its own warp). The consumers write the task's coordinates ``(is1, tile, gen, rb)`` into one of
  two shared-memory records at the task's top and hand the task over at the named barrier ``SIGNAL_BAR`` (288
  threads: the consumers and the signal warp): W1 after its stores, W2 at ``w2_epilogue``'s barrier after its
  loads; then the signal warp's lane 0 reads the record and releases while the consumers go on. Every participant
  uses ``bar.sync``, so phases cannot alias; record ``li % 2`` is rewritten only after hand-over ``li + 1``, which
  the signal warp reaches after reading it. The signal warp runs the producer thread's task loop (one loop, two
  branches: a second loop made ptxas spill the producer's values).

* **Epilogue warpgroup (session 60; variant parameter ``epilogue_wg``, set where ``heuristics.sm90_epilogue_wg``
  says: the one-CTA 384-thread BM 64 tile; :mod:`.role2_handover`).** That build (BM 32 / 64 can) gets a fourth
  warpgroup (512 threads): at a task's end the consumers hand their accumulators over through
  shared memory as BF16 pairs of ``acc x efac`` (W1) or as W2's staged BF16 rows, with the task's coordinates ``(is1,
  tile, gen, rb, tokens, last)``, and go on with the next task's K loop, while the epilogue warpgroup runs the
  epilogue (W1's SwiGLU, amax, requantisation, the ``l2_x`` / ``l2_sf`` stores; W2's ``ring_meta`` loads and peer
  stores into ``combine``) and the releases: W1's mask bits after its stores, W2's ``l2_empty`` count (and the
  generation's hand-back) once its destinations are loaded, as the signal warp did (which this build has not). The
  outputs are bit-identical (both epilogues round ``acc x efac`` to BF16 first). Its loop ends with the hand-over of
  the CTA's last task (the record's bit); an end marker after the consumers' task loop took every K-loop descriptor
  off the uniform datapath (32 ``R2UR`` per loop), and at 200 consumer registers the loops spilled, hence
  ``setmaxnreg`` 24 / 216 / 56 (``role2_config``). The K-loop probe priced it at +5-6 % (W1-like) / +10-11 %
  (W2-like) of the BM 64 loop (session 59); measured (session 60, H100): kernel alone -2.3..-3.6 % (the dev form
  ``_ppksafwre``), the GLM-5.2 share's layer at T = 176-208 role2 -3.3..-4.6 % (``heuristics.SM90_EPILOGUE_WG_BM``).

* **Narrow W1 loop (session 36; ``Role2RingConfig.narrow_n``, :func:`narrow_n_build`).** The one-CTA BM 48 / 64 /
  80 builds carry a second W1 K loop at wgmma N = 32 / 48 / 64, taken by a W1 task whose block holds at most that many
  tokens: an expert below the build's BM in a layer whose other experts need it pays the narrower MMAs and
  promotes for its W1 (two thirds of its weights).

* **Shared K loop (sessions 37-38; ``Role2RingConfig.shared_loop``, :func:`shared_loop_build`).** Where the two
  GEMMs' K loops differ only in K (the same chunk, steps per call, lag and turns: GLM-5.2's BM 48 / 64 / 80), one
  loop per wgmma N serves both: the task's ``is1`` (warp-uniform, from its record) picks the chunk count, the tensor
  map and the activation scales' source and format (W1's FP32 or W2's UE8M0: one load of the aligned word that holds
  either, W2's byte picked when a chunk's scales are staged). Two K loops instead of three, so W2 gets the narrow N
  too without the fourth copy that took every loop off the uniform datapath (session 36). A load per width into one
  register (session 37's first form) made W1's tasks wait a global-load latency per K chunk (a write-after-write on
  that register): W1 3-16 % slower, role2 +1..+7 %; with one load role2 is 0.6-3.2 % faster where blocks are narrow
  (session 38, docs/PERFORMANCE.md).

* **W1 split-K (session 21; ``Role2RingConfig.w1_split``, :func:`w1_split_build`).** At T = 1 on one GPU a
  replay has 128 (GLM-5.2) / 108 (DSV-4.1-Flash) W1 tiles: the one-CTA BM 8 build runs them on two consumer warps
  per scheduler (latency-bound decode), and the two-CTA build left half its 256 CTAs without a W1 task. The two-CTA
  BM 8 build with the variant parameter ``w1_split = W1_SPLIT`` (its own build since session 22, picked by
  ``heuristics.sm90_w1_split`` only where every replay of T tokens can split; the other token counts run the
  build without any split code) therefore runs each W1 tile as ``W1_SPLIT`` tasks over equal K ranges when the
  replay's tiles x split fit the grid, in one ring generation of at most ``W1_SPLIT_MAX_BLOCKS`` blocks
  (:func:`w1_split_runs`, uniform over the grid: every CTA reads the same ``nq``). The order stays generation-phased, a
  tile's K ranges consecutive (``role2_schedule.split_task_coords``). A K-range task streams and multiplies only its
  range (the producer's stages, the consumers' chunks ``[c0, c0 + nch)``), stores its FP32 accumulators to
  ``w1_partials`` and counts itself in at ``w1_split_count[rb][tile]`` (stores, barrier, fence + ``atom.acq_rel``; the
  pattern of role4's split-K). The last arrival adds the other range's partial (L1-bypassing loads after the acquire),
  zeroes the count for the next replay and runs the epilogue + release as above; the others hand the signal warp a
  record with ``is1 = 2`` (release nothing). No task waits for another K range, so the order keeps its no-deadlock
  argument; with two ranges the sum's bits do not depend on which arrives last. (Session 22 split the W2 tiles the same
  way, DSV-4.1-Flash T = 1 with 120 W2 tiles: +6.9 % against the W1 split alone, ptxas' K loops 7 % longer; removed.)

* **K interleave (384-thread builds, session 50; variant param ``k_interleave``, the manifest target's
  ``k_interleave``; ``Role2GemmConfig.k_interleave``).** The routed tiles' K order inside each K128 step gives every
  consumer thread one K32 scale block for all four of its K32 slices (``gcmoe_runtime.numerics.sm90_layout``), so it
  builds one decode table pair per row and step (SASS: -63..-75 loop instructions per K256 at BM 8-80). W1's
  activations: at ``k_interleave`` = 1 (BM 8-32) each landed chunk (role1's plain ``ring_x`` rows) is permuted into
  that order in shared memory at the chunk's top (``role2_chunks.interleave_chunk``); at 2 (BM 48-80, whose
  issue-bound loops paid that on every task: session 51, W1 +3..+7 % kernel alone) role1 wrote the rows interleaved
  (``heuristics.sm90_role1_interleaves_rows``, role1's ``k_interleave``). W1's epilogue writes ``l2_x`` in that
  order already (``sm90_layout.k128_epilogue_position``), so W2's chunks need nothing. The weights must be
  transformed to match: the runtime reads the bundle's flag (``GcMoeBuffer.k_interleave``) and refuses weights in the
  other order, and the role1 it pairs with a role2 must agree on who permutes W1's rows.
* **Task trace (session 23; dev, ``TRACE``).** With ``TRACE`` on, the 384-thread builds stamp each task's
  ``%globaltimer`` into ``role2_trace[task]`` (``gcmoe_runtime.workspace.layout``: ``TRACE_*`` words): the producer
  thread when it begins the task's acquires, when it has them (a W2 task: its block's W1 bits) and after its last
  weight stage; consumer thread 0 at the task's top (record in hand), when its first activation chunk has landed, when
  its K loop is done and past its last barrier; plus the SM and the task's coordinates. Since session 48 the top in
  parts too (``role2_chunks.for_each_chunk``'s ``stamps``): past the top's barrier, the first chunk's copy issued, its
  token scales stored, its wait over. ``python -m
  gcmoe_runtime.bench tasks`` reads it after one replay: which SM runs what when, how long W2 tasks wait for W1, where
  the grid idles. Plain stores, a few per task (tasks take microseconds). The trace builds' producer thread has at
  least 32 registers (``REGS`` in the kernel builder: BM 48's consumers then run at 232, as the turns builds'), so a
  BM 48 trace is not its shipped build's to the instruction (session 39).

Thread variants (the heuristic's ``threads``): 384 = producer warpgroup streaming K128 weight stages
with ``cp.async.bulk`` (EVICT_FIRST) across task boundaries + two consumer warpgroups; 256 = the
consumer warpgroups load their weight fragments straight from HBM (EVICT_FIRST) into registers.
Intra-CTA stage waits (mbarriers) are bounded by the same ``timeout_ns`` (trap code 13).

Occupancy: the 256-thread variant at BM <= ``SM90_TWO_CTAS_MAX_BM`` is built for two CTAs per SM
(``.minnctapersm 2``: <= 128 registers; activation chunk <= 48 KB) and launched on twice the compute SMs
(grid rule ``compute_sms*2``): four consumer warps per SM scheduler instead of two hide the decode's
latency (kernel-alone -8..-10 % at BM 8 on the H200, ``results/operator/2026-11-30-h200-x2-session4``). The
384-thread variant up to ``SM90_PIPELINED_TWO_CTAS_MAX_BM`` has a two-CTA build (variant parameter ``ctas_per_sm``;
setmaxnreg 32 / 104, 3-5 stages, W1 drained per K128 so that ptxas keeps the wgmmas asynchronous) beside the one-CTA
one where the heuristic can pick either: it takes the two-CTA one once each CTA has several tasks
(``heuristics.sm90_ctas_per_sm``; layer -3..-4 % at BM 8 / T = 4-64, ``results/operator/2026-11-30-h200-session6``;
BM 16 -4 %, ``results/operator/2026-11-30-h200-x2-session7``). BM 32's two-CTA build issues one slab's K128 chain per
commit group and drains it before decoding the next slab (``Role2GemmConfig.slab_groups = 1``: one slab's partial and
A registers live), which is what fits its accumulators into 104 registers (:func:`slab_groups_build`; kernel alone
-12..-15 % W1, -4..-8 % W2 against the one-CTA build, session 15). The one-CTA BM 64 build's two consumer
warpgroups take turns issuing their wgmmas (``Role2GemmConfig.pingpong``, :func:`pingpong_build`): one decodes and
promotes while the other's MMAs run, instead of both in lockstep; warpgroup 1 gives the first turn before the task loop
and skips its last hand-over (``K128Step.final``), so no barrier follows the loop (one there took the K loops off the
uniform datapath, session 35). The one-CTA BM 8-48 builds, which keep a step's MMAs in flight under the next step's
decode (lag 1), issue four K128 steps per MMA call where the K chunk allows (:func:`steps_per_call_build`): one
tensor-core drain per K512.

Activations: the 384-thread builds' chunks come by tensor map (``Role2GemmConfig.act_tma``: ``KC/128`` boxes of
[BM rows x 128 B], 128-byte swizzle, issued by consumer thread 0 after its fence.proxy.async.global; the maps over
``ring_x`` / ``l2_x`` sit in the workspace's ``act_maps`` region, written at set-up by
``gcmoe_runtime.workspace.act_tma``; a padded row arrives as the ring holds it and only its own accumulator column
sees it); the 256-thread builds' consumers load them. ``act_fast_math`` gives W1's sigmoid the ``rcp.approx``
reciprocal (else IEEE); its exponent is ``ex2.approx`` with or without it (not yet an accurate ``exp`` for
``fast_math: false``: say so, never fake). No role4 wait (shared experts are role4's own node).
"""
# no `from __future__ import annotations`: the DSL evaluates kernel annotations at trace time

from gcmoe_runtime.heuristics import PLACE_CTAS_START_LATE, SM90_W1_PREFETCH_MAX_BM, W1_SPLIT_BM, W1_SPLIT_MAX_BLOCKS

from .role2_ring_config import (CLAIM_MIN_TASKS_PER_CTA, CODE_HEADER, CODE_L1_FULL, CODE_L2_EMPTY, CODE_L2_MASK,
                                CODE_RECV, CODE_STAGE, NAME_PREFIX, OFFSET_PARAMS, ROLE, SCALAR_PARAMS_S32,
                                SCALAR_PARAMS_U64, STATIC_ROUNDS, WEIGHT_PARAMS, Role2RingConfig, abi_plan, grid_rule,
                                l2_empty_target, last_w2_old)
from .role_common import peer_scope

#: Dev instrument (module docstring, "Task trace"): True stamps every task into the workspace's ``role2_trace``.
#: Never True in a shipped build; flip it for an experiment bundle (the records re-key: the source changed).
TRACE = False


def build(variant):
    from gcmoe_build.frontend.dsl import import_dsl
    from gcmoe_build.kernels import KernelBuild
    from gcmoe_runtime.artifacts.record import LaunchFacts

    if variant.arch != "sm_90a":
        raise ValueError(f"role2: this module builds sm_90a only, got arch {variant.arch!r}")
    import_dsl(variant.arch)
    cfg = Role2RingConfig(variant.params)
    host, kernel, fake = _trace_parts(cfg)
    so = cfg.smem_offsets()
    return KernelBuild(
        host=host, kernel=kernel, args=fake, name_prefix=NAME_PREFIX, abi=abi_plan(cfg.ranks),
        launch=LaunchFacts(block=(cfg.launch_threads, 1, 1), cluster=(1, 1, 1), dynamic_smem=cfg.smem_bytes,
                           grid=grid_rule(cfg.ctas_per_sm)),
        extra={"role": ROLE, "bm": cfg.bm, "threads": cfg.threads, "ctas_per_sm": cfg.ctas_per_sm,
               "stages": so["stages"], "kc_w1": cfg.w1.kc,
               "kc_w2": cfg.w2.kc, "tasks_per_block": cfg.nt1 + cfg.nt2, "w1_split": cfg.w1_split,
               "k_interleave": int(cfg.k_interleave) + int(cfg.w1_rows_interleaved),
               **({"epilogue_wg": 1} if cfg.epilogue_wg else {}),
               "offset_params": list(OFFSET_PARAMS)},
    )


def _trace_parts(cfg):
    import cutlass
    import cutlass.cute as cute
    from cutlass import Float32, Int32, Int64, Uint8, const_expr

    from gcmoe_build.kernels.common.peer import PeerDesc, fake_peer_desc

    from gcmoe_runtime.workspace import layout as wsl
    from gcmoe_runtime.workspace.layout import ACT_MAP_BYTES, act_map_slot, w1_partial_slot

    from .ptx_mem import (bar_sync, block_coords, evict_first_policy, fence_acq_rel_gpu, fence_tensormap_acquire,
                          globaltimer, launch_coords, ld_global_cg_f32, ld_global_f32, ld_global_s32, ld_global_v4,
                          ld_shared_v4, mbar_init, prefetch_l2,
                          red_release_add_u32, red_release_or_b64, setmaxnreg, smid, st_global_f32, st_global_v4,
                          st_shared_v4)
    from .ring_sync import (atom_add_acqrel_gpu_u32, atom_add_relaxed_gpu_u32, atom_add_relaxed_gpu_u32_if,
                            atom_add_release_gpu_u32, ld_relaxed_gpu_u32, ld_shared_b32, mbar_wait_rt, redux_min_u32,
                            shfl_bfly_s32, st_relaxed_gpu_u32, st_relaxed_gpu_u64, st_shared_b32, trap_if_ne,
                            wait_arrived_count, wait_geq_u32_rt, wait_mask_u64_rt)
    from .role2_chunks import ActTma, act_tma_phase_flips, all_w1_tile_bits, for_each_chunk, w1_tile_bits
    from .role2_config import (CONSUMER_REGS_TURNS, CONSUMER_THREADS, L2_SCALE_GROUP, PRODUCER_REGS_TURNS,
                               PRODUCER_THREADS, ROWS_PER_CTA, SIGNAL_BAR, SIGNAL_BAR_THREADS, SIGNAL_WARP_TIDS,
                               _consumer_lane)
    from .role2_epilogue import _w1_epilogue, w2_epilogue
    from .role2_handover import (epilogue_w1, epilogue_w2, epilogue_warpgroup_loop, hand_over_task, handover_layout,
                                 init_handover)
    from .role2_mainloop import K128Step, TokenScales, _mma_k128_steps, pingpong_open, pingpong_turns
    from .role2_stages import _init_stage_barriers, stage_k128_step, _load_k128, _produce_k128
    from .role1_sync import shfl_idx
    from .task_queue import check_slot_reuse, init_task_slots, next_task, publish_task

    H, I, BM, CAP = cfg.hidden, cfg.inter, cfg.bm, cfg.capacity
    P, EL, D = cfg.ranks, cfg.experts_local, cfg.dispatch_sms
    SCOPE = peer_scope(P)
    PIPE = cfg.pipelined
    SIG = cfg.w1.signal_warp  # 384-thread builds: the releases run on the producer warpgroup's signal warp
    EPIWG = cfg.epilogue_wg  # ... or, with the epilogue warpgroup, there (module docstring, "Epilogue warpgroup")
    THREADS = cfg.launch_threads
    P0 = PRODUCER_THREADS if PIPE else 0
    CT = CONSUMER_THREADS
    ND = BM // 2
    NARROW = cfg.narrow_n  # a second W1 K loop at this wgmma N for blocks of at most NARROW tokens (0: none)
    NT1, NT2 = cfg.nt1, cfg.nt2
    TPB = NT1 + NT2
    NK1, NK2 = H // 128, I // 128
    NSLAB1, NSLAB2 = 2 * I // 64, H // 64
    NKB = H // 128  # FP32 activation scales per token row (K128 groups of H)
    NIG = I // L2_SCALE_GROUP  # UE8M0 L2 scales per token row
    so = cfg.smem_offsets()
    ACT_OFF, ASC_OFF, AMAX_OFF, INFO_OFF = so["act"], so["asc"], so["amax"], so["info"]
    HO = handover_layout(so["handover"], BM) if EPIWG else None
    STAGE_OFF, BAR_OFF, NS = so["stage"], so["bar"], so["stages"]
    SLOT_OFF, NSLOT, SIGREC_OFF = so.get("slots", 0), so.get("nslots", 0), so.get("sigrec", 0)
    if PIPE:
        check_slot_reuse(min(NK1, NK2), NS, f"role2 BM={BM}", NSLOT)
    TMA = cfg.w1.act_tma  # the activation chunks come by tensor map (the workspace's act_maps)
    ACTBAR_OFF = so.get("actbar", 0)
    FLIP1, FLIP2 = (act_tma_phase_flips(cfg.w1), act_tma_phase_flips(cfg.w2)) if TMA else (0, 0)
    I_BITS = all_w1_tile_bits(I)  # every W1 N128 tile's mask bit of a block (Role2RingConfig: 2I/128 <= 64)
    SPLIT = cfg.w1_split  # W1 tasks per W1 tile at small loads (module docstring, "W1 split-K"); 1: no split code
    NKC1, NKC2 = H // cfg.w1.kc, I // cfg.w2.kc  # each GEMM's activation chunks of its whole K
    SHARED_LOOP = cfg.shared_loop  # one K loop per wgmma N serves both GEMMs (module docstring, "Shared K loop")
    FLIP1S = act_tma_phase_flips(cfg.w1, NKC1 // SPLIT) if TMA else 0  # a split W1 task's chunk buffers
    SKIP = 2  # signal record ``is1`` of a split W1 task that is not its tile's last: no release
    NOTASK = 3  # signal record kind of a CTA without a task: no release (+ 4 in a record: the CTA's last task)
    PLACED = cfg.ctas_per_sm == 2  # the CTA's index from where it runs (module docstring, "Placement")
    PLACE_OFF = so.get("place", 0)  # its logical index, for every thread after the first barrier
    PLACE_TID = 32  # warp 1 lane 0: idle while warp 0 waits for the receive counts (producer warpgroup or consumer)
    # the first W1 task's weights to L2 ("First weights to L2"): one GPU, where topk_idx names the local experts
    PREFETCH = PIPE and BM <= SM90_W1_PREFETCH_MAX_BM and P == 1
    TOPK = cfg.topk
    PREFETCH_WARP = 2  # of the producer warpgroup: idle while warp 0 waits for the receive counts
    NEXT_OFF = INFO_OFF + 8  # the producer thread's next task (module docstring, "Dynamic tasks")
    CLAIMS_OFF = INFO_OFF + 12  # whether this replay's producer claims (claims_run)
    SPLIT_SLOT = 256 * W1_SPLIT_BM  # floats of one split's partial (layout.w1_partial_slot)
    alpha, clamp = float(cfg.alpha), float(cfg.clamp)
    TR = bool(TRACE) and PIPE  # the task trace (module docstring); the 256-thread builds have no producer thread
    # (producer, consumer) registers after setmaxnreg; a trace build's producer gets at least 32: at 24 (BM 48) its
    # stamps beside the task claim put its stage loop off the uniform datapath (an elect loop per bulk copy) and
    # starved the consumers (K loops ~25 % slower than the shipped build's, session 39 call B), at the price of the
    # consumers' 232 (BM 48's wide loop 1 306 -> 1 336 instructions per K512)
    REGS = cfg.w1.setmaxnreg
    if TR and REGS[0] < PRODUCER_REGS_TURNS:
        REGS = (PRODUCER_REGS_TURNS, CONSUMER_REGS_TURNS)

    def trace_addr(trace, task, word):
        """The address of word ``word`` of task ``task``'s trace row (TRACE builds); tasks past
        ``ROLE2_TRACE_TASKS`` all write the last row's spare word, a sink the reader ignores."""
        over = Int32(task >= wsl.ROLE2_TRACE_TASKS)
        row = task - over * (task - (wsl.ROLE2_TRACE_TASKS - 1))
        return trace + (Int64(row) * wsl.ROLE2_TRACE_WORDS + Int64(word + over * (wsl.TRACE_SPARE - word))) * 8

    def stamp(trace, task, word, value):
        """Word ``word`` of task ``task``'s trace row := ``value`` (``globaltimer()`` for a time)."""
        st_relaxed_gpu_u64(trace_addr(trace, task, word), value)

    # the trace words of a task's top: ``role2_chunks.for_each_chunk``'s ``stamps`` parts
    top_stamps = {"top": wsl.TRACE_TOP_BAR, "issued": wsl.TRACE_CHUNK0_ISSUED, "scales": wsl.TRACE_CHUNK0_SCALES,
                  "landed": wsl.TRACE_CHUNK0_LANDED, "first": wsl.TRACE_CHUNK0}

    def ring_act_scale_addr(mode, base, rb, row0, sf_stride, grp, tok):
        """Address of the activation scale of token ``tok``, K group ``grp`` of ring block ``rb``
        (``role2_chunks.load_act_scale``): W1 FP32 per K128 group, MN-major ``ring_sf[rb][H/128][sf_stride]``; W2
        UE8M0 per L2_SCALE_GROUP I-columns, token-major ``l2_sf[rb][bm_stride][I/L2_SCALE_GROUP]``."""
        if mode == "w1":
            return base + ((Int64(rb) * NKB + Int64(grp)) * Int64(sf_stride) + Int64(tok)) * 4
        return base + (row0 + Int64(tok)) * NIG + Int64(grp)

    def acquire_block(task, nq, l1_full_count, ring_blocks, err, timeout_ns, wait=True, srun=None):
        """Task -> (pool block q, W1 task? (0/1), tile, generation, ring block rb, split) in the generation-phased
        order (``role2_schedule.task_coords``, line for line), once the ring block's ``l1_full_count`` reaches
        ``BM * (gen + 1)`` (trap code 2; ``wait=False``: the coordinates only, for consumers of a task record).
        ``srun``: the replay's W1 tasks per tile (split builds; the W1 tasks of a tile consecutive, split index
        fastest), None in the others (split 0)."""
        s1 = 1 if srun is None else srun
        gt = ring_blocks * (TPB if srun is None else NT1 * s1 + NT2)
        gen = task // gt
        u = task - gen * gt
        nb = nq - gen * ring_blocks
        nb = nb - Int32(nb > ring_blocks) * (nb - ring_blocks)  # min(ring_blocks, blocks left)
        n1 = nb * NT1 if srun is None else nb * NT1 * s1
        is1 = Int32(u < n1)
        v = u - (1 - is1) * n1
        sp = 0
        if srun is not None:
            bt = v // s1
            sp = is1 * (v - bt * s1)
            v = v - is1 * (v - bt)  # W1: the (block, tile) index
        rb = is1 * (v // NT1) + (1 - is1) * (v // NT2)
        tile = v - rb * (NT2 + is1 * (NT1 - NT2))
        q = gen * ring_blocks + rb
        if wait:
            wait_geq_u32_rt(l1_full_count + Int64(rb) * 4, BM * (gen + 1), err, CODE_L1_FULL, timeout_ns)
        return q, is1, tile, gen, rb, sp

    @cute.jit
    def release_task(is1: Int32, tile: Int32, gen: Int32, rb: Int32, l2_full_mask: Int64, l2_empty_count: Int64,
                     l1_empty_count: Int64):
        """One thread, after the barrier that ends the task's stores (W1) or its reads of the block (W2): W1 sets
        its two N128 mask bits; W2 counts one ``l2_empty``, and the generation's last W2 task clears the mask, completes
        ``l2_empty``'s generation and hands the block back to role1. Release operations: each cumulative over what
        the barrier ordered before it; no separate fence (its MEMBAR and L1 invalidation)."""
        if const_expr(SPLIT > 1):
            if is1 == 1:
                red_release_or_b64(l2_full_mask + Int64(rb) * 8, Int64(3) << Int64(2 * tile))
            elif is1 == 0:  # (SKIP: a split W1 task that was not its tile's last releases nothing)
                hand_back_if_last(atom_add_release_gpu_u32(l2_empty_count + Int64(rb) * 4, Int32(1)), gen, rb,
                                  l2_full_mask, l2_empty_count, l1_empty_count)
        else:
            if is1 != 0:
                red_release_or_b64(l2_full_mask + Int64(rb) * 8, Int64(3) << Int64(2 * tile))
            else:
                hand_back_if_last(atom_add_release_gpu_u32(l2_empty_count + Int64(rb) * 4, Int32(1)), gen, rb,
                                  l2_full_mask, l2_empty_count, l1_empty_count)

    @cute.jit
    def hand_back_if_last(old: Int32, gen: Int32, rb: Int32, l2_full_mask: Int64, l2_empty_count: Int64,
                          l1_empty_count: Int64):
        """W2, after its ``l2_empty`` count returned ``old``: the generation's last W2 task clears the W1 bitmap
        for the next generation, completes ``l2_empty``'s generation, then hands the ring block back to role1."""
        if old == last_w2_old(gen, NT2):
            fence_acq_rel_gpu()  # acquire the generation's other W2 releases (their reads are done)
            st_relaxed_gpu_u64(l2_full_mask + Int64(rb) * 8, Int64(0))
            red_release_add_u32(l2_empty_count + Int64(rb) * 4, Int32(1))
            red_release_add_u32(l1_empty_count + Int64(rb) * 4, Int32(1))

    def peer_ws(peer, r):
        """Rank ``r``'s workspace base (a fresh trace-time view each use)."""
        pd_ = PeerDesc(peer)
        return pd_.base() + pd_.offset(r)

    def combine_row(peer, ws, o_ring_meta, o_combine, row0, tile, n):
        """W2's destination of token ``n`` of the block at ``row0``: ``ring_meta`` = (routing weight, src_rank,
        src_token, slot), so its ``combine[slot][src_token]`` row of its source rank (peer descriptor), this task's
        256 columns."""
        meta = ld_global_v4(ws + o_ring_meta + (row0 + Int64(n)) * 16)
        cell = (Int64(meta[3]) * CAP + Int64(meta[2])) * H + Int64(tile * ROWS_PER_CTA)
        return peer_ws(peer, meta[1]) + o_combine + cell * 2

    @cute.jit
    def place_cta(sslot: Int32, place: Int64, ncta: Int32, late: Int32) -> Int32:
        """One thread: this CTA's logical index (module docstring, "Placement"; host mirror :func:`placed_cta`) to
        shared memory at ``sslot``, then its start count. ``late`` == 0: acquire-release, and the launch's last CTA to
        start zeroes ``role2_place`` for the next launch here; else a release whose old value is returned for
        :func:`zero_place_if_last` after the first barrier (a branch of its own: ptxas read the value at once where
        both modes shared the add, merging the modes' conditions into one predicate)."""
        sm = smid() & Int32(wsl.ROLE2_PLACE_SMS - 1)
        cls = Int32(atom_add_relaxed_gpu_u32(place + Int64(wsl.PLACE_SM + sm) * 4, Int32(1)) != 0)
        n = atom_add_relaxed_gpu_u32(place + Int64(wsl.PLACE_CLASS + cls) * 4, Int32(1))
        u = n + cls * (ncta - 1 - 2 * n)  # class 0 from the bottom, class 1 from the top
        h = ncta // 2
        st_shared_b32(sslot, u + Int32(u >= h) * (ncta - 1 + h - 2 * u))  # the upper half reversed
        started = Int32(0)
        start_count = place + Int64(wsl.PLACE_STARTED) * 4
        if late != 0:
            started = atom_add_release_gpu_u32(start_count, Int32(1))
        else:
            # release: this CTA's class counts before its start count; acquire: the last starter zeroes after every
            # count
            if atom_add_acqrel_gpu_u32(start_count, Int32(1)) == ncta - 1:
                zero_place(place)
        return started

    @cute.jit
    def zero_place(place: Int64):
        """Zero ``role2_place`` (16-byte stores) for the next launch."""
        for i in cutlass.range(wsl.ROLE2_PLACE_WORDS // 4, unroll=1):
            st_global_v4(place + Int64(i) * 16, Int32(0), Int32(0), Int32(0), Int32(0))

    @cute.jit
    def zero_place_if_last(started: Int32, place: Int64, ncta: Int32):
        """The placing thread after the first barrier, with its late start count's old value: the launch's last CTA to
        start zeroes ``role2_place`` for the next launch, after a fence that makes the release-add an acquire too."""
        if started == ncta - 1:
            fence_acq_rel_gpu()
            zero_place(place)

    def replay_tasks(nq, ncta, ring_blocks):
        """This replay's W1 tasks per W1 tile (:func:`w1_split_runs`, line for line; 1 outside the split builds) and
        its task count, from its ``nq`` pool blocks."""
        srun = Int32(1)
        if const_expr(SPLIT > 1):
            srun = 1 + (SPLIT - 1) * (Int32(nq * NT1 * SPLIT <= ncta) * Int32(nq <= ring_blocks)
                                      * Int32(nq <= W1_SPLIT_MAX_BLOCKS))
            return srun, nq * (NT1 * srun + NT2)
        return srun, nq * TPB

    @cute.jit
    def prefetch_first_w1(ws: Int64, o_topk_idx: Int64, rank_tokens: Int32, ring_blocks: Int32, steps: Int32,
                          w1_tiles: Int64, w1_scales: Int64, lane: Int32):
        """One warp at the CTA's start (module docstring, "First weights to L2"; P = 1, at most 32 routed slots): from
        the rank's ``topk_idx`` count each expert's tokens and number the pool blocks as role1 will (each expert's
        ``ceil(tokens / BM)`` blocks in expert order; host mirror :func:`prefetch_search`), find the CTA's first task
        (the static split's task ``blockIdx``) and, when it is a W1 task of the first ring generation, bring
        ``steps`` K128 steps of its W1 tile (four 64-row slabs' codes and scales) into L2, each lane its share of the
        lines."""
        # the block index read here, not the kernel's (ptx_mem.block_coords)
        cta, ncta = block_coords()
        n = rank_tokens * TOPK
        valid = Int32(lane < n)
        e = ld_global_s32(ws + o_topk_idx + Int64(cutlass.min(lane, n - 1)) * 4)
        valid = valid * Int32(e >= 0) * Int32(e < EL)
        e = valid * e + (1 - valid) * Int32(EL)  # a dropped slot sorts past every expert
        same = Int32(0)  # lanes holding this lane's expert
        below = Int32(0)  # ... of them below this lane: 0 in the expert's leader
        for j in cutlass.range_constexpr(32):
            ej = shfl_idx(e, Int32(j))
            same = same + Int32(ej == e)
            below = below + Int32(ej == e) * Int32(j < lane)
        nb = valid * Int32(below == 0) * ((same + (BM - 1)) // BM)  # the expert's blocks, in its leader lane
        first = Int32(0)  # the expert's first pool block: the blocks of every lower expert
        nq = Int32(0)
        for j in cutlass.range_constexpr(32):
            nbj = shfl_idx(nb, Int32(j))
            first = first + Int32(shfl_idx(e, Int32(j)) < e) * nbj
            nq = nq + nbj
        srun, ntasks = replay_tasks(nq, ncta, ring_blocks)  # as the kernel derives them after the receive counts
        q, is1, tile, gen, rb, sp = acquire_block(cta, nq, Int64(0), ring_blocks, Int64(0), Int64(0), wait=False,
                                                  srun=srun if const_expr(SPLIT > 1) else None)
        nrun = NK1 // srun  # a split W1 task's K128 steps (srun 1: the whole K)
        mine = Int32(cta < ntasks) * is1 * Int32(gen == 0) * Int32(nb > 0) * Int32(first <= q) * Int32(q < first + nb)
        # one lane at most holds the task's expert: a warp sum gives it (or 0 lanes) to every lane, which then takes
        # its share of the lines
        hit = mine
        el = mine * e
        for d in cutlass.range_constexpr(5):
            hit = hit + shfl_bfly_s32(hit, 1 << d)
            el = el + shfl_bfly_s32(el, 1 << d)
        if hit != 0:
            nst = cutlass.min(steps, nrun)
            for j in cutlass.range_constexpr(4):
                slab = Int64(el * NSLAB1 + tile * 4 + j) * NK1 + Int64(sp * nrun)
                for off in cutlass.range(lane * 128, nst * 4096, 32 * 128, unroll=1):
                    prefetch_l2(w1_tiles + slab * 4096 + Int64(off))
                for off in cutlass.range(lane * 128, nst * 256, 32 * 128, unroll=1):
                    prefetch_l2(w1_scales + slab * 256 + Int64(off))

    @cute.jit
    def next_task_of(task: Int32, li: Int32, ticket: Int64, ntasks: Int32, ncta: Int32, dyn: Int32) -> Int32:
        """The producer thread: the CTA's task after its ``li``-th, ``task``, or -1 when none is left. ``dyn`` != 0
        and past the static rounds: ``STATIC_ROUNDS * ncta`` + a claim from the launch's ticket (module docstring,
        "Dynamic tasks"); else the static split's ``task + ncta``."""
        dyn = dyn * Int32(li >= STATIC_ROUNDS - 1)
        t = atom_add_relaxed_gpu_u32_if(ticket, Int32(1), dyn)
        if dyn * Int32(t == ntasks - (STATIC_ROUNDS - 1) * ncta - 1) != 0:
            st_relaxed_gpu_u32(ticket, Int32(0))
        t = ncta * (1 + dyn * (STATIC_ROUNDS - 1)) + dyn * t + (1 - dyn) * task
        return Int32(t < ntasks) * (t + 1) - 1

    @cute.jit
    def produce_task(smem: Int32, li: Int32, gs0: Int32, cta: Int32, ntasks: Int32, ncta: Int32,
                     ticket: Int64, nq: Int32, ws: Int64,
                     o_l1_full_count: Int64, o_ring_block: Int64, o_l2_full_mask: Int64, w1_tiles: Int64,
                     w1_scales: Int64, w1_factor: Int64, w2_tiles: Int64, w2_scales: Int64, w2_factor: Int64,
                     ring_blocks: Int32, policy: Int64, err: Int64, timeout_ns: Int64, srun: Int32, trace: Int64):
        """The producer thread's ``li``-th task (384 threads; the task itself at ``NEXT_OFF``): acquire it, check the
        header, wait for W2's W1 mask bits, take the CTA's next task (:func:`next_task_of`, to ``NEXT_OFF``; -1:
        none), publish this one's record with its "last" bit (module docstring, "Task records", "Dynamic tasks"),
        then stream its K128 weight stages from stage ``gs0`` (a split W1 task: its split's K range); returns the
        next task's first stage."""
        task = ld_shared_b32(smem + NEXT_OFF)
        if const_expr(TR):
            stamp(trace, task, wsl.TRACE_CLAIM, globaltimer())
        q, is1, tile, gen, rb, sp = acquire_block(task, nq, ws + o_l1_full_count, ring_blocks, err,
                                                  timeout_ns, srun=srun if const_expr(SPLIT > 1) else None)
        # the task record: header (checked here), W2's W1 mask bits, the expert factor
        hdr = ws + o_ring_block + Int64(rb) * 16
        el = ld_relaxed_gpu_u32(hdr)
        trap_if_ne(ld_relaxed_gpu_u32(hdr + 8), q, err, CODE_HEADER)
        trap_if_ne(ld_relaxed_gpu_u32(hdr + 12), gen, err, CODE_HEADER)
        if is1 == 0:
            wait_mask_u64_rt(ws + o_l2_full_mask + Int64(rb) * 8, Int64(I_BITS), err, CODE_L2_MASK, timeout_ns)
        if const_expr(TR):
            stamp(trace, task, wsl.TRACE_READY, globaltimer())
            stamp(trace, task, wsl.TRACE_WHERE, Int64(smid()) | (Int64(cta) << 32))
            stamp(trace, task, wsl.TRACE_WHAT, Int64(is1) | (Int64(tile) << 8) | (Int64(sp) << 16) | (Int64(q) << 24)
                  | (Int64(gen) << 48))
        # claimed once this task is ready, so a CTA commits to its next task about one task ahead of running it
        nxt = next_task_of(task, li, ticket, ntasks, ncta, ld_shared_b32(smem + CLAIMS_OFF))
        st_shared_b32(smem + NEXT_OFF, nxt)
        fbase = w2_factor + Int64(is1) * (w1_factor - w2_factor)
        publish_task(smem + SLOT_OFF, li, task | (Int32(nxt < 0) << 31), el, ld_relaxed_gpu_u32(hdr + 4),
                     ld_global_f32(fbase + Int64(el) * 4), NSLOT)
        nk = NK2 + is1 * (NK1 - NK2)
        nslab = NSLAB2 + is1 * (NSLAB1 - NSLAB2)
        wbase = w2_tiles + Int64(is1) * (w1_tiles - w2_tiles)
        sbase = w2_scales + Int64(is1) * (w1_scales - w2_scales)
        slab0 = Int64(el) * Int64(nslab) + Int64(tile) * 4
        if const_expr(SPLIT > 1):
            nrun = nk // (1 + is1 * (srun - 1))  # a split W1 task streams its split's K128 steps
            # its first step folded into the bases (a tile's steps are consecutive: 4096 code / 256 scale bytes
            # each), so the loop carries no more values than the unsplit one (the producer has 32 registers)
            kb0 = Int64(sp * nrun)
            for kb in cutlass.range(nrun, unroll=1):
                _produce_k128(smem, BAR_OFF, STAGE_OFF, NS, gs0 + kb,
                              lambda bar, ph: mbar_wait_rt(bar, ph, err, CODE_STAGE, timeout_ns),
                              wbase + kb0 * 4096, sbase + kb0 * 256, slab0, Int64(nk), kb, policy)
            if const_expr(TR):
                stamp(trace, task, wsl.TRACE_LAST_STAGE, globaltimer())
            return gs0 + nrun
        for kb in cutlass.range(nk, unroll=1):
            _produce_k128(smem, BAR_OFF, STAGE_OFF, NS, gs0 + kb,
                          lambda bar, ph: mbar_wait_rt(bar, ph, err, CODE_STAGE, timeout_ns),
                          wbase, sbase, slab0, Int64(nk), kb, policy)
        if const_expr(TR):
            stamp(trace, task, wsl.TRACE_LAST_STAGE, globaltimer())
        return gs0 + nk

    @cute.jit
    def mainloop(mode: cutlass.Constexpr, smem: Int32, ctid: Int32, acc: cute.Tensor, wbuf: cute.Tensor, el: Int32,
                 tile: Int32, ntok: Int32, gs0: Int32, rb: Int32, row0: Int64, ws: Int64, o_act: Int64,
                 o_asc: Int64, o_mask: Int64, w: Int64, wsc: Int64, sf_stride: Int32, policy: Int64, err: Int64,
                 timeout_ns: Int64, o_maps: Int64, aph: Int32, bm_stride: Int32, c0: Int32, nch: Int32,
                 o_trace: Int64, task: Int32, final_task: Int32, o_asc_w2: Int64, is1: Int32,
                 mma_n: cutlass.Constexpr):
        """K loop of one 256-row task (the verified mainloop) over its K chunks ``[c0, c0 + nch)`` (split builds' W1;
        all of K otherwise, the arguments unused; ``final_task``: 1 on the consumer's last task, whose last step
        skips warpgroup 1's hand-over of the turns; ``mma_n``: the wgmmas' N, BM or ``NARROW``): weights from the
        producer's stages (384) or the register stream (256); activations + scales staged per K chunk into shared
        memory (padded rows zeroed; 384 threads: by tensor map, ``aph`` the chunk buffers' phases); ``_k128_mma`` per
        K128. W1
        (``mode == "w1"``): ``ring_x`` rows + FP32 MN-major ``ring_sf``; W2: ``l2_x`` rows + UE8M0 ``l2_sf``, each
        chunk after acquiring its mask bits. ``mode == "any"`` (``SHARED_LOOP`` builds): the task's GEMM is ``is1``'s
        (W1's scales at ``o_asc``, W2's at ``o_asc_w2``), read at run time: one loop serves both (module docstring,
        "Shared K loop"); ``is1`` / ``o_asc_w2`` are unused otherwise."""
        mc = cfg.w2 if const_expr(mode == "w2") else cfg.w1  # "any": the GEMMs' loops differ only in K (SHARED_LOOP)
        K, KC = mc.k, mc.kc
        NK = K // 128
        NSLAB = mc.rows // 64
        GS = mc.act_scale_group
        NGS = KC // GS
        nkc = K // KC  # the task's K chunks
        if const_expr(mode == "any"):
            nkc = NKC2 + is1 * (NKC1 - NKC2)
        # the turns' last step is in this chunk (-1: none; one value for the loop to keep, not final_task and nkc)
        final_kc = final_task * nkc - 1
        wg, warp, g, t, tw = _consumer_lane(ctid)
        for i in cutlass.range_constexpr(2 * ND):
            acc[i] = Float32(0.0)
        slabs = [Int64(el) * NSLAB + Int64(tile) * 4 + Int64(wg * 2 + sl) for sl in range(2)]
        wbases = [w + slabs[sl] * NK * 4096 + Int64(tw) * 32 for sl in range(2)]
        sbases = [wsc + slabs[sl] * NK * 256 + Int64(warp * 8 + g) * 8 for sl in range(2)]
        if const_expr(not PIPE):
            _load_k128(wbuf, 0, Int32(0), wbases, sbases, policy)

        def wait_w1_tiles(kc):  # W2: the W1 N128 tiles that produced I-columns [kc*KC, (kc+1)*KC)
            wait_mask_u64_rt(ws + o_mask + Int64(rb) * 8, w1_tile_bits(kc, KC), err, CODE_L2_MASK, timeout_ns)

        turns = pingpong_turns(wg) if const_expr(mc.pingpong) else None

        SPC = mc.mma_steps_per_call  # K128 steps per _mma_k128_steps call: the tensor cores drain once per call

        def chunk_mma(kc, act_buf, asc_buf, prefetch):
            for k2 in cutlass.range(KC // (128 * SPC), unroll=1):
                steps = []
                for h in cutlass.range_constexpr(SPC):
                    kl128 = k2 * SPC + h
                    kb = kc * (KC // 128) + kl128
                    ascl = TokenScales(asc_buf, kl128, t, BM, GS, mma_n)
                    if const_expr(PIPE):
                        steps.append(stage_k128_step(
                            mc, smem, BAR_OFF, STAGE_OFF, NS, lambda kb=kb: gs0 + kb,
                            lambda bar, ph: mbar_wait_rt(bar, ph, err, CODE_STAGE, timeout_ns), (wg, tw, warp, g),
                            ascl, kl128))
                    else:
                        def fetch(h=h, kb=kb):
                            nxt = kb + 1 - Int32(kb + 1 >= NK)  # last K128: harmless reload of itself
                            _load_k128(wbuf, 1 - h, nxt, wbases, sbases, policy)
                            return [wbuf[h * 20 + r] for r in range(20)]
                        steps.append(K128Step(fetch, ascl, kl128))
                if const_expr(prefetch is not None):
                    steps[-1].issued = lambda k2=k2: prefetch(k2)
                if const_expr(mc.pingpong):  # the consumer's last step (``final_task``: this is its last task)
                    steps[-1].final = Int32(kc == final_kc) * Int32(k2 == KC // (128 * SPC) - 1)
                _mma_k128_steps(steps, acc, act_buf, BM, mc.lag, overlap=PIPE, prescaled=mc.staged_fold_scale,
                                sw128=mc.act_tma, slab_groups=mc.slab_groups, turns=turns, mma_n=mma_n,
                                k_interleave_tig=t if const_expr(mc.k_interleave) else None,
                                scales_before_wait=mc.scales_before_wait)

        if const_expr(mode == "any"):
            slot2 = act_map_slot("w2", BM)
            act_src = ActTma(ws + o_maps + (slot2 + is1 * (act_map_slot("w1", BM) - slot2)) * ACT_MAP_BYTES,
                             rb * bm_stride, aph, ACTBAR_OFF)
        elif const_expr(mc.act_tma):
            act_src = ActTma(ws + o_maps + act_map_slot(mode, BM) * ACT_MAP_BYTES, rb * bm_stride, aph, ACTBAR_OFF)
        else:
            act_src = lambda tok: ws + o_act + (row0 + Int64(tok)) * K  # noqa: E731
        rng = dict(c0=c0, nkc=nch) if const_expr(SPLIT > 1 and mode == "w1") else {}
        if const_expr(mode == "any"):
            rng.update(nkc=nkc, w1=is1)
        if const_expr(TR):  # the task trace's stamps of the task's top (module docstring, "Task trace")
            rng["stamps"] = {part: trace_addr(ws + o_trace, task, word) for part, word in top_stamps.items()}

        if const_expr(mode == "any"):
            # ring_act_scale_addr's two layouts as base + group * gstride + token * tstride, picked once per task
            # (32-bit strides: a block's scales span less than 2**31 bytes)
            sbase = ws + o_asc_w2 + row0 * NIG
            sbase = sbase + Int64(is1) * (ws + o_asc + Int64(rb) * NKB * Int64(sf_stride) * 4 - sbase)
            gstride = 1 + is1 * (sf_stride * 4 - 1)
            tstride = NIG + is1 * (4 - NIG)
            scale_addr = lambda kc, tok, kk: sbase + Int64((kc * NGS + kk) * gstride + tok * tstride)  # noqa: E731
        else:
            scale_addr = lambda kc, tok, kk: ring_act_scale_addr(mode, ws + o_asc, rb, row0, sf_stride,  # noqa: E731
                                                                 kc * NGS + kk, tok)
        for_each_chunk(mc, smem, ACT_OFF, ASC_OFF, act_src, scale_addr,
                       ctid, ntok, chunk_mma, wait_w1_tiles if mode == "w2" and not PIPE else None, **rng)

    @cute.jit
    def w1_split_reduce(smem: Int32, ctid: Int32, acc: cute.Tensor, mine: Int64, other: Int64,
                        count: Int64) -> Int32:
        """A split W1 task after its K loop (module docstring, "W1 split-K"): store this split's FP32 accumulators
        (thread-major: float ``i * CT + ctid``) to ``mine``, count the split in at ``count`` and return 1 only in the
        tile's last arrival, with ``acc`` += the other split's partial from ``other`` (two splits: the sum's bits
        are the same whichever arrives last); that task zeroes the count for the next replay. Release: the CTA's
        stores, barrier, fence + acq_rel add by consumer thread 0; acquire: the last task's add, fence, barrier,
        then L1-bypassing loads (role4's split-K hand-over, the cooperative-groups grid-sync pattern)."""
        for i in cutlass.range_constexpr(2 * ND):
            st_global_f32(mine + Int64(i * CT + ctid) * 4, acc[i])
        bar_sync(1, CT)
        if ctid == 0:
            fence_acq_rel_gpu()
            old = atom_add_acqrel_gpu_u32(count, Int32(1))
            fence_acq_rel_gpu()
            st_shared_b32(smem + INFO_OFF + 4, old)
        bar_sync(1, CT)
        last = Int32(ld_shared_b32(smem + INFO_OFF + 4) == SPLIT - 1)
        if last != 0:
            if ctid == 0:
                st_relaxed_gpu_u32(count, Int32(0))
            for i in cutlass.range_constexpr(2 * ND):
                acc[i] = acc[i] + ld_global_cg_f32(other + Int64(i * CT + ctid) * 4)
        return last

    @cute.kernel
    def kernel(peer: cute.Pointer, o_ring_x: Int64, o_ring_sf: Int64, o_ring_meta: Int64, o_ring_block: Int64,
               o_l2_x: Int64, o_l2_sf: Int64, o_l1_full_count: Int64, o_l1_empty_count: Int64,
               o_l2_full_mask: Int64, o_l2_empty_count: Int64, o_recv_count: Int64, o_recv_parity: Int64,
               o_combine: Int64, o_act_maps: Int64, o_w1_split_count: Int64, o_w1_partials: Int64,
               o_role2_trace: Int64, o_role2_ticket: Int64, o_role2_place: Int64, o_topk_idx: Int64, w1_tiles: Int64,
               w1_scales: Int64, w1_factor: Int64, w2_tiles: Int64, w2_scales: Int64, w2_factor: Int64, err: Int64,
               timeout_ns: Int64, ring_blocks: Int32, bm_stride: Int32, sf_stride: Int32, place_ctas: Int32,
               w1_prefetch_steps: Int32, rank_tokens: Int32):
        tid, cta, ncta = launch_coords()
        smem = cute.arch.get_dyn_smem(Uint8, 1024).toint()
        ws = PeerDesc(peer).base()
        policy = evict_first_policy()

        def ho_wait(bar, ph):  # the epilogue warpgroup's hand-overs (epilogue_wg): bounded, with a trap record
            mbar_wait_rt(bar, ph, err, CODE_STAGE, timeout_ns)
        if const_expr(PIPE):
            if tid == 0:
                if const_expr(TMA):
                    for b in cutlass.range_constexpr(2):
                        mbar_init(smem + ACTBAR_OFF + 8 * b, 1)
                _init_stage_barriers(smem, BAR_OFF, NS)
                init_task_slots(smem + SLOT_OFF, NSLOT)
                if const_expr(EPIWG):
                    init_handover(smem, HO)

        # ---- this replay's pool blocks: wait for every receive counter of this parity to be complete ----
        if tid < 32:
            par = ld_relaxed_gpu_u32(ws + o_recv_parity) & Int32(1)
            nb = Int32(0)
            for el in cutlass.range(tid, EL, 32):
                tot = Int32(0)
                for r in cutlass.range_constexpr(P):
                    cell = Int64((par * EL + el) * P + r)
                    tot = tot + wait_arrived_count(ws + o_recv_count + cell * 8, D, err, CODE_RECV, timeout_ns,
                                                   SCOPE)
                nb = nb + (tot + (BM - 1)) // BM
            for d in cutlass.range_constexpr(5):
                nb = nb + shfl_bfly_s32(nb, 1 << d)
            if tid == 0:
                st_shared_b32(smem + INFO_OFF, nb)
        started = Int32(0)  # the placing thread's start count (module docstring, "Placement")
        if const_expr(PLACED):
            if place_ctas != 0:
                if tid == PLACE_TID:
                    started = place_cta(smem + PLACE_OFF, ws + o_role2_place, ncta,
                                        Int32(place_ctas == PLACE_CTAS_START_LATE))
        if const_expr(PREFETCH):
            # the CTA's first W1 weights into L2 while role1 counts and fills (module docstring): blockIdx's task, so
            # not where the CTAs place themselves; the routing's slots fit one warp
            if (Int32(w1_prefetch_steps != 0) * Int32(place_ctas == 0) * Int32(rank_tokens > 0)
                    * Int32(rank_tokens * TOPK <= 32)) != 0:
                if (tid >> 5) == PREFETCH_WARP:
                    prefetch_first_w1(ws, o_topk_idx, rank_tokens, ring_blocks, w1_prefetch_steps, w1_tiles,
                                      w1_scales, tid & 31)
        bar_sync(0, THREADS)
        nq = ld_shared_b32(smem + INFO_OFF)
        if const_expr(PLACED):
            if place_ctas != 0:
                cta = ld_shared_b32(smem + PLACE_OFF)
            if const_expr(not PIPE):
                # the start count's round trip after the barrier, where only the placing thread's warp waits for it
                # (the 384-thread builds: after the producer warpgroup's register release, below)
                if place_ctas == PLACE_CTAS_START_LATE:
                    if tid == PLACE_TID:
                        zero_place_if_last(started, ws + o_role2_place, ncta)
        srun, ntasks = replay_tasks(nq, ncta, ring_blocks)
        nlocal = (ntasks - cta + ncta - 1) // ncta  # the static split's tasks of this CTA (may be 0)

        if tid < P0:
            # ---------------- producer warpgroup (384-thread variant) ----------------
            setmaxnreg(REGS[0], False)
            if const_expr(PLACED):
                # the late start count's value in warp 1 (the signal warp, or idle). Its register release above
                # already waits for it (a release waits for every pending register write), and the consumers'
                # raise for that release, but the producer thread does not: its first stages are in flight by then
                if place_ctas == PLACE_CTAS_START_LATE:
                    if tid == PLACE_TID:
                        zero_place_if_last(started, ws + o_role2_place, ncta)
            # one task loop for the producer thread and the signal warp, each warp running its own instance (a
            # second loop over the tasks, the signal warp's, made ptxas spill ~20 values of the producer's); the
            # producer runs until it has no next task, the signal warp until a record says the task was the last.
            # The producer's task lives in shared memory, not in a register its loop carries: at 24 registers any
            # value more there (the task, the claim's result) took the consumers' K loops off the uniform
            # datapath (session 39)
            go = Int32(0)
            if tid == 0:
                st_shared_b32(smem + NEXT_OFF, cta)  # the first task is the static split's (module docstring)
                # and whether it claims the others (module docstring, "Dynamic tasks"): not in a split replay (W1
                # split-K at small loads) nor with few tasks per CTA (claims_run). Kept in shared memory as the task
                # is: a register more in the producer (32 at BM 80) put 8 UMOV into each of that build's K loops
                st_shared_b32(smem + CLAIMS_OFF, Int32(srun == 1) * Int32(ntasks >= CLAIM_MIN_TASKS_PER_CTA * ncta))
                go = Int32(cta < ntasks)
            if const_expr(SIG):
                go = go + Int32(tid >= SIGNAL_WARP_TIDS[0]) * Int32(tid < SIGNAL_WARP_TIDS[1])
            gs0 = Int32(0)
            li = Int32(0)
            while go != 0:
                if tid == 0:
                    gs0 = produce_task(smem, li, gs0, cta, ntasks, ncta, ws + o_role2_ticket, nq, ws,
                                       o_l1_full_count, o_ring_block, o_l2_full_mask, w1_tiles, w1_scales, w1_factor,
                                       w2_tiles, w2_scales, w2_factor, ring_blocks, policy, err, timeout_ns, srun,
                                       ws + o_role2_trace)
                    go = Int32(ld_shared_b32(smem + NEXT_OFF) >= 0)
                else:
                    if const_expr(SIG):
                        # the signal warp: the task's hand-over barrier, then the coordinates record the consumers
                        # wrote at the task's top (with its "last" bit), then the task's releases
                        bar_sync(SIGNAL_BAR, SIGNAL_BAR_THREADS)
                        rec = ld_shared_v4(smem + SIGREC_OFF + (li % 2) * 16)
                        kind = rec[0] & 3
                        go = 1 - (rec[0] >> 2)
                        if tid == SIGNAL_WARP_TIDS[0]:
                            if kind != NOTASK:
                                release_task(kind, rec[1], rec[2], rec[3], ws + o_l2_full_mask,
                                             ws + o_l2_empty_count, ws + o_l1_empty_count)
                li = li + 1
        elif tid >= P0 + CT:
            # ---------------- the epilogue warpgroup (epilogue_wg builds only: no thread gets here otherwise) -------
            if const_expr(EPIWG):
                setmaxnreg(cfg.w1.epilogue_regs, False)
                e = tid - P0 - CT

                def ring_epilogue(fields):  # the hand-over's (is1, tile, gen, rb, tokens, the CTA's last task)
                    is1, tile, gen, rb, ntok, _ = fields
                    row0 = Int64(rb) * Int64(bm_stride)
                    if is1 != 0:  # as the consumers' W1 epilogue above, from the hand-over
                        epilogue_w1(smem, HO, AMAX_OFF, e, ntok, tile,
                                    lambda n: ws + o_ring_meta + (row0 + Int64(n)) * 16,
                                    lambda n, col: ws + o_l2_x + (row0 + Int64(n)) * I + Int64(col),
                                    lambda n, grp: ws + o_l2_sf + (row0 + Int64(n)) * NIG + Int64(grp),
                                    BM, alpha, clamp, cfg.fast_math, cfg.k_interleave)
                    else:  # W2: released once the destinations are loaded (every read of the block is done)
                        epilogue_w2(smem, HO, AMAX_OFF, e, ntok,
                                    lambda n: combine_row(peer, ws, o_ring_meta, o_combine, row0, tile, n), BM,
                                    lambda: release_task(is1, tile, gen, rb, ws + o_l2_full_mask,
                                                         ws + o_l2_empty_count, ws + o_l1_empty_count))

                def ring_finish(fields):  # W1, after every epilogue thread's stores: its two mask bits
                    if fields[0] != 0:
                        release_task(fields[0], fields[1], fields[2], fields[3], ws + o_l2_full_mask,
                                     ws + o_l2_empty_count, ws + o_l1_empty_count)

                # the loop ends with the CTA's last task (its record's bit, handed over), none without a task
                epilogue_warpgroup_loop(smem, HO, 6, e, ho_wait, ring_epilogue, ring_finish, go=Int32(nlocal > 0),
                                        is_last=lambda fields: fields[5])
        else:
            # ---------------- consumer warpgroups ----------------
            if const_expr(PIPE):
                setmaxnreg(REGS[1], True)
            ctid = tid - P0
            wg, warp, g, t, tw = _consumer_lane(ctid)
            acc = cute.make_rmem_tensor((2 * ND,), Float32)
            wbuf = cute.make_rmem_tensor((2 * 20,), Int32)  # 256-thread variant: 2 K128 register stages
            gs0 = Int32(0)
            aph = Int32(0)  # act_tma: the chunk buffers' mbarrier phases (ActTma)
            if const_expr(TMA):
                if ctid == 0:
                    fence_tensormap_acquire(ws + o_act_maps + act_map_slot("w1", BM) * ACT_MAP_BYTES)
                    fence_tensormap_acquire(ws + o_act_maps + act_map_slot("w2", BM) * ACT_MAP_BYTES)
            # the first task is static, so whether the CTA has one is too; the task loop's exit is data (the record's
            # "last" bit) through a uniform register (redux_min_u32). Its entry taken from the first record instead
            # put the K loops off the uniform datapath (32 R2UR per K256), and so did the absence of this branch's
            # barrier (a zero-task CTA's only: an unconditional consumer barrier did not keep them there either;
            # without it the one-CTA BM 8 build, which has no signal warp, ran 993 -> 1 064 instructions per K512;
            # session 39). The 256-thread builds (no producer, the static split) need no barrier here
            go = Int32(nlocal > 0)
            if const_expr(PIPE):
                if go == 0:
                    if const_expr(SIG):  # the signal warp still takes one hand-over, whose record tells it to stop
                        if ctid == 0:
                            st_shared_v4(smem + SIGREC_OFF, NOTASK + 4, Int32(0), Int32(0), Int32(0))
                        bar_sync(SIGNAL_BAR, SIGNAL_BAR_THREADS)
                    else:
                        bar_sync(1, CT)
            if const_expr(cfg.w1.pingpong):
                # closed by the last step's skipped hand-over (K128Step.final), not pingpong_close: any barrier after
                # this loop took its K loops off the uniform datapath (GLM-5.2 BM 64 669 -> 638 instructions per
                # K256: every wgmma descriptor through R2UR; session 35)
                pingpong_open(wg, go)
            li = Int32(0)
            while go != 0:
                if const_expr(PIPE):  # the producer acquired the task: its record (module docstring)
                    tw, el, ntok, efac_rec = next_task(
                        smem + SLOT_OFF, li, lambda bar, ph: mbar_wait_rt(bar, ph, err, CODE_STAGE, timeout_ns),
                        record=True, nslots=NSLOT)
                    task = tw & 0x7FFFFFFF
                    last_task = redux_min_u32((tw >> 31) & 1)
                    if const_expr(TR):
                        if ctid == 0:
                            stamp(ws + o_role2_trace, task, wsl.TRACE_START, globaltimer())
                    q, is1, tile, gen, rb, sp = acquire_block(task, nq, ws + o_l1_full_count,
                                                              ring_blocks, err, timeout_ns, wait=False,
                                                              srun=srun if const_expr(SPLIT > 1) else None)
                    if const_expr(cfg.ctas_per_sm == 1):
                        # the stream step and the chunk buffers' phases are warp-uniform (every consumer thread steps
                        # them alike) but carried across tasks through is1, which comes from loaded values: said
                        # so, ptxas keeps the one-CTA builds' K-loop waits and wgmma descriptors on the uniform
                        # datapath (without it they computed them per thread: BM 8 572 / 570 -> 534 / 544
                        # instructions per K256, DSV-4.1-Flash BM 64 697 / 783 -> 650 / 736); the two-CTA builds
                        # are left as they were (there it added 1-4 loop instructions and ~20 spills: session 26)
                        gs0 = cute.arch.make_warp_uniform(gs0)
                        aph = cute.arch.make_warp_uniform(aph)
                        if const_expr(SHARED_LOOP):  # it picks the shared K loop's GEMM
                            is1 = cute.arch.make_warp_uniform(is1)
                    if const_expr(SIG):
                        if ctid == 0:  # for the signal warp, read after this task's hand-over barrier
                            st_shared_v4(smem + SIGREC_OFF + (li % 2) * 16, is1 + 4 * last_task, tile, gen, rb)
                else:
                    task = cta + li * ncta
                    last_task = Int32(li == nlocal - 1)
                    q, is1, tile, gen, rb, sp = acquire_block(task, nq, ws + o_l1_full_count,
                                                              ring_blocks, err, timeout_ns)
                if gen > 0:  # previous generation's W2 done and its mask bits cleared
                    wait_geq_u32_rt(ws + o_l2_empty_count + Int64(rb) * 4, l2_empty_target(gen, NT2), err,
                                    CODE_L2_EMPTY, timeout_ns)
                if const_expr(not PIPE):
                    hdr = ws + o_ring_block + Int64(rb) * 16
                    el = ld_relaxed_gpu_u32(hdr)
                    ntok = ld_relaxed_gpu_u32(hdr + 4)
                    if ctid == 0:
                        trap_if_ne(ld_relaxed_gpu_u32(hdr + 8), q, err, CODE_HEADER)
                        trap_if_ne(ld_relaxed_gpu_u32(hdr + 12), gen, err, CODE_HEADER)
                row0 = Int64(rb) * Int64(bm_stride)  # first token row of the block in ring_x/meta/l2
                nch1 = NKC1 // srun  # a split W1 task's K chunks (split builds)
                if const_expr(SHARED_LOOP):
                    # both GEMMs' K loop (W1 from ring_x / ring_sf, W2 from l2_x / l2_sf: is1 picks), at NARROW
                    # for a block of at most NARROW tokens (every consumer thread reads ntok and is1 from the same
                    # task record: uniform branches); weights from the producer's stages, activations by tensor map
                    any_args = (smem, ctid, acc, wbuf, el, tile, ntok, gs0, rb, row0, ws, Int64(0), o_ring_sf,
                                o_l2_full_mask, Int64(0), Int64(0), sf_stride, policy, err, timeout_ns, o_act_maps,
                                aph, bm_stride, Int32(0), Int32(0), o_role2_trace, task, last_task,
                                o_l2_sf, is1)
                    if ntok <= NARROW:
                        mainloop("any", *any_args, NARROW)
                    else:
                        mainloop("any", *any_args, BM)
                    if const_expr(TR):
                        if ctid == 0:
                            stamp(ws + o_role2_trace, task, wsl.TRACE_KLOOP_END, globaltimer())
                if is1 != 0:
                    # ================= W1: ring_x x W1 -> SwiGLU x weight -> FP8 l2_x =================
                    # a block of at most NARROW tokens runs the K loop at that N (Role2RingConfig.narrow_n; every
                    # consumer thread reads ntok from the same task record: a uniform branch)
                    if const_expr(not SHARED_LOOP):
                        w1_args = (smem, ctid, acc, wbuf, el, tile, ntok, gs0, rb, row0, ws, o_ring_x, o_ring_sf,
                                   o_l2_full_mask, w1_tiles, w1_scales, sf_stride, policy, err, timeout_ns,
                                   o_act_maps, aph, bm_stride, sp * nch1, nch1, o_role2_trace, task,
                                   last_task, Int64(0), Int32(1))
                        if const_expr(NARROW):
                            if ntok <= NARROW:
                                mainloop("w1", *w1_args, NARROW)
                            else:
                                mainloop("w1", *w1_args, BM)
                        else:
                            mainloop("w1", *w1_args, BM)
                        if const_expr(TR):
                            if ctid == 0:
                                stamp(ws + o_role2_trace, task, wsl.TRACE_KLOOP_END, globaltimer())
                    efac = efac_rec if const_expr(PIPE) else ld_global_f32(w1_factor + Int64(el) * 4)
                    last = Int32(1)
                    if const_expr(SPLIT > 1):
                        if srun > 1:
                            part = ws + o_w1_partials + Int64(w1_partial_slot(rb, tile, 0, NT1)) * 4
                            last = w1_split_reduce(smem, ctid, acc, part + Int64(sp) * (SPLIT_SLOT * 4),
                                                   part + Int64(1 - sp) * (SPLIT_SLOT * 4),
                                                   ws + o_w1_split_count + Int64(rb * NT1 + tile) * 4)
                            if last == 0:
                                if ctid == 0:  # the signal warp reads the record after the hand-over barrier
                                    st_shared_v4(smem + SIGREC_OFF + (li % 2) * 16, SKIP + 4 * last_task, tile, gen,
                                                 rb)
                    if last != 0:
                        if const_expr(EPIWG):  # the epilogue warpgroup requantises, stores and releases
                            hand_over_task(acc, efac, smem, HO, ctid, wg, warp, li,
                                           (Int32(1), tile, gen, rb, ntok, last_task), True, BM, ho_wait)
                        else:
                            # routing weight = ring_meta[rb][row].x; E4M3 -> l2_x[rb][row][I],
                            # UE8M0 -> l2_sf[rb][row][I/L2_SCALE_GROUP]
                            _w1_epilogue(acc, smem, AMAX_OFF, ACT_OFF, efac, ntok, tile, wg, warp, g, t,
                                         lambda n: ws + o_ring_meta + (row0 + Int64(n)) * 16,
                                         lambda n, col: ws + o_l2_x + (row0 + Int64(n)) * I + Int64(col),
                                         lambda n, grp: ws + o_l2_sf + (row0 + Int64(n)) * NIG + Int64(grp),
                                         BM, alpha, clamp, fast_math=cfg.fast_math, k_interleave=cfg.k_interleave)
                    # publish: every consumer's stores, then the task's two W1 N128 mask bits (release_task)
                    if const_expr(SIG):
                        bar_sync(SIGNAL_BAR, SIGNAL_BAR_THREADS)
                    elif const_expr(not EPIWG):
                        bar_sync(1, CT)
                        if ctid == 0:  # a release operation: cumulative over the barrier's stores, no acquire half
                            red_release_or_b64(ws + o_l2_full_mask + Int64(rb) * 8, Int64(3) << Int64(2 * tile))
                else:
                    # ================= W2: l2_x x W2 -> BF16 partials -> source rank's combine =================
                    if const_expr(not SHARED_LOOP):
                        mainloop("w2", smem, ctid, acc, wbuf, el, tile, ntok, gs0, rb, row0, ws, o_l2_x, o_l2_sf,
                                 o_l2_full_mask, w2_tiles, w2_scales, sf_stride, policy, err, timeout_ns, o_act_maps,
                                 aph, bm_stride, Int32(0), Int32(0), o_role2_trace, task, last_task,
                                 Int64(0), Int32(0), BM)
                        if const_expr(TR):
                            if ctid == 0:
                                stamp(ws + o_role2_trace, task, wsl.TRACE_KLOOP_END, globaltimer())
                    efac = efac_rec if const_expr(PIPE) else ld_global_f32(w2_factor + Int64(el) * 4)

                    def dst_row(n):
                        return combine_row(peer, ws, o_ring_meta, o_combine, row0, tile, n)

                    if const_expr(EPIWG):  # the epilogue warpgroup stores and releases
                        hand_over_task(acc, efac, smem, HO, ctid, wg, warp, li,
                                       (Int32(0), tile, gen, rb, ntok, last_task), False, BM, ho_wait)
                    elif const_expr(SIG):
                        # the signal warp joins the barrier after the loads and releases there
                        w2_epilogue(acc, efac, smem, ACT_OFF, AMAX_OFF, ntok, ctid, dst_row, BM, None,
                                    (SIGNAL_BAR, SIGNAL_BAR_THREADS))
                    else:
                        def release_reads():  # every read of the block is done (mainloop, ring_meta); no store yet
                            old = Int32(-1)
                            if ctid == 0:
                                old = atom_add_release_gpu_u32(ws + o_l2_empty_count + Int64(rb) * 4, Int32(1))
                            return old

                        old = w2_epilogue(acc, efac, smem, ACT_OFF, AMAX_OFF, ntok, ctid, dst_row, BM,
                                          after_loads=release_reads)
                        bar_sync(1, CT)
                        if ctid == 0:
                            hand_back_if_last(old, gen, rb, ws + o_l2_full_mask, ws + o_l2_empty_count,
                                              ws + o_l1_empty_count)
                if const_expr(TR):
                    if ctid == 0:
                        stamp(ws + o_role2_trace, task, wsl.TRACE_END, globaltimer())
                if const_expr(SPLIT > 1):
                    split_on = Int32(srun > 1)
                    gs0 = gs0 + NK2 + is1 * (NK1 // srun - NK2)
                    aph = aph ^ (FLIP2 + is1 * (FLIP1 + split_on * (FLIP1S - FLIP1) - FLIP2))
                else:
                    gs0 = gs0 + NK2 + is1 * (NK1 - NK2)
                    aph = aph ^ (FLIP2 + is1 * (FLIP1 - FLIP2))
                li = li + 1
                go = 1 - last_task

    @cute.jit
    def host(peer: cute.Pointer, o_ring_x: Int64, o_ring_sf: Int64, o_ring_meta: Int64, o_ring_block: Int64,
             o_l2_x: Int64, o_l2_sf: Int64, o_l1_full_count: Int64, o_l1_empty_count: Int64,
             o_l2_full_mask: Int64, o_l2_empty_count: Int64, o_recv_count: Int64, o_recv_parity: Int64,
             o_combine: Int64, o_act_maps: Int64, o_w1_split_count: Int64, o_w1_partials: Int64,
             o_role2_trace: Int64, o_role2_ticket: Int64, o_role2_place: Int64, o_topk_idx: Int64, w1_tiles: Int64,
             w1_scales: Int64, w1_factor: Int64, w2_tiles: Int64, w2_scales: Int64, w2_factor: Int64, err: Int64,
             timeout_ns: Int64, ring_blocks: Int32, bm_stride: Int32, sf_stride: Int32, place_ctas: Int32,
             w1_prefetch_steps: Int32, rank_tokens: Int32):
        kernel(peer, o_ring_x, o_ring_sf, o_ring_meta, o_ring_block, o_l2_x, o_l2_sf, o_l1_full_count,
               o_l1_empty_count, o_l2_full_mask, o_l2_empty_count, o_recv_count, o_recv_parity, o_combine,
               o_act_maps, o_w1_split_count, o_w1_partials, o_role2_trace, o_role2_ticket, o_role2_place, o_topk_idx,
               w1_tiles, w1_scales, w1_factor, w2_tiles, w2_scales, w2_factor, err, timeout_ns, ring_blocks, bm_stride,
               sf_stride, place_ctas, w1_prefetch_steps, rank_tokens).launch(
                   grid=(1, 1, 1), block=(THREADS, 1, 1), smem=cfg.smem_bytes, **cfg.w1.occupancy_launch)

    fake = (fake_peer_desc(),) + tuple(Int64(0) for _ in OFFSET_PARAMS + WEIGHT_PARAMS + SCALAR_PARAMS_U64) + tuple(
        Int32(1) for _ in SCALAR_PARAMS_S32)
    return host, kernel, fake
