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
//! - [`is_credential_config`]: git configuration that carries a credential (an
//!   `http.extraheader`, a credential helper, a URL with a password in it), as found in
//!   `GIT_CONFIG_COUNT`/`GIT_CONFIG_KEY_<n>`/`GIT_CONFIG_VALUE_<n>`;
//!   [`git_config_from_env`] reads those variables less such entries.

use std::ffi::OsString;

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

/// Variables that never reach an agent: credentials ([`is_credential`]), git variables
/// that would point the agent's git at the user's repository, and the user's ssh agent.
pub fn is_scrubbed(name: &str) -> bool {
    const EXACT: &[&str] = &[
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
