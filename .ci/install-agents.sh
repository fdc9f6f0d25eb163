#!/usr/bin/env bash
# Install the four real agent CLIs that tests/it/agents_real.rs drives against a
# loopback fake model server (tests/support/fake_model.py):
#
#   claude     npm  @anthropic-ai/claude-code   -> ROOT/npm
#   codex      npm  @openai/codex               -> ROOT/npm
#   aider      PyPI aider-chat                  -> ROOT/aider-venv
#   architect  PyPI architect-ai-cli + mcp      -> ROOT/architect-venv (Python >= 3.12)
#
# ROOT is ${FANOUT_AGENTS_ROOT:-${XDG_CACHE_HOME:-$HOME/.cache}/fanout-peers/agents}.
# Idempotent: a stamp file per pinned version (ROOT/stamps/NAME-VERSION) skips what
# is already installed. Fails (exit 1, message on stderr) when a registry cannot be
# reached or an install breaks; it never skips silently. At the end it writes
# ROOT/env.sh (FANOUT_CLAUDE_BIN=... etc., sourceable) and prints one line per CLI:
# `name path version`.
set -euo pipefail

CLAUDE_VERSION=2.1.330
CODEX_VERSION=0.169.0
AIDER_VERSION=0.86.2
ARCHITECT_VERSION=1.1.0
MCP_VERSION=2.3.0

ROOT="${FANOUT_AGENTS_ROOT:-${XDG_CACHE_HOME:-$HOME/.cache}/fanout-peers/agents}"
STAMPS="$ROOT/stamps"
mkdir -p "$STAMPS"

die() {
    echo "install-agents: ERROR: $*" >&2
    exit 1
}
say() { echo "install-agents: $*" >&2; }

# stamp NAME VERSION: true when that exact version was installed and its binary is there.
stamped() { [[ -f "$STAMPS/$1-$2" && -x "$3" ]]; }
stamp() {
    rm -f "$STAMPS/$1"-*
    echo "$2" >"$STAMPS/$1-$2"
}

export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_DEFAULT_TIMEOUT=30 PIP_RETRIES=2
export npm_config_fund=false npm_config_audit=false npm_config_update_notifier=false
# npm's default fetch timeout is 5 minutes per try: an unreachable registry must fail sooner
export npm_config_fetch_timeout=60000 npm_config_fetch_retries=1

# ---- npm: claude and codex (one prefix, one install so both land together) ----
NPM="$ROOT/npm"
CLAUDE_BIN="$NPM/node_modules/.bin/claude"
CODEX_BIN="$NPM/node_modules/.bin/codex"
if stamped claude "$CLAUDE_VERSION" "$CLAUDE_BIN" && stamped codex "$CODEX_VERSION" "$CODEX_BIN"; then
    say "claude $CLAUDE_VERSION and codex $CODEX_VERSION already installed"
else
    command -v npm >/dev/null || die "npm not found: install Node.js (>= 18) and npm"
    say "npm install @anthropic-ai/claude-code@$CLAUDE_VERSION @openai/codex@$CODEX_VERSION into $NPM"
    mkdir -p "$NPM"
    [[ -f "$NPM/package.json" ]] || echo '{"private":true}' >"$NPM/package.json"
    timeout 900 npm install --prefix "$NPM" --no-save --loglevel=error \
        "@anthropic-ai/claude-code@$CLAUDE_VERSION" "@openai/codex@$CODEX_VERSION" >&2 \
        || die "npm install of the Claude Code / Codex CLIs failed (is the npm registry reachable?)"
    [[ -x "$CLAUDE_BIN" ]] || die "npm installed @anthropic-ai/claude-code but $CLAUDE_BIN is missing"
    [[ -x "$CODEX_BIN" ]] || die "npm installed @openai/codex but $CODEX_BIN is missing"
    stamp claude "$CLAUDE_VERSION"
    stamp codex "$CODEX_VERSION"
fi

# ---- PyPI: aider (any python3 >= 3.10 works) ----
AIDER_VENV="$ROOT/aider-venv"
AIDER_BIN="$AIDER_VENV/bin/aider"
if stamped aider "$AIDER_VERSION" "$AIDER_BIN"; then
    say "aider $AIDER_VERSION already installed"
else
    command -v python3 >/dev/null || die "python3 not found"
    say "pip install aider-chat==$AIDER_VERSION into $AIDER_VENV"
    rm -rf "$AIDER_VENV"
    python3 -m venv "$AIDER_VENV" || die "python3 -m venv failed (Debian: apt-get install python3-venv)"
    timeout 900 "$AIDER_VENV/bin/pip" install --quiet "aider-chat==$AIDER_VERSION" >&2 \
        || die "pip install aider-chat==$AIDER_VERSION failed (is PyPI reachable?)"
    [[ -x "$AIDER_BIN" ]] || die "aider-chat installed but $AIDER_BIN is missing"
    stamp aider "$AIDER_VERSION"
fi

# ---- PyPI: architect (needs Python >= 3.12) ----
find_python312() {
    local c
    for c in python3.13 python3.12 python3; do
        if command -v "$c" >/dev/null 2>&1 &&
            "$c" -c 'import sys, venv; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then
            command -v "$c"
            return
        fi
    done
    # pyenv keeps other versions out of PATH; look at them directly
    local pyenv_root="${PYENV_ROOT:-$HOME/.pyenv}"
    for c in "$pyenv_root"/versions/3.1[2-9]*/bin/python3 /usr/local/bin/python3.1[2-9] /usr/bin/python3.1[2-9]; do
        if [[ -x "$c" ]] && "$c" -c 'import sys, venv; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then
            echo "$c"
            return
        fi
    done
    return 1
}
ARCH_VENV="$ROOT/architect-venv"
ARCH_BIN="$ARCH_VENV/bin/architect"
ARCH_STAMP="$ARCHITECT_VERSION+mcp$MCP_VERSION"
if stamped architect "$ARCH_STAMP" "$ARCH_BIN"; then
    say "architect $ARCHITECT_VERSION already installed"
else
    PY312="$(find_python312)" || {
        # Debian 13+ ships python3.13; Debian 12 has none >= 3.12.
        if command -v apt-get >/dev/null && [[ $(id -u) == 0 ]]; then
            say "no Python >= 3.12 found; trying apt-get install python3.13 python3.13-venv"
            apt-get update -qq >&2 || true
            apt-get install -y -qq python3.13 python3.13-venv >&2 || true
        fi
        PY312="$(find_python312)" || die "architect-ai-cli needs Python >= 3.12 and none was found (tried python3.13/python3.12 on PATH, pyenv versions, apt python3.13)"
    }
    say "pip install architect-ai-cli==$ARCHITECT_VERSION mcp==$MCP_VERSION into $ARCH_VENV (with $PY312)"
    rm -rf "$ARCH_VENV"
    "$PY312" -m venv "$ARCH_VENV" || die "$PY312 -m venv failed"
    timeout 900 "$ARCH_VENV/bin/pip" install --quiet "architect-ai-cli==$ARCHITECT_VERSION" "mcp==$MCP_VERSION" >&2 \
        || die "pip install architect-ai-cli==$ARCHITECT_VERSION mcp==$MCP_VERSION failed (is PyPI reachable?)"
    [[ -x "$ARCH_BIN" ]] || die "architect-ai-cli installed but $ARCH_BIN is missing"
    stamp architect "$ARCH_STAMP"
fi

# ---- env.sh and the summary ----
cat >"$ROOT/env.sh.tmp" <<ENV
# Written by .ci/install-agents.sh; source it to find the agent CLIs.
export FANOUT_CLAUDE_BIN='$CLAUDE_BIN'
export FANOUT_CODEX_BIN='$CODEX_BIN'
export FANOUT_AIDER_BIN='$AIDER_BIN'
export FANOUT_ARCHITECT_BIN='$ARCH_BIN'
export FANOUT_CLAUDE_VERSION='$CLAUDE_VERSION'
export FANOUT_CODEX_VERSION='$CODEX_VERSION'
export FANOUT_AIDER_VERSION='$AIDER_VERSION'
export FANOUT_ARCHITECT_VERSION='$ARCHITECT_VERSION'
ENV
mv "$ROOT/env.sh.tmp" "$ROOT/env.sh"

version_of() {
    # first line of `BIN --version`, run offline-safe (no update checks)
    local out
    out="$(DISABLE_AUTOUPDATER=1 CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 LITELLM_LOG=ERROR \
        LITELLM_LOCAL_MODEL_COST_MAP=True timeout 60 "$1" --version 2>/dev/null | grep -m1 .)" \
        || die "$1 --version failed: the install is broken; delete $ROOT and run again"
    echo "$out"
}
echo "claude $CLAUDE_BIN $(version_of "$CLAUDE_BIN")"
echo "codex $CODEX_BIN $(version_of "$CODEX_BIN")"
echo "aider $AIDER_BIN $(version_of "$AIDER_BIN")"
echo "architect $ARCH_BIN $(version_of "$ARCH_BIN")"
