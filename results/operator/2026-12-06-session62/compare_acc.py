"""Session 62: the accuracy records of two arms (``call-1-h100/json/acc-<case>-n`` against ``-a``: the branch's bundles
against the shipped ones) compared field by field, the run's own fields (command, date, seconds, bundle hash) aside.

    python3 results/operator/2026-12-06-session62/compare_acc.py results/operator/2026-12-06-session62/call-1-h100/json
"""
import gzip
import json
import sys
from pathlib import Path

OWN = {"environment", "seconds", "bundle_top_hash", "bundle"}


def load(folder: Path):
    f = next(folder.glob("*.json*"))
    return json.loads((gzip.open(f) if f.suffix == ".gz" else open(f)).read())


def main(root):
    for new in sorted(Path(root).glob("acc-*-n")):
        old = new.with_name(new.name[:-1] + "a")
        a, b = load(new), load(old)
        same = {k: a[k] == b[k] for k in a if k not in OWN}
        print(f"{new.name[4:-2]}: {len(a['records'])} records, "
              f"{'every field equal' if all(same.values()) else 'DIFFERS in ' + str([k for k, v in same.items() if not v])}")


if __name__ == "__main__":
    main(sys.argv[1])
