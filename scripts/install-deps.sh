#!/usr/bin/env bash
# Installs FlashMSA's build and test dependencies from Debian packages (skips the
# package manager entirely when everything is already present).
set -euo pipefail
pkgs=(cmake g++ make libgtest-dev nlohmann-json3-dev libcli11-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "install-deps: installing ${missing[*]}" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
# The JSON-schema check of `flashmsa run --json` uses python3's jsonschema.
if ! python3 -c "import jsonschema" >/dev/null 2>&1; then
  echo "install-deps: pip installing jsonschema" >&2
  python3 -m pip install -q jsonschema
fi
# The SM90 kernels' CUTLASS/CuTe headers are vendored (third_party/cutlass): nothing to install.
