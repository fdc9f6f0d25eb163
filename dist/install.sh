#!/usr/bin/env bash
# Install fanout for the composite action (action.yml), in seconds and verified:
#
#   1. FANOUT_BINARY set: use that binary as it is (end-to-end tests).
#   2. Otherwise map RUNNER_OS/RUNNER_ARCH (or uname) to a target, and reuse
#      $RUNNER_TOOL_CACHE/fanout/<version>/<target>/ when a previous job filled it
#      and the release archive kept there still has the manifest's sha256: the binary
#      is unpacked from that archive again, never taken as it is (see below).
#   3. Otherwise download the target's asset named in the manifest (with retries),
#      check its sha256, and unpack it into the tool cache, the archive beside it.
#   4. When the manifest has no asset for the target, or FANOUT_BUILD_FROM_SOURCE is
#      true: `cargo build --locked --release` of the action's own source.
#
# The action runs this script in two steps so that a workflow builds at most once
# (FANOUT_INSTALL_STEP): `resolve` does 1–3 and, where 4 is needed, builds nothing
# but writes build-key=, build-dir= and build-artifact= to $GITHUB_OUTPUT; the
# action then fetches the plan job's binary (artifact; worker and aggregate jobs) or
# the cache (worker jobs only) into build-dir, and `build` takes the binary found
# there when the mode may trust it, else builds into build-dir/cache/.
# Unset (`all`): everything in one go.
#
# A failed download or a checksum mismatch is an error, never a silent fall back to
# building: a tampered or missing release must be seen. So is asking for a version
# the manifest does not describe (the action's own source is not that version).
#
# Inputs (environment only): FANOUT_VERSION (default, or `latest`: the manifest's),
# FANOUT_BUILD_FROM_SOURCE, FANOUT_MANIFEST (path or URL; default dist/manifest.json
# beside this script), FANOUT_INSTALL_BASE_URL (download the asset from this base URL
# instead, same file name, same sha256: a mirror), FANOUT_INSTALL_ALLOW_HTTP,
# FANOUT_SOURCE_DIR (default: the directory above dist/), FANOUT_CARGO (default
# cargo), FANOUT_BINARY, FANOUT_BINARY_SHA256 (the binary must have this sha256),
# FANOUT_INSTALL_RETRIES (default 5), FANOUT_INSTALL_STEP (all, resolve, build),
# FANOUT_BUILD_DIR, FANOUT_BUILD_VERSION, FANOUT_BUILD_ARTIFACT (build step: the
# resolve step's outputs), FANOUT_IN_MODE (build step: the action's mode, which
# decides what it may take instead of building), RUNNER_OS, RUNNER_ARCH, RUNNER_TOOL_CACHE, RUNNER_TEMP,
# GITHUB_OUTPUT, GITHUB_PATH, CARGO_TARGET_DIR (relative: to the current directory,
# as cargo reads it).
#
# Result: the binary's directory is added to $GITHUB_PATH, `bin=`, `version=` and
# `sha256=` (of the binary) are written to $GITHUB_OUTPUT, and the binary's absolute
# path is the last stdout line. Everything else goes to stderr. Portable to bash 3.2
# (macOS runners).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
log() { printf 'fanout install: %s\n' "$*" >&2; }
die() {
    printf '::error title=fanout install::%s\n' "$*" >&2
    exit 1
}
lower() { printf '%s' "$1" | tr '[:upper:]' '[:lower:]'; }
truthy() {
    case "$(lower "${1:-}")" in
        true | yes | 1 | on) return 0 ;;
        *) return 1 ;;
    esac
}
output() { # KEY VALUE: a step output
    if [[ -n "${GITHUB_OUTPUT:-}" ]]; then
        echo "$1=$2" >>"$GITHUB_OUTPUT"
    fi
}

sha256_of() {
    if command -v sha256sum >/dev/null 2>&1; then
        sha256sum "$@" | awk '{print $1}'
    else
        shasum -a 256 "$@" | awk '{print $1}'
    fi
}

finish() { # $1: binary, $2: version
    local bin="$1" dir sum
    dir="$(cd "$(dirname "$bin")" && pwd)"
    bin="$dir/$(basename "$bin")"
    sum="$(sha256_of "$bin")"
    if [[ -n "${FANOUT_BINARY_SHA256:-}" && "$sum" != "$(lower "$FANOUT_BINARY_SHA256")" ]]; then
        die "$bin has sha256 $sum, but FANOUT_BINARY_SHA256 (the action's binary-sha256) is $FANOUT_BINARY_SHA256: refusing it"
    fi
    if [[ -n "${GITHUB_PATH:-}" ]]; then
        echo "$dir" >>"$GITHUB_PATH"
    fi
    output bin "$bin"
    output version "$2"
    output sha256 "$sum"
    log "fanout $2 at $bin (sha256 $sum)"
    echo "$bin"
    exit 0
}

step="${FANOUT_INSTALL_STEP:-all}"
case "$step" in
    all | resolve | build) ;;
    *) die "FANOUT_INSTALL_STEP=$step: expected all, resolve or build" ;;
esac

# 1. A prebuilt binary.
if [[ -n "${FANOUT_BINARY:-}" ]]; then
    [[ -x "$FANOUT_BINARY" ]] || die "FANOUT_BINARY=$FANOUT_BINARY is not an executable file"
    log "using FANOUT_BINARY as it is"
    finish "$FANOUT_BINARY" "$("$FANOUT_BINARY" --version 2>/dev/null | awk '{print $2}' || echo unknown)"
fi

build_from_source() { # $1: why; prints the binary's path
    local src="${FANOUT_SOURCE_DIR:-$here/..}" cargo="${FANOUT_CARGO:-cargo}" target_dir
    [[ -d "$src" ]] || die "FANOUT_SOURCE_DIR=$src is not a directory"
    src="$(cd "$src" && pwd)"
    log "building from source ($1): $cargo build --locked --release in $src"
    [[ -f "$src/Cargo.toml" ]] || die "no Cargo.toml in $src to build from"
    command -v "$cargo" >/dev/null 2>&1 ||
        die "building from source needs cargo, and '$cargo' is not found (install Rust, e.g. with rustup)"
    "$cargo" build --locked --release --manifest-path "$src/Cargo.toml" >&2 ||
        die "cargo build failed"
    # cargo reads a relative CARGO_TARGET_DIR against its current directory.
    target_dir="${CARGO_TARGET_DIR:-$src/target}"
    case "$target_dir" in
        /*) ;;
        *) target_dir="$PWD/$target_dir" ;;
    esac
    [[ -x "$target_dir/release/fanout" ]] || die "the build left no $target_dir/release/fanout"
    log "built from source"
    echo "$target_dir/release/fanout"
}

# The build step of the action: the plan job's binary, the cache's, or a build.
# Any job of the workflow run (a worker job's agent included) can upload an artifact
# of any name and save a cache entry under any key of the branch, so what runs with
# the write token is never taken from either without a sum that came from elsewhere:
# the artifact only with the plan job's binary-sha256 (or in a worker job), the cache
# only in a worker job (which holds no write token); the plan job, whose binary and
# plan the aggregate job trusts, and `run` mode build.
if [[ "$step" == build ]]; then
    dir="${FANOUT_BUILD_DIR:?FANOUT_BUILD_DIR is not set (the resolve step writes build-dir)}"
    version="${FANOUT_BUILD_VERSION:-unknown}"
    want="$(lower "${FANOUT_BINARY_SHA256:-}")"
    mode="${FANOUT_IN_MODE:-}"
    candidates=()
    case "$mode" in
        worker) candidates=("$dir/artifact/fanout" "$dir/cache/fanout") ;;
        aggregate) if [[ -n "$want" ]]; then candidates=("$dir/artifact/fanout"); fi ;;
    esac
    for found in ${candidates[@]+"${candidates[@]}"}; do
        [[ -f "$found" ]] || continue
        chmod +x "$found" # artifacts do not keep file modes
        sum="$(sha256_of "$found")"
        if [[ -n "$want" && "$sum" != "$want" ]]; then
            log "not using $found: sha256 $sum, expected $want (binary-sha256)"
            continue
        fi
        case "$found" in
            */artifact/*) log "using the fanout binary the plan job built (no build in this job)" ;;
            *) log "using the cached build of this version and source (no build)" ;;
        esac
        finish "$found" "$version"
    done
    where="the artifact ${FANOUT_BUILD_ARTIFACT:-}"
    if [[ "$mode" == worker ]]; then where="$where nor in the cache"; fi
    [[ -z "$want" ]] ||
        die "the plan job's fanout binary (sha256 $want, binary-sha256) is not in $where: refusing to run another binary"
    case "$mode" in
        worker)
            echo "::warning title=fanout install::no fanout binary from the plan job (artifact ${FANOUT_BUILD_ARTIFACT:-}) nor from the cache: building in this job (run the plan job with this action to build once per workflow)" >&2
            ;;
        aggregate)
            echo "::warning title=fanout install::no binary-sha256 (the plan job's output): building in this job rather than trusting an artifact any job of the run could have uploaded" >&2
            ;;
    esac
    built="$(build_from_source "no released asset for this runner, or build-from-source")"
    mkdir -p "$dir/cache"
    cp "$built" "$dir/cache/fanout.tmp"
    chmod +x "$dir/cache/fanout.tmp"
    mv "$dir/cache/fanout.tmp" "$dir/cache/fanout"
    output built true
    finish "$dir/cache/fanout" "$version"
fi

# The manifest: a local path or file:// URL; http(s) is fetched.
manifest_src="${FANOUT_MANIFEST:-$here/manifest.json}"
work="$(mktemp -d "${RUNNER_TEMP:-${TMPDIR:-/tmp}}/fanout-install.XXXXXX")"
trap 'rm -rf "$work"' EXIT

check_url() { # refuse plain http unless allowed
    case "$1" in
        https://* | file://* | /*) ;;
        http://*)
            truthy "${FANOUT_INSTALL_ALLOW_HTTP:-}" ||
                die "$2: refusing plain http URL $1 (set FANOUT_INSTALL_ALLOW_HTTP=true to allow it)"
            ;;
        *) [[ "$1" != *://* ]] || die "$2: unsupported URL scheme in $1" ;;
    esac
}

fetch() { # $1 url or path, $2 destination
    local src="$1" protos="=https"
    case "$src" in
        file://*) src="${src#file://}" ;;
    esac
    if [[ "$src" != *://* ]]; then
        cp "$src" "$2" || return 1
        return 0
    fi
    truthy "${FANOUT_INSTALL_ALLOW_HTTP:-}" && protos="=http,https"
    if command -v curl >/dev/null 2>&1; then
        curl --fail --silent --show-error --location --proto "$protos" --proto-redir "$protos" \
            --retry "$retries" --retry-all-errors --connect-timeout 10 --output "$2" "$src"
    elif command -v wget >/dev/null 2>&1; then
        wget --quiet --tries="$((retries + 1))" --timeout=10 --output-document="$2" "$src"
    else
        die "neither curl nor wget is installed"
    fi
}

retries="${FANOUT_INSTALL_RETRIES:-5}"
case "$retries" in '' | *[!0-9]*) die "FANOUT_INSTALL_RETRIES=$retries: expected a number" ;; esac
check_url "$manifest_src" "FANOUT_MANIFEST"
fetch "$manifest_src" "$work/manifest.json" || die "cannot read the manifest $manifest_src"

# manifest_get KEY [TARGET FIELD]: a string from the manifest, empty when null/absent.
manifest_get() {
    if command -v python3 >/dev/null 2>&1; then
        python3 - "$work/manifest.json" "$@" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
if len(sys.argv) == 3:
    v = m.get(sys.argv[2])
else:
    t = (m.get("targets") or {}).get(sys.argv[3])
    v = t.get(sys.argv[4]) if isinstance(t, dict) else None
print("" if v is None else v)
PY
    elif command -v jq >/dev/null 2>&1; then
        if [[ $# -eq 1 ]]; then
            jq -r --arg k "$1" '.[$k] // ""' "$work/manifest.json"
        else
            jq -r --arg t "$2" --arg f "$3" \
                '(.targets[$t] // {}) | if type == "object" then .[$f] // "" else "" end' \
                "$work/manifest.json"
        fi
    else
        die "reading the manifest needs python3 or jq"
    fi
}

manifest_version="$(manifest_get version)" || die "$manifest_src: not a JSON manifest"
[[ -n "$manifest_version" ]] || die "$manifest_src: no \"version\""
version="${FANOUT_VERSION:-}"
version="${version#v}"
if [[ -z "$version" || "$version" == "latest" ]]; then
    version="$manifest_version"
fi

# 2. The target.
os="${RUNNER_OS:-$(uname -s)}"
arch="${RUNNER_ARCH:-$(uname -m)}"
case "$(lower "$os")" in
    linux) os=linux ;;
    macos | darwin) os=macos ;;
    windows* | mingw* | msys* | cygwin*) os=windows ;;
    *) os="unknown-$os" ;;
esac
case "$(lower "$arch")" in
    x64 | x86_64 | amd64) arch=x86_64 ;;
    arm64 | aarch64) arch=aarch64 ;;
    *) arch="unknown-$arch" ;;
esac
case "$os" in
    linux) target="$arch-unknown-linux-musl" ;;
    macos) target="$arch-apple-darwin" ;;
    *) target="$arch-$os" ;;
esac
log "target $target, version $version"

cache_root="${RUNNER_TOOL_CACHE:-${RUNNER_TEMP:-${TMPDIR:-/tmp}}}"
cache="$cache_root/fanout/$version/$target"

# A hash of what the build reads: Cargo.toml, Cargo.lock, build.rs, src/, templates/.
source_hash() {
    local src="${FANOUT_SOURCE_DIR:-$here/..}"
    local -a sum=(sha256sum)
    command -v sha256sum >/dev/null 2>&1 || sum=(shasum -a 256)
    (
        cd "$src" || exit 1
        {
            for f in Cargo.toml Cargo.lock build.rs; do
                if [[ -f "$f" ]]; then echo "$f"; fi
            done
            for d in src templates; do
                if [[ -d "$d" ]]; then find "$d" -type f; fi
            done | LC_ALL=C sort
        } | tr '\n' '\0' | xargs -0 "${sum[@]}"
    ) | "${sum[@]}" | awk '{print $1}'
}

build() { # $1: why
    if [[ "$step" == resolve ]]; then
        # The action's next steps fetch or build the binary, once per workflow run.
        local hash key
        hash="$(source_hash)" || hash=""
        [[ "$hash" =~ ^[0-9a-f]{64}$ ]] || die "cannot hash the source in ${FANOUT_SOURCE_DIR:-$here/..}"
        # A source build is for this runner (os-arch), not for a release target.
        key="fanout-source-$manifest_version-$os-$arch-$(printf '%s' "$hash" | cut -c1-32)"
        log "$1: the plan job builds fanout once for this workflow run (cache key $key)"
        output build-key "$key"
        output build-dir "${RUNNER_TEMP:-${TMPDIR:-/tmp}}/fanout-build"
        output build-artifact "$key"
        output version "$manifest_version"
        exit 0
    fi
    finish "$(build_from_source "$1")" "$manifest_version"
}

if truthy "${FANOUT_BUILD_FROM_SOURCE:-}"; then
    if [[ "$version" != "$manifest_version" ]]; then
        log "warning: version $version ignored: the action's source is $manifest_version"
    fi
    build "build-from-source is true"
fi

if [[ "$version" != "$manifest_version" ]]; then
    die "version $version asked for, but $manifest_src describes $manifest_version: use the action at the tag v$version, or leave the version empty"
fi
url="$(manifest_get targets "$target" url)" || die "$manifest_src: cannot read targets.$target"
want="$(manifest_get targets "$target" sha256)" || die "$manifest_src: cannot read targets.$target"
if [[ -z "$url" ]]; then
    build "no released asset for $target"
fi
[[ -n "$want" ]] || die "the manifest has a URL for $target but no sha256: refusing an unverifiable download"
want="$(lower "$want")"

# The tool cache outlives the job on a self-hosted runner, and any job there (a
# worker job's agent included, same uid) can write to it: what it holds is trusted
# only as far as the manifest's sha256 vouches for it. So the archive is kept beside
# the binary, and a later job copies it out, checks that copy's sha256 and unpacks
# the binary from it again over whatever the cache holds; an archive that does not
# match is downloaded again.
kept="$cache/fanout.tar.gz"
got=""
if [[ -f "$kept" ]] && cp "$kept" "$work/asset.tar.gz"; then
    got="$(lower "$(sha256_of "$work/asset.tar.gz")")"
    if [[ "$got" == "$want" ]]; then
        log "reusing the tool cache at $cache (its archive has the manifest's sha256; the binary is unpacked from it again)"
    else
        log "not reusing the tool cache at $cache: its archive has sha256 $got, the manifest's is $want; downloading again"
        got=""
    fi
fi

# 3. Download, verify, unpack, keep the archive beside the binary.
if [[ -z "$got" ]]; then
    if [[ -n "${FANOUT_INSTALL_BASE_URL:-}" ]]; then
        url="${FANOUT_INSTALL_BASE_URL%/}/${url##*/}"
        log "FANOUT_INSTALL_BASE_URL: the asset comes from $url (its sha256 is still checked)"
    fi
    check_url "$url" "the $target asset"
    log "downloading $url"
    fetch "$url" "$work/asset.tar.gz" || die "download failed: $url"
    got="$(lower "$(sha256_of "$work/asset.tar.gz")")"
    if [[ "$got" != "$want" ]]; then
        die "checksum mismatch for $url: expected sha256 $want, got $got"
    fi
fi
mkdir -p "$work/unpacked"
tar -xzf "$work/asset.tar.gz" -C "$work/unpacked" || die "cannot unpack $url"
[[ -f "$work/unpacked/fanout" ]] || die "$url holds no fanout binary at its top level"
rm -rf "$cache"
mkdir -p "$cache"
cp "$work/unpacked/fanout" "$cache/fanout"
chmod +x "$cache/fanout"
cp "$work/asset.tar.gz" "$kept"
finish "$cache/fanout" "$version"
