#!/usr/bin/env bash
# Bundles of an experiment: this checkout's tree with patches applied (and/or role2's task trace on), compiled in a
# scratch copy, so neither the working tree nor this checkout's store changes (the records' keys hash the patched
# kernel sources). What a session's A/B runs against the shipped bundles, rebuilt from the diff it committed.
#
#   bash ci/build_variant_bundles.sh OUT_DIR [--diff FILE]... [--trace] [MANIFEST ...]
#
# --diff FILE: `git apply` FILE to the copy (in order; a patch that does not apply stops the build); --trace: set
# role2_ring.TRACE = True (``bench tasks``; the bundles are then named <manifest>-sm90a-trace.gcmoe, else
# <manifest>-sm90a.gcmoe). Default manifests: the two production shapes. Carry OUT_DIR to the device and point
# GCMOE_BENCH_BUNDLES (or GCMOE_OPERATOR_BUNDLE at one file) at it. GCMOE_JOBS: parallel compiles (default 2).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
[ $# -ge 1 ] || { echo "usage: $0 OUT_DIR [--diff FILE]... [--trace] [MANIFEST ...]" >&2; exit 2; }
out="$1"; shift
diffs=(); trace=0; manifests=()
while [ $# -gt 0 ]; do
    case "$1" in
        --diff) [ $# -ge 2 ] || { echo "$0: --diff needs a file" >&2; exit 2; }
                diffs+=("$(cd "$(dirname "$2")" && pwd)/$(basename "$2")"); shift 2 ;;
        --trace) trace=1; shift ;;
        *) manifests+=("$1"); shift ;;
    esac
done
[ ${#manifests[@]} -gt 0 ] || manifests=(manifests/glm-5.2.yaml manifests/deepseek-v4.1-flash.yaml)
mkdir -p "$out"
out="$(cd "$out" && pwd)"  # absolute: the compile runs in the scratch copy
py="$repo/.venv/bin/python"
src="$(mktemp -d /tmp/gcmoe-variant-src.XXXXXX)"
trap 'rm -rf "$src"' EXIT
# the tracked and untracked-but-not-ignored files, as `git ls-files` lists them
(cd "$repo" && git ls-files -co --exclude-standard -z | tar --null -T - -cf -) | tar -xf - -C "$src"
for d in "${diffs[@]}"; do
    (cd "$src" && git apply --whitespace=nowarn "$d") || { echo "$0: $d does not apply to this tree" >&2; exit 1; }
    echo "applied $d"
done
suffix=""
if [ "$trace" = 1 ]; then
    ring="$src/gcmoe_build/kernels/sm90/role2_ring.py"
    grep -q '^TRACE = False$' "$ring" || { echo "$0: no 'TRACE = False' line in $ring" >&2; exit 1; }
    sed -i 's/^TRACE = False$/TRACE = True/' "$ring"
    suffix="-trace"
fi
cd "$src"
export PYTHONPATH="$src${PYTHONPATH:+:$PYTHONPATH}"
"$py" -m gcmoe_build.cli compile "${manifests[@]}" --arch sm_90a --store "$src/store" --jobs "${GCMOE_JOBS:-2}" \
    --no-progress | tail -n 3
for m in "${manifests[@]}"; do
    name="$(basename "$m" .yaml)"
    "$py" -m gcmoe_build.cli bundle "$m" --arch sm_90a --store "$src/store" -o "$out/$name-sm90a$suffix.gcmoe"
done
ls -l "$out"
