"""Re-save committed plots as 256-colour palette PNGs (matplotlib's flat colours survive; ~3x smaller).

``.venv/bin/python ci/shrink_pngs.py [PATH ...]`` (default: every tracked ``*.png``). Why: the device call ships the
whole tracked tree plus carry under 64 MiB, and the plots were 23 of its 59 MB in session 17. Images already in
palette mode are left as they are, so rerunning changes nothing; each file is replaced atomically.
"""
from __future__ import annotations

import io
import os
import subprocess
import sys

from PIL import Image


def shrink(path: str) -> tuple[int, int]:
    before = os.path.getsize(path)
    with Image.open(path) as im:
        if im.mode == "P":
            return before, before
        rgb = im.convert("RGB")
    buf = io.BytesIO()
    rgb.quantize(colors=256, method=Image.Quantize.MEDIANCUT).save(buf, format="PNG", optimize=True)
    if len(buf.getvalue()) >= before:
        return before, before
    tmp = f"{path}.tmp"
    with open(tmp, "wb") as f:
        f.write(buf.getvalue())
    os.replace(tmp, path)
    return before, len(buf.getvalue())


def main(argv: list[str]) -> int:
    paths = argv or subprocess.check_output(["git", "ls-files", "*.png"], text=True).split()
    b0 = b1 = 0
    for p in paths:
        a, b = shrink(p)
        b0, b1 = b0 + a, b1 + b
    print(f"{len(paths)} PNGs: {b0 / 1e6:.1f} MB -> {b1 / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
