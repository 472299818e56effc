#!/usr/bin/env bash
# Exploration: the differential, random-schedule and fuzz suites at the `thorough` profile with
# fresh seeds on every executable target, for about N minutes (scripts/explore.py --help).
#
#   scripts/explore.sh --minutes N [--targets c,opencl,hlsl,sycl,poplar] [--seed S] [--widen full]
#
# Python: $EINC_PYTHON, else .venv/bin/python (scripts/install_toolchains.sh), else python3.
set -euo pipefail
cd "$(dirname "$0")/.."
python="${EINC_PYTHON:-}"
if [ -z "$python" ]; then
  if [ -x .venv/bin/python ]; then python=.venv/bin/python; else python=python3; fi
fi
exec "$python" scripts/explore.py "$@"
