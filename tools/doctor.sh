#!/bin/sh
# `make doctor`: checks what `make run` and `make test` need on this machine and prints the fix for each missing
# part. Exit 1 when a required part is missing (install would fail), 0 otherwise (optional parts only warn).
# usage: tools/doctor.sh [PYTHON] [--quiet]
PYTHON="${1:-python3}"; QUIET="$2"
NEED_GB=6  # the venv (~3.1 GB with the CPU torch), the llama-cpp-python build, the models (~0.4 GB) and headroom
missing=0
ok() { [ "$QUIET" = "--quiet" ] || echo "  ok    $1"; }
bad() { echo "  MISSING  $1"; echo "           fix: $2"; missing=1; }
warn() { echo "  warn  $1"; echo "        fix: $2"; }
[ "$QUIET" = "--quiet" ] || echo "==> anima doctor: what make run / make test need"
if command -v "$PYTHON" >/dev/null 2>&1; then
  version="$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
  case "$version" in
    3.11|3.12) ok "python $version ($PYTHON)";;
    *) bad "python 3.11 or 3.12 (found $version at $PYTHON)" \
           "apt-get install python3.11 python3.11-venv python3.11-dev, then: make PYTHON=python3.11 run";;
  esac
  if "$PYTHON" -c 'import venv, ensurepip' >/dev/null 2>&1; then ok "python venv + ensurepip"
  else bad "python's venv module (with ensurepip)" "apt-get install python3-venv (or python$version-venv)"; fi
  if "$PYTHON" -c 'import sysconfig, os, sys; sys.exit(0 if os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")) else 1)' 2>/dev/null
  then ok "python headers (Python.h)"
  else bad "python headers (Python.h: llama-cpp-python is built from source)" "apt-get install python3-dev (or python$version-dev)"; fi
else
  bad "python 3.11 ($PYTHON not found)" "apt-get install python3.11 python3.11-venv python3.11-dev"
fi
if command -v cc >/dev/null 2>&1 || command -v gcc >/dev/null 2>&1; then ok "C compiler"
else bad "a C/C++ compiler (llama-cpp-python is built from source)" "apt-get install build-essential"; fi
if command -v c++ >/dev/null 2>&1 || command -v g++ >/dev/null 2>&1; then ok "C++ compiler"
else bad "a C++ compiler (llama.cpp)" "apt-get install build-essential"; fi
if command -v cmake >/dev/null 2>&1; then ok "cmake $(cmake --version | head -1 | awk '{print $3}')"
else bad "cmake (the llama.cpp build)" "apt-get install cmake (or: pip install cmake)"; fi
if command -v git >/dev/null 2>&1; then ok "git"; else warn "git" "apt-get install git"; fi
free_kb="$(df -Pk . | awk 'NR==2 {print $4}')"
free_gb=$((free_kb / 1024 / 1024))
if [ "$free_gb" -ge "$NEED_GB" ]; then ok "disk: ${free_gb} GB free here (needs ~${NEED_GB} GB)"
else bad "disk space: ${free_gb} GB free here, ~${NEED_GB} GB needed" "free space, or clone elsewhere"; fi
if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then ok "chromium (browser tests)"
else warn "chromium (only for make test's browser tests; make test installs it as root)" "apt-get install chromium"; fi
if command -v bwrap >/dev/null 2>&1; then ok "bubblewrap (the persona's scripts' jail)"
else warn "bubblewrap (the persona's scripts run in it; make install installs it as root)" "apt-get install bubblewrap"; fi
if [ "$missing" = 1 ]; then echo "==> doctor: something required is missing (see the fixes above)"; exit 1; fi
[ "$QUIET" = "--quiet" ] || echo "==> doctor: ready"
exit 0
