"""Dump the SASS of chosen roles' cubins from a bundle and count the instructions the performance log relies on
(QGMMA with A from registers, 128-bit loads/stores, local-memory spills). Needs ``cuobjdump`` (GPU machine image).

``python3 ci/sass_report.py BUNDLE OUTDIR [ROLE ...]`` (default roles: role2 role4); writes OUTDIR/<role>-<key12>.sass
and prints one table row per cubin."""
from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from pathlib import Path

from gcmoe_runtime.artifacts.bundle import open_bundle

PATTERNS = {
    "qgmma_regA": r"QGMMA\.[^ ]+ R\d+, R\d+, gdesc",
    "qgmma_smemA": r"QGMMA\.[^ ]+ R\d+, gdesc",
    "ldg128": r"LDG\.E\.128",
    "stg128": r"STG\.E\.128",
    "lds128": r"LDS\.128",
    "stl": r"\bSTL\b",
    "ldl": r"\bLDL\b",
}


def main(bundle: str, outdir: str, roles: list[str]) -> None:
    b = open_bundle(bundle)
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    print("| role | variant | " + " | ".join(PATTERNS) + " |")
    for rec in sorted(b.records, key=lambda r: (r.role, r.key)):
        if rec.role not in roles:
            continue
        key = rec.key
        with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
            f.write(b.cubin(key))
            f.flush()
            sass = subprocess.run(["cuobjdump", "--dump-sass", f.name], capture_output=True, text=True,
                                  check=True).stdout
        (out / f"{rec.role}-{key[:12]}.sass").write_text(sass)
        counts = [len(re.findall(p, sass)) for p in PATTERNS.values()]
        params = ",".join(f"{k}={v}" for k, v in sorted(rec.variant.items()) if k in ("bm", "threads", "ranks", "recipe_shared"))
        print(f"| {rec.role} | {params} | " + " | ".join(map(str, counts)) + " |")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3:] or ["role2", "role4"])
