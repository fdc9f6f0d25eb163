//! Which environment variables and git configuration entries carry credentials, and
//! which never reach a process fanout starts. A leaf: the agent adapters
//! ([`crate::agent`]) and fanout's own git commands ([`crate::git`]) both filter their
//! children's environment with it.
//!
//! - [`is_credential`]: GitHub and Actions credentials (`GITHUB_TOKEN`, `GH_*TOKEN`,
//!   the Actions runtime and OIDC tokens, GitHub App keys, `INPUT_*` secrets, fanout's
//!   own `FANOUT_*TOKEN` / `FANOUT_*PRIVATE_KEY`). No child of fanout gets them.
//! - [`is_scrubbed`]: what an agent never gets — credentials, plus the git variables
//!   that would point its git at the user's repository and the user's ssh agent.
//! - [`is_model_credential`]: a model provider's credential ([`MODEL_CREDENTIALS`]:
//!   API keys, bearer and OAuth tokens, cloud keys the CLIs reach a model with). The
//!   run's gateway takes the keys it holds from fanout's environment; no process fanout
//!   starts for a worker (agent, setup command, check) nor any git fanout runs gets
//!   one (`run::gated::without_keys`, [`crate::git`]'s environment).
//! - [`is_credential_config`]: git configuration that carries a credential (an
//!   `http.extraheader`, a credential helper, a URL with a password in it), as found in
//!   `GIT_CONFIG_COUNT`/`GIT_CONFIG_KEY_<n>`/`GIT_CONFIG_VALUE_<n>`;
//!   [`git_config_from_env`] reads those variables less such entries.
//!
//! At start, before anything else (and before any thread exists), `main` takes every
//! credential out of the process ([`Secrets::take_from_env`]: the bytes of the
//! original environment block overwritten, then the variables removed, so neither
//! `/proc/<pid>/environ` nor any child ever shows them) and makes the process
//! non-dumpable ([`make_undumpable`]: same-uid processes can no longer read its
//! memory or environment, nor ptrace it). The values live on only in [`Secrets`]
//! ([`SecretString`], zeroed when dropped), handed to the commands that publish.

use std::ffi::OsString;

use crate::util::out::errln;
use secrecy::SecretString;

/// A variable holding a GitHub or Actions credential.
pub fn is_credential(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    const EXACT: &[&str] = &[
        "GITHUB_TOKEN",
        "GH_TOKEN",
        "GH_ENTERPRISE_TOKEN",
        "GITHUB_ENTERPRISE_TOKEN",
        "GITHUB_PAT",
        "ACTIONS_RUNTIME_TOKEN",
        "ACTIONS_RUNTIME_URL",
        "ACTIONS_RESULTS_URL",
        "ACTIONS_CACHE_URL",
        "ACTIONS_ID_TOKEN_REQUEST_TOKEN",
        "ACTIONS_ID_TOKEN_REQUEST_URL",
    ];
    EXACT.contains(&upper.as_str())
        || upper.contains("GITHUB_TOKEN")
        || upper.starts_with("GH_") && upper.ends_with("TOKEN")
        || upper.starts_with("FANOUT_")
            && (upper.contains("TOKEN") || upper.contains("PRIVATE_KEY"))
        || upper.starts_with("GITHUB_APP_")
        || upper.starts_with("INPUT_")
            && (upper.contains("TOKEN") || upper.contains("KEY") || upper.contains("SECRET"))
}

/// The variables that hold a model provider's credential (see [`is_model_credential`]).
pub const MODEL_CREDENTIALS: &[&str] = &[
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "CLAUDE_CODE_OAUTH_TOKEN",
    "OPENAI_API_KEY",
    "AZURE_OPENAI_API_KEY",
    "AZURE_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "VERTEXAI_API_KEY",
    "OPENROUTER_API_KEY",
    "AWS_BEARER_TOKEN_BEDROCK",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "MISTRAL_API_KEY",
    "GROQ_API_KEY",
    "DEEPSEEK_API_KEY",
    "XAI_API_KEY",
    "TOGETHER_API_KEY",
    "TOGETHERAI_API_KEY",
    "FIREWORKS_API_KEY",
    "COHERE_API_KEY",
    "CO_API_KEY",
    "PERPLEXITYAI_API_KEY",
    "CEREBRAS_API_KEY",
    "HUGGINGFACE_API_KEY",
    "HF_TOKEN",
];

/// A variable holding a model provider's credential ([`MODEL_CREDENTIALS`], any case).
/// The keys the gateway holds are read from fanout's environment; none of these
/// reaches a worker's process or fanout's git.
pub fn is_model_credential(name: &str) -> bool {
    MODEL_CREDENTIALS
        .iter()
        .any(|m| m.eq_ignore_ascii_case(name))
}

/// Variables that never reach an agent: credentials ([`is_credential`]), git variables
/// that would point the agent's git at the user's repository, the user's ssh agent, and
/// the files through which a GitHub Actions step sets its outputs, state, environment,
/// `PATH` and job summary (those of fanout's own step: an agent must not change what later steps do).
pub fn is_scrubbed(name: &str) -> bool {
    const EXACT: &[&str] = &[
        "GITHUB_OUTPUT",
        "GITHUB_ENV",
        "GITHUB_PATH",
        "GITHUB_STATE",
        "GITHUB_STEP_SUMMARY",
        "GIT_DIR",
        "GIT_WORK_TREE",
        "GIT_INDEX_FILE",
        "GIT_OBJECT_DIRECTORY",
        "GIT_ALTERNATE_OBJECT_DIRECTORIES",
        "GIT_COMMON_DIR",
        "GIT_PREFIX",
        "GIT_NAMESPACE",
        "GIT_ASKPASS",
        "SSH_AUTH_SOCK",
    ];
    is_credential(name) || EXACT.contains(&name.to_ascii_uppercase().as_str())
}

/// A git configuration entry that carries a credential: `http.extraheader` (any URL),
/// anything under `credential.`, or a key or value holding a URL with a password
/// (`https://user:secret@host/`).
pub fn is_credential_config(key: &str, value: &str) -> bool {
    let lower = key.to_ascii_lowercase();
    (lower.starts_with("http.") && lower.ends_with(".extraheader"))
        || lower.starts_with("credential.")
        || has_url_password(key)
        || has_url_password(value)
}

/// `scheme://user:password@…` anywhere in `s`.
fn has_url_password(s: &str) -> bool {
    s.match_indices("://").any(|(i, _)| {
        let rest = &s[i + 3..];
        let authority = rest.split(['/', '?', '#', ' ']).next().unwrap_or("");
        authority
            .rsplit_once('@')
            .is_some_and(|(userinfo, _)| userinfo.contains(':'))
    })
}

/// The configuration given in `GIT_CONFIG_COUNT`/`GIT_CONFIG_KEY_<n>`/
/// `GIT_CONFIG_VALUE_<n>` of `env`, in order, less entries that carry a credential
/// ([`is_credential_config`]). A malformed set (a count that is not a number, a
/// missing key) yields what could be read.
pub fn git_config_from_env(env: &[(OsString, OsString)]) -> Vec<(String, String)> {
    let get = |name: &str| {
        env.iter()
            .rev()
            .find(|(k, _)| k == name)
            .and_then(|(_, v)| v.to_str())
    };
    let count: usize = get("GIT_CONFIG_COUNT")
        .and_then(|c| c.trim().parse().ok())
        .unwrap_or(0);
    (0..count.min(1000))
        .filter_map(|i| {
            let key = get(&format!("GIT_CONFIG_KEY_{i}"))?;
            let value = get(&format!("GIT_CONFIG_VALUE_{i}")).unwrap_or("");
            Some((key.to_owned(), value.to_owned()))
        })
        .filter(|(k, v)| !is_credential_config(k, v))
        .collect()
}

/// `GIT_CONFIG_COUNT`, `GIT_CONFIG_KEY_<n>`, `GIT_CONFIG_VALUE_<n>` or
/// `GIT_CONFIG_PARAMETERS`: the variables that carry git configuration.
pub fn is_git_config_var(name: &str) -> bool {
    name == "GIT_CONFIG_COUNT"
        || name == "GIT_CONFIG_PARAMETERS"
        || name.starts_with("GIT_CONFIG_KEY_")
        || name.starts_with("GIT_CONFIG_VALUE_")
}

/// Prefixes of token-shaped words: GitHub (classic, fine-grained, app, OAuth), OpenAI
/// and Anthropic keys, Slack, GitLab, AWS access key ids.
const TOKEN_PREFIXES: &[&str] = &[
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "sk-",
    "xoxb-",
    "xoxp-",
    "glpat-",
    "AKIA",
];

/// `text` with anything that looks like a credential replaced by `***`: token-shaped
/// words (see [`TOKEN_PREFIXES`]), the word after `Bearer`, `token` or `Basic`, and the
/// password of a URL (`https://user:***@host`). For text fanout stores or shows that an
/// agent wrote (its findings, the lines of its log quoted in a reason).
pub fn mask_tokens(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut mask_next = false;
    for piece in text.split_inclusive(char::is_whitespace) {
        let word = piece.trim_end_matches(char::is_whitespace);
        let space = &piece[word.len()..];
        let bare = word.trim_matches(|c: char| "\"'`,;()[]{}<>".contains(c));
        if (mask_next && bare.len() >= 8) || is_token_shaped(bare) {
            out.push_str(&word.replace(bare, "***"));
        } else {
            out.push_str(&mask_url_password(word));
        }
        mask_next = ["bearer", "token", "basic"].contains(&bare.to_ascii_lowercase().as_str());
        out.push_str(space);
    }
    out
}

/// A word that starts with a token prefix and is long enough to be one.
fn is_token_shaped(word: &str) -> bool {
    let word = word.rsplit(['=', ':']).next().unwrap_or(word);
    TOKEN_PREFIXES
        .iter()
        .any(|p| word.starts_with(p) && word.len() >= p.len() + 12)
}

/// `scheme://user:password@host…` with the password masked.
fn mask_url_password(word: &str) -> String {
    let Some(start) = word.find("://").map(|i| i + 3) else {
        return word.to_owned();
    };
    let rest = &word[start..];
    let Some(at) = rest.find('@') else {
        return word.to_owned();
    };
    match rest[..at].find(':') {
        Some(colon) if !rest[..colon].contains('/') => {
            format!("{}{}:***{}", &word[..start], &rest[..colon], &rest[at..])
        }
        _ => word.to_owned(),
    }
}

/// The credentials fanout was started with, taken out of its environment
/// ([`Secrets::take_from_env`]). Only commands that publish (or run an agent whose
/// definition says `allow_github_token: true`) are handed them.
#[derive(Default)]
pub struct Secrets {
    vars: Vec<(String, SecretString)>,
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.vars.iter().map(|(k, _)| k))
            .finish()
    }
}

impl Secrets {
    /// Take every [`is_credential`] variable out of the process environment: its
    /// value is copied into the result, its bytes in the environment block are
    /// overwritten with zeros, then the variable is removed.
    ///
    /// Call it first thing in `main`, while the process has one thread: the
    /// environment is not thread-safe.
    pub fn take_from_env() -> Secrets {
        let mut vars = Vec::new();
        // SAFETY: one thread, see above.
        unsafe {
            scrub_environ(|name, value| {
                if is_credential(name) {
                    let value = String::from_utf8_lossy(value).into_owned();
                    vars.push((name.to_owned(), SecretString::from(value)));
                    true
                } else {
                    false
                }
            });
            // Then every credential's name, with those not overwritten (not UTF-8).
            let names: Vec<OsString> = std::env::vars_os()
                .map(|(k, _)| k)
                .filter(|k| is_credential(&k.to_string_lossy()))
                .collect();
            for name in names {
                std::env::remove_var(name);
            }
            scrub_git_config_env();
        }
        Secrets { vars }
    }

    /// Secrets holding `vars` (tests).
    pub fn from_pairs(vars: &[(&str, &str)]) -> Secrets {
        Secrets {
            vars: vars
                .iter()
                .map(|(k, v)| ((*k).to_owned(), SecretString::from((*v).to_owned())))
                .collect(),
        }
    }

    /// The value of `name`, when it was set and not blank.
    pub fn get(&self, name: &str) -> Option<&SecretString> {
        use secrecy::ExposeSecret;
        self.vars
            .iter()
            .find(|(k, v)| k == name && !v.expose_secret().trim().is_empty())
            .map(|(_, v)| v)
    }

    /// The GitHub token: `GITHUB_TOKEN`, else `GH_TOKEN` (trimmed).
    pub fn github_token(&self) -> Option<SecretString> {
        use secrecy::ExposeSecret;
        self.get("GITHUB_TOKEN")
            .or_else(|| self.get("GH_TOKEN"))
            .map(|t| SecretString::from(t.expose_secret().trim().to_owned()))
    }

    /// The names taken.
    pub fn names(&self) -> Vec<&str> {
        self.vars.iter().map(|(k, _)| k.as_str()).collect()
    }
}

/// Overwrite with zeros, in the process's environment block itself, the value of
/// every variable for which `take(name, value)` says so (it sees the value first).
///
/// # Safety
/// The process must have one thread (the environment is not thread-safe).
#[cfg(unix)]
unsafe fn scrub_environ(mut take: impl FnMut(&str, &[u8]) -> bool) {
    unsafe extern "C" {
        static mut environ: *mut *mut std::ffi::c_char;
    }
    // SAFETY: `environ` is the C library's NULL-terminated array of NUL-terminated
    // "NAME=value" strings, in writable memory of this process; only bytes before
    // each string's terminating NUL are written, and no Rust reference to them lives
    // across the write.
    unsafe {
        let mut entry = environ;
        while !entry.is_null() && !(*entry).is_null() {
            let ptr = *entry;
            let bytes = std::ffi::CStr::from_ptr(ptr).to_bytes();
            if let Some(eq) = bytes.iter().position(|b| *b == b'=') {
                let name = String::from_utf8_lossy(&bytes[..eq]).into_owned();
                let len = bytes.len() - eq - 1;
                if take(&name, &bytes[eq + 1..]) {
                    std::ptr::write_bytes(ptr.add(eq + 1), 0, len);
                }
            }
            entry = entry.add(1);
        }
    }
}

#[cfg(not(unix))]
unsafe fn scrub_environ(_take: impl FnMut(&str, &[u8]) -> bool) {}

/// Git configuration in the environment (`GIT_CONFIG_COUNT`/`_KEY_n`/`_VALUE_n`,
/// `GIT_CONFIG_PARAMETERS`) that carries a credential ([`is_credential_config`]): its
/// values overwritten in place, then the set rewritten without it.
///
/// # Safety
/// The process must have one thread (the environment is not thread-safe).
unsafe fn scrub_git_config_env() {
    let keys: std::collections::BTreeMap<String, String> = std::env::vars_os()
        .filter_map(|(k, v)| {
            let n = k.to_str()?.strip_prefix("GIT_CONFIG_KEY_")?.to_owned();
            Some((n, v.to_string_lossy().into_owned()))
        })
        .collect();
    let mut dropped = false;
    // SAFETY: one thread (the caller's promise).
    unsafe {
        scrub_environ(|name, value| {
            let value = String::from_utf8_lossy(value);
            let credential = match name.strip_prefix("GIT_CONFIG_VALUE_") {
                Some(n) => keys.get(n).is_some_and(|k| is_credential_config(k, &value)),
                None if name == "GIT_CONFIG_PARAMETERS" => {
                    let lower = value.to_ascii_lowercase();
                    lower.contains("extraheader")
                        || lower.contains("'credential.")
                        || has_url_password(&value)
                }
                None => false,
            };
            dropped |= credential;
            credential
        });
    }
    if !dropped {
        return;
    }
    let env: Vec<(OsString, OsString)> = std::env::vars_os().collect();
    let kept = git_config_from_env(&env);
    // SAFETY: one thread (the caller's promise).
    unsafe {
        for (name, _) in env {
            if name.to_str().is_some_and(is_git_config_var) {
                std::env::remove_var(&name);
            }
        }
        if !kept.is_empty() {
            std::env::set_var("GIT_CONFIG_COUNT", kept.len().to_string());
        }
        for (i, (k, v)) in kept.iter().enumerate() {
            std::env::set_var(format!("GIT_CONFIG_KEY_{i}"), k);
            std::env::set_var(format!("GIT_CONFIG_VALUE_{i}"), v);
        }
    }
}

/// Make this process non-dumpable (`prctl(PR_SET_DUMPABLE, 0)`, Linux): processes of
/// the same user can no longer read `/proc/<pid>/environ` or `mem`, nor ptrace it.
/// (Root still can; children get the default back when they exec.) A no-op elsewhere.
pub fn make_undumpable() {
    #[cfg(target_os = "linux")]
    if let Err(e) = nix::sys::prctl::set_dumpable(false) {
        errln!("fanout: warning: could not make the process non-dumpable: {e}");
    }
}

#[cfg(test)]
mod mask_tests {
    use super::mask_tokens;

    #[test]
    fn tokens_in_text_are_masked_and_the_rest_kept() {
        let cases = [
            (
                "push failed with ghp_abcdefghijklmnop1234 here",
                "push failed with *** here",
            ),
            ("GITHUB_TOKEN=ghs_0123456789abcdefXYZ", "***"),
            (
                "Authorization: Bearer abc.def.ghi.jkl",
                "Authorization: Bearer ***",
            ),
            ("key 'sk-ant-api03-aaaaaaaaaaaaaaaa'", "key '***'"),
            (
                "https://x-access-token:s3cretvalue@github.com/o/r",
                "https://x-access-token:***@github.com/o/r",
            ),
            ("the token was rejected", "the token was rejected"),
            ("sk-short and ghp_ alone", "sk-short and ghp_ alone"),
            ("line one\n  line two\n", "line one\n  line two\n"),
        ];
        for (text, want) in cases {
            assert_eq!(mask_tokens(text), want, "{text}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_and_scrubbed_names() {
        for name in [
            "GITHUB_TOKEN",
            "github_token",
            "GH_TOKEN",
            "GH_ENTERPRISE_TOKEN",
            "ACTIONS_ID_TOKEN_REQUEST_TOKEN",
            "ACTIONS_RUNTIME_TOKEN",
            "FANOUT_APP_PRIVATE_KEY",
            "FANOUT_PUSH_TOKEN",
            "GITHUB_APP_ID",
            "INPUT_GITHUB-TOKEN",
            "INPUT_API_KEY",
            "MY_GITHUB_TOKEN",
        ] {
            assert!(is_credential(name), "{name} is a credential");
            assert!(is_scrubbed(name), "{name} is scrubbed");
        }
        for name in ["GIT_DIR", "GIT_INDEX_FILE", "GIT_ASKPASS", "SSH_AUTH_SOCK"] {
            assert!(!is_credential(name), "{name} is no credential");
            assert!(is_scrubbed(name), "{name} is scrubbed");
        }
        for name in [
            "PATH",
            "HOME",
            "ANTHROPIC_API_KEY",
            "OPENAI_BASE_URL",
            "GITHUB_REPOSITORY",
            "GITHUB_SERVER_URL",
            "INPUT_WORKERS",
            "FANOUT_RUN_ID",
        ] {
            assert!(!is_scrubbed(name), "{name} passes");
        }
    }

    #[test]
    fn model_credentials_are_one_list() {
        for name in [
            "ANTHROPIC_API_KEY",
            "anthropic_auth_token",
            "CLAUDE_CODE_OAUTH_TOKEN",
            "OPENAI_API_KEY",
            "AZURE_OPENAI_API_KEY",
            "GEMINI_API_KEY",
            "GOOGLE_API_KEY",
            "OPENROUTER_API_KEY",
            "AWS_BEARER_TOKEN_BEDROCK",
            "AWS_ACCESS_KEY_ID",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_SESSION_TOKEN",
        ] {
            assert!(is_model_credential(name), "{name}");
        }
        for name in [
            "ANTHROPIC_BASE_URL",
            "OPENAI_BASE_URL",
            "AWS_REGION",
            "PATH",
        ] {
            assert!(!is_model_credential(name), "{name}");
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_process_becomes_non_dumpable() {
        make_undumpable();
        assert!(!nix::sys::prctl::get_dumpable().unwrap());
    }

    #[test]
    fn secrets_hand_out_the_github_token_and_hide_values() {
        let s = Secrets::from_pairs(&[("GH_TOKEN", " gho_x \n"), ("GITHUB_TOKEN", "  ")]);
        use secrecy::ExposeSecret;
        assert_eq!(s.github_token().unwrap().expose_secret(), "gho_x");
        assert!(s.get("GITHUB_TOKEN").is_none(), "blank is unset");
        assert_eq!(format!("{s:?}"), r#"["GH_TOKEN", "GITHUB_TOKEN"]"#);
        assert!(Secrets::default().github_token().is_none());
    }

    #[test]
    fn credential_config_is_recognised() {
        let yes = [
            (
                "http.https://github.com/.extraheader",
                "AUTHORIZATION: basic eA==",
            ),
            ("http.extraHeader", "Authorization: bearer x"),
            ("credential.helper", "store"),
            ("credential.https://example.com.username", "me"),
            (
                "url.https://x-access-token:ghs_1@github.com/.insteadOf",
                "https://github.com/",
            ),
            ("remote.origin.url", "https://me:pw@example.com/r.git"),
        ];
        for (k, v) in yes {
            assert!(is_credential_config(k, v), "{k}={v}");
        }
        let no = [
            ("protocol.file.allow", "always"),
            ("user.name", "fanout agent"),
            ("url.git@github.com:.insteadOf", "https://github.com/"),
            ("remote.origin.url", "https://me@example.com/r.git"),
            ("http.https://github.com/.proxy", "http://proxy:3128"),
        ];
        for (k, v) in no {
            assert!(!is_credential_config(k, v), "{k}={v}");
        }
    }

    #[test]
    fn config_from_env_drops_credentials_and_survives_garbage() {
        let env = |pairs: &[(&str, &str)]| -> Vec<(OsString, OsString)> {
            pairs.iter().map(|(k, v)| (k.into(), v.into())).collect()
        };
        let e = env(&[
            ("GIT_CONFIG_COUNT", "3"),
            ("GIT_CONFIG_KEY_0", "protocol.file.allow"),
            ("GIT_CONFIG_VALUE_0", "always"),
            ("GIT_CONFIG_KEY_1", "http.https://github.com/.extraheader"),
            ("GIT_CONFIG_VALUE_1", "AUTHORIZATION: basic secret"),
            ("GIT_CONFIG_KEY_2", "user.name"),
            ("GIT_CONFIG_VALUE_2", "me"),
        ]);
        assert_eq!(
            git_config_from_env(&e),
            [
                ("protocol.file.allow".to_owned(), "always".to_owned()),
                ("user.name".to_owned(), "me".to_owned())
            ]
        );
        assert!(git_config_from_env(&env(&[("GIT_CONFIG_COUNT", "x")])).is_empty());
        assert!(git_config_from_env(&env(&[("GIT_CONFIG_COUNT", "2")])).is_empty());
        assert!(is_git_config_var("GIT_CONFIG_KEY_12"));
        assert!(is_git_config_var("GIT_CONFIG_PARAMETERS"));
        assert!(!is_git_config_var("GIT_CONFIG_GLOBAL"));
    }
}
