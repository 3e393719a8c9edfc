//! The admission hook. (Placeholder until the client lands: every request is allowed.)

use crate::config::HookSettings;

pub enum Action {
    Play,
    Publish,
}

pub struct AdmissionRequest {
    pub channel: String,
    pub action: Action,
    pub subject: Option<String>,
    pub address: Option<std::net::IpAddr>,
    pub user_agent: Option<String>,
}

pub enum Verdict {
    Allow,
    Deny(String),
    Unreachable(String),
}

#[derive(Default)]
pub struct AdmissionHook {}

impl AdmissionHook {
    pub fn new() -> AdmissionHook {
        AdmissionHook {}
    }

    pub async fn ask(&self, _cfg: &HookSettings, _req: &AdmissionRequest) -> Verdict {
        Verdict::Allow
    }
}
