//! `Create` from a federated server (one castd follows): it went live (see `servers::went_live`).
//! From any other actor it changes nothing.

use super::{Check, Context};
use crate::federation::FedError;

pub struct Create;

impl Create {
    /// `servers::went_live` acts only for a federated server.
    pub fn verify(&self, _cx: &Context<'_>) -> Check {
        Check::Act
    }

    pub async fn receive(self, cx: &Context<'_>) -> Result<(), FedError> {
        crate::federation::servers::went_live(cx.fed, cx.actor).await
    }
}
