#!/usr/bin/env python3
"""fanout's release steps, one subcommand per step of .github/workflows/release.yml.

The flow makes the tagged commit carry its own checksums:

  check VERSION          the version is valid and is what Cargo.toml and
                         dist/manifest.json say; prints tag, major tag, prerelease
  package TARGET BIN DIR fanout-TARGET.tar.gz (the binary at its top level, a
                         reproducible archive) and fanout-TARGET.tar.gz.sha256
  draft TAG DIR          a DRAFT release for TAG holding every archive in DIR
  manifest TAG           dist/manifest.json from the draft's own assets (each one
                         downloaded and hashed), and a .sha256 asset beside each
  tag TAG                commit dist/manifest.json, tag that commit TAG, push the tag
  publish TAG            publish the draft (only once the tag exists: GitHub would
                         otherwise create the tag itself, on a commit without the
                         manifest)
  major TAG              move the major tag (v0, v1, ...) to TAG's commit, when TAG
                         is the newest stable release of that major version

Every step is idempotent, so re-running the workflow after a failure finishes the
release: an existing draft is reused and its uploaded archives are kept (the manifest
is always computed from what the release holds, never from what a build claims), an
existing tag is accepted only when its manifest is the one this release computes, a
published release is left as it is.

Environment: GITHUB_REPOSITORY (owner/name), GITHUB_TOKEN (or GH_TOKEN),
GITHUB_API_URL (default https://api.github.com), GITHUB_SERVER_URL (default
https://github.com; the manifest's URLs are
SERVER/REPOSITORY/releases/download/TAG/ASSET), GITHUB_SHA (the draft's
target_commitish), GITHUB_OUTPUT (step outputs), FANOUT_RELEASE_REMOTE (the git
remote for tags, default origin). Python 3.11+, standard library only.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import re
import subprocess
import sys
import tarfile
import time
import tomllib
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MANIFEST = ROOT / "dist" / "manifest.json"
SEMVER = re.compile(
    r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*)(?:\.(?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*))*))?"
    r"(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?"
)
BOT = ("github-actions[bot]", "41898282+github-actions[bot]@users.noreply.github.com")


class Failure(Exception):
    """A step cannot go on; the message says why and what to do."""


def log(message: str) -> None:
    print(f"release: {message}", file=sys.stderr, flush=True)


def output(**values: str) -> None:
    """Step outputs: to $GITHUB_OUTPUT when set, and to stdout."""
    lines = "".join(f"{key.replace('_', '-')}={value}\n" for key, value in values.items())
    sys.stdout.write(lines)
    if os.environ.get("GITHUB_OUTPUT"):
        with open(os.environ["GITHUB_OUTPUT"], "a", encoding="utf-8") as out:
            out.write(lines)


# --- versions ----------------------------------------------------------------


def parse_version(text: str) -> tuple[str, tuple[int, int, int], bool]:
    """(version, (major, minor, patch), prerelease) of `0.2.0` or `v0.2.0`."""
    version = text[1:] if text.startswith("v") else text
    m = SEMVER.fullmatch(version)
    if not m:
        raise Failure(f"version {text!r}: expected MAJOR.MINOR.PATCH[-PRERELEASE], e.g. 0.2.0")
    return version, (int(m[1]), int(m[2]), int(m[3])), m[4] is not None


def major_tag(core: tuple[int, int, int]) -> str:
    return f"v{core[0]}"


def asset_name(target: str) -> str:
    return f"fanout-{target}.tar.gz"


def load_manifest() -> dict:
    try:
        return json.loads(MANIFEST.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise Failure(f"{MANIFEST}: {e}") from e


def targets() -> list[str]:
    """The targets a release must cover: the manifest's keys."""
    found = list(load_manifest().get("targets") or {})
    if not found:
        raise Failure(f"{MANIFEST}: no targets")
    return found


def cmd_check(args: list[str]) -> None:
    (wanted,) = args
    version, core, pre = parse_version(wanted)
    cargo = tomllib.loads((ROOT / "Cargo.toml").read_text(encoding="utf-8"))["package"]["version"]
    manifest = load_manifest().get("version")
    if cargo != version or manifest != version:
        raise Failure(
            f"releasing {version}, but Cargo.toml says {cargo} and dist/manifest.json says "
            f"{manifest}: bump both (and Cargo.lock) in a pull request first, then release"
        )
    output(version=version, tag=f"v{version}", major=major_tag(core), prerelease=str(pre).lower())


# --- archives ----------------------------------------------------------------


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def archive(binary: Path) -> bytes:
    """A tar.gz with `fanout` at its top level; the same binary gives the same bytes."""
    data = binary.read_bytes()
    raw = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz:
        with tarfile.open(fileobj=gz, mode="w", format=tarfile.USTAR_FORMAT) as tar:
            info = tarfile.TarInfo("fanout")
            info.size, info.mode, info.mtime = len(data), 0o755, 0
            tar.addfile(info, io.BytesIO(data))
    return raw.getvalue()


def check_archive(name: str, data: bytes) -> None:
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
            names = tar.getnames()
    except (tarfile.TarError, OSError, EOFError) as e:
        raise Failure(f"{name}: not a tar.gz archive ({e})") from e
    if "fanout" not in names:
        raise Failure(f"{name}: no `fanout` at the top level (it holds {names[:5]})")


def sum_line(digest: str, name: str) -> str:
    """A line `sha256sum -c` reads."""
    return f"{digest}  {name}\n"


def cmd_package(args: list[str]) -> None:
    target, binary, outdir = args
    if target not in targets():
        raise Failure(f"target {target} is not in dist/manifest.json ({', '.join(targets())})")
    binary_path = Path(binary)
    if not binary_path.is_file():
        raise Failure(f"{binary}: no such file (did the build for {target} run?)")
    data = archive(binary_path)
    name = asset_name(target)
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    (out / name).write_bytes(data)
    digest = sha256_hex(data)
    (out / f"{name}.sha256").write_text(sum_line(digest, name), encoding="utf-8")
    log(f"{out / name}: {len(data)} bytes, sha256 {digest}")
    output(asset=name, sha256=digest)


# --- the GitHub API ----------------------------------------------------------


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):  # noqa: D102
        return None


class GitHub:
    """The few REST calls of the flow, with retries on 5xx and network errors."""

    def __init__(self) -> None:
        self.repo = env("GITHUB_REPOSITORY")
        self.api = os.environ.get("GITHUB_API_URL", "https://api.github.com").rstrip("/")
        self.token = os.environ.get("GITHUB_TOKEN") or os.environ.get("GH_TOKEN")
        if not self.token:
            raise Failure("GITHUB_TOKEN (or GH_TOKEN) is not set: the release API needs it")
        self.opener = urllib.request.build_opener(NoRedirect)

    def request(self, method: str, url: str, body=None, content_type=None, accept=None):
        """(status, headers, bytes); follows redirects, dropping the token off-host."""
        if not url.startswith(("http://", "https://")):
            url = f"{self.api}/repos/{self.repo}{url}"
        headers = {
            "Authorization": f"Bearer {self.token}",
            "Accept": accept or "application/vnd.github+json",
            "X-GitHub-Api-Version": "2022-11-28",
            "User-Agent": "fanout-release",
        }
        data = None
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            headers["Content-Type"] = content_type or "application/json"
        for hop in range(5):
            status, got, payload = self._send(method, url, data, headers)
            if status not in (301, 302, 303, 307, 308):
                return status, got, payload
            location = urllib.parse.urljoin(url, got.get("Location", ""))
            if not location.startswith(f"{self.api}/"):
                # Off the API (asset storage): the URL is signed, and a second
                # credential is refused; the token never leaves the API.
                headers.pop("Authorization", None)
            url = location
            if status == 303:
                method, data = "GET", None
        raise Failure(f"{method} {url}: too many redirects")

    def _send(self, method, url, data, headers):
        delay = 2.0
        for attempt in range(1, 5):
            req = urllib.request.Request(url, data=data, method=method, headers=headers)
            try:
                with self.opener.open(req, timeout=120) as resp:
                    return resp.status, resp.headers, resp.read()
            except urllib.error.HTTPError as e:
                body = e.read()
                if e.code < 500 or attempt == 4:
                    return e.code, e.headers, body
                why = f"HTTP {e.code}"
            except (urllib.error.URLError, TimeoutError, ConnectionError) as e:
                if attempt == 4:
                    raise Failure(f"{method} {url}: {e}") from e
                why = str(e)
            log(f"{method} {url}: {why}; retrying in {delay:.0f} s (attempt {attempt + 1} of 4)")
            time.sleep(delay)
            delay *= 2
        raise AssertionError("unreachable")

    def json(self, method: str, path: str, body=None, ok=(200, 201)):
        status, _, payload = self.request(method, path, body)
        if status not in ok:
            raise Failure(f"{method} {path}: HTTP {status}: {message(payload)}")
        return json.loads(payload) if payload else None

    def find_release(self, tag: str):
        """The release for `tag`, drafts included (get-release-by-tag skips drafts)."""
        page = 1
        while True:
            releases = self.json("GET", f"/releases?per_page=100&page={page}")
            for release in releases:
                if release["tag_name"] == tag:
                    return release
            if len(releases) < 100:
                return None
            page += 1

    def require_release(self, tag: str) -> dict:
        release = self.find_release(tag)
        if release is None:
            raise Failure(f"no release for {tag}: run the draft step first")
        return release

    def assets(self, release: dict) -> dict[str, dict]:
        found, page = {}, 1
        while True:
            batch = self.json("GET", f"/releases/{release['id']}/assets?per_page=100&page={page}")
            found.update({a["name"]: a for a in batch})
            if len(batch) < 100:
                return found
            page += 1

    def upload(self, release: dict, name: str, data: bytes, content_type: str) -> dict:
        base = re.sub(r"\{[^}]*\}$", "", release["upload_url"])
        url = f"{base}?{urllib.parse.urlencode({'name': name})}"
        status, _, payload = self.request("POST", url, data, content_type)
        if status != 201:
            raise Failure(f"uploading {name}: HTTP {status}: {message(payload)}")
        log(f"uploaded {name} ({len(data)} bytes)")
        return json.loads(payload)

    def download(self, asset: dict) -> bytes:
        status, _, payload = self.request(
            "GET", f"/releases/assets/{asset['id']}", accept="application/octet-stream"
        )
        if status != 200:
            raise Failure(f"downloading {asset['name']}: HTTP {status}: {message(payload)}")
        return payload

    def delete_asset(self, asset: dict) -> None:
        status, _, payload = self.request("DELETE", f"/releases/assets/{asset['id']}")
        if status not in (204, 404):
            raise Failure(f"deleting {asset['name']}: HTTP {status}: {message(payload)}")


def message(payload: bytes) -> str:
    try:
        return json.loads(payload).get("message", "")
    except (ValueError, AttributeError):
        return payload[:200].decode("utf-8", "replace")


def env(name: str) -> str:
    value = os.environ.get(name, "")
    if not value:
        raise Failure(f"{name} is not set")
    return value


# --- draft and manifest ------------------------------------------------------


def cmd_draft(args: list[str]) -> None:
    tag, assets_dir = args
    version, _, pre = parse_version(tag)
    files = {asset_name(t): Path(assets_dir) / asset_name(t) for t in targets()}
    missing = [str(p) for p in files.values() if not p.is_file()]
    if missing:
        raise Failure(f"no archive for: {', '.join(missing)} (did every build job finish?)")
    gh = GitHub()
    release = gh.find_release(tag)
    if release and not release["draft"]:
        log(f"{tag} is already published: its assets are left as they are")
        output(release_id=str(release["id"]))
        return
    if release is None:
        release = gh.json(
            "POST",
            "/releases",
            {
                "tag_name": tag,
                "target_commitish": env("GITHUB_SHA"),
                "name": f"fanout {version}",
                "body": "Install: see docs/install.md. Each archive has its sha256 beside it, and dist/manifest.json at this tag lists them all.",
                "generate_release_notes": True,
                "draft": True,
                "prerelease": pre,
            },
        )
        log(f"created the draft release {release['id']} for {tag}")
    else:
        log(f"reusing the draft release {release['id']} for {tag}")
    have = gh.assets(release)
    for name, path in files.items():
        asset = have.get(name)
        if asset and asset.get("state") == "uploaded":
            log(f"kept {name} from an earlier run (the manifest hashes what the release holds)")
            continue
        if asset:
            gh.delete_asset(asset)  # a half-finished upload
        gh.upload(release, name, path.read_bytes(), "application/gzip")
    output(release_id=str(release["id"]))


def release_manifest(gh: GitHub, release: dict, version: str) -> tuple[dict, dict]:
    """(the manifest of what `release` holds, its assets by name): each archive is
    downloaded and hashed, and checked against the digest GitHub lists for it."""
    tag = release["tag_name"]
    have = gh.assets(release)
    server = os.environ.get("GITHUB_SERVER_URL", "https://github.com").rstrip("/")
    manifest = {"version": version, "targets": {}}
    for target in targets():
        name = asset_name(target)
        if name not in have:
            raise Failure(f"the {tag} release has no {name}: run the draft step first")
        data = gh.download(have[name])
        check_archive(name, data)
        digest = sha256_hex(data)
        listed = (have[name].get("digest") or "").removeprefix("sha256:")
        if listed and listed != digest:
            raise Failure(f"{name}: the release lists sha256 {listed}, its download has {digest}")
        manifest["targets"][target] = {
            "url": f"{server}/{gh.repo}/releases/download/{tag}/{name}",
            "sha256": digest,
        }
    return manifest, have


def cmd_manifest(args: list[str]) -> None:
    (tag,) = args
    version, _, _ = parse_version(tag)
    gh = GitHub()
    release = gh.require_release(tag)
    manifest, have = release_manifest(gh, release, version)
    for target, entry in manifest["targets"].items():
        log(f"{asset_name(target)}: sha256 {entry['sha256']}")
        ensure_sum_asset(gh, release, have, asset_name(target), entry["sha256"])
    MANIFEST.write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    log(f"wrote {MANIFEST} ({len(manifest['targets'])} targets)")


def ensure_sum_asset(gh: GitHub, release: dict, have: dict, name: str, digest: str) -> None:
    """`NAME.sha256` on the release, matching the bytes the release holds."""
    sums = f"{name}.sha256"
    want = sum_line(digest, name).encode()
    if sums in have:
        if gh.download(have[sums]) == want:
            return
        if not release["draft"]:
            raise Failure(f"the published {release['tag_name']} has a {sums} that does not match {name}")
        gh.delete_asset(have[sums])
    elif not release["draft"]:
        raise Failure(f"the published {release['tag_name']} has no {sums}")
    gh.upload(release, sums, want, "text/plain")


# --- git: tag, publish, major tag --------------------------------------------


def git(*args: str, check: bool = True) -> str:
    done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
    if check and done.returncode != 0:
        raise Failure(f"git {' '.join(args)}: {done.stderr.strip() or done.returncode}")
    return done.stdout.strip()


def remote() -> str:
    return os.environ.get("FANOUT_RELEASE_REMOTE", "origin")


def remote_tags() -> dict[str, str]:
    """Tag name -> the commit it points at (annotated tags peeled), on the remote."""
    tags: dict[str, str] = {}
    for line in git("ls-remote", "--tags", remote()).splitlines():
        sha, ref = line.split("\t")
        name = ref.removeprefix("refs/tags/")
        if name.endswith("^{}"):
            tags[name[:-3]] = sha
        else:
            tags.setdefault(name, sha)
    return tags


def cmd_tag(args: list[str]) -> None:
    (tag,) = args
    version, _, _ = parse_version(tag)
    ours = json.loads(MANIFEST.read_text(encoding="utf-8"))
    if ours.get("version") != version or not all(
        (t or {}).get("url") and (t or {}).get("sha256") for t in ours["targets"].values()
    ):
        raise Failure(f"{MANIFEST} does not describe every {tag} asset: run the manifest step first")
    existing = remote_tags().get(tag)
    if existing:
        if tagged_manifest(tag) != ours:
            raise Failure(
                f"the tag {tag} exists and its dist/manifest.json differs from the release's "
                f"assets: a tag is never moved; delete the tag (and the release) to redo {tag}"
            )
        log(f"{tag} already tags {existing} with this manifest")
        output(commit=existing)
        return
    ident = ["-c", f"user.name={BOT[0]}", "-c", f"user.email={BOT[1]}"]
    if git("status", "--porcelain", "--", "dist/manifest.json"):
        git(*ident, "commit", "--quiet", "--no-verify", "-m",
            f"release {tag}: dist/manifest.json with every asset's URL and sha256",
            "--", "dist/manifest.json")
    git(*ident, "tag", "--force", "--annotate", tag, "-m", f"fanout {version}")
    git("push", "--quiet", remote(), f"refs/tags/{tag}")
    commit = git("rev-parse", f"{tag}^{{commit}}")
    log(f"pushed {tag} -> {commit}")
    output(commit=commit)


def tagged_manifest(tag: str):
    """dist/manifest.json of the remote's `tag` (None when it has none)."""
    git("fetch", "--no-tags", remote(), f"+refs/tags/{tag}:refs/tags/{tag}")
    text = git("show", f"{tag}^{{commit}}:dist/manifest.json", check=False)
    try:
        return json.loads(text)
    except ValueError:
        return None


def newest_stable(tags: dict[str, str], major: int | None = None) -> tuple[int, int, int] | None:
    """The highest stable vX.Y.Z among `tags` (of one major version, if given)."""
    best = None
    for name in tags:
        m = SEMVER.fullmatch(name[1:]) if name.startswith("v") else None
        if m and m[4] is None and major in (None, int(m[1])):
            core = (int(m[1]), int(m[2]), int(m[3]))
            best = core if best is None or core > best else best
    return best


def cmd_publish(args: list[str]) -> None:
    (tag,) = args
    _, core, pre = parse_version(tag)
    gh = GitHub()
    release = gh.require_release(tag)
    if not release["draft"]:
        log(f"{tag} is already published")
        return
    tags = remote_tags()
    if tag not in tags:
        raise Failure(f"the tag {tag} is not on {remote()}: run the tag step first (publishing "
                      "would make GitHub tag a commit without the manifest)")
    manifest, have = release_manifest(gh, release, parse_version(tag)[0])
    if tagged_manifest(tag) != manifest:
        raise Failure(f"the tag {tag} does not hold the manifest of the draft's assets: run the "
                      "manifest and tag steps first")
    sums = [f"{asset_name(t)}.sha256" for t in targets() if f"{asset_name(t)}.sha256" not in have]
    if sums:
        raise Failure(f"the draft lacks {', '.join(sums)}: run the manifest step first")
    latest = not pre and newest_stable(tags) == core
    gh.json("PATCH", f"/releases/{release['id']}", {
        "tag_name": tag,
        "draft": False,
        "prerelease": pre,
        "make_latest": "true" if latest else "false",
    })
    log(f"published {tag}" + (" (latest)" if latest else ""))


def cmd_major(args: list[str]) -> None:
    (tag,) = args
    _, core, pre = parse_version(tag)
    moving = major_tag(core)
    if pre:
        log(f"{tag} is a prerelease: {moving} stays where it is")
        return
    tags = remote_tags()
    if tag not in tags:
        raise Failure(f"the tag {tag} is not on {remote()}: run the tag step first")
    newest = newest_stable(tags, core[0])
    if newest is not None and newest > core:
        log(f"{moving} stays: v{'.'.join(map(str, newest))} is newer than {tag}")
        return
    commit = tags[tag]
    if tags.get(moving) == commit:
        log(f"{moving} already points at {tag} ({commit})")
        return
    git("fetch", "--no-tags", remote(), f"+refs/tags/{tag}:refs/tags/{tag}")
    git("push", "--quiet", "--force", remote(), f"{commit}:refs/tags/{moving}")
    log(f"moved {moving} from {tags.get(moving, '(none)')} to {tag} ({commit})")


COMMANDS = {
    "check": (cmd_check, "VERSION"),
    "package": (cmd_package, "TARGET BINARY OUTDIR"),
    "draft": (cmd_draft, "TAG ASSETS_DIR"),
    "manifest": (cmd_manifest, "TAG"),
    "tag": (cmd_tag, "TAG"),
    "publish": (cmd_publish, "TAG"),
    "major": (cmd_major, "TAG"),
}


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in COMMANDS:
        usage = "\n".join(f"  release.py {name} {spec[1]}" for name, spec in COMMANDS.items())
        print(f"usage:\n{usage}", file=sys.stderr)
        return 2
    run, spec = COMMANDS[argv[0]]
    if len(argv) - 1 != len(spec.split()):
        print(f"usage: release.py {argv[0]} {spec}", file=sys.stderr)
        return 2
    try:
        run(argv[1:])
    except Failure as e:
        print(f"::error title=release {argv[0]}::{e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
