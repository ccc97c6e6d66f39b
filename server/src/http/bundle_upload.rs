//! `POST /console/skills/{skill}/bundle`: a reviewer uploads a `SKILL.md` or an Agent Skills
//! zip as a multipart form, with or without JavaScript, and it becomes a candidate that
//! another reviewer decides. A reviewer's upload cites sources (in `provenance.json`); an
//! admin's may cite none, and then the gate says it has no evidence to evaluate. The
//! console guard has checked the origin and the form token before this runs; this checks
//! the session and the console role, proposes through the revisions service (which audits
//! it), and redirects back to the skill's page with the outcome as a flash notice. A
//! refused upload records no candidate, only its audited refusal.

use axum::Router;
use axum::extract::multipart::{Multipart, MultipartRejection};
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::post;
use skillgate_app::components::flash::Notice;
use skillgate_app::shared::ssr::session_user_id;
use skillgate_core::revisions::bundle::MAX_UPLOAD_BYTES;
use skillgate_core::revisions::{Authorship, RevisionError, Revisions};
use skillgate_core::slug::Slug;
use skillgate_core::store::StoreError;
use skillgate_core::store::revisions::Proposer;
use skillgate_core::users::ConsoleRole;
use tower_sessions::Session;

use crate::state::AppState;

/// The form field that carries the file.
pub const FILE_FIELD: &str = "bundle";

/// The request body limit of the upload route: the file and the form around it.
pub const MAX_FORM_BYTES: usize = MAX_UPLOAD_BYTES + 64 * 1024;

fn failed(error: impl std::fmt::Display) -> Response {
    tracing::error!(%error, "skill bundle upload failed");
    (
        StatusCode::INTERNAL_SERVER_ERROR,
        "the upload failed; see the server log",
    )
        .into_response()
}

/// The uploaded file: its name and bytes, or what to tell the uploader.
async fn read_file(multipart: &mut Multipart) -> Result<(String, Vec<u8>), String> {
    let too_large = || {
        format!("The upload is larger than {MAX_UPLOAD_BYTES} bytes (2 MiB); nothing was recorded.")
    };
    loop {
        let field = match multipart.next_field().await {
            Ok(Some(field)) => field,
            Ok(None) => {
                return Err(
                    "Choose a SKILL.md or a zip bundle to upload; nothing was recorded.".to_owned(),
                );
            }
            Err(e) if e.status() == StatusCode::PAYLOAD_TOO_LARGE => return Err(too_large()),
            Err(e) => {
                return Err(format!(
                    "The form could not be read ({e}); nothing was recorded."
                ));
            }
        };
        if field.name() != Some(FILE_FIELD) {
            continue;
        }
        let name = field.file_name().unwrap_or_default().to_owned();
        let bytes = match field.bytes().await {
            Ok(bytes) => bytes,
            Err(e) if e.status() == StatusCode::PAYLOAD_TOO_LARGE => return Err(too_large()),
            Err(e) => {
                return Err(format!(
                    "The file could not be read ({e}); nothing was recorded."
                ));
            }
        };
        if bytes.is_empty() {
            return Err(
                "Choose a SKILL.md or a zip bundle to upload; nothing was recorded.".to_owned(),
            );
        }
        return Ok((name, bytes.to_vec()));
    }
}

async fn propose(
    revisions: &Revisions,
    skill: &str,
    multipart: Result<Multipart, MultipartRejection>,
    user: String,
    authorship: Authorship,
) -> Result<Notice, Response> {
    let refused = |message: String| Notice {
        error: true,
        message,
        secret: None,
    };
    let mut multipart = match multipart {
        Ok(multipart) => multipart,
        Err(e) => {
            return Ok(refused(format!(
                "The upload must be a multipart form ({e}); nothing was recorded."
            )));
        }
    };
    let (name, bytes) = match read_file(&mut multipart).await {
        Ok(file) => file,
        Err(message) => return Ok(refused(message)),
    };
    match revisions
        .propose_file(Some(skill), &name, &bytes, Proposer::User(user), authorship)
        .await
    {
        Ok(candidate) => Ok(Notice::ok(format!(
            "Candidate {} recorded from {} with verdict {}; another reviewer decides it.",
            candidate.id,
            if name.is_empty() { "the upload" } else { &name },
            candidate.verdict
        ))),
        Err(RevisionError::Store(
            e @ (StoreError::Sqlx(_) | StoreError::Migrate(_) | StoreError::Open { .. }),
        )) => Err(failed(e)),
        Err(RevisionError::Audit(e)) => Err(failed(e)),
        Err(e) => Ok(refused(format!("{e}. Nothing was recorded."))),
    }
}

/// The skill bundle upload form, with a body limit of its own.
pub fn router() -> Router<AppState> {
    Router::new().route(
        "/console/skills/{skill}/bundle",
        post(upload_bundle).layer(DefaultBodyLimit::max(MAX_FORM_BYTES)),
    )
}

#[tracing::instrument(skip(state, session, multipart))]
pub async fn upload_bundle(
    State(state): State<AppState>,
    session: Session,
    Path(skill): Path<String>,
    multipart: Result<Multipart, MultipartRejection>,
) -> Response {
    let user = match session_user_id(&session).await {
        Ok(Some(id)) => state.users.get(id).await,
        Ok(None) => return StatusCode::UNAUTHORIZED.into_response(),
        Err(error) => return failed(error),
    };
    let user = match user {
        Ok(Some(user)) if !user.disabled => user,
        Ok(_) => return StatusCode::UNAUTHORIZED.into_response(),
        Err(error) => return failed(error),
    };
    let target = format!("skill:{skill}");
    if !user.role.allows(ConsoleRole::Reviewer) {
        let message = format!(
            "Uploading a skill needs the reviewer role; you are {}.\n",
            user.role
        );
        if let Err(error) = audit_refusal(&state, &user.name, &target, "FORBIDDEN", &message).await
        {
            return failed(error);
        }
        return (StatusCode::FORBIDDEN, message).into_response();
    }
    let Ok(slug) = Slug::parse(&skill) else {
        return (
            StatusCode::NOT_FOUND,
            format!("there is no skill `{skill}`"),
        )
            .into_response();
    };
    // An admin may upload a skill they wrote without citing sources; a reviewer's upload
    // cites feedback, sessions or patterns like an agent's proposal.
    let authorship = if user.role.allows(ConsoleRole::Admin) {
        Authorship::Admin
    } else {
        Authorship::Cited
    };
    let notice = match propose(
        &state.revisions,
        slug.as_str(),
        multipart,
        user.name.clone(),
        authorship,
    )
    .await
    {
        Ok(notice) => notice,
        Err(response) => return response,
    };
    // A refused upload changes nothing, and is on the record all the same.
    if notice.error
        && let Err(error) =
            audit_refusal(&state, &user.name, &target, "REFUSED", &notice.message).await
    {
        return failed(error);
    }
    if let Err(error) = skillgate_app::components::flash::ssr::leave(&session, &notice).await {
        return failed(error);
    }
    Redirect::to(&format!("/skills/{slug}#skill-candidates")).into_response()
}

/// Audits a refused upload (`admin_refused`, action `skill_candidate.propose`) through the
/// admin door's audit writer, before the uploader hears of it.
async fn audit_refusal(
    state: &AppState,
    user: &str,
    target: &str,
    code: &str,
    reason: &str,
) -> Result<(), skillgate_core::admin::AdminError> {
    state
        .admin
        .record_refusal(user, "skill_candidate.propose", target, code, reason)
        .await
}
