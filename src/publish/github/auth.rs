//! Authentication: a token (`--token`, `GITHUB_TOKEN`, `GH_TOKEN`), or a GitHub App
//! (`--app-id` and a private key) → a JWT (jsonwebtoken 10, as octocrab uses) → the
//! repository's installation → an installation token, asked for the one repository
//! and only what publishing needs ([`token_request`]: `contents` and `pull_requests`
//! write, `issues` write only when a digest or findings need it) — never every
//! repository of the installation with every permission of the App. Either way the
//! result is an authenticated octocrab plus the token that also authorizes `git push`.

use std::time::Duration;

use octocrab::Octocrab;
use octocrab::models::{AppId, InstallationId};
use secrecy::{ExposeSecret, SecretString};

use super::{ApiError, RepoSlug, encode, first_line};

/// How fanout authenticates.
#[derive(Clone)]
pub enum Credentials {
    /// A token.
    Token(SecretString),
    /// A GitHub App and its private key (PEM).
    App {
        /// The App's id.
        app_id: u64,
        /// The App's RSA private key, PEM.
        private_key_pem: SecretString,
    },
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Credentials::Token(_) => f.write_str("Credentials::Token(…)"),
            Credentials::App { app_id, .. } => write!(f, "Credentials::App({app_id}, …)"),
        }
    }
}

/// Timeouts for every API call.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);
const READ_TIMEOUT: Duration = Duration::from_secs(60);

fn builder(
    api_base: &str,
) -> Result<
    octocrab::OctocrabBuilder<
        octocrab::NoSvc,
        octocrab::DefaultOctocrabBuilderConfig,
        octocrab::NoAuth,
        octocrab::NotLayerReady,
    >,
    ApiError,
> {
    Octocrab::builder()
        .base_uri(api_base.trim_end_matches('/'))
        .map_err(|e| ApiError::Auth(format!("API URL {api_base:?}: {}", first_line(&e))))
        .map(|b| {
            b.set_connect_timeout(Some(CONNECT_TIMEOUT))
                .set_read_timeout(Some(READ_TIMEOUT))
        })
}

/// What an installation token is asked for besides writing contents and pull
/// requests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Scope {
    /// Write issues (a digest issue, findings posted to a tracking issue, issues read
    /// as tasks).
    pub issues: bool,
    /// Read check runs and Actions jobs' logs (tending pull requests whose checks
    /// failed).
    pub ci: bool,
}

/// The body of an installation token request: `repo` alone, with write access to its
/// contents and pull requests, to its issues when `scope.issues`, and read access to
/// its checks and Actions when `scope.ci`.
pub fn token_request(repo: &RepoSlug, scope: Scope) -> serde_json::Value {
    let mut permissions = serde_json::json!({"contents": "write", "pull_requests": "write"});
    if scope.issues {
        permissions["issues"] = "write".into();
    }
    if scope.ci {
        permissions["checks"] = "read".into();
        permissions["actions"] = "read".into();
    }
    serde_json::json!({"repositories": [repo.name], "permissions": permissions})
}

/// Authenticate against `api_base` for `repo`. Returns the client and the token that
/// authorizes pushes (the installation token for an App, scoped by [`token_request`]
/// with `scope`).
pub async fn connect(
    api_base: &str,
    repo: &RepoSlug,
    credentials: &Credentials,
    scope: Scope,
) -> Result<(Octocrab, SecretString), ApiError> {
    match credentials {
        Credentials::Token(token) => {
            let crab = builder(api_base)?
                .personal_token(token.clone())
                .build()
                .map_err(|e| ApiError::Auth(first_line(&e)))?;
            Ok((crab, token.clone()))
        }
        Credentials::App {
            app_id,
            private_key_pem,
        } => {
            let key =
                jsonwebtoken::EncodingKey::from_rsa_pem(private_key_pem.expose_secret().as_bytes())
                    .map_err(|e| ApiError::Auth(format!("GitHub App private key: {e}")))?;
            let app = builder(api_base)?
                .app(AppId(*app_id), key)
                .build()
                .map_err(|e| ApiError::Auth(first_line(&e)))?;
            let path = format!(
                "/repos/{}/{}/installation",
                encode(&repo.owner),
                encode(&repo.name)
            );
            let (status, text) = app_call(&app, path, None).await?;
            if status != 200 {
                return Err(ApiError::Auth(format!(
                    "GitHub App {app_id}: no installation on {repo} (HTTP {status}: {})",
                    super::error_message(&text)
                )));
            }
            let id = serde_json::from_str::<serde_json::Value>(&text)
                .ok()
                .and_then(|v| v.get("id").and_then(serde_json::Value::as_u64))
                .ok_or_else(|| ApiError::Decode("installation without an id".into()))?;
            let token = installation_token(&app, *app_id, InstallationId(id), repo, scope).await?;
            let crab = builder(api_base)?
                .personal_token(token.clone())
                .build()
                .map_err(|e| ApiError::Auth(first_line(&e)))?;
            Ok((crab, token))
        }
    }
}

/// GET `path` as the App (POST `body` when given): the answer's status and text.
async fn app_call(
    app: &Octocrab,
    path: String,
    body: Option<&serde_json::Value>,
) -> Result<(u16, String), ApiError> {
    let sent = match body {
        None => app._get(path).await,
        Some(body) => app._post(path, Some(body)).await,
    };
    let response = sent.map_err(|e| ApiError::Transport(first_line(&e)))?;
    let status = response.status().as_u16();
    let text = app
        .body_to_string(response)
        .await
        .map_err(|e| ApiError::Transport(first_line(&e)))?;
    Ok((status, text))
}

/// An installation token for `repo` alone, with what [`token_request`] asks for.
async fn installation_token(
    app: &Octocrab,
    app_id: u64,
    installation: InstallationId,
    repo: &RepoSlug,
    scope: Scope,
) -> Result<SecretString, ApiError> {
    let path = format!("/app/installations/{installation}/access_tokens");
    let (status, text) = app_call(app, path, Some(&token_request(repo, scope))).await?;
    if status != 201 {
        return Err(ApiError::Auth(format!(
            "GitHub App {app_id}: installation token for {repo} (contents and pull requests write{}{}): HTTP {status}: {}",
            if scope.issues { ", issues write" } else { "" },
            if scope.ci {
                ", checks and actions read"
            } else {
                ""
            },
            super::error_message(&text)
        )));
    }
    serde_json::from_str::<serde_json::Value>(&text)
        .ok()
        .and_then(|v| v.get("token")?.as_str().map(str::to_owned))
        .map(SecretString::from)
        .ok_or_else(|| ApiError::Decode("installation token response without a token".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_installation_token_is_asked_for_one_repository_and_what_publishing_needs() {
        let repo = RepoSlug::parse("octo/demo").unwrap();
        assert_eq!(
            token_request(&repo, Scope::default()),
            serde_json::json!({"repositories": ["demo"],
                "permissions": {"contents": "write", "pull_requests": "write"}})
        );
        assert_eq!(
            token_request(
                &repo,
                Scope {
                    issues: true,
                    ci: false
                }
            )["permissions"],
            serde_json::json!({"contents": "write", "pull_requests": "write", "issues": "write"})
        );
        assert_eq!(
            token_request(
                &repo,
                Scope {
                    issues: true,
                    ci: true
                }
            )["permissions"],
            serde_json::json!({"contents": "write", "pull_requests": "write", "issues": "write",
                "checks": "read", "actions": "read"})
        );
    }
}
