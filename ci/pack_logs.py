"""Pack old GPU sessions' raw step logs: each ``logs/`` folder under the given result folders becomes one
``logs.tar.gz`` beside it (deterministic: sorted members, zero mtimes and owners), verified byte for byte against the
files before they are removed. Why: a device call copies the tracked tree as an uncompressed tar, where each small
file costs a 512-byte header and up to 511 bytes of padding; ~3 500 step logs were ~6.6 MiB of the 64 MiB a call may
carry (``ci/device_tree_size.py``). The logs stay in the tree, one ``tar xzf logs.tar.gz`` away; the session READMEs
that cite ``logs/NAME.log`` mean the member of that archive.

    python3 ci/pack_logs.py results/operator/2026-12-01-h200-session19 ...   # then git add -A those folders
    python3 ci/pack_logs.py --check results/...                               # every archive matches no loose logs/
"""
from __future__ import annotations

import argparse
import gzip
import io
import os
import sys
import tarfile
from pathlib import Path

ARCHIVE = "logs.tar.gz"


def _members(logs: Path) -> list[Path]:
    return sorted(p for p in logs.rglob("*") if p.is_file())


def pack(logs: Path) -> Path:
    """``logs/`` -> ``logs.tar.gz`` beside it (members named ``logs/...``); returns the archive's path. Refuses to
    overwrite an existing archive; removes the folder only after the archive reads back identical."""
    out = logs.parent / ARCHIVE
    if out.exists():
        raise FileExistsError(f"{out}: already packed (remove it or the logs/ folder first)")
    files = _members(logs)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for f in files:
            info = tarfile.TarInfo(f.relative_to(logs.parent).as_posix())
            info.size, info.mtime, info.mode = f.stat().st_size, 0, 0o644
            with f.open("rb") as fh:
                tar.addfile(info, fh)
    tmp = out.with_name(f".{ARCHIVE}.tmp")
    with open(tmp, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as gz:
        gz.write(buf.getvalue())
    if unpacked(tmp) != {f.relative_to(logs.parent).as_posix(): f.read_bytes() for f in files}:
        tmp.unlink()
        raise RuntimeError(f"{out}: the archive does not read back as the folder; nothing removed")
    os.replace(tmp, out)
    for f in files:
        f.unlink()
    for d in sorted((p for p in logs.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
        d.rmdir()
    logs.rmdir()
    return out


def unpacked(archive: Path) -> dict[str, bytes]:
    with tarfile.open(archive, mode="r:gz") as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folders", nargs="+", type=Path)
    ap.add_argument("--check", action="store_true", help="only check: no loose logs/ beside an archive")
    a = ap.parse_args(argv)
    bad = 0
    for root in a.folders:
        for logs in sorted(root.rglob("logs")):
            if not logs.is_dir():
                continue
            if a.check:
                if (logs.parent / ARCHIVE).exists():
                    print(f"{logs}: loose beside its archive", file=sys.stderr)
                    bad += 1
                continue
            n = len(_members(logs))
            out = pack(logs)
            print(f"{out}: {n} files, {out.stat().st_size / 1024:.0f} KiB")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
