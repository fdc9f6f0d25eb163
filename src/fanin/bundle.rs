//! Git bundles carry a worker's branch from its matrix job to the aggregate job.
//! libgit2 cannot write or read bundles, so the `git` CLI (on every runner, run
//! through the hardened [`crate::git::Git`]) makes and fetches them; fanout itself parses and checks the header before trusting one:
//! exactly the expected branch, and nothing but the plan's base commit as prerequisite.

use std::path::Path;

/// A bundle's header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BundleHeader {
    /// `(commit, ref name)` the bundle contains.
    pub refs: Vec<(String, String)>,
    /// Commits the receiver must already have.
    pub prerequisites: Vec<String>,
}

/// Read the header of a bundle file (v2 or v3).
pub fn read_header(path: &Path) -> Result<BundleHeader, String> {
    use std::io::{BufRead, BufReader};
    let f = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut lines = BufReader::new(f).split(b'\n');
    let first = lines.next().and_then(Result::ok).ok_or("empty file")?;
    let first = String::from_utf8_lossy(&first);
    if first != "# v2 git bundle" && first != "# v3 git bundle" {
        return Err(format!("not a git bundle (starts with {first:?})"));
    }
    let mut header = BundleHeader {
        refs: Vec::new(),
        prerequisites: Vec::new(),
    };
    for line in lines {
        let line = line.map_err(|e| e.to_string())?;
        if line.is_empty() {
            return Ok(header);
        }
        let line = String::from_utf8_lossy(&line).into_owned();
        if line.starts_with('@') {
            continue; // v3 capabilities
        }
        if let Some(rest) = line.strip_prefix('-') {
            let sha = rest.split_whitespace().next().unwrap_or("").to_owned();
            header.prerequisites.push(sha);
        } else {
            let (sha, name) = line
                .split_once(' ')
                .ok_or_else(|| format!("bad header line {line:?}"))?;
            header.refs.push((sha.to_owned(), name.to_owned()));
        }
    }
    Err("truncated header".into())
}

fn git(dir: &Path, args: &[&str]) -> Result<String, String> {
    crate::git::Git::new(dir)
        .args(args)
        .output()
        .map_err(|e| e.to_string())
}

/// Bundle `branch` (its commits since `base`) from the repository at `repo` into `out`.
pub fn create(repo: &Path, branch: &str, base: &str, out: &Path) -> Result<(), String> {
    let out_s = out.display().to_string();
    git(
        repo,
        &[
            "bundle",
            "create",
            "-q",
            &out_s,
            &format!("refs/heads/{branch}"),
            &format!("^{base}"),
        ],
    )
    .map(|_| ())
}

/// Check `bundle` holds exactly `refs/heads/<branch>` and needs nothing but `base`,
/// then fetch the branch into `repo`. Returns the branch's commit.
pub fn import(repo: &Path, bundle: &Path, branch: &str, base: &str) -> Result<String, String> {
    let header = read_header(bundle)?;
    let want = format!("refs/heads/{branch}");
    let tip = match header.refs.as_slice() {
        [(sha, name)] if *name == want => sha.clone(),
        refs => {
            let names: Vec<&str> = refs.iter().map(|(_, n)| n.as_str()).collect();
            return Err(format!(
                "the bundle must hold only {want}, it holds {}",
                if names.is_empty() {
                    "nothing".to_owned()
                } else {
                    names.join(", ")
                }
            ));
        }
    };
    if let Some(other) = header.prerequisites.iter().find(|p| p.as_str() != base) {
        return Err(format!(
            "the bundle is not based on the plan's base commit {} (it needs {})",
            &base[..base.len().min(12)],
            &other[..other.len().min(12)]
        ));
    }
    let bundle_s = bundle.display().to_string();
    git(repo, &["bundle", "verify", "-q", &bundle_s])?;
    git(
        repo,
        &[
            "fetch",
            "-q",
            "--no-tags",
            &bundle_s,
            &format!("{want}:{want}"),
        ],
    )?;
    // The branch must descend from the base (a bundle without prerequisites could
    // carry an unrelated history).
    git(repo, &["merge-base", "--is-ancestor", base, &tip])
        .map_err(|_| format!("{want} does not descend from the plan's base commit"))?;
    Ok(tip)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_are_parsed_and_garbage_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("b.bundle");
        std::fs::write(
            &p,
            "# v2 git bundle\n-aaaa base commit\nbbbb refs/heads/x\n\nPACK....",
        )
        .unwrap();
        assert_eq!(
            read_header(&p).unwrap(),
            BundleHeader {
                refs: vec![("bbbb".into(), "refs/heads/x".into())],
                prerequisites: vec!["aaaa".into()],
            }
        );
        std::fs::write(&p, "hello").unwrap();
        assert!(read_header(&p).unwrap_err().starts_with("not a git bundle"));
        std::fs::write(&p, "# v2 git bundle\nbbbb refs/heads/x\n").unwrap();
        assert_eq!(read_header(&p).unwrap_err(), "truncated header");
    }
}
