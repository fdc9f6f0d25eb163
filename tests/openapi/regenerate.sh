#!/usr/bin/env bash
# Regenerates the trimmed copies of GitHub's official OpenAPI description (as
# published in the npm package @octokit/openapi) that the loopback fakes check
# requests and responses against:
#   github-trimmed.json   pull requests, issues and comments, reviews, App tokens,
#                         check runs and job logs
#                         (tests/common/fake_github.rs)
#   github-releases.json  releases and their assets (tests/support/fake_release.rs)
#
# Each trimmed file keeps only the operations its fake implements, plus every
# `#/components/...` object they reference, transitively. Output is pretty-printed with sorted
# keys so that regenerating from the same package version is byte-identical.
#
# Usage: tests/openapi/regenerate.sh [VERSION]
#   VERSION  npm version or tag of @octokit/openapi, e.g. 23.0.2 or latest.
#            Default: the version recorded in the current github-trimmed.json
#            (x-source.version), so a plain run reproduces the committed file;
#            "latest" when there is no trimmed file yet.
# Needs: npm (to fetch the package into the cache below) and python3.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/fanout-peers/openapi"
pkg_dir="$cache/node_modules/@octokit/openapi"
spec="$pkg_dir/generated/api.github.com.json"
out="$here/github-trimmed.json" # its x-source.version is the default VERSION

json_field() { # FILE PYTHON-EXPRESSION-ON-d
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"
}

wanted="${1:-}"
if [[ -z "$wanted" ]]; then
    if [[ -f "$out" ]]; then
        wanted="$(json_field "$out" 'd["x-source"]["version"]')"
    else
        wanted=latest
    fi
fi

cached=""
if [[ -f "$pkg_dir/package.json" && -f "$spec" ]]; then
    cached="$(json_field "$pkg_dir/package.json" 'd["version"]')"
fi
if [[ "$cached" != "$wanted" ]]; then
    mkdir -p "$cache"
    npm install --no-save --no-audit --no-fund --prefix "$cache" "@octokit/openapi@$wanted" >&2
fi

version="$(json_field "$pkg_dir/package.json" 'd["version"]')"

python3 - "$spec" "$here" "$version" <<'PY'
import json
import os
import sys

spec_path, out_dir, version = sys.argv[1:4]

OUTPUTS = {
    "github-trimmed.json": [
        "pulls/list",
        "pulls/create",
        "pulls/update",
        "pulls/get",
        "issues/add-labels",
        "pulls/request-reviewers",
        "apps/get-repo-installation",
        "apps/create-installation-access-token",
        "repos/get",
        "issues/create-comment",
        "issues/list-for-repo",
        "issues/create",
        "issues/update",
        "pulls/create-review",
        "issues/get",
        "checks/list-for-ref",
        "actions/download-job-logs-for-workflow-run",
    ],
    "github-releases.json": [
        "repos/list-releases",
        "repos/create-release",
        "repos/get-release",
        "repos/get-release-by-tag",
        "repos/update-release",
        "repos/list-release-assets",
        "repos/upload-release-asset",
        "repos/get-release-asset",
        "repos/delete-release-asset",
    ],
}
METHODS = {"get", "put", "post", "delete", "options", "head", "patch", "trace"}

with open(spec_path, encoding="utf-8") as f:
    spec = json.load(f)


def trim(operations, out_path):
    """Writes the operations named, and what they reference, to out_path."""
    paths = {}
    found = set()
    for path, item in spec["paths"].items():
        kept = {}
        for key, op in item.items():
            if key in METHODS and op.get("operationId") in operations:
                kept[key] = op
                found.add(op["operationId"])
        if kept:
            # Path-level keys (e.g. shared "parameters") apply to every method.
            for key, value in item.items():
                if key not in METHODS:
                    kept[key] = value
            paths[path] = kept

    missing = [op for op in operations if op not in found]
    if missing:
        sys.exit(f"operations not found in the spec: {missing}")

    # Collect every "#/components/<section>/<name>" reference, transitively.
    components = {}

    def walk(node):
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str):
                add_ref(ref)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    def add_ref(ref):
        prefix = "#/components/"
        if not ref.startswith(prefix):
            sys.exit(f"unsupported $ref: {ref}")
        section, _, name = ref[len(prefix):].partition("/")
        if "/" in name:
            sys.exit(f"unsupported nested $ref: {ref}")
        bucket = components.setdefault(section, {})
        if name in bucket:
            return
        try:
            target = spec["components"][section][name]
        except KeyError:
            sys.exit(f"dangling $ref: {ref}")
        bucket[name] = target
        walk(target)

    walk(paths)

    trimmed = {
        "openapi": spec["openapi"],
        "info": spec["info"],
        "servers": spec.get("servers", []),
        "x-source": {
            "package": "@octokit/openapi",
            "version": version,
            "file": "generated/api.github.com.json",
            "operations": operations,
            "generator": "tests/openapi/regenerate.sh",
        },
        "paths": paths,
        "components": components,
    }

    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(trimmed, f, indent=2, sort_keys=True, ensure_ascii=False)
        f.write("\n")

    sizes = {k: len(v) for k, v in sorted(components.items())}
    print(f"wrote {out_path}: {len(paths)} paths, components {sizes}", file=sys.stderr)


for name, operations in OUTPUTS.items():
    trim(operations, os.path.join(out_dir, name))
PY
