#!/usr/bin/env bash
# Seed inputs for every fuzz target, from real files: the recorded agent outputs in
# tests/fixtures/agents, the fanout.yml examples of the README and docs/, and a real run of the fake
# agent (`fanout demo`: results.json, journal.json, plan.json, worker records, a git
# bundle of a worker's branch, a matrix artifact made from a record).
#
#   fuzz/seed.sh OUT_DIR      # writes OUT_DIR/<target>/<name>
#
# The kept corpus (fuzz/corpus/) is these seeds plus what the fuzzers found, minimized
# with `cargo fuzz cmin` (see fuzz/README.md). Needs git, python3 and cargo.
set -euo pipefail

out=${1:?usage: fuzz/seed.sh OUT_DIR}
root=$(cd "$(dirname "$0")/.." && pwd)
fixtures=$root/tests/fixtures/agents
mkdir -p "$out"
out=$(cd "$out" && pwd)
for t in agent_claude agent_codex agent_aider agent_architect agent_command agent_stream \
    results_json journal_json bundle_header config_yml plan_json worker_artifact run_records git_config; do
    mkdir -p "$out/$t"
done

# put TARGET NAME PREFIX FILE: PREFIX (printf %b escapes, e.g. \0005), then FILE's bytes.
put() {
    { printf '%b' "$3"; cat "$4"; } >"$out/$1/$2"
}

# Agent outputs: the control byte picks the exit (bits 0-1) and the model (bits 2-3).
for cli in claude codex aider architect; do
    for f in "$fixtures/$cli"/*; do
        name=$(basename "$f")
        [ "$name" = exit_codes.json ] && continue
        put "agent_$cli" "$name" '\0000' "$f"
        put "agent_$cli" "exit1-gpt4o-$name" '\0005' "$f"
    done
done
# The live stream: adapter byte, chunking seed, longest line kept (0: 1 MiB).
i=0
for cli in claude codex aider; do
    for f in "$fixtures/$cli"/*; do
        name=$(basename "$f")
        [ "$name" = exit_codes.json ] && continue
        case $cli in claude) a='\0000' ;; codex) a='\0001' ;; aider) a='\0002' ;; esac
        put agent_stream "$cli-$name" "$a\\$(printf '%04o' $((i % 8)))\\0000" "$f"
        put agent_stream "$cli-short-lines-$name" "$a\\$(printf '%04o' $((i % 8)))\\0050" "$f"
        i=$((i + 1))
    done
done
# A command agent: control byte, format byte (0 json, 1 jsonl, 2 file, 3 exit-code),
# a line of tab-separated result paths and values, then its output.
printf '\000\000result.status\tnum_turns\ttotal_cost_usd\tmessage\tdone,ok\terror_max_turns\nlog line\n{"result":{"status":"done"},"num_turns":3,"total_cost_usd":0.25,"message":"fine"}\n' \
    >"$out/agent_command/json-paths"
printf '\001\001\t\tusage.cost\t\t\t\n{"usage":{"cost":0.1},"steps":1}\nnoise\n{"usage":{"cost":0.3},"steps":2,"status":"partial","reason":"max steps"}\n' \
    >"$out/agent_command/jsonl-cost"
printf '\020\002\n{"status":"success","steps":4,"cost":0.12,"reason":"done"}\n' \
    >"$out/agent_command/file-default"
printf '\003\003\n' >"$out/agent_command/exit-code"
printf '\003\001\001\000{"cost":0.5,"turns":2}\n{"cost":0.75,"turns":3}\n' >"$out/agent_stream/jsonl"

# fanout.yml: every YAML example in the README and docs/ (the corpus keeps the
# names the examples had when they were all in the README).
python3 - "$out/config_yml" "$root/README.md" "$root"/docs/*.md <<'EOF'
import re, sys
text = "".join(open(p).read() for p in sys.argv[2:])
for i, block in enumerate(re.findall(r"```yaml\n(.*?)```", text, re.S)):
    open(f"{sys.argv[1]}/readme-{i}.yml", "w").write(block)
EOF

# A real run of the fake agent, and what it leaves behind.
cargo build --quiet --manifest-path "$root/Cargo.toml" --bin fanout
fanout=$root/target/debug/fanout
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Hermetic git: no global or system config.
export HOME=$work/home GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
mkdir -p "$HOME"
"$fanout" demo --quiet --dir "$work/demo" >/dev/null 2>&1 || true
run=$(find "$work/demo/repo/.git/fanout/runs" -name results.json -printf '%h\n' | head -1)
cp "$run/results.json" "$out/results_json/demo-results.json"
cp "$run/journal.json" "$out/journal_json/demo-journal.json"
cp "$run/plan.json" "$out/plan_json/demo-plan.json"
for r in "$run"/results/w*.json; do
    put run_records "record-$(basename "$r")" '\0000' "$r"
done
printf '\001%s\n%s\n' 4242 claude >"$out/run_records/pgid"
printf '\0022\n' >"$out/run_records/attempt"
printf '\003{"copied":[".env"],"changed":{"package-lock.json":"e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"}}' \
    >"$out/run_records/baseline"
python3 - "$run" "$out/worker_artifact/demo-artifact.json" <<'EOF'
import json, sys
run = sys.argv[1]
report = json.load(open(f"{run}/results.json"))
r = report["results"][0]
json.dump({"schema_version": 1, "run_id": report["run_id"],
           "base_commit": report["plan"]["base"]["commit"], "result": r,
           "bundle": "branch.bundle"}, open(sys.argv[2], "w"), indent=2)
EOF
# No path of the machine that made them: the checkout and the scratch directory.
for f in "$out"/{results_json,journal_json,plan_json,worker_artifact,run_records}/*; do
    sed -i -e "s#$root#/src/fanout#g" -e "s#$work#/tmp/fanout-seed#g" "$f"
done
repo=$work/demo/repo
branch=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["results"][0]["branch"])' "$run/results.json")
base=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["plan"]["base"]["commit"])' "$run/results.json")
git -C "$repo" bundle create -q "$work/b.bundle" "$base..$branch"
head -c 2048 "$work/b.bundle" >"$out/bundle_header/demo-v2.bundle"
git -C "$repo" bundle create -q --version=3 "$work/b3.bundle" "$base..$branch"
head -c 2048 "$work/b3.bundle" >"$out/bundle_header/demo-v3.bundle"

# The configuration git lists, with what an agent might plant and a user's own driver.
printf '[filter "lfs"]\n\tclean = git-lfs clean -- %%f\n\tsmudge = git-lfs smudge -- %%f\n\tprocess = git-lfs filter-process\n\trequired = true\n' \
    >"$work/global"
git -C "$repo" config filter.planted.clean 'sh -c planted'
git -C "$repo" config diff.x.textconv 'cat -v'
git -C "$repo" config submodule.sub.update '!sh -c planted'
git -C "$repo" config credential.https://example.com.helper store
git -C "$repo" config core.fsmonitor 'sh -c planted'
{ printf '\003'; GIT_CONFIG_GLOBAL=$work/global git -C "$repo" config --list --show-scope -z; } \
    >"$out/git_config/scoped"
{ printf '\000'; git -C "$repo" config --list -z; } >"$out/git_config/unscoped"
echo "seeds in $out: $(find "$out" -type f | wc -l) files"
