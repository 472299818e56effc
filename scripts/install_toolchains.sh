#!/usr/bin/env bash
# Install the device toolchains einc's runtimes use (see einc/targets/toolchains.py and each runtime's toolchain_check).
# Idempotent: installed apt packages are skipped, pip installs are no-ops when satisfied.
#
#   scripts/install_toolchains.sh [--with-sycl] [--venv DIR]
#
#   apt  pocl-opencl-icd ocl-icd-opencl-dev clinfo     OpenCL on the CPU (PoCL)
#        oclgrind                                      OpenCL API / data-race checks (tests/test_oclgrind.py)
#        glslang-tools spirv-tools                     HLSL -> SPIR-V, validation
#        mesa-vulkan-drivers libvulkan1                Vulkan on the CPU (lavapipe)
#        hipcc libamdhip64-dev                         HIP compile checks (gfx90a, gfx1030)
#        g++                                           SYCL shim, Poplar harness
#        chromium                                      headless browser for `einc explain`'s page test
#        python3-dev                                   Python's headers: the C kernels' call trampoline (einc.runtime.fastcall)
#   pip  pyopencl wgpu cuda-python nvidia-cuda-nvrtc
#        --with-sycl: intel-sycl-rt intel-opencl-rt (~1.6 GB), i.e. einc's [sycl] extra
set -euo pipefail
cd "$(dirname "$0")/.."

with_sycl=0
venv=.venv
while [ $# -gt 0 ]; do
  case "$1" in
    --with-sycl) with_sycl=1 ;;
    --venv) venv="$2"; shift ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "unknown option: $1" >&2; exit 2 ;;
  esac
  shift
done

apt_packages=(
  pocl-opencl-icd ocl-icd-opencl-dev clinfo oclgrind
  glslang-tools spirv-tools
  mesa-vulkan-drivers libvulkan1
  hipcc libamdhip64-dev
  g++
  chromium
  python3-dev
)
pip_packages=(pyopencl wgpu cuda-python nvidia-cuda-nvrtc)
sycl_packages=(intel-sycl-rt intel-opencl-rt)

missing=()
for p in "${apt_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "apt-get install: ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}"
fi

if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet "${pip_packages[@]}"
if [ "$with_sycl" -eq 1 ]; then
  "$venv/bin/python" -m pip install --quiet "${sycl_packages[@]}"
fi

# Report what einc sees (a missing toolchain is printed, not fatal, here; the test suite
# fails on it in CI).
"$venv/bin/python" - <<'PY' || echo "(einc is not importable yet: toolchain report skipped)"
from einc.targets.toolchains import available, toolchain_targets
for target in toolchain_targets():
    ok, why = available(target)
    print(f"{'ok     ' if ok else 'MISSING'} {target:7} {why}")
PY
