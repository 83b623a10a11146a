#!/usr/bin/env bash
# Builds, here (no GPU), the plain-K-order twins of the shipped SM90 production bundles (manifests/ablation-plain-k-
# order-*.yaml: the manifests without targets[].k_interleave, as shipped until session 51) into build/bundles_plain,
# for an A/B of the layer against results/operator/bundles (e.g. results/operator/steps/s51-b.steps). Carry:
# build/bundles_plain (~1.8 MiB; python3 ci/device_tree_size.py .whl-rt build/bundles_plain checks the 64 MiB limit).
# (Sessions 50-51's builds of the interleaved forms, ci/prepare_k_interleave_ab.sh and ci/prepare_s51.sh, are at
# commit 2190988f, with the manifests they read.)
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p build/bundles_plain
for m in glm-5.2 deepseek-v4.1-flash rank-share-glm-5.2-p8 rank-share-deepseek-v4.1-flash-p8; do
  .venv/bin/gcmoe-build compile "manifests/ablation-plain-k-order-$m.yaml" --jobs 2 --no-progress
  .venv/bin/gcmoe-build bundle "manifests/ablation-plain-k-order-$m.yaml" \
      -o "build/bundles_plain/ablation-plain-k-order-$m-sm90a.gcmoe"
done
python3 ci/device_tree_size.py .whl-rt build/bundles_plain
