#!/usr/bin/env bash
# bench/gateway.sh — what the model gateway (src/gateway/) adds to a model call on
# loopback, against the fake provider of the tests:
#
#   latency      p50 and p99 of a Messages call (whole, then streamed) straight to the
#                fake and through a worker's door, the time added and the ratio
#   throughput   10 workers streaming calls at once, through the gateway and
#                straight to the fake: calls per second and the ratio
#
# Target (issue #31): <= 1 ms added at p50. It runs `cargo bench --bench gateway`
# (optimised build); the gateway is a library module, no fanout binary is needed.
#
# A benchmark, not a test: it never fails on a timing, only when something breaks.
#
# Usage:   bench/gateway.sh
# Env:     BENCH_RUNS     rounds per latency figure (default 2000)
#          BENCH_STREAMS  streamed calls per worker for the throughput (default 200)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
for var in BENCH_RUNS BENCH_STREAMS; do
    if [[ -n ${!var:-} ]]; then
        case ${!var} in *[!0-9]* | 0 | 0*) echo "$var must be a positive integer, got '${!var}'" >&2; exit 2 ;; esac
    fi
done
cd "$ROOT"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown)"
exec cargo bench --locked --quiet --bench gateway
