#!/usr/bin/env bash
# bench/install.sh — how long does the action's install step take from a release?
#
# What is measured: the wall-clock time of `dist/install.sh` (the action's first
# step) installing fanout from a release: the manifest read, the asset downloaded
# from an HTTP server on 127.0.0.1, its sha256 checked, unpacked into the tool cache.
# The asset is made from a real fanout binary by `dist/release.py package`, as the
# release workflow makes it. The goal is well under 10 s per job; printed as the
# ratio median/10 s. A run with the tool cache already filled (a self-hosted runner's
# second job) is timed too.
#
# Loopback leaves out the network between GitHub's storage and a runner: add the
# asset's size divided by the runner's bandwidth (tens of MB/s on hosted runners).
# This is a benchmark, not a test: it prints numbers and never asserts a timing. It
# exits non-zero only when an install fails.
#
# Usage:   bench/install.sh
# Env:     BENCH_RUNS    timed cold installs (default 5)
#          BENCH_BINARY  the binary to package (default target/release/fanout, else
#                        target/debug/fanout, which is several times larger: an
#                        upper bound); CARGO_TARGET_DIR is honoured.
set -euo pipefail

RUNS=${BENCH_RUNS:-5}
case $RUNS in
    '' | *[!0-9]* | 0) echo "BENCH_RUNS must be a positive integer, got '$RUNS'" >&2; exit 2 ;;
esac
command -v python3 >/dev/null || { echo "python3 is required" >&2; exit 2; }
root="$(cd "$(dirname "$0")/.." && pwd)"
target_dir="${CARGO_TARGET_DIR:-$root/target}"
binary="${BENCH_BINARY:-}"
if [[ -z "$binary" ]]; then
    for b in "$target_dir/release/fanout" "$target_dir/debug/fanout"; do
        if [[ -x "$b" ]]; then binary="$b"; break; fi
    done
fi
[[ -n "$binary" && -x "$binary" ]] ||
    { echo "no fanout binary: run cargo build --release (or set BENCH_BINARY)" >&2; exit 2; }

case "$(uname -s)-$(uname -m)" in
    Linux-x86_64) target=x86_64-unknown-linux-musl ;;
    Linux-aarch64 | Linux-arm64) target=aarch64-unknown-linux-musl ;;
    Darwin-x86_64) target=x86_64-apple-darwin ;;
    Darwin-arm64) target=aarch64-apple-darwin ;;
    *) echo "no release target for $(uname -s)-$(uname -m)" >&2; exit 2 ;;
esac

scratch="$(mktemp -d)"
server=""
cleanup() {
    if [[ -n "$server" ]]; then kill "$server" 2>/dev/null || true; fi
    rm -rf "$scratch"
}
trap cleanup EXIT

now() { python3 -c 'import time; print(time.monotonic())'; }
elapsed() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.3f}')" "$1" "$2"; }

python3 "$root/dist/release.py" package "$target" "$binary" "$scratch/release" >/dev/null
asset="$scratch/release/fanout-$target.tar.gz"
sha="$(cut -d' ' -f1 "$asset.sha256")"
printf '{"version": "bench", "targets": {"%s": {"url": "https://github.com/fanout-dev/fanout/releases/download/vbench/fanout-%s.tar.gz", "sha256": "%s"}}}\n' \
    "$target" "$target" "$sha" >"$scratch/manifest.json"

port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
python3 -m http.server --bind 127.0.0.1 --directory "$scratch/release" "$port" >/dev/null 2>&1 &
server=$!
for _ in $(seq 50); do
    if curl -s -o /dev/null "http://127.0.0.1:$port/"; then break; fi
    sleep 0.1
done

install() { # $1: tool cache directory
    FANOUT_MANIFEST="$scratch/manifest.json" FANOUT_INSTALL_BASE_URL="http://127.0.0.1:$port" \
        FANOUT_INSTALL_ALLOW_HTTP=true RUNNER_TOOL_CACHE="$1" RUNNER_TEMP="$scratch" \
        bash "$root/dist/install.sh" >/dev/null 2>"$scratch/install.log" ||
        { cat "$scratch/install.log" >&2; echo "install failed" >&2; exit 1; }
}

echo "binary: $binary ($(wc -c <"$binary" | tr -d ' ') bytes)"
echo "asset:  fanout-$target.tar.gz ($(wc -c <"$asset" | tr -d ' ') bytes), served on 127.0.0.1:$port"
times=()
for i in $(seq "$RUNS"); do
    start="$(now)"
    install "$scratch/cache-$i"
    t="$(elapsed "$start" "$(now)")"
    times+=("$t")
    echo "cold install $i: ${t} s"
done
start="$(now)"
install "$scratch/cache-1"
echo "warm tool cache: $(elapsed "$start" "$(now)") s"
python3 - "${times[@]}" <<'PY'
import statistics, sys
t = sorted(float(x) for x in sys.argv[1:])
m = statistics.median(t)
print(f"cold installs: min {t[0]:.3f} s, median {m:.3f} s, max {t[-1]:.3f} s")
print(f"ratio median/10 s budget: {m / 10:.3f}")
PY
