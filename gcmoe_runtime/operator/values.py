"""By-name kernel argument values of the operator roles, from one workspace.

The role kernels take workspace region offsets as by-value u64 parameters named ``o_<region>``
(see ``gcmoe_build/kernels/sm90/role1_dispatch.py`` / ``role3_finalize.py``); the offsets come
from THE layout (``gcmoe_runtime.workspace.layout``), nowhere else. :func:`role_values` returns a
dict holding every ``o_<region>`` of the layout plus the per-call scalars; ``LoadedKernel.args``
packs exactly the names the kernel's recorded schema lists (a missing name is a clear error there).
"""
from __future__ import annotations

from typing import Any

#: Device-wait timeout default (paper §4.3: 3600 s). Long on purpose: ranks may reach a layer seconds apart
#: (host skew, first-call set-up), and a trap ends the CUDA context. Tests pass short timeouts explicitly.
DEFAULT_TIMEOUT_NS = 3600 * 1_000_000_000


def role_values(ws: Any, *, ntok: int, err: int, timeout_ns: int = DEFAULT_TIMEOUT_NS, y: int = 0,
                stats: bool = False) -> dict[str, Any]:
    """Values for role1 and role3 (and any kernel that follows the ``o_<region>`` convention)."""
    lay = ws.layout
    if not 0 <= ntok <= lay.spec.capacity:
        raise ValueError(f"gcmoe: T={ntok} tokens outside 0..capacity={lay.spec.capacity}")
    vals: dict[str, Any] = {f"o_{name}": r.offset for name, r in lay.regions.items()}
    vals.update({
        "peer": ws.peer_desc,
        "err": int(err),
        "timeout_ns": int(timeout_ns),
        "ntok": int(ntok),
        "ring_blocks": int(lay.ring_blocks),
        "bm_stride": int(lay.bm_max),
        "sf_stride": int(lay.sf_rows_max),
        "place_ctas": 0,  # role2: blockIdx; the layer call may place them (heuristics.sm90_place_ctas)
        "w1_prefetch_steps": 0,  # role2: none; the layer call may ask for some (role2_ring "First weights to L2")
        "y": int(y),
        "stats": 1 if stats else 0,
    })
    return vals


def kernel_args(kernel: Any, values: dict[str, Any]) -> Any:
    """Pack ``values`` for a loaded kernel, passing only the names its schema lists (a name the
    schema needs and ``values`` lacks is still an error, raised by the packer)."""
    names = [p.name for p in kernel.record.params]
    return kernel.args({n: values[n] for n in names if n in values})
