//! Which adapter reads an agent definition: [`AgentSpec::adapter`] (the adapters
//! import the agent module's types; the module itself never names an adapter).

use super::aider::AiderAdapter;
use super::architect::ArchitectAdapter;
use super::claude::ClaudeAdapter;
use super::codex::CodexAdapter;
use super::command::CommandAdapter;
use super::{Adapter, AdapterKind, AgentSpec};

impl AgentSpec {
    /// The adapter for this definition.
    pub fn adapter(&self) -> Box<dyn Adapter> {
        match self.adapter {
            AdapterKind::Command => Box::new(CommandAdapter::new(self.clone())),
            AdapterKind::Architect => Box::new(ArchitectAdapter::new(self.clone())),
            AdapterKind::Claude => Box::new(ClaudeAdapter::new(self.clone())),
            AdapterKind::Codex => Box::new(CodexAdapter::new(self.clone())),
            AdapterKind::Aider => Box::new(AiderAdapter::new(self.clone())),
        }
    }
}
