"""P = 2 worker (run by torch.distributed.run, one process per GPU): symmetric workspace rendezvous,
peer-descriptor addressing checked by a real peer write, and the handshake graph on each GPU."""
import json
import os
import sys

import torch
import torch.distributed as dist

from gpu_selftest import Handshake

from gcmoe_runtime import driver
from gcmoe_runtime.peer import unpack_peer_descriptor

PEER_WORD = 48  # a selftest-region word the handshake kernels do not use


def main(out_path: str) -> None:
    rank = int(os.environ["RANK"])
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", device_id=torch.device("cuda", rank))
    hs = Handshake(rank, group=dist.group.WORLD, world_size=2)
    ws = hs.ws
    desc = unpack_peer_descriptor(ws.peer_desc, 2)
    descriptor_ok = (desc.rank == rank and desc.base == ws.base
                     and all(desc.base + desc.offsets[r] == ws.peer_bases[r] for r in range(2))
                     and ws.peer_bases[rank] == ws.buffer.data_ptr())
    # Write to the peer's copy through descriptor arithmetic (base + signed offset + layout offset).
    peer = 1 - rank
    src = torch.tensor([0xA000 + rank], dtype=torch.int32, device=f"cuda:{rank}")
    dst = desc.base + desc.offsets[peer] + ws.layout.offset("selftest") + 4 * PEER_WORD
    driver.REAL.call("cuMemcpyDtoD", dst, src.data_ptr(), 4)
    torch.cuda.synchronize()
    ws.handle.barrier()
    got = int(ws.view("selftest")[PEER_WORD].item())
    peer_write_ok = got == 0xA000 + peer

    g = hs.graph()
    before = hs.state()
    hs.replay(g, 10_000)
    after = hs.state()
    hs.trap.check()
    ws.handle.barrier()
    rec = {"rank": rank, "world_size": ws.world_size, "gpu": torch.cuda.get_device_name(rank),
           "peer_bases": [hex(b) for b in ws.peer_bases], "offsets": list(desc.offsets),
           "descriptor_ok": descriptor_ok, "peer_word": hex(got), "peer_write_ok": peer_write_ok,
           "partition": [hs.gp.dispatch_sms, hs.gp.compute_sms], "workspace_bytes": ws.layout.total_bytes,
           "handshake_delta": after["finalize_gen"] - before["finalize_gen"], "errors": after["errors"]}
    for r in range(2):
        if r == rank:
            with open(out_path, "a") as f:
                f.write(json.dumps(rec) + "\n")
        dist.barrier(device_ids=[rank])
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
