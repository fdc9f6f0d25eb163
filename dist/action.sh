#!/usr/bin/env bash
# The composite action's main step (action.yml): turns the action's inputs, which
# arrive only as FANOUT_IN_* environment variables (never `${{ }}` in shell text),
# into one fanout command line. Runs `fanout run|plan|worker|aggregate`, and, as the
# action's own step after `run` (`publish-run`, not an input mode), `fanout publish`.
#
# The GitHub token reaches fanout only where nothing but fanout runs: `aggregate`, and
# the publish step after `run` (the agents of `run` mode run in a step without it, and
# in the sandbox when that step follows); fanout itself also removes it from every
# child's environment.
set -euo pipefail
# Portable to bash 3.2 (macOS): no ${x,,}, empty arrays expanded with ${a[@]+…}.

fanout="${FANOUT_BIN:-}"
if [[ -z "$fanout" ]]; then
    fanout="$(command -v fanout || true)"
fi
if [[ -z "$fanout" || ! -x "$fanout" ]]; then
    echo "::error title=fanout::the install step did not produce a fanout binary" >&2
    exit 2
fi

mode="${FANOUT_IN_MODE:-run}"
truthy() {
    case "$(printf '%s' "$1" | tr '[:upper:]' '[:lower:]')" in
        true | yes | 1 | on) return 0 ;;
        false | no | 0 | off | "") return 1 ;;
        *)
            echo "::error title=fanout::input $2: expected true or false, got '$1'" >&2
            exit 2
            ;;
    esac
}

global=()
if [[ -n "${FANOUT_IN_CONFIG:-}" ]]; then
    global+=(--config "$FANOUT_IN_CONFIG")
fi

# Flags that shape the plan (run and plan).
plan_flags=()
while IFS= read -r line || [[ -n "$line" ]]; do
    line="${line%$'\r'}"
    # Trim surrounding whitespace; skip empty lines.
    line="${line#"${line%%[![:space:]]*}"}"
    line="${line%"${line##*[![:space:]]}"}"
    if [[ -n "$line" ]]; then
        plan_flags+=(--task "$line")
    fi
done <<<"${FANOUT_IN_TASKS:-}"
[[ -n "${FANOUT_IN_MODELS:-}" ]] && plan_flags+=(--models "$FANOUT_IN_MODELS")
[[ -n "${FANOUT_IN_WORKERS:-}" ]] && plan_flags+=(--workers "$FANOUT_IN_WORKERS")
[[ -n "${FANOUT_IN_AGENT:-}" ]] && plan_flags+=(--agent "$FANOUT_IN_AGENT")
[[ -n "${FANOUT_IN_BASE:-}" ]] && plan_flags+=(--base "$FANOUT_IN_BASE")
[[ -n "${FANOUT_IN_BUDGET:-}" ]] && plan_flags+=(--budget-per-worker "$FANOUT_IN_BUDGET")
[[ -n "${FANOUT_IN_TIMEOUT:-}" ]] && plan_flags+=(--timeout-per-worker "$FANOUT_IN_TIMEOUT")
[[ -n "${FANOUT_IN_FAIL_ON:-}" ]] && plan_flags+=(--fail-on "$FANOUT_IN_FAIL_ON")
sandbox=()
[[ -n "${FANOUT_IN_SANDBOX:-}" ]] && sandbox=(--sandbox "$FANOUT_IN_SANDBOX")
# `run` mode with `publish`: the publish step after this one holds the token in this
# same job, where an unconfined agent could have changed what it runs (the step's
# environment and PATH files, the action's script, the installed binary). So its agents
# run in the sandbox or not at all: fanout refuses to start where it is missing.
if [[ "$mode" == run ]] && truthy "${FANOUT_IN_PUBLISH:-false}" publish; then
    if [[ "$(printf '%s' "${FANOUT_IN_SANDBOX:-}" | tr '[:upper:]' '[:lower:]')" == off ]]; then
        echo "::error title=fanout::publish: true in run mode needs the sandbox (sandbox: off was given): an unconfined agent could take over the publish step that holds the token. Publish from a separate job (mode: plan, worker, aggregate) or drop sandbox: off" >&2
        exit 2
    fi
    sandbox=(--sandbox required)
fi
plan_flags+=(${sandbox[@]+"${sandbox[@]}"})

publish=()
use_token() {
    # Publishing: hand fanout the token (an App's credentials, when given, win).
    if [[ -n "${FANOUT_IN_GITHUB_TOKEN:-}" ]]; then
        export GITHUB_TOKEN="$FANOUT_IN_GITHUB_TOKEN"
    fi
    publish=(--publish)
    if [[ -n "${FANOUT_IN_BRANCH:-}" ]]; then
        publish_flags+=(--branch "$FANOUT_IN_BRANCH")
    fi
    if [[ -n "${FANOUT_IN_DIGEST:-}" ]]; then
        publish_flags+=(--digest "$FANOUT_IN_DIGEST")
    fi
}
publish_flags=()
if [[ "$mode" != publish-run ]] && ! truthy "${FANOUT_IN_PUBLISH:-false}" publish; then
    unset GITHUB_TOKEN GH_TOKEN FANOUT_APP_PRIVATE_KEY
fi

integrate=()
if truthy "${FANOUT_IN_INTEGRATE:-false}" integrate; then
    integrate=(--integrate)
fi
plan_file="${FANOUT_IN_PLAN_FILE:-fanout-plan.json}"
# The plan job's digest of the plan file, checked by worker and aggregate.
plan_check=()
[[ -n "${FANOUT_IN_PLAN_SHA256:-}" ]] && plan_check=(--plan-sha256 "$FANOUT_IN_PLAN_SHA256")
results_dir="${FANOUT_IN_RESULTS_DIR:-fanout-results}"

case "$mode" in
    run)
        # Agents run in this step: never a token here, whatever the workflow passed.
        # With `publish`, the action's next step publishes this run (`publish-run`).
        unset GITHUB_TOKEN GH_TOKEN FANOUT_APP_PRIVATE_KEY FANOUT_IN_GITHUB_TOKEN
        if truthy "${FANOUT_IN_PUBLISH:-false}" publish && [[ -n "${GITHUB_OUTPUT:-}" ]]; then
            echo "publish=true" >>"$GITHUB_OUTPUT"
        fi
        empty=()
        truthy "${FANOUT_IN_ALLOW_EMPTY:-false}" allow-empty && empty+=(--allow-empty)
        # What the tend step read of GitHub before this one (issues, pull requests to tend).
        if [[ -n "${FANOUT_IN_TEND_FILE:-}" && -f "$FANOUT_IN_TEND_FILE" ]]; then
            empty+=(--tend-file "$FANOUT_IN_TEND_FILE")
        fi
        cmd=("$fanout" ${global[@]+"${global[@]}"} run --quiet ${plan_flags[@]+"${plan_flags[@]}"} ${empty[@]+"${empty[@]}"} ${integrate[@]+"${integrate[@]}"})
        ;;
    tend-run)
        # Before `run`: read GitHub with the token, no agent runs here; the run step
        # takes the file (its path is this step's `file` output).
        use_token
        out="${RUNNER_TEMP:-${TMPDIR:-/tmp}}/fanout-tend.json"
        if [[ -n "${GITHUB_OUTPUT:-}" ]]; then
            echo "file=$out" >>"$GITHUB_OUTPUT"
        fi
        cmd=("$fanout" ${global[@]+"${global[@]}"} tend --out "$out" ${plan_flags[@]+"${plan_flags[@]}"} ${publish_flags[@]+"${publish_flags[@]}"})
        ;;
    publish-run)
        if [[ -z "${FANOUT_IN_RUN_ID:-}" ]]; then
            echo "::error title=fanout::publish-run needs the run id of the run step" >&2
            exit 2
        fi
        use_token
        cmd=("$fanout" ${global[@]+"${global[@]}"} publish --run "$FANOUT_IN_RUN_ID" ${publish_flags[@]+"${publish_flags[@]}"})
        ;;
    plan)
        extra=()
        truthy "${FANOUT_IN_ALLOW_EMPTY:-false}" allow-empty && extra+=(--allow-empty)
        cmd=("$fanout" ${global[@]+"${global[@]}"} plan ${plan_flags[@]+"${plan_flags[@]}"} ${extra[@]+"${extra[@]}"}
            --plan-file "$plan_file" --github-output)
        ;;
    worker)
        if [[ -z "${FANOUT_IN_WORKER_ID:-}" ]]; then
            echo "::error title=fanout::mode worker needs the input worker-id (e.g. \${{ matrix.id }})" >&2
            exit 2
        fi
        # A worker job never holds a write token, whatever the workflow passed.
        unset GITHUB_TOKEN GH_TOKEN FANOUT_APP_PRIVATE_KEY FANOUT_IN_GITHUB_TOKEN
        deps=()
        if [[ -n "${FANOUT_IN_DEPS_DIR:-}" && -d "$FANOUT_IN_DEPS_DIR" ]]; then
            deps=(--deps-from "$FANOUT_IN_DEPS_DIR")
        fi
        cmd=("$fanout" ${global[@]+"${global[@]}"} worker --plan "$plan_file" ${plan_check[@]+"${plan_check[@]}"} --id "$FANOUT_IN_WORKER_ID"
            --out "$results_dir" --quiet ${deps[@]+"${deps[@]}"} ${sandbox[@]+"${sandbox[@]}"})
        ;;
    aggregate)
        truthy "${FANOUT_IN_PUBLISH:-false}" publish && use_token
        cmd=("$fanout" ${global[@]+"${global[@]}"} aggregate --plan "$plan_file" ${plan_check[@]+"${plan_check[@]}"} --from "$results_dir"
            ${integrate[@]+"${integrate[@]}"} ${publish[@]+"${publish[@]}"} ${publish_flags[@]+"${publish_flags[@]}"})
        ;;
    *)
        echo "::error title=fanout::input mode: expected run, plan, worker or aggregate, got '$mode'" >&2
        exit 2
        ;;
esac
unset FANOUT_IN_GITHUB_TOKEN

printf 'fanout:' >&2
printf ' %q' "${cmd[@]:1}" >&2
printf '\n' >&2
exec "${cmd[@]}"
