#!/usr/bin/env bash
# Rewrite dist/manifest.json for a release: update-manifest.sh VERSION BASE_URL SUMS_DIR
# where SUMS_DIR holds `fanout-<target>.tar.gz.sha256` files (sha256sum format) and
# each asset is at BASE_URL/fanout-<target>.tar.gz. Targets without a sum file keep
# null (the installer builds those from source). Used by .github/workflows/release.yml.
set -euo pipefail
[[ $# -eq 3 ]] || { echo "usage: $0 VERSION BASE_URL SUMS_DIR" >&2; exit 2; }
manifest="$(cd "$(dirname "$0")" && pwd)/manifest.json"
python3 - "$manifest" "$1" "$2" "$3" <<'PY'
import json, os, re, sys
path, version, base, sums = sys.argv[1:]
m = json.load(open(path))
m["version"] = version
for target in m["targets"]:
    f = os.path.join(sums, f"fanout-{target}.tar.gz.sha256")
    if os.path.exists(f):
        digest = open(f).read().split()[0].lower()
        if not re.fullmatch(r"[0-9a-f]{64}", digest):
            sys.exit(f"{f}: not a sha256 digest")
        m["targets"][target] = {"url": f"{base}/fanout-{target}.tar.gz", "sha256": digest}
    else:
        m["targets"][target] = {"url": None, "sha256": None}
with open(path + ".tmp", "w") as out:
    json.dump(m, out, indent=2)
    out.write("\n")
os.replace(path + ".tmp", path)
print(f"{path}: version {version}, {sum(1 for t in m['targets'].values() if t['url'])} assets")
PY
