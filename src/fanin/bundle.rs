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

/// Most bytes of a bundle's header (a worker's bundle holds one branch: a few lines).
pub const HEADER_LIMIT: usize = 1 << 20;

/// Read the header of a bundle file (v2 or v3); only its first [`HEADER_LIMIT`] bytes
/// are read.
pub fn read_header(path: &Path) -> Result<BundleHeader, String> {
    let head = crate::util::read_head(path, HEADER_LIMIT as u64)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    parse_header(&head)
}

/// The header at the start of a bundle's bytes (what follows it is not read).
pub fn parse_header(bytes: &[u8]) -> Result<BundleHeader, String> {
    let bytes = &bytes[..bytes.len().min(HEADER_LIMIT)];
    if bytes.is_empty() {
        return Err("empty file".into());
    }
    let mut lines = bytes.split(|b| *b == b'\n');
    let first = lines.next().unwrap_or_default();
    let first = String::from_utf8_lossy(first);
    if first != "# v2 git bundle" && first != "# v3 git bundle" {
        return Err(format!(
            "not a git bundle (starts with {:?})",
            shown(&first)
        ));
    }
    let mut header = BundleHeader {
        refs: Vec::new(),
        prerequisites: Vec::new(),
    };
    let mut rest = lines.peekable();
    while let Some(line) = rest.next() {
        if rest.peek().is_none() {
            break; // no newline after it: cut short
        }
        if line.is_empty() {
            return Ok(header);
        }
        let line = String::from_utf8_lossy(line).into_owned();
        if line.starts_with('@') {
            continue; // v3 capabilities
        }
        if let Some(rest) = line.strip_prefix('-') {
            let sha = rest.split_whitespace().next().unwrap_or("").to_owned();
            header.prerequisites.push(sha);
        } else {
            let (sha, name) = line
                .split_once(' ')
                .ok_or_else(|| format!("bad header line {:?}", shown(&line)))?;
            header.refs.push((sha.to_owned(), name.to_owned()));
        }
    }
    if bytes.len() == HEADER_LIMIT {
        Err(format!("header longer than {HEADER_LIMIT} bytes"))
    } else {
        Err("truncated header".into())
    }
}

/// At most 60 characters of `s`, for a message.
fn shown(s: &str) -> String {
    s.chars().take(60).collect()
}

/// Check that `header` holds exactly `refs/heads/<branch>` and needs nothing but
/// `base`. Returns the branch's commit.
pub fn check_header(header: &BundleHeader, branch: &str, base: &str) -> Result<String, String> {
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
            crate::util::head(base, 12),
            crate::util::head(other, 12)
        ));
    }
    Ok(tip)
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
    let tip = check_header(&read_header(bundle)?, branch, base)?;
    let want = format!("refs/heads/{branch}");
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

    #[test]
    fn only_a_bounded_header_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("b.bundle");
        // A first line of 2 MiB: refused from its first bytes, the message bounded.
        std::fs::write(&p, vec![b'x'; 2 << 20]).unwrap();
        let e = read_header(&p).unwrap_err();
        assert!(e.starts_with("not a git bundle (starts with \"xxx"), "{e}");
        assert!(e.len() < 100, "{e}");
        // A header that never ends within the limit.
        let mut long = b"# v3 git bundle\n".to_vec();
        while long.len() <= HEADER_LIMIT {
            long.extend_from_slice(b"@capability\n");
        }
        std::fs::write(&p, &long).unwrap();
        assert_eq!(
            read_header(&p).unwrap_err(),
            format!("header longer than {HEADER_LIMIT} bytes")
        );
    }

    #[test]
    fn checks_name_what_is_wrong_without_cutting_characters() {
        let header = |refs: &[&str], prereq: &[&str]| BundleHeader {
            refs: refs
                .iter()
                .map(|n| ("1111".to_owned(), (*n).to_owned()))
                .collect(),
            prerequisites: prereq.iter().map(|p| (*p).to_owned()).collect(),
        };
        let ok = header(&["refs/heads/b"], &["base"]);
        assert_eq!(check_header(&ok, "b", "base").unwrap(), "1111");
        let two = header(&["refs/heads/b", "refs/heads/main"], &[]);
        assert_eq!(
            check_header(&two, "b", "base").unwrap_err(),
            "the bundle must hold only refs/heads/b, it holds refs/heads/b, refs/heads/main"
        );
        // Found by fuzz/bundle_header: a prerequisite of multi-byte characters.
        let odd = header(&["refs/heads/b"], &[&"é".repeat(14)]);
        assert_eq!(
            check_header(&odd, "b", "0123456789abcdef").unwrap_err(),
            format!(
                "the bundle is not based on the plan's base commit 0123456789ab (it needs {})",
                "é".repeat(12)
            )
        );
    }
}
