//! `GET /console/export/skills/{skill}/{version}`: a stored skill version as an Agent Skills
//! folder (`SKILL.md`, `references/`, `provenance.json`) in a tar archive, for any signed-in
//! console user (the console login layer sends everyone else to the sign-in page).

use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use skillgate_app::api::ssr::session_user_id;
use skillgate_core::revisions::export::{skill_folder, tar_archive};
use skillgate_core::slug::Slug;
use tower_sessions::Session;

use crate::serve::AppState;

fn failed(error: impl std::fmt::Display) -> Response {
    tracing::error!(%error, "skill export failed");
    (
        StatusCode::INTERNAL_SERVER_ERROR,
        "the export failed; see the server log",
    )
        .into_response()
}

#[tracing::instrument(skip(state, session))]
pub async fn export_skill(
    State(state): State<AppState>,
    session: Session,
    Path((skill, version)): Path<(String, u32)>,
) -> Response {
    let user = match session_user_id(&session).await {
        Ok(Some(id)) => state.users.get(id).await,
        Ok(None) => return StatusCode::UNAUTHORIZED.into_response(),
        Err(error) => return failed(error),
    };
    match user {
        Ok(Some(user)) if !user.disabled => {}
        Ok(_) => return StatusCode::UNAUTHORIZED.into_response(),
        Err(error) => return failed(error),
    }
    let Ok(slug) = Slug::parse(&skill) else {
        return (StatusCode::NOT_FOUND, "no such skill").into_response();
    };
    let versions = match state.store.skill_versions(&slug).await {
        Ok(versions) => versions,
        Err(error) => return failed(error),
    };
    let Some(found) = versions.into_iter().find(|v| v.version == version) else {
        return (
            StatusCode::NOT_FOUND,
            format!("skill `{skill}` has no version {version}"),
        )
            .into_response();
    };
    let candidate = match state.store.candidate_approved_as(&skill, version).await {
        Ok(candidate) => candidate,
        Err(error) => return failed(error),
    };
    let archive = match tar_archive(&skill_folder(&found, candidate.as_ref())) {
        Ok(bytes) => bytes,
        Err(error) => return failed(error),
    };
    (
        [
            (header::CONTENT_TYPE, "application/x-tar".to_owned()),
            (
                header::CONTENT_DISPOSITION,
                format!("attachment; filename=\"{skill}-v{version}.tar\""),
            ),
        ],
        archive,
    )
        .into_response()
}
