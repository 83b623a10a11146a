"""Numerical ground truth of the operator (paper §2.3, §4.4, §4.5, §6.5; DESIGN.md §3 "Numerics").

* ``formats``         — E2M1 / E4M3FN / UE8M0 constants, code tables, encode/decode, nibble and scale packing.
* ``quant``           — quantisers/dequantisers for activations, MXFP4 routed and FP8 shared weights.
* ``recipes``         — activation recipes and the intermediate's scale group per path (torch-free).
* ``reference``       — FP32 quantised reference MoE layer and the BF16 "ideal" reference.
* ``gate_up``         — gate/up interleave in 8-row groups (both architectures).
* ``sm90_window``     — Hopper per-expert window repack of MXFP4 scales (+ exactness report).
* ``sm90_layout``     — Hopper tile byte layout / lane permutation for the in-register FP4->E4M3 decoder.
* ``transforms_sm90`` — the Hopper weight transform (interleave, window, tile permutation) and its inverse.
* ``transforms_sm100``— the Blackwell weight transform (K128 tile prepack, UTCCP scale order) and its inverse.
* ``shared_scales``   — shared-expert activation scale staging (paper Eq. 3).

torch only: this package runs in serving processes (no pydantic, no CuTe DSL, no compiler).
"""
