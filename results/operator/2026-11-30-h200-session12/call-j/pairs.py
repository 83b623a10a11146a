"""Call J: each staged-fold variant (_ppkf, _pp2kf) against its base (_ppk, _pp2k), both orders pooled
(``ci/kernel_ab.py``). python3 pairs.py (from this folder)."""
import glob
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[3] / "ci"))
from kernel_ab import main  # noqa: E402

main([",".join(sorted(glob.glob(str(HERE / "json" / "bench_*.json")))), "f", ""])
