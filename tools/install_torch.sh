#!/bin/sh
# Installs the CPU build of torch (only the embedding model's one-time ONNX export needs it) without CUDA packages.
# usage: tools/install_torch.sh PIP VERSION
# 1. already importable at that version: nothing to do;
# 2. the PyTorch CPU index (TORCH_INDEX, default https://download.pytorch.org/whl/cpu) — ~190 MB, no nvidia-*;
# 3. a CPU wheel the machine's own pip configuration offers (a mirror, find-links): `torch==VERSION+cpu`;
# 4. only then the default index, which on Linux x86-64 pulls ~2.7 GB of CUDA packages: said loudly first.
PIP="$1"; VERSION="$2"
INDEX="${TORCH_INDEX:-https://download.pytorch.org/whl/cpu}"
PY="$(dirname "$(echo "$PIP" | cut -d' ' -f1)")/python"
if "$PY" -c "import torch, sys; sys.exit(0 if torch.__version__.split('+')[0] == '$VERSION' else 1)" 2>/dev/null; then
  echo "==> torch $VERSION (CPU) already installed"; exit 0
fi
echo "==> installing torch $VERSION, CPU build, from $INDEX (about 190 MB; no CUDA)"
# one retry, not pip's five with back-off per package: an index this machine cannot reach costs seconds, not minutes
if $PIP install --progress-bar on --retries 1 --timeout 20 --index-url "$INDEX" "torch==$VERSION+cpu"; then exit 0; fi
echo "==> $INDEX did not answer: trying a CPU wheel from this machine's pip configuration"
if $PIP install --progress-bar on --no-index "torch==$VERSION+cpu" 2>/dev/null \
   || $PIP install --progress-bar on "torch==$VERSION+cpu"; then exit 0; fi
echo "==> WARNING: no CPU build of torch $VERSION reachable. Falling back to the default index, which on Linux"
echo "    x86-64 also installs ~2.2 GB of nvidia-*/cuda-* packages the export never uses. To avoid it, set"
echo "    TORCH_INDEX to a reachable mirror of $INDEX and run make install again (Ctrl-C now to stop)."
sleep 5
exec $PIP install --progress-bar on "torch==$VERSION"
