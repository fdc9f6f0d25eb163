//! Argument templates: `{name}` placeholders, `{{` and `}}` for literal braces.
//! Expansion yields exactly one argument per template: never word-split, never a shell.

/// Placeholders an argument template may use.
pub const PLACEHOLDERS: &[&str] = &[
    "task",
    "model",
    "worker_id",
    "branch",
    "worktree",
    "run_id",
    "max_steps",
    "budget",
    "timeout",
];

/// Check that `template` only uses known placeholders and balanced braces.
pub fn check(template: &str) -> Result<(), String> {
    expand(template, &mut |_| Some(String::new())).map(|_| ())
}

/// Expand `template`, looking names up with `lookup` (`None`: the value is unset).
pub fn expand(
    template: &str,
    lookup: &mut dyn FnMut(&str) -> Option<String>,
) -> Result<String, String> {
    let mut out = String::with_capacity(template.len());
    let mut chars = template.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        match c {
            '{' if chars.peek().map(|p| p.1) == Some('{') => {
                chars.next();
                out.push('{');
            }
            '}' if chars.peek().map(|p| p.1) == Some('}') => {
                chars.next();
                out.push('}');
            }
            '{' => {
                let rest = &template[i + 1..];
                let Some(end) = rest.find('}') else {
                    return Err(format!(
                        "unclosed '{{' in {template:?} (write {{{{ for a literal brace)"
                    ));
                };
                let name = &rest[..end];
                if !PLACEHOLDERS.contains(&name) {
                    return Err(format!(
                        "unknown placeholder {{{name}}} in {template:?}; known: {}",
                        PLACEHOLDERS
                            .iter()
                            .map(|p| format!("{{{p}}}"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ));
                }
                let Some(value) = lookup(name) else {
                    return Err(format!(
                        "{{{name}}} has no value for this worker (use model_args or budget_args for optional values)"
                    ));
                };
                out.push_str(&value);
                for _ in 0..=end {
                    chars.next();
                }
            }
            '}' => {
                return Err(format!(
                    "unmatched '}}' in {template:?} (write }}}} for a literal brace)"
                ));
            }
            c => out.push(c),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(name: &str) -> Option<String> {
        match name {
            "task" => Some("fix it; rm -rf / $(x)".into()),
            "worker_id" => Some("3".into()),
            _ => None,
        }
    }

    #[test]
    fn expands_verbatim_without_shell_meaning() {
        assert_eq!(
            expand("--prompt={task}", &mut vars).unwrap(),
            "--prompt=fix it; rm -rf / $(x)"
        );
        assert_eq!(expand("w{worker_id}", &mut vars).unwrap(), "w3");
        assert_eq!(expand("{{task}}", &mut vars).unwrap(), "{task}");
        assert_eq!(expand("a}}b{{", &mut vars).unwrap(), "a}b{");
        assert_eq!(expand("ünï{worker_id}ç", &mut vars).unwrap(), "ünï3ç");
    }

    #[test]
    fn errors_are_specific() {
        assert!(
            expand("{nope}", &mut vars)
                .unwrap_err()
                .starts_with("unknown placeholder {nope}")
        );
        assert!(
            expand("{task", &mut vars)
                .unwrap_err()
                .starts_with("unclosed")
        );
        assert!(
            expand("x}", &mut vars)
                .unwrap_err()
                .starts_with("unmatched")
        );
        assert!(
            expand("{model}", &mut vars)
                .unwrap_err()
                .starts_with("{model} has no value")
        );
        assert!(check("{model} {budget}").is_ok());
    }
}
