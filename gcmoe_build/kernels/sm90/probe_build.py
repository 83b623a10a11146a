"""Build driver of the dev probes (:mod:`.qgmma_probe`, :mod:`.membar_probe`; never bundled): trace each probe kernel
through the project's frontend, assemble it with the locked ptxas, and write ``NAME.ptx``, ``NAME.cubin`` (atomically)
and ``index.json`` (entry name + the probe's launch facts) into one folder the GPU-side bench loads."""
from __future__ import annotations

import argparse
import json
import os
from pathlib import Path


def probe_main(description: str, probes, argv=None) -> None:
    """A probe module's command line: ``python -m <module> OUTDIR``; ``probes()`` yields :func:`write_probes`'s
    tuples (called after the DSL is imported for sm_90a)."""
    from gcmoe_build.frontend.dsl import import_dsl

    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("outdir")
    a = ap.parse_args(argv)
    import_dsl("sm_90a")
    write_probes(a.outdir, probes())


def write_probes(outdir, probes) -> None:
    """``probes``: iterable of ``(name, host, kernel, trace_args, info)``; ``info`` (dict) goes to ``index.json``
    beside the entry name."""
    from gcmoe_build.frontend.dsl import import_dsl, trace_to_ptx
    from gcmoe_build.toolchain.ptxas import assemble, effective_options

    import_dsl("sm_90a")
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    index = {}
    for name, host, kern, args, info in probes:
        res = trace_to_ptx(host, kern, args, name, "sm_90a")
        cubin = assemble(res.ptx, effective_options("sm_90a", []), what=name)
        (out / f"{name}.ptx").write_text(res.ptx)
        tmp = out / f".{name}.tmp"
        tmp.write_bytes(cubin)
        os.replace(tmp, out / f"{name}.cubin")
        index[name] = {"entry": res.entry_name, **info}
        print(name, len(cubin), "B")
    tmp = out / ".index.json.tmp"
    tmp.write_text(json.dumps(index, indent=1, sort_keys=True))
    os.replace(tmp, out / "index.json")
