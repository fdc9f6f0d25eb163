//! The rules behind [`super::Git`]: the environment a git command gets, the options it
//! always gets, and the overrides for what a repository's configuration names
//! ([`neutralise`]). Pure functions over configuration entries, so that each rule is
//! tested without a repository.

use std::collections::BTreeSet;
use std::ffi::OsString;

/// Options every git command fanout runs gets (`-c key=value`, in this order): no
/// hooks, no fsmonitor, no credential helper or askpass, no `ext::` transport, no
/// signing, no templates (their hooks) in repositories git creates, no automatic
/// maintenance left running, bare repositories only when named.
pub const FIXED: &[(&str, &str)] = &[
    ("core.hooksPath", "/dev/null"),
    ("core.fsmonitor", "false"),
    ("credential.helper", ""),
    ("core.askPass", ""),
    ("http.extraHeader", ""),
    ("protocol.ext.allow", "never"),
    ("init.templateDir", ""),
    ("commit.gpgSign", "false"),
    ("tag.gpgSign", "false"),
    ("push.gpgSign", "false"),
    ("log.showSignature", "false"),
    ("merge.verifySignatures", "false"),
    ("gc.auto", "0"),
    ("maintenance.auto", "false"),
    ("safe.bareRepository", "explicit"),
];

/// Variables every git command gets, whatever fanout's environment says.
pub const FIXED_ENV: &[(&str, &str)] = &[
    ("GIT_CONFIG_NOSYSTEM", "1"),
    ("GIT_TERMINAL_PROMPT", "0"),
    ("GIT_NO_REPLACE_OBJECTS", "1"),
    ("GIT_EDITOR", ":"),
    ("GIT_SEQUENCE_EDITOR", ":"),
    ("GIT_PAGER", "cat"),
];

/// `GIT_*` variables of fanout's environment that a git command keeps: identity and
/// dates, the user's global config file, ssh and TLS settings, discovery limits, LFS's
/// own switches. Every other `GIT_*` variable (repository pointers, `GIT_ASKPASS`,
/// `GIT_EXTERNAL_DIFF`, `GIT_CONFIG_PARAMETERS`, templates, …) is dropped;
/// `GIT_CONFIG_COUNT`/`_KEY_n`/`_VALUE_n` become options, less credentials.
const KEPT_GIT_VARS: &[&str] = &[
    "GIT_AUTHOR_NAME",
    "GIT_AUTHOR_EMAIL",
    "GIT_AUTHOR_DATE",
    "GIT_COMMITTER_NAME",
    "GIT_COMMITTER_EMAIL",
    "GIT_COMMITTER_DATE",
    "GIT_CONFIG_GLOBAL",
    "GIT_SSH",
    "GIT_SSH_COMMAND",
    "GIT_SSH_VARIANT",
    "GIT_SSL_CAINFO",
    "GIT_SSL_CAPATH",
    "GIT_SSL_NO_VERIFY",
    "GIT_HTTP_USER_AGENT",
    "GIT_HTTP_LOW_SPEED_LIMIT",
    "GIT_HTTP_LOW_SPEED_TIME",
    "GIT_CEILING_DIRECTORIES",
    "GIT_DISCOVERY_ACROSS_FILESYSTEM",
    "GIT_EXEC_PATH",
    "GIT_DEFAULT_HASH",
];

/// Whether fanout's variable `name` reaches a git command (before [`FIXED_ENV`] is
/// added): never a credential ([`crate::secret::is_credential`]) nor a model
/// provider's ([`crate::secret::is_model_credential`]), never an askpass
/// program, and of the `GIT_*` variables only those in the kept list (and `GIT_LFS_*`).
pub fn keeps_var(name: &str) -> bool {
    if crate::secret::is_credential(name)
        || crate::secret::is_model_credential(name)
        || name.starts_with("SSH_ASKPASS")
    {
        return false;
    }
    match name.strip_prefix("GIT_") {
        Some(rest) => KEPT_GIT_VARS.contains(&name) || rest.starts_with("LFS_"),
        None => true,
    }
}

/// The environment of a git command: `parent` filtered by [`keeps_var`], plus
/// [`FIXED_ENV`].
pub fn env(parent: &[(OsString, OsString)]) -> Vec<(OsString, OsString)> {
    let mut env: std::collections::BTreeMap<OsString, OsString> = parent
        .iter()
        .filter(|(k, _)| k.to_str().is_some_and(keeps_var))
        .cloned()
        .collect();
    for (k, v) in FIXED_ENV {
        env.insert((*k).into(), (*v).into());
    }
    env.into_iter().collect()
}

/// Where a configuration entry comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The user's own: global config and fanout's command line / environment. An agent
    /// in the sandbox cannot write it (git itself calls these "protected").
    Protected,
    /// The repository's (`.git/config`, `config.worktree`, a submodule's config, an
    /// included file): an agent may have written it.
    Repository,
}

impl Scope {
    /// The scope named by `git config --show-scope`.
    pub fn from_git(name: &str) -> Scope {
        match name {
            "global" | "system" | "command" => Scope::Protected,
            _ => Scope::Repository,
        }
    }
}

/// One configuration entry as git sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Where it comes from.
    pub scope: Scope,
    /// `section.subsection.variable` as git prints it (section and variable lower case).
    pub key: String,
    /// The value (`true` for a bare key).
    pub value: String,
}

impl Entry {
    /// `(section, subsection, variable)`, as git compares them: section and variable
    /// lower-cased (git ignores their case), the subsection as it is (git does not);
    /// the subsection may contain dots.
    fn parts(&self) -> (String, Option<&str>, String) {
        parts(&self.key)
    }
}

/// [`Entry::parts`] of `key`.
fn parts(key: &str) -> (String, Option<&str>, String) {
    let (section, rest) = key.split_once('.').unwrap_or((key, ""));
    let (sub, var) = match rest.rsplit_once('.') {
        Some((sub, var)) => (Some(sub), var),
        None => (None, rest),
    };
    (section.to_ascii_lowercase(), sub, var.to_ascii_lowercase())
}

/// Whether `a` and `b` name the same variable as git reads them: section and variable
/// name case-insensitive, the subsection (`filter.<driver>.clean`) case-sensitive —
/// `filter.lfS.clean` is another driver than `filter.lfs.clean`.
fn same_key(a: &str, b: &str) -> bool {
    parts(a) == parts(b)
}

/// `key` spelled so that two spellings of one variable compare equal (see [`same_key`]).
fn canonical_key(key: &str) -> String {
    match parts(key) {
        (section, Some(sub), var) => format!("{section}.{sub}.{var}"),
        (section, None, var) => format!("{section}.{var}"),
    }
}

/// Parse `git config --list -z` output: `key\nvalue\0` records, each preceded by
/// `scope\0` when `scoped` (`--show-scope`); unscoped records get `default`.
pub fn parse_list(out: &[u8], scoped: bool, default: Scope) -> Vec<Entry> {
    let mut fields = out.split(|b| *b == 0).filter(|f| !f.is_empty());
    let mut entries = Vec::new();
    loop {
        let scope = if scoped {
            match fields.next() {
                Some(s) => Scope::from_git(&String::from_utf8_lossy(s)),
                None => break,
            }
        } else {
            default
        };
        let Some(record) = fields.next() else { break };
        let record = String::from_utf8_lossy(record);
        let (key, value) = record.split_once('\n').unwrap_or((&record, "true"));
        entries.push(Entry {
            scope,
            key: key.to_owned(),
            value: value.to_owned(),
        });
    }
    entries
}

/// What the caller vouches for: `(key, value)` pairs passed last, so they hold.
pub type Trusted = [(String, String)];

/// The `-c` overrides for `entries` (the configuration the command would read), in
/// order, or why git must not run at all:
/// - every filter driver: `clean`, `smudge`, `process` empty and `required` false (a
///   driver `trusted` names: its other `clean`/`smudge` empty, another `process` refused);
/// - a diff driver's `textconv` becomes `cat` (the file as it is), its `command`, and
///   `diff.external`, empty (git then fails instead of running it: pass
///   `--no-ext-diff`); a merge driver's `driver` empty (git reports a conflict);
/// - `submodule.<name>.update`: a `!command` becomes `checkout`; every other value is
///   pinned as it is now (`submodules` names the `.gitmodules` entries, pinned to
///   their own update mode, so a `!command` added to the config later never counts);
/// - URL-scoped credential helpers and extra headers: reset (empty);
/// - config hooks (`hook.<name>.command`): empty;
/// - `core.sshCommand` set by the repository: the user's own (protected) value, else `ssh`;
/// - `core.alternateRefsCommand`: empty;
/// - `remote.<name>.uploadpack`/`receivepack` and `core.gitProxy` set by the repository
///   (git reads the first of these, so no later option overrides them): refused;
/// - Git LFS's programs set by the repository (`lfs.extension.<name>.clean`/`smudge`,
///   `lfs.customtransfer.<name>.path`/`args`, `lfs.standalonetransferagent`): git-lfs
///   reads them itself, under the user's trusted `filter.lfs` driver: refused.
///
/// Entries in `trusted` are neither overridden nor refused (the caller appends them).
pub fn neutralise(
    entries: &[Entry],
    submodules: &[Entry],
    trusted: &Trusted,
) -> Result<Vec<(String, String)>, String> {
    let is_trusted = |key: &str, value: Option<&str>| {
        trusted
            .iter()
            .any(|(k, v)| same_key(k, key) && value.is_none_or(|value| value == v.as_str()))
    };
    let mut out: Vec<(String, String)> = Vec::new();
    let mut seen = BTreeSet::new();
    let mut put = |out: &mut Vec<(String, String)>, key: String, value: &str| {
        if seen.insert(canonical_key(&key)) && !is_trusted(&key, None) {
            out.push((key, value.to_owned()));
        }
    };
    let protected_ssh = entries
        .iter()
        .rev()
        .find(|e| e.scope == Scope::Protected && e.key == "core.sshcommand")
        .map(|e| e.value.clone());
    for e in entries {
        let (section, sub, var) = e.parts();
        let untrusted = e.scope == Scope::Repository && !is_trusted(&e.key, Some(&e.value));
        match (section.as_str(), sub, var.as_str()) {
            ("filter", Some(d), _) if !trusts_driver(trusted, d) => {
                for (v, value) in [
                    ("clean", ""),
                    ("smudge", ""),
                    ("process", ""),
                    ("required", "false"),
                ] {
                    put(&mut out, key("filter", d, v)?, value);
                }
            }
            // A driver the caller trusts: what it does not vouch for is turned off
            // one key at a time (an empty `process` would turn the whole driver off).
            ("filter", Some(d), "process") if !is_trusted(&e.key, Some(&e.value)) => {
                return Err(format!(
                    "the repository's configuration sets filter.{d}.process, which differs from \
                     the run's start; fanout runs no git command with it"
                ));
            }
            ("filter", Some(d), v @ ("clean" | "smudge")) => {
                put(&mut out, key("filter", d, v)?, "")
            }
            ("diff", Some(d), "textconv") => put(&mut out, key("diff", d, "textconv")?, "cat"),
            ("diff", Some(d), "command") => put(&mut out, key("diff", d, "command")?, ""),
            ("diff", None, "external") => put(&mut out, "diff.external".into(), ""),
            ("merge", Some(d), "driver") => put(&mut out, key("merge", d, "driver")?, ""),
            ("hook", Some(d), "command") => put(&mut out, key("hook", d, "command")?, ""),
            ("credential", Some(u), "helper") => put(&mut out, key("credential", u, "helper")?, ""),
            ("http", Some(u), "extraheader") => put(&mut out, key("http", u, "extraheader")?, ""),
            ("core", None, "alternaterefscommand") => {
                put(&mut out, "core.alternateRefsCommand".into(), "")
            }
            ("core", None, "sshcommand") if untrusted => {
                let ssh = protected_ssh.as_deref().unwrap_or("ssh");
                put(&mut out, "core.sshCommand".into(), ssh);
            }
            ("remote", Some(r), "uploadpack" | "receivepack") if untrusted => {
                return Err(format!(
                    "the repository's configuration sets remote.{r}.{var}, a program git would run; \
                     fanout runs no git command with it (remove it with `git config --unset remote.{r}.{var}`)"
                ));
            }
            _ if untrusted && trusts_driver(trusted, "lfs") && lfs_program(&e.key) => {
                return Err(format!(
                    "the repository's configuration sets {}, a program Git LFS would run; \
                     fanout runs no git command with it (remove it with `git config --unset {}`, \
                     or set it in your global configuration)",
                    e.key, e.key
                ));
            }
            ("core", None, "gitproxy") if untrusted => {
                return Err(
                    "the repository's configuration sets core.gitProxy, a program git would run; \
                     fanout runs no git command with it (remove it with `git config --unset-all core.gitProxy`)"
                        .into(),
                );
            }
            _ => {}
        }
    }
    pin_submodules(entries, submodules, &mut |k, v| put(&mut out, k, v))?;
    Ok(out)
}

/// Whether configuration key `key` names a program Git LFS runs (or its arguments),
/// as git-lfs reads keys: lower-cased whole, and custom transfer agents found by an
/// unanchored match (`lfs.customtransfer.<name>.path` anywhere in the key).
fn lfs_program(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    let ends = |tails: &[&str]| tails.iter().any(|t| k.ends_with(t));
    (k.contains("lfs.customtransfer.") && ends(&[".path", ".args"]))
        || (k.contains("lfs.extension.") && ends(&[".clean", ".smudge"]))
        || (k.starts_with("lfs.") && k.ends_with(".standalonetransferagent"))
}

/// Whether `trusted` names any key of filter driver `driver`.
fn trusts_driver(trusted: &Trusted, driver: &str) -> bool {
    trusted
        .iter()
        .any(|(k, _)| matches!(parts(k), (section, Some(sub), _) if section == "filter" && sub == driver))
}

/// `submodule.<name>.update` for every submodule named in the configuration or in
/// `.gitmodules`: the configured mode, the `.gitmodules` one, else `checkout`; a
/// `!command` is never kept.
fn pin_submodules(
    entries: &[Entry],
    gitmodules: &[Entry],
    put: &mut dyn FnMut(String, &str),
) -> Result<(), String> {
    const MODES: &[&str] = &["checkout", "rebase", "merge", "none"];
    let mut names: Vec<&str> = Vec::new();
    for e in entries.iter().chain(gitmodules) {
        if let (section, Some(name), _) = parts(&e.key)
            && section == "submodule"
            && !names.contains(&name)
        {
            names.push(name);
        }
    }
    let update = |list: &[Entry], name: &str| {
        list.iter()
            .rev()
            .find(|e| parts(&e.key) == ("submodule".into(), Some(name), "update".into()))
            .map(|e| e.value.trim().to_owned())
    };
    for name in names {
        let configured = update(entries, name);
        let mode = match configured.as_deref() {
            Some(m) if MODES.contains(&m) => m.to_owned(),
            Some(_) => "checkout".to_owned(),
            None => update(gitmodules, name)
                .filter(|m| MODES.contains(&m.as_str()))
                .unwrap_or_else(|| "checkout".into()),
        };
        match key("submodule", name, "update") {
            Ok(k) => put(k, &mode),
            // A name git's `-c` cannot express: only a problem when it runs a program.
            Err(e) if configured.is_some_and(|m| m.starts_with('!')) => return Err(e),
            Err(_) => {}
        }
    }
    Ok(())
}

/// `section.sub.var`, or why `-c` cannot override it (a subsection holding `=`, which
/// `git -c` would split at).
fn key(section: &str, sub: &str, var: &str) -> Result<String, String> {
    if sub.contains('=') {
        return Err(format!(
            "the repository's configuration has {section}.{sub}.{var}, which fanout cannot \
             override (a name with '='); fanout runs no git command with it"
        ));
    }
    Ok(format!("{section}.{sub}.{var}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo(key: &str, value: &str) -> Entry {
        Entry {
            scope: Scope::Repository,
            key: key.into(),
            value: value.into(),
        }
    }

    fn pairs(v: &[(String, String)]) -> Vec<String> {
        v.iter().map(|(k, v)| format!("{k}={v}")).collect()
    }

    #[test]
    fn list_output_is_parsed_with_and_without_scopes() {
        let out = b"global\0user.name\nMe\0local\0core.bare\nfalse\0local\0filter.a.b.clean\nx\ny\0command\0flag\0";
        let e = parse_list(out, true, Scope::Repository);
        assert_eq!(e.len(), 4);
        assert_eq!(e[0].scope, Scope::Protected);
        assert_eq!(e[2].key, "filter.a.b.clean");
        assert_eq!(e[2].value, "x\ny");
        assert_eq!(e[2].parts(), ("filter".into(), Some("a.b"), "clean".into()));
        assert_eq!((e[3].key.as_str(), e[3].value.as_str()), ("flag", "true"));
        let e = parse_list(b"submodule.lib.update\nnone\0", false, Scope::Repository);
        assert_eq!(e, [repo("submodule.lib.update", "none")]);
        assert!(parse_list(b"", true, Scope::Repository).is_empty());
    }

    #[test]
    fn drivers_helpers_and_commands_are_overridden() {
        let entries = [
            repo("filter.evil.clean", "plant"),
            repo("filter.evil.smudge", "plant"),
            repo("filter.lfs.process", "git-lfs filter-process"),
            repo("diff.evil.textconv", "plant"),
            repo("diff.evil.command", "plant"),
            repo("diff.py.xfuncname", "^def"),
            repo("diff.external", "plant"),
            repo("merge.evil.driver", "plant %A"),
            repo("hook.pre-commit.command", "plant"),
            repo("credential.https://example.com.helper", "!plant"),
            repo("http.https://github.com/.extraheader", "AUTHORIZATION: x"),
            repo("core.alternaterefscommand", "plant"),
        ];
        let got = pairs(&neutralise(&entries, &[], &[]).unwrap());
        assert_eq!(
            got,
            [
                "filter.evil.clean=",
                "filter.evil.smudge=",
                "filter.evil.process=",
                "filter.evil.required=false",
                "filter.lfs.clean=",
                "filter.lfs.smudge=",
                "filter.lfs.process=",
                "filter.lfs.required=false",
                "diff.evil.textconv=cat",
                "diff.evil.command=",
                "diff.external=",
                "merge.evil.driver=",
                "hook.pre-commit.command=",
                "credential.https://example.com.helper=",
                "http.https://github.com/.extraheader=",
                "core.alternateRefsCommand=",
            ]
        );
    }

    #[test]
    fn trusted_entries_are_left_to_the_caller() {
        let entries = [
            repo("filter.lfs.process", "git-lfs filter-process"),
            repo("filter.lfs.required", "true"),
        ];
        let trusted = [
            (
                "filter.lfs.process".to_owned(),
                "git-lfs filter-process".to_owned(),
            ),
            ("filter.lfs.required".to_owned(), "true".to_owned()),
        ];
        assert_eq!(neutralise(&entries, &[], &trusted).unwrap(), []);
        // the caller trusts clean only: an agent's smudge is emptied, its process refused
        let trusted = [("filter.up.clean".to_owned(), "tr a-z A-Z".to_owned())];
        let entries = [
            repo("filter.up.clean", "tr a-z A-Z"),
            repo("filter.up.smudge", "plant"),
        ];
        let got = pairs(&neutralise(&entries, &[], &trusted).unwrap());
        assert_eq!(got, ["filter.up.smudge="]);
        let entries = [repo("filter.up.process", "plant")];
        let err = neutralise(&entries, &[], &trusted).unwrap_err();
        assert!(err.contains("filter.up.process"), "{err}");
    }

    #[test]
    fn a_driver_whose_name_differs_in_case_is_another_driver() {
        // Found by the git_config fuzzer: git compares subsections case-sensitively, so
        // `filter.lfS` is not the trusted `filter.lfs`, even with the same command.
        let trusted = [(
            "filter.lfs.clean".to_owned(),
            "git-lfs clean -- %f".to_owned(),
        )];
        let entries = [
            repo("filter.lfs.clean", "git-lfs clean -- %f"),
            repo("filter.lfS.clean", "git-lfs clean -- %f"),
        ];
        let got = pairs(&neutralise(&entries, &[], &trusted).unwrap());
        assert_eq!(
            got,
            [
                "filter.lfS.clean=",
                "filter.lfS.smudge=",
                "filter.lfS.process=",
                "filter.lfS.required=false",
            ]
        );
        // section and variable names are case-insensitive: still the trusted driver
        let entries = [repo("FILTER.lfs.Clean", "git-lfs clean -- %f")];
        assert_eq!(neutralise(&entries, &[], &trusted).unwrap(), []);
    }

    #[test]
    fn submodule_updates_are_pinned_and_commands_dropped() {
        let config = [
            repo("submodule.vendor/lib.url", "/x"),
            repo("submodule.vendor/lib.update", "!plant"),
            repo("submodule.keep.update", "rebase"),
        ];
        let gitmodules = [
            repo("submodule.vendor/lib.path", "vendor/lib"),
            repo("submodule.other.path", "other"),
            repo("submodule.other.update", "merge"),
            repo("submodule.odd.update", "!nope"),
        ];
        let got = pairs(&neutralise(&config, &gitmodules, &[]).unwrap());
        assert_eq!(
            got,
            [
                "submodule.vendor/lib.update=checkout",
                "submodule.keep.update=rebase",
                "submodule.other.update=merge",
                "submodule.odd.update=checkout",
            ]
        );
    }

    #[test]
    fn first_wins_programs_are_refused_only_from_the_repository() {
        let err = neutralise(&[repo("remote.origin.uploadpack", "plant")], &[], &[]).unwrap_err();
        assert!(err.contains("remote.origin.uploadpack"), "{err}");
        assert!(neutralise(&[repo("core.gitproxy", "plant")], &[], &[]).is_err());
        let users = Entry {
            scope: Scope::Protected,
            ..repo("remote.origin.uploadpack", "/opt/git/bin/git-upload-pack")
        };
        assert_eq!(neutralise(&[users], &[], &[]).unwrap(), []);
        let trusted = [("remote.origin.uploadpack".to_owned(), "plant".to_owned())];
        assert!(neutralise(&[repo("remote.origin.uploadpack", "plant")], &[], &trusted).is_ok());
        let eq = neutralise(&[repo("filter.a=b.clean", "plant")], &[], &[]).unwrap_err();
        assert!(eq.contains("filter.a=b.clean"), "{eq}");
        // Git LFS's programs, where the user's own LFS driver runs (git-lfs reads
        // them itself): refused from the repository, however the key is spelt.
        let lfs = [(
            "filter.lfs.process".to_owned(),
            "git-lfs filter-process".to_owned(),
        )];
        for key in [
            "lfs.extension.x.clean",
            "lfs.Extension.x.smudge",
            "lfs.customtransfer.y.path",
            "lfs.customtransfer.y.args",
            "foo.lfs.customtransfer.y.path",
            "lfs.standalonetransferagent",
            "lfs.https://h/.standalonetransferagent",
        ] {
            let err = neutralise(&[repo(key, "plant")], &[], &lfs).unwrap_err();
            assert!(err.contains(key) && err.contains("Git LFS"), "{err}");
            let users = Entry {
                scope: Scope::Protected,
                ..repo(key, "/usr/bin/lfs-thing")
            };
            assert!(neutralise(&[users], &[], &lfs).is_ok(), "{key}");
            // Without the user's LFS driver nothing runs them: left alone.
            assert!(neutralise(&[repo(key, "plant")], &[], &[]).is_ok(), "{key}");
        }
        assert!(neutralise(&[repo("lfs.url", "https://lfs.example")], &[], &lfs).is_ok());
    }

    #[test]
    fn a_planted_ssh_command_becomes_the_users_own() {
        let planted = repo("core.sshcommand", "plant");
        assert_eq!(
            pairs(&neutralise(std::slice::from_ref(&planted), &[], &[]).unwrap()),
            ["core.sshCommand=ssh"]
        );
        let users = Entry {
            scope: Scope::Protected,
            ..repo("core.sshcommand", "ssh -i ~/.ssh/work")
        };
        assert_eq!(
            pairs(&neutralise(&[users.clone(), planted], &[], &[]).unwrap()),
            ["core.sshCommand=ssh -i ~/.ssh/work"]
        );
        assert_eq!(neutralise(&[users], &[], &[]).unwrap(), []);
    }

    #[test]
    fn environment_keeps_no_credential_and_no_repository_pointer() {
        let parent: Vec<(OsString, OsString)> = [
            ("PATH", "/bin"),
            ("HOME", "/home/u"),
            ("GITHUB_TOKEN", "ghs_x"),
            ("GH_TOKEN", "gho_x"),
            ("ACTIONS_ID_TOKEN_REQUEST_TOKEN", "t"),
            ("GIT_DIR", "/elsewhere"),
            ("GIT_ASKPASS", "/plant"),
            ("SSH_ASKPASS", "/plant"),
            ("GIT_EXTERNAL_DIFF", "/plant"),
            ("GIT_CONFIG_PARAMETERS", "'core.fsmonitor'='/plant'"),
            ("GIT_CONFIG_COUNT", "1"),
            ("GIT_CONFIG_KEY_0", "protocol.file.allow"),
            ("GIT_CONFIG_VALUE_0", "always"),
            ("GIT_TERMINAL_PROMPT", "1"),
            ("GIT_CONFIG_GLOBAL", "/dev/null"),
            ("GIT_AUTHOR_NAME", "Me"),
            ("GIT_SSH_COMMAND", "ssh -i k"),
            ("GIT_LFS_SKIP_SMUDGE", "1"),
            ("SSH_AUTH_SOCK", "/run/agent"),
        ]
        .iter()
        .map(|(k, v)| (OsString::from(k), OsString::from(v)))
        .collect();
        let env = env(&parent);
        let names: Vec<String> = env
            .iter()
            .map(|(k, v)| format!("{}={}", k.to_string_lossy(), v.to_string_lossy()))
            .collect();
        assert_eq!(
            names,
            [
                "GIT_AUTHOR_NAME=Me",
                "GIT_CONFIG_GLOBAL=/dev/null",
                "GIT_CONFIG_NOSYSTEM=1",
                "GIT_EDITOR=:",
                "GIT_LFS_SKIP_SMUDGE=1",
                "GIT_NO_REPLACE_OBJECTS=1",
                "GIT_PAGER=cat",
                "GIT_SEQUENCE_EDITOR=:",
                "GIT_SSH_COMMAND=ssh -i k",
                "GIT_TERMINAL_PROMPT=0",
                "HOME=/home/u",
                "PATH=/bin",
                "SSH_AUTH_SOCK=/run/agent",
            ]
        );
    }
}
