//! The conflict map, and the integration branch.
//!
//! Before publishing, fanout looks at the successful branches together: which pairs
//! touch the same files (an *overlap*: they may still merge cleanly) and which truly
//! conflict (git's three-way merge of their trees, done in memory with
//! `git_merge_trees`, leaves conflicts). Nothing is checked out and no ref moves.
//!
//! Only pairs that share a file are merged, so the map costs one tree merge per
//! overlapping pair, not one per pair.
//!
//! [`integrate`] builds one branch from the base that merges the given branches one by
//! one, in the order given (fanout uses worker-id order); a branch that does not merge
//! cleanly onto what was integrated so far is left out, with the paths that conflict
//! and the workers it conflicts with, and the next one is tried.

use std::collections::BTreeSet;

use git2::{Commit, MergeOptions, Oid, Repository, Signature};

use crate::model::fanin::{ConflictMap, Integration, LeftOut, Overlap};
use crate::model::{Status, WorkerResult};

/// A successful branch to compare.
#[derive(Debug, Clone)]
pub struct Candidate {
    /// Worker id.
    pub worker_id: u32,
    /// Branch name.
    pub branch: String,
    /// The branch's commit.
    pub commit: Oid,
    /// Paths it changed against the base (the WorkerResult's `files_modified`).
    pub files: Vec<String>,
}

/// Paths in conflict after merging `theirs` into `ours` over `ancestor`.
fn merge_conflicts(
    repo: &Repository,
    ancestor: &git2::Tree<'_>,
    ours: &git2::Tree<'_>,
    theirs: &git2::Tree<'_>,
) -> Result<(git2::Index, Vec<String>), git2::Error> {
    let mut opts = MergeOptions::new();
    opts.find_renames(true);
    let index = repo.merge_trees(ancestor, ours, theirs, Some(&opts))?;
    let mut paths = BTreeSet::new();
    if index.has_conflicts() {
        for c in index.conflicts()? {
            let c = c?;
            for entry in [c.ancestor, c.our, c.their].into_iter().flatten() {
                paths.insert(String::from_utf8_lossy(&entry.path).into_owned());
            }
        }
    }
    Ok((index, paths.into_iter().collect()))
}

/// The conflict map of `candidates`, all branched from `base`.
pub fn conflict_map(
    repo: &Repository,
    base: Oid,
    candidates: &[Candidate],
) -> Result<ConflictMap, git2::Error> {
    let base_tree = repo.find_commit(base)?.tree()?;
    let mut sorted: Vec<&Candidate> = candidates.iter().collect();
    sorted.sort_by_key(|c| c.worker_id);
    let trees = sorted
        .iter()
        .map(|c| repo.find_commit(c.commit).and_then(|k| k.tree()))
        .collect::<Result<Vec<_>, _>>()?;
    let files: Vec<BTreeSet<&str>> = sorted
        .iter()
        .map(|c| c.files.iter().map(String::as_str).collect())
        .collect();
    let mut overlaps = Vec::new();
    for i in 0..sorted.len() {
        for j in i + 1..sorted.len() {
            let shared: Vec<String> = files[i]
                .intersection(&files[j])
                .map(|s| (*s).to_owned())
                .collect();
            if shared.is_empty() {
                continue;
            }
            let (_, conflicts) = merge_conflicts(repo, &base_tree, &trees[i], &trees[j])?;
            overlaps.push(Overlap {
                a: sorted[i].worker_id,
                b: sorted[j].worker_id,
                files: shared,
                conflicts,
            });
        }
    }
    Ok(ConflictMap {
        workers: sorted.iter().map(|c| c.worker_id).collect(),
        overlaps,
    })
}

/// Errors building the integration branch.
#[derive(Debug, thiserror::Error)]
pub enum IntegrateError {
    /// Nothing to integrate.
    #[error("no successful worker to integrate")]
    Empty,
    /// The branch exists and is not fanout's to move.
    #[error("branch {0} already exists and is not this run's integration branch; not moved")]
    BranchTaken(String),
    /// git failure.
    #[error("git: {}", .0.message())]
    Git(#[from] git2::Error),
}

/// Build `branch` from `base` by merging `candidates` in the order given. Each
/// included candidate becomes a merge commit (first parent: the integration so far,
/// second: the worker's commit), so every worker's own commits stay in the history.
///
/// `owned_prefix` is the namespace fanout owns for this run (`prefix/run-id/`): an
/// existing `branch` is only moved when it is inside it; otherwise nothing is touched.
pub fn integrate(
    repo: &Repository,
    base: Oid,
    candidates: &[Candidate],
    branch: &str,
    owned_prefix: &str,
    signature: &Signature<'_>,
) -> Result<Integration, IntegrateError> {
    if candidates.is_empty() {
        return Err(IntegrateError::Empty);
    }
    if repo.find_branch(branch, git2::BranchType::Local).is_ok()
        && !branch.starts_with(owned_prefix)
    {
        return Err(IntegrateError::BranchTaken(branch.to_owned()));
    }
    let base_commit = repo.find_commit(base)?;
    let base_tree = base_commit.tree()?;
    let mut head: Commit<'_> = base_commit;
    let mut included: Vec<(u32, BTreeSet<String>)> = Vec::new();
    let mut left_out = Vec::new();
    for c in candidates {
        let theirs = repo.find_commit(c.commit)?;
        let (mut index, conflicts) =
            merge_conflicts(repo, &base_tree, &head.tree()?, &theirs.tree()?)?;
        if !conflicts.is_empty() {
            let with: Vec<String> = included
                .iter()
                .filter(|(_, files)| conflicts.iter().any(|p| files.contains(p)))
                .map(|(id, _)| format!("#{id}"))
                .collect();
            let reason = if with.is_empty() {
                format!(
                    "conflicts with the integration so far in {}",
                    conflicts.join(", ")
                )
            } else {
                format!(
                    "conflicts with {} in {}",
                    with.join(", "),
                    conflicts.join(", ")
                )
            };
            left_out.push(LeftOut {
                worker_id: c.worker_id,
                branch: c.branch.clone(),
                reason,
                conflicts,
            });
            continue;
        }
        let tree = repo.find_tree(index.write_tree_to(repo)?)?;
        // (the namespace `<prefix>/<run-id>/` names the run; the trailers tell a later
        // publish this commit is the run's own)
        let run_id = owned_prefix
            .trim_end_matches('/')
            .rsplit('/')
            .next()
            .unwrap_or("");
        let message = format!(
            "fanout: integrate #{} ({})\n\nMerge {} into the integration branch.\n\nFanout-Run: {run_id}\nFanout-Integration: true\n",
            c.worker_id, c.branch, c.branch
        );
        let oid = repo.commit(
            None,
            signature,
            signature,
            &message,
            &tree,
            &[&head, &theirs],
        )?;
        head = repo.find_commit(oid)?;
        included.push((c.worker_id, c.files.iter().cloned().collect()));
    }
    repo.branch(branch, &head, true)?;
    Ok(Integration {
        branch: branch.to_owned(),
        commit: head.id().to_string(),
        order: "worker id".to_owned(),
        included: included.into_iter().map(|(id, _)| id).collect(),
        left_out,
        publish: None,
    })
}

/// The successful workers of `results` (winners only, when best-of-N selected) as
/// candidates, in worker-id order.
pub fn candidates(results: &[WorkerResult]) -> Vec<Candidate> {
    results
        .iter()
        .filter(|r| r.status == Status::Success && !r.files_modified.is_empty())
        .filter(|r| r.selection.as_ref().is_none_or(|s| s.winner))
        .filter_map(|r| {
            Some(Candidate {
                worker_id: r.worker_id,
                branch: r.branch.clone(),
                commit: r.commit.as_deref()?.parse().ok()?,
                files: r.files_modified.clone(),
            })
        })
        .collect()
}

/// The integration branch's name for a run: beside its workers' branches
/// (`prefix/run-id/integration`), and the namespace fanout owns for the run.
pub fn integration_branch(report: &crate::run::results::RunReport) -> Option<(String, String)> {
    let first = report.results.first()?;
    let (ns, _) = first.branch.rsplit_once('/')?;
    Some((format!("{ns}/integration"), format!("{ns}/")))
}

/// Build the integration branch of `report`'s successful workers (winners, under
/// best-of-N) into `report.integration`.
pub fn integrate_report(
    repo: &Repository,
    report: &mut crate::run::results::RunReport,
    identity: (&str, &str),
) -> Result<(), IntegrateError> {
    let (branch, owned) = integration_branch(report).ok_or(IntegrateError::Empty)?;
    let base: Oid = report
        .plan
        .base
        .commit
        .parse()
        .map_err(|_| IntegrateError::Empty)?;
    let sig = Signature::now(identity.0, identity.1)?;
    let it = integrate(
        repo,
        base,
        &candidates(&report.results),
        &branch,
        &owned,
        &sig,
    )?;
    report.integration = Some(it);
    Ok(())
}

/// The integration branch as a worker-shaped record, so publishing treats it like any
/// branch (worker id 0; its reason lists what was left out).
pub fn integration_result(report: &crate::run::results::RunReport) -> Option<WorkerResult> {
    let it = report.integration.as_ref()?;
    let mut files: Vec<String> = report
        .results
        .iter()
        .filter(|r| it.included.contains(&r.worker_id))
        .flat_map(|r| r.files_modified.iter().cloned())
        .collect();
    files.sort();
    files.dedup();
    let ids = |v: &[u32]| {
        v.iter()
            .map(|i| format!("#{i}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let left: Vec<String> = it
        .left_out
        .iter()
        .map(|l| format!("left out #{}: {}", l.worker_id, l.reason))
        .collect();
    let task = format!(
        "Integration of run {}: {}",
        report.run_id,
        ids(&it.included)
    );
    let cost = report
        .results
        .iter()
        .filter(|r| it.included.contains(&r.worker_id))
        .filter_map(|r| r.cost)
        .reduce(|a, b| a + b);
    let agent = &report.plan.agent.name;
    Some(WorkerResult {
        cost,
        files_modified: files,
        reason: (!left.is_empty()).then(|| left.join("; ").into()),
        commit: Some(it.commit.clone()),
        committed_by_fanout: true,
        publish: it.publish.clone(),
        ..WorkerResult::new(0, &it.branch, &task, agent, Status::Success)
    })
}

/// The conflict map of a run's successful workers, when there are two or more.
pub fn analyze(repo: &Repository, base: &str, results: &[WorkerResult]) -> Option<ConflictMap> {
    let c = candidates(results);
    if c.len() < 2 {
        return None;
    }
    conflict_map(repo, base.parse().ok()?, &c).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Repo {
        _dir: tempfile::TempDir,
        repo: Repository,
        base: Oid,
    }

    fn sig() -> Signature<'static> {
        Signature::new("t", "t@example.invalid", &git2::Time::new(1_700_000_000, 0)).unwrap()
    }

    impl Repo {
        fn new() -> Repo {
            let dir = tempfile::tempdir().unwrap();
            let repo = Repository::init(dir.path()).unwrap();
            let base = {
                let tree = Self::tree(
                    &repo,
                    None,
                    &[("a.txt", "1\n2\n3\n4\n5\n6\n7\n8\n"), ("b.txt", "b\n")],
                );
                repo.commit(
                    Some("HEAD"),
                    &sig(),
                    &sig(),
                    "base",
                    &repo.find_tree(tree).unwrap(),
                    &[],
                )
                .unwrap()
            };
            Repo {
                _dir: dir,
                repo,
                base,
            }
        }

        fn tree(repo: &Repository, parent: Option<Oid>, files: &[(&str, &str)]) -> Oid {
            let mut b = repo
                .treebuilder(parent.map(|t| repo.find_tree(t).unwrap()).as_ref())
                .unwrap();
            for (path, body) in files {
                let blob = repo.blob(body.as_bytes()).unwrap();
                b.insert(path, blob, 0o100644).unwrap();
            }
            b.write().unwrap()
        }

        /// A worker's branch: `files` changed on top of the base.
        fn worker(&self, id: u32, files: &[(&str, &str)]) -> Candidate {
            let base = self.repo.find_commit(self.base).unwrap();
            let tree = Self::tree(&self.repo, Some(base.tree_id()), files);
            let tree = self.repo.find_tree(tree).unwrap();
            let oid = self
                .repo
                .commit(None, &sig(), &sig(), &format!("w{id}"), &tree, &[&base])
                .unwrap();
            let branch = format!("fanout/r/w{id}");
            self.repo
                .branch(&branch, &self.repo.find_commit(oid).unwrap(), false)
                .unwrap();
            Candidate {
                worker_id: id,
                branch,
                commit: oid,
                files: files.iter().map(|(p, _)| (*p).to_owned()).collect(),
            }
        }
    }

    #[test]
    fn overlaps_and_true_conflicts_are_told_apart() {
        let r = Repo::new();
        // 1 and 2 edit the same line of a.txt: conflict. 3 edits another line of
        // a.txt: overlaps with both, merges cleanly. 4 touches only its own file.
        let w1 = r.worker(1, &[("a.txt", "ONE\n2\n3\n4\n5\n6\n7\n8\n")]);
        let w2 = r.worker(2, &[("a.txt", "uno\n2\n3\n4\n5\n6\n7\n8\n")]);
        let w3 = r.worker(3, &[("a.txt", "1\n2\n3\n4\n5\n6\n7\nEIGHT\n")]);
        let w4 = r.worker(4, &[("c.txt", "new\n")]);
        let map = conflict_map(&r.repo, r.base, &[w4, w3, w2, w1]).unwrap();
        assert_eq!(map.workers, [1, 2, 3, 4]);
        let got: Vec<(u32, u32, bool)> = map
            .overlaps
            .iter()
            .map(|o| (o.a, o.b, o.conflicting()))
            .collect();
        assert_eq!(got, [(1, 2, true), (1, 3, false), (2, 3, false)]);
        assert_eq!(map.overlaps[0].conflicts, ["a.txt"]);
        assert_eq!(map.overlaps[1].files, ["a.txt"]);
        assert_eq!(map.conflicts().count(), 1);
        // Nothing moved: HEAD and the branches are where they were.
        assert_eq!(r.repo.head().unwrap().target(), Some(r.base));
    }

    #[test]
    fn integration_merges_what_merges_and_names_what_it_left_out() {
        let r = Repo::new();
        let w1 = r.worker(1, &[("a.txt", "ONE\n2\n3\n4\n5\n6\n7\n8\n")]);
        let w2 = r.worker(2, &[("a.txt", "uno\n2\n3\n4\n5\n6\n7\n8\n")]);
        let w3 = r.worker(3, &[("a.txt", "1\n2\n3\n4\n5\n6\n7\nEIGHT\n")]);
        let w4 = r.worker(4, &[("c.txt", "new\n")]);
        let it = integrate(
            &r.repo,
            r.base,
            &[w1.clone(), w2, w3.clone(), w4.clone()],
            "fanout/r/integration",
            "fanout/r/",
            &sig(),
        )
        .unwrap();
        assert_eq!(it.included, [1, 3, 4]);
        assert_eq!(it.left_out.len(), 1);
        assert_eq!(it.left_out[0].worker_id, 2);
        assert_eq!(it.left_out[0].reason, "conflicts with #1 in a.txt");
        // The branch holds every included change, and each worker's commit is an ancestor.
        let head = r
            .repo
            .find_branch("fanout/r/integration", git2::BranchType::Local)
            .unwrap()
            .get()
            .peel_to_commit()
            .unwrap();
        assert_eq!(head.id().to_string(), it.commit);
        let tree = head.tree().unwrap();
        let read = |p: &str| {
            let blob = tree
                .get_path(std::path::Path::new(p))
                .unwrap()
                .to_object(&r.repo)
                .unwrap();
            String::from_utf8(blob.as_blob().unwrap().content().to_vec()).unwrap()
        };
        assert_eq!(read("a.txt"), "ONE\n2\n3\n4\n5\n6\n7\nEIGHT\n");
        assert_eq!(read("c.txt"), "new\n");
        for c in [&w1, &w3, &w4] {
            assert!(r.repo.graph_descendant_of(head.id(), c.commit).unwrap());
        }
        // Re-running moves this run's own integration branch.
        let again = integrate(
            &r.repo,
            r.base,
            &[w4],
            "fanout/r/integration",
            "fanout/r/",
            &sig(),
        )
        .unwrap();
        assert_eq!(again.included, [4]);
        // A branch outside the run's namespace is never moved.
        r.repo
            .branch("integration", &r.repo.find_commit(r.base).unwrap(), false)
            .unwrap();
        let e = integrate(&r.repo, r.base, &[w1], "integration", "fanout/r/", &sig()).unwrap_err();
        assert!(matches!(e, IntegrateError::BranchTaken(_)), "{e}");
        assert_eq!(
            r.repo
                .find_branch("integration", git2::BranchType::Local)
                .unwrap()
                .get()
                .target(),
            Some(r.base)
        );
    }
}
