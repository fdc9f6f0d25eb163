//! The checks of agent definitions (`agents:` in `fanout.yml`) that need to know the
//! adapters: which keys each adapter reads, template placeholders, JSON paths. The
//! settings run them when they read the file, so a problem is reported at its line
//! and column; [`crate::agent::AgentSpec::resolve`] runs them again for definitions
//! made otherwise.

use crate::config::error::key;
use crate::config::{AdapterKind, AgentDef, ConfigFile, KeySeg, Problem};

/// Check every definition under `agents:`; the path of a problem is from the file's
/// root.
pub fn definitions(file: &ConfigFile) -> Result<(), Problem> {
    for (name, def) in &file.agents {
        definition(name, def).map_err(|p| p.under(&[key("agents"), key(name)]))?;
    }
    Ok(())
}

/// Check `def` (the definition named `name`) across its keys; the path of a problem
/// is relative to the definition.
pub fn definition(name: &str, def: &AgentDef) -> Result<(), Problem> {
    let adapter = def.adapter_for(name);
    adapter_keys(def, adapter)?;
    for (k, list) in [
        ("command", &def.command),
        ("model_args", &def.model_args),
        ("budget_args", &def.budget_args),
        ("args", &def.args),
    ] {
        for (i, arg) in list.iter().enumerate() {
            super::template::check(arg)
                .map_err(|e| Problem::at(vec![key(k), KeySeg::Index(i)], e))?;
        }
    }
    for k in def.env.keys() {
        if k.is_empty() || k.contains('=') || k.contains('\0') {
            return Err(Problem::at(
                vec![key("env"), key(k)],
                format!("{k:?} is not a valid variable name"),
            ));
        }
    }
    writable(&def.writable)?;
    if adapter == AdapterKind::Command {
        command_keys(def)
    } else {
        builtin_keys(def, adapter.program())
    }
}

/// `writable:` entries: absolute paths, or `~/…`, without control characters or `..`
/// ([`crate::sandbox::hidden::check_entry`]).
fn writable(list: &[String]) -> Result<(), Problem> {
    for (i, p) in list.iter().enumerate() {
        crate::sandbox::hidden::check_entry(p)
            .map_err(|e| Problem::at(vec![key("writable"), KeySeg::Index(i)], e).in_value())?;
    }
    Ok(())
}

/// A problem with the key `k` (it is misplaced or missing).
fn only(k: &str, msg: String) -> Result<(), Problem> {
    Err(Problem::at(vec![key(k)], msg))
}

/// Keys only one adapter reads: `result` (command), `permission_mode` (claude),
/// `agent` (architect).
fn adapter_keys(def: &AgentDef, adapter: AdapterKind) -> Result<(), Problem> {
    let program = adapter.program();
    if def.result.is_some() && adapter != AdapterKind::Command {
        return only(
            "result",
            format!(
                "only the command adapter reads a `result` spec; the {program} adapter reads its CLI's own output"
            ),
        );
    }
    if def.permission_mode.is_some() && adapter != AdapterKind::Claude {
        return only(
            "permission_mode",
            "only used by the claude adapter".to_owned(),
        );
    }
    if let Some(mode) = &def.permission_mode
        && (mode.is_empty() || !mode.chars().all(|c| c.is_ascii_alphanumeric()))
    {
        return Err(Problem::at(
            vec![key("permission_mode")],
            format!(
                "{mode:?} is not a permission mode (e.g. acceptEdits, bypassPermissions, plan)"
            ),
        )
        .in_value());
    }
    if def.gateway.is_some() && adapter != AdapterKind::Command {
        return only(
            "gateway",
            format!(
                "only for the command adapter; the {program} adapter is pointed at the gateway by fanout"
            ),
        );
    }
    if let Some(g) = &def.gateway {
        gateway_keys(g)?;
    }
    if def.agent.is_some() && adapter != AdapterKind::Architect {
        return only(
            "agent",
            "only used by the architect adapter (architect's own agent name)".to_owned(),
        );
    }
    Ok(())
}

/// A `command` agent's `gateway:`: two variable names and a known provider.
fn gateway_keys(g: &crate::config::GatewayOptIn) -> Result<(), Problem> {
    for (k, v) in [("base_url_env", &g.base_url_env), ("key_env", &g.key_env)] {
        if v.is_empty() || !v.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(Problem::at(
                vec![key("gateway"), key(k)],
                format!("{v:?} is not a variable name (letters, digits, '_')"),
            )
            .in_value());
        }
    }
    if !matches!(g.provider.as_str(), "anthropic" | "openai") {
        return Err(Problem::at(
            vec![key("gateway"), key("provider")],
            format!("{:?} is not a provider: anthropic or openai", g.provider),
        )
        .in_value());
    }
    Ok(())
}

/// The command adapter's definition: an argv list with a program, no `binary`, and
/// dotted JSON paths in `result`.
fn command_keys(def: &AgentDef) -> Result<(), Problem> {
    match def.command.first() {
        None => {
            return only(
                "command",
                "the command adapter needs an argv list, e.g. [my-agent, \"{task}\"]".to_owned(),
            );
        }
        Some(p) if p.trim().is_empty() => {
            return Err(Problem::at(
                vec![key("command"), KeySeg::Index(0)],
                "empty program name",
            ));
        }
        Some(_) => {}
    }
    if def.binary.is_some() {
        return only(
            "binary",
            "not used by the command adapter: the program is command[0]".to_owned(),
        );
    }
    if let Some(r) = &def.result {
        if r.format == crate::config::ResultFormat::ExitCode {
            let read = [
                ("status", r.status.is_some()),
                ("steps", r.steps.is_some()),
                ("cost", r.cost.is_some()),
                ("reason", r.reason.is_some()),
                ("success", !r.success.is_empty()),
                ("partial", !r.partial.is_empty()),
            ];
            if let Some((k, _)) = read.iter().find(|(_, set)| *set) {
                return Err(Problem::at(
                    vec![key("result"), key(k)],
                    "not read with `format: exit-code` (the exit code is the whole report); drop it, or have fanout read a report (`format: file`, `json` or `jsonl`)",
                ));
            }
        }
        for (k, p) in [
            ("status", &r.status),
            ("steps", &r.steps),
            ("cost", &r.cost),
            ("reason", &r.reason),
        ] {
            if let Some(p) = p
                && (p.trim().is_empty() || p.split('.').any(str::is_empty))
            {
                return Err(Problem::at(
                    vec![key("result"), key(k)],
                    format!("{p:?} is not a dotted JSON path like `result.cost_usd`"),
                )
                .in_value());
            }
        }
    }
    Ok(())
}

/// A built-in adapter's definition (`program` runs by default): `binary` and `args`,
/// no `command`, no model or budget arguments.
fn builtin_keys(def: &AgentDef, program: &str) -> Result<(), Problem> {
    if !def.command.is_empty() {
        return only(
            "command",
            format!("not used by the {program} adapter (use `binary` and `args`)"),
        );
    }
    for (k, list) in [
        ("model_args", &def.model_args),
        ("budget_args", &def.budget_args),
    ] {
        if !list.is_empty() {
            return only(
                k,
                format!(
                    "for the command adapter; the {program} adapter passes the model and budget itself"
                ),
            );
        }
    }
    if let Some(b) = &def.binary
        && b.trim().is_empty()
    {
        return Err(Problem::at(vec![key("binary")], "empty program name").in_value());
    }
    Ok(())
}
