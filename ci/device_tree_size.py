"""What a device call would send: the tracked tree plus the carried paths, measured as a tar stream (the form that
travels), against the device's 64 MiB limit. Run it before a call whose carry is large:

    python3 ci/device_tree_size.py [CARRY_PATH ...]      # e.g. .whl-rt build/bundles_c0 build/bundles_r2

Prints the tree's and each carried path's size and the total; exits 1 above the limit (the call would be refused
before it starts). Session 41's first call was refused so: four A/B bundle sets on a 58 MiB tree, 66.6 MiB by this
count; its call C went through at 59.3. The device's own count is not published, so above :data:`WARN_MIB` the
tool says the call is near the limit.
"""
from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
from pathlib import Path

LIMIT_MIB = 64.0
WARN_MIB = 61.0


class _Count(io.RawIOBase):
    """A write-only sink that only counts bytes."""

    def __init__(self) -> None:
        self.n = 0

    def writable(self) -> bool:
        return True

    def write(self, b) -> int:
        self.n += len(b)
        return len(b)


def tar_mib(paths: list[str]) -> float:
    """Size in MiB of an uncompressed GNU tar of ``paths`` (files or folders, recursively): what `tar -c` writes."""
    sink = _Count()
    with tarfile.open(fileobj=sink, mode="w|", format=tarfile.GNU_FORMAT) as tar:
        for p in paths:
            tar.add(p)
    return sink.n / 2**20


def main(argv: list[str]) -> int:
    root = Path(subprocess.run(["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True,
                               check=True).stdout.strip())
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, check=True).stdout
    files = [f for f in tracked.decode().split("\0") if f and (root / f).is_file()]
    missing = [c for c in argv if not (root / c).exists()]
    if missing:
        print(f"device_tree_size: carry path(s) not found under {root}: {', '.join(missing)}", file=sys.stderr)
        return 2
    os.chdir(root)
    total = tree = tar_mib(files)
    print(f"tracked tree ({len(files)} files): {tree:.1f} MiB")
    for c in argv:
        mib = tar_mib([c])
        total += mib
        print(f"carry {c}: {mib:.1f} MiB")
    verdict = ("TOO LARGE: the call would be refused" if total > LIMIT_MIB
               else "fits, near the limit: carry less if you can" if total > WARN_MIB else "fits")
    print(f"total {total:.1f} MiB of {LIMIT_MIB:.0f} MiB: {verdict}")
    return 0 if total <= LIMIT_MIB else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
