#!/usr/bin/env bash
# Regenerates third_party/cutlass/: the CUTLASS/CuTe headers the SM90 kernels include
# (their transitive closure, computed with nvcc -M), copied from the pinned wheel
# nvidia-cutlass==$VERSION, with its license. Vendored so that builds (and the offline
# `pip install --no-build-isolation .` on the GPU machine) need no download.
# Run after adding a CUTLASS/CuTe include to src/cuda; needs nvcc and the pinned wheel
# (python3 -m pip install nvidia-cutlass==$VERSION).
set -euo pipefail
VERSION=4.2.0.0
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SITE=$(python3 -c 'import cutlass_library, os; print(os.path.dirname(os.path.dirname(cutlass_library.__file__)))')
GOT=$(python3 -c 'import importlib.metadata as m; print(m.version("nvidia-cutlass"))')
[ "$GOT" = "$VERSION" ] || { echo "vendor-cutlass: need nvidia-cutlass==$VERSION, found $GOT" >&2; exit 1; }
INC=$SITE/cutlass_library/source/include
FINAL=$ROOT/third_party/cutlass
OUT=$(mktemp -d)  # built aside, moved into place only when complete
trap 'rm -rf "$OUT"' EXIT
mkdir -p "$OUT/include"
for f in "$ROOT"/src/cuda/sm90/*.cu; do  # the build's flags (cmake: CUDA sources of flashmsa)
  nvcc -std=c++17 -gencode=arch=compute_90a,code=sm_90a --expt-relaxed-constexpr -DFLASHMSA_WITH_CUDA=1 \
    -I "$ROOT/include" -I "$ROOT/src" -I "$INC" -M "$f"
done > "$OUT/deps.txt"
tr ' \\' '\n\n' < "$OUT/deps.txt" | grep "^$INC/" | sort -u > "$OUT/headers.txt"
[ -s "$OUT/headers.txt" ] || { echo "vendor-cutlass: no CUTLASS header found in the dependencies" >&2; exit 1; }
while read -r h; do
  rel=${h#"$INC"/}; mkdir -p "$OUT/include/$(dirname "$rel")"; cp "$h" "$OUT/include/$rel"
done < "$OUT/headers.txt"
rm "$OUT/deps.txt" "$OUT/headers.txt"
cp "$SITE/nvidia_cutlass-$VERSION.dist-info/licenses/LICENSE.txt" "$OUT/LICENSE.txt"
{
  echo "CUTLASS/CuTe headers vendored from the pip wheel nvidia-cutlass==$VERSION"
  echo "(cutlass_library/source/include), only the files the SM90 kernels include."
  echo "License: LICENSE.txt (BSD-3-Clause). Regenerate with scripts/vendor-cutlass.sh."
  echo; echo "files:"; (cd "$OUT/include" && find . -type f | sort | sed 's|^\./|  |')
} > "$OUT/README.md"
rm -rf "$FINAL"; mkdir -p "$(dirname "$FINAL")"; cp -r "$OUT" "$FINAL"
echo "vendor-cutlass: $(find "$FINAL/include" -type f | wc -l) headers in $FINAL"
