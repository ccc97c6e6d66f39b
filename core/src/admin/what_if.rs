//! "What would change": an edit of the catalog replayed against the audited calls before it
//! is saved, as the console's panel beside a policy editor's save button asks. The edit is
//! the live catalog with one change made to a copy; nothing is saved, and the replay is
//! audited like any other (`what_if_replay`, with the proposal's digest).

use chrono::Utc;
use sha2::{Digest as _, Sha256};

use super::AdminService;
use crate::model::Catalog;
use crate::policy::CompiledCatalog;
use crate::whatif::{ReplayReport, ReplayRequest, WhatIfError, Window, replay_stored};

/// What a replay's audit event names the proposal by: the SHA-256 of its JSON form, so two
/// previews of the same edit name the same catalog.
pub fn proposal_digest(proposed: &Catalog) -> String {
    let json = serde_json::to_vec(proposed).expect("a catalog serializes");
    hex::encode(Sha256::digest(json))
}

impl AdminService {
    /// Replays `window` of this workspace's audit under `proposed` against the live
    /// catalog. Reads only: the catalog, the sessions and usage are untouched.
    #[tracing::instrument(skip(self, proposed))]
    pub async fn what_if(
        &self,
        actor: &str,
        proposed: Catalog,
        window: &Window,
    ) -> Result<ReplayReport, WhatIfError> {
        let current = self.live();
        let digest = proposal_digest(&proposed);
        let proposed = CompiledCatalog::compile(proposed);
        let request = ReplayRequest {
            current: &current,
            proposed: &proposed,
            window,
            actor,
            file_digest: &digest,
        };
        replay_stored(self.store(), self.audit(), request, Utc::now(), |_| {}).await
    }
}
