//! Skill exports for any signed-in console user (the console login layer sends everyone
//! else to the sign-in page; these handlers check the session again themselves):
//!
//! - `GET /console/export/skills/{skill}/versions/{n}.zip`: the version as an Agent Skills
//!   bundle (`<skill>/SKILL.md`, `references/`, `provenance.json`), the zip the console's
//!   upload and `skillgate skill import` read back;
//! - `GET /console/export/skills/{skill}/{n}`: the same folder as a tar archive.

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use skillgate_app::shared::ssr::session_user_id;
use skillgate_core::revisions::bundle::zip_archive;
use skillgate_core::revisions::export::{skill_folder, tar_archive};
use skillgate_core::slug::Slug;
use skillgate_core::store::{Store, StoreError};
use tower_sessions::Session;

use crate::state::AppState;

fn failed(error: impl std::fmt::Display) -> Response {
    tracing::error!(%error, "skill export failed");
    (
        StatusCode::INTERNAL_SERVER_ERROR,
        "the export failed; see the server log",
    )
        .into_response()
}

/// Why a version's folder could not be made.
pub enum FolderError {
    NotFound(String),
    Store(StoreError),
}

impl std::fmt::Display for FolderError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NotFound(message) => f.write_str(message),
            Self::Store(e) => e.fmt(f),
        }
    }
}

/// The files of version `version` of `skill` (the current one when `None`) and its number.
pub async fn version_folder(
    store: &Store,
    skill: &str,
    version: Option<u32>,
) -> Result<(u32, Vec<(String, Vec<u8>)>), FolderError> {
    let no_skill = || FolderError::NotFound(format!("there is no skill `{skill}`"));
    let slug = Slug::parse(skill).map_err(|_| no_skill())?;
    let version = match version {
        Some(v) => v,
        None => store
            .list_skills()
            .await
            .map_err(FolderError::Store)?
            .into_iter()
            .find(|s| s.value.skill.slug == slug)
            .map(|s| s.value.version)
            .ok_or_else(no_skill)?,
    };
    let versions = store
        .skill_versions(&slug)
        .await
        .map_err(FolderError::Store)?;
    if versions.is_empty() {
        return Err(no_skill());
    }
    let found = versions
        .into_iter()
        .find(|v| v.version == version)
        .ok_or_else(|| {
            FolderError::NotFound(format!("skill `{skill}` has no version {version}"))
        })?;
    let candidate = store
        .candidate_approved_as(skill, version)
        .await
        .map_err(FolderError::Store)?;
    let skill_md = store
        .skill_md_file(&slug, version)
        .await
        .map_err(FolderError::Store)?;
    Ok((
        version,
        skill_folder(&found, candidate.as_ref(), skill_md.as_deref()),
    ))
}

/// The signed-in, enabled console user's check every export makes.
async fn signed_in(state: &AppState, session: &Session) -> Result<(), Response> {
    let user = match session_user_id(session).await {
        Ok(Some(id)) => state.users.get(id).await,
        Ok(None) => return Err(StatusCode::UNAUTHORIZED.into_response()),
        Err(error) => return Err(failed(error)),
    };
    match user {
        Ok(Some(user)) if !user.disabled => Ok(()),
        Ok(_) => Err(StatusCode::UNAUTHORIZED.into_response()),
        Err(error) => Err(failed(error)),
    }
}

async fn folder_or_response(
    state: &AppState,
    skill: &str,
    version: u32,
) -> Result<Vec<(String, Vec<u8>)>, Response> {
    match version_folder(&state.store, skill, Some(version)).await {
        Ok((_, files)) => Ok(files),
        Err(FolderError::NotFound(message)) => {
            Err((StatusCode::NOT_FOUND, message).into_response())
        }
        Err(FolderError::Store(error)) => Err(failed(error)),
    }
}

fn attachment(content_type: &str, file_name: &str, bytes: Vec<u8>) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type.to_owned()),
            (
                header::CONTENT_DISPOSITION,
                format!("attachment; filename=\"{file_name}\""),
            ),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff".to_owned()),
        ],
        bytes,
    )
        .into_response()
}

/// A skill version's download as a tar folder or an Agent Skills zip.
pub fn router() -> Router<AppState> {
    Router::new()
        .route(
            "/console/export/skills/{skill}/{version}",
            get(export_skill),
        )
        .route(
            "/console/export/skills/{skill}/versions/{file}",
            get(export_skill_zip),
        )
}

#[tracing::instrument(skip(state, session))]
pub async fn export_skill(
    State(state): State<AppState>,
    session: Session,
    Path((skill, version)): Path<(String, u32)>,
) -> Response {
    if let Err(refused) = signed_in(&state, &session).await {
        return refused;
    }
    let files = match folder_or_response(&state, &skill, version).await {
        Ok(files) => files,
        Err(response) => return response,
    };
    match tar_archive(&files) {
        Ok(bytes) => attachment(
            "application/x-tar",
            &format!("{skill}-v{version}.tar"),
            bytes,
        ),
        Err(error) => failed(error),
    }
}

/// `{n}.zip`: the version number, or `None` for anything else.
fn zip_version(file: &str) -> Option<u32> {
    let number = file.strip_suffix(".zip")?;
    if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    number.parse().ok()
}

#[tracing::instrument(skip(state, session))]
pub async fn export_skill_zip(
    State(state): State<AppState>,
    session: Session,
    Path((skill, file)): Path<(String, String)>,
) -> Response {
    if let Err(refused) = signed_in(&state, &session).await {
        return refused;
    }
    let Some(version) = zip_version(&file) else {
        return (
            StatusCode::NOT_FOUND,
            format!("`{file}` is not a version's zip: ask for versions/<n>.zip"),
        )
            .into_response();
    };
    let files = match folder_or_response(&state, &skill, version).await {
        Ok(files) => files,
        Err(response) => return response,
    };
    match zip_archive(&files) {
        Ok(bytes) => attachment("application/zip", &format!("{skill}-v{version}.zip"), bytes),
        Err(error) => failed(error),
    }
}

#[cfg(test)]
mod tests {
    use super::zip_version;

    #[test]
    fn only_a_number_and_zip_name_a_versions_zip() {
        assert_eq!(zip_version("3.zip"), Some(3));
        for bad in [
            "3",
            "v3.zip",
            ".zip",
            "-1.zip",
            "3.zip.zip",
            "99999999999.zip",
        ] {
            assert_eq!(zip_version(bad), None, "{bad}");
        }
    }
}
