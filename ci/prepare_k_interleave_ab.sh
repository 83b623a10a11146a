#!/usr/bin/env bash
# Builds, here (no GPU), what results/operator/steps/s50-a.steps and s50-b.steps carry (session 50, the K interleave):
#   build/dev_s50c     the dev mirrors of the ring's shipped role2 forms and their k_interleave twins, cubins + index
#                      only, at the (form, BM) pairs the GPU tests and the kernel-alone A/B use (the device carry is
#                      64 MiB: the tree is ~57)
#   build/bundles_kil  the four production shapes' bundles with targets[].k_interleave: true
#                      (manifests/ablation-k-interleave-*.yaml)
# Then: python3 ci/device_tree_size.py .whl-rt build/dev_s50c build/bundles_kil
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
FORMS="_pp2ksaf,_pp2ksag1f,_ppksaf4,_ppksafw"
PYTHONPATH=. $PY -m gcmoe_build.kernels.sm90.role2_devbuild build/dev_s50 --shapes glm52,dsv41flash --experiments \
    --only "$FORMS,_pp2ksafi,_pp2ksag1fi,_ppksaf4i,_ppksafwi"
$PY - <<'PYEOF'
import json, os, shutil
src, dst = "build/dev_s50", "build/dev_s50c"
# each shipped form at the tiles the ring builds it for (role2_ring: two CTAs BM 8 / 16, one slab group BM 32, four
# steps per call BM 8 (one CTA) / 48, the turns BM 64 / 80), and its k_interleave twin ("i")
bms = {"_pp2ksaf": (8, 16), "_pp2ksag1f": (32,), "_ppksaf4": (8, 48), "_ppksafw": (64, 80)}
idx = json.load(open(f"{src}/index.json"))
keep = {n: i for n, i in idx.items() for f, b in bms.items() if i["bm"] in b
        and (n.endswith(f"_bm{i['bm']}{f}") or n.endswith(f"_bm{i['bm']}{f}i"))}
shutil.rmtree(dst, ignore_errors=True)
os.makedirs(dst)
for n in keep:
    shutil.copy(f"{src}/{n}.cubin", dst)
with open(f"{dst}/index.json", "w") as fh:
    json.dump(keep, fh, indent=1, sort_keys=True)
print(f"{dst}: {len(keep)} cubins")
PYEOF
mkdir -p build/bundles_kil
for m in glm-5.2 deepseek-v4.1-flash rank-share-glm-5.2-p8 rank-share-deepseek-v4.1-flash-p8; do
  .venv/bin/gcmoe-build compile "manifests/ablation-k-interleave-$m.yaml" --jobs 2 --no-progress
  .venv/bin/gcmoe-build bundle "manifests/ablation-k-interleave-$m.yaml" \
      -o "build/bundles_kil/ablation-k-interleave-$m-sm90a.gcmoe"
done
python3 ci/device_tree_size.py .whl-rt build/dev_s50c build/bundles_kil
