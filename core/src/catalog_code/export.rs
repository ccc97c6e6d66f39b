//! The stored catalog as a document: what `skillgate catalog export` writes.

use chrono::{DateTime, Utc};

use super::document::{
    CATALOG_VERSION, CatalogDocument, InspectionDoc, KeyDoc, RoleDoc, ScopeDoc, SkillDoc, ToolDoc,
    UpstreamDoc,
};
use crate::model::UpstreamKind;
use crate::revisions::curator::CURATION_UPSTREAM;
use crate::slug::Slug;
use crate::store::catalog_code::{CatalogState, catalog_state_on};
use crate::store::{Store, StoreError};

/// The document of a stored state at `now`: every list sorted by name; the built-in
/// curation upstream and its tools left out (they are part of the binary), tools no admin
/// has admitted left out (an upstream's pending offers, not the catalog), and only the
/// agent keys active at `now`.
pub fn document(state: &CatalogState, now: DateTime<Utc>) -> CatalogDocument {
    let catalog = &state.catalog;
    let mut upstreams: Vec<UpstreamDoc> = catalog
        .upstreams
        .iter()
        .filter(|u| u.kind != UpstreamKind::Builtin && u.name.as_str() != CURATION_UPSTREAM)
        .map(UpstreamDoc::from)
        .collect();
    upstreams.sort_by(|a, b| a.name.cmp(&b.name));
    let mut tools: Vec<ToolDoc> = catalog
        .tools
        .iter()
        .filter(|t| t.upstream.as_str() != CURATION_UPSTREAM)
        .filter(|t| !state.unadmitted.contains(&t.spec.name))
        .map(|t| ToolDoc::from_spec(&t.upstream, &t.spec))
        .collect();
    tools.sort_by(|a, b| a.name.cmp(&b.name));
    let mut skills: Vec<SkillDoc> = catalog
        .skills
        .iter()
        .map(|s| SkillDoc::from(&s.skill))
        .collect();
    skills.sort_by(|a, b| a.slug.cmp(&b.slug));
    let mut roles: Vec<RoleDoc> = catalog.roles.iter().map(RoleDoc::from).collect();
    roles.sort_by(|a, b| a.slug.cmp(&b.slug));
    let mut scopes: Vec<ScopeDoc> = catalog.scopes.iter().map(ScopeDoc::from).collect();
    scopes.sort_by(|a, b| a.slug.cmp(&b.slug));
    let mut keys: Vec<KeyDoc> = state
        .keys
        .iter()
        .filter(|k| k.is_active(now))
        .filter_map(|k| {
            Some(KeyDoc {
                name: k.name.clone(),
                scope: Slug::parse(&k.scope).ok()?,
                expires_at: k.expires_at,
            })
        })
        .collect();
    keys.sort_by(|a, b| a.name.cmp(&b.name));
    CatalogDocument {
        version: CATALOG_VERSION,
        upstreams,
        tools,
        skills,
        roles,
        scopes,
        keys,
        inspection: InspectionDoc::exported(&catalog.inspection),
    }
}

/// The stored state an export or a plan starts from.
pub async fn state(store: &Store) -> Result<CatalogState, StoreError> {
    store.with_conn(|tx| Box::pin(catalog_state_on(tx))).await
}

/// The database's catalog as a document, now.
#[tracing::instrument(skip(store))]
pub async fn export(store: &Store) -> Result<CatalogDocument, StoreError> {
    Ok(document(&state(store).await?, Utc::now()))
}
