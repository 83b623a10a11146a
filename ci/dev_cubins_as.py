"""Copy role2 dev cubins under other suffixes, for kernel-alone A/Bs with identical run make-up.

``python ci/dev_cubins_as.py SRC DST _ppksafw=_ppksa,_pp2ksafw=_pp2ksa``: every ``SRC/<base><from>.cubin`` of the
dev build (``gcmoe_build.kernels.sm90.role2_devbuild``) lands as ``DST/<base><to>.cubin`` with its ``index.json``
record (the kernel's entry symbol is unchanged: the harness loads the record's ``entry``). Two trees or two builds
then run ``bench_role2.py`` with the same ``--variants`` list in the same order (session 25: a run's variant list
moves its numbers by 5-12 %, so compare like with like). No ``.ptx`` is copied (the device tree has a size limit).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path


def parse_map(text: str) -> dict[str, str]:
    """``"_a=_b,_c=_d"`` -> ``{"_a": "_b", "_c": "_d"}``; every suffix starts with ``_``."""
    out = {}
    for item in filter(None, text.split(",")):
        src, sep, dst = item.partition("=")
        if not sep or not src.startswith("_") or not dst.startswith("_"):
            raise SystemExit(f"dev_cubins_as: bad map item {item!r} (want _from=_to)")
        out[src] = dst
    return out


def copy_as(src: Path, dst: Path, mapping: dict[str, str]) -> list[str]:
    """Copy and rename; returns the new names. Suffixes are matched longest first, so ``_ppksafw`` never counts as
    ``_ppksaf`` plus a stray letter."""
    index = json.loads((src / "index.json").read_text())
    dst.mkdir(parents=True, exist_ok=True)
    out_index = json.loads((dst / "index.json").read_text()) if (dst / "index.json").is_file() else {}
    done = []
    for name, rec in sorted(index.items()):
        for frm in sorted(mapping, key=len, reverse=True):
            if name.endswith(frm):
                new = name[: -len(frm)] + mapping[frm]
                shutil.copyfile(src / f"{name}.cubin", dst / f"{new}.cubin")
                out_index[new] = dict(rec, copied_from=name)
                done.append(new)
                break
    tmp = dst / ".index.json.tmp"
    tmp.write_text(json.dumps(out_index, indent=1, sort_keys=True))
    os.replace(tmp, dst / "index.json")
    return done


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("src", type=Path)
    ap.add_argument("dst", type=Path)
    ap.add_argument("map", help="_from=_to[,...]")
    a = ap.parse_args(argv)
    done = copy_as(a.src, a.dst, parse_map(a.map))
    if not done:
        print(f"dev_cubins_as: nothing in {a.src} matched {a.map}", file=sys.stderr)
        return 1
    print(f"{len(done)} cubins -> {a.dst}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
