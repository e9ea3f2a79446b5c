#!/usr/bin/env bash
# `pip install .` as docs/python.md documents it, offline: a copy of the checkout (its
# tracked files and the module scripts/build.sh made in build/python, so nothing is
# compiled) is installed into a fresh virtual environment of each Python given (default:
# Debian's python3; DEFERKV_INSTALL_PYTHONS="python3.9 /opt/py/bin/python3" for others),
# the copy is deleted, and the installed package generates from its own models, away from
# any checkout. Needs python3-venv (scripts/install-deps.sh). A few seconds a Python.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
if ! ls build/python/deferkv/_deferkv*.so >/dev/null 2>&1; then
  echo "test_install: no module in build/python/deferkv (run scripts/build.sh first)" >&2
  exit 1
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for python in ${DEFERKV_INSTALL_PYTHONS:-/usr/bin/python3}; do
  echo "test_install: $python ($("$python" --version 2>&1))"
  src="$work/checkout"
  rm -rf "$src" "$work/venv"
  mkdir -p "$src/build/python/deferkv"
  git ls-files -z | (cd "$ROOT" && xargs -0 cp --parents -t "$src")
  cp build/python/deferkv/_deferkv*.so "$src/build/python/deferkv/"
  "$python" -m venv "$work/venv"
  # Isolated build (pip's default) with --no-index: the backend must need nothing to download.
  "$work/venv/bin/pip" install --quiet --no-index --disable-pip-version-check "$src"
  rm -rf "$src"
  (cd "$work" && env -u DEFERKV_HOME VENV="$work/venv" "$work/venv/bin/python" - <<'PY'
import os
import deferkv

site = os.path.dirname(deferkv.__file__)
assert site.startswith(os.environ["VENV"]), f"deferkv imported from {site}, not the virtual environment"
model = deferkv.Model()
assert model.metadata["path"].startswith(site), (model.metadata["path"], site)
out = model.generate("Once upon a time", max_tokens=8, temperature=0)
assert len(out.tokens) == 8 and out.text, out
print(f"test_install: installed in {site}, generated {out.text!r}")
PY
  )
done
