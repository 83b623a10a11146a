"""The activation recipes of the two paths and the intermediate's scale group (numerics reference steps 1 and 4).

torch-free, so the workspace layout (region sizes) and the kernels (scale staging) read the same facts as the
reference without importing it.
"""
from __future__ import annotations

#: layer-input activation recipes: Hopper E4M3 with FP32 scales per 128 along H, Blackwell E4M3 with UE8M0 per 32
ACT_RECIPES = ("fp32_k128", "ue8m0_k32")
#: reference step 4, the SwiGLU intermediate's UE8M0 scale group along I per path (keyed by the activation recipe):
#: Hopper per 128 (role2's W2 then chains a K128 step's four K32 MMAs on one partial, like W1), Blackwell per 32
#: (its block-scaled MMA reads K32 scales)
INTERMEDIATE_SCALE_GROUP = {"fp32_k128": 128, "ue8m0_k32": 32}
#: the Hopper kernels' group: role2's W1 epilogue and W2 staging, role4, the workspace's ``l2_sf`` / ``shared_l2_sf``
SM90_INTERMEDIATE_SCALE_GROUP = INTERMEDIATE_SCALE_GROUP["fp32_k128"]
