#!/usr/bin/env bash
# Builds, here (no GPU), what results/operator/steps/s51-a.steps carries (session 51: role1 interleaves W1's rows for
# the large-BM builds) into build/s51 (one carry path; the device carry is 64 MiB and the tree ~58):
#   build/s51/kil2  the two P = 8 shares' k_interleave bundles of this tree (manifests/ablation-k-interleave-rank-share-*)
#   build/s51/kil   the same manifests' bundles in session 50's form (role2 permutes W1's chunks at every BM): built
#                   from commit 0ed409e6 by ci/prepare_k_interleave_ab.sh into build/bundles_kil (pass its folder as $1)
#   build/s51/dev   the dev mirrors of the ring's one-CTA BM 48-80 forms, plain and fed interleaved rows ("r")
set -euo pipefail
cd "$(dirname "$0")/.."
KIL=${1:-build/bundles_kil}
PY=.venv/bin/python
mkdir -p build/s51/kil build/s51/kil2
for m in rank-share-glm-5.2-p8 rank-share-deepseek-v4.1-flash-p8; do
  .venv/bin/gcmoe-build compile "manifests/ablation-k-interleave-$m.yaml" --jobs 2 --no-progress
  .venv/bin/gcmoe-build bundle "manifests/ablation-k-interleave-$m.yaml" \
      -o "build/s51/kil2/ablation-k-interleave-$m-sm90a.gcmoe"
  cp "$KIL/ablation-k-interleave-$m-sm90a.gcmoe" build/s51/kil/
done
PYTHONPATH=. $PY -m gcmoe_build.kernels.sm90.role2_devbuild build/dev_s51 --shapes glm52,dsv41flash --experiments \
    --only _ppksaf4,_ppksafw,_ppksaf4r,_ppksafwr --bms 48,64,80
$PY - <<'PYEOF'
import json, os, shutil
src, dst = "build/dev_s51", "build/s51/dev"
# the tiles the ring builds each form for: four steps per call BM 48, the turns BM 64 / 80
bms = {"_ppksaf4": (48,), "_ppksafw": (64, 80), "_ppksaf4r": (48,), "_ppksafwr": (64, 80)}
idx = json.load(open(f"{src}/index.json"))
keep = {n: i for n, i in idx.items() for f, b in bms.items() if i["bm"] in b and n.endswith(f"_bm{i['bm']}{f}")}
shutil.rmtree(dst, ignore_errors=True)
os.makedirs(dst)
for n in keep:
    shutil.copy(f"{src}/{n}.cubin", dst)
with open(f"{dst}/index.json", "w") as fh:
    json.dump(keep, fh, indent=1, sort_keys=True)
print(f"{dst}: {len(keep)} cubins")
PYEOF
python3 ci/device_tree_size.py .whl-rt build/s51
