//! Console routes outside Leptos: streamed audit exports (JSONL, CSV) and the retention
//! form. Both check the console login and role themselves: export paths end in a file
//! name, which the login guard treats as a public asset.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::{Extension, Form};
use serde::Deserialize;
use skillgate_app::compliance::api::{SessionQuery, ssr::filter};
use skillgate_app::shared::ssr::session_user_id;
use skillgate_core::audit::{CheckpointSigner, ExportFormat};
use skillgate_core::compliance::Compliance;
use skillgate_core::names::Actor;
use skillgate_core::store::Store;
use skillgate_core::users::{ConsoleRole, ConsoleUser};
use tower_sessions::Session;

use crate::state::AppState;

/// Bytes per chunk of a streamed export.
const EXPORT_CHUNK: usize = 64 * 1024;

/// `signer` signs the `audit_pruned` event of a prune the retention form asks for.
pub fn router(signer: Arc<CheckpointSigner>) -> axum::Router<AppState> {
    axum::Router::new()
        .route("/console/export/sessions.jsonl", get(export_jsonl))
        .route("/console/export/sessions.csv", get(export_csv))
        .route("/console/retention", post(set_retention))
        .layer(Extension(signer))
}

/// The signed-in, enabled console user whose role includes `needed`, or the response
/// that refuses the request.
async fn require(
    state: &AppState,
    session: &Session,
    needed: ConsoleRole,
) -> Result<ConsoleUser, Response> {
    let id = session_user_id(session).await.map_err(|error| {
        tracing::error!(%error, "cannot read the console session");
        StatusCode::INTERNAL_SERVER_ERROR.into_response()
    })?;
    let Some(id) = id else {
        return Err((StatusCode::UNAUTHORIZED, "Sign in to the console first.\n").into_response());
    };
    let user = state.users.get(id).await.map_err(|error| {
        tracing::error!(%error, "cannot load the console user");
        StatusCode::INTERNAL_SERVER_ERROR.into_response()
    })?;
    match user {
        Some(user) if !user.disabled && user.role.allows(needed) => Ok(user),
        Some(user) if !user.disabled => Err((
            StatusCode::FORBIDDEN,
            format!("This needs the {needed} console role.\n"),
        )
            .into_response()),
        _ => Err((StatusCode::UNAUTHORIZED, "Sign in to the console first.\n").into_response()),
    }
}

/// The sessions-list filters plus `session` (one session's events).
#[derive(Debug, Default, Deserialize)]
pub struct ExportParams {
    session: Option<String>,
    key: Option<String>,
    scope: Option<String>,
    from: Option<String>,
    to: Option<String>,
    role: Option<String>,
    tool: Option<String>,
    outcome: Option<String>,
    q: Option<String>,
}

async fn export_jsonl(
    State(state): State<AppState>,
    session: Session,
    Query(params): Query<ExportParams>,
) -> Response {
    export(state, session, params, ExportFormat::Jsonl).await
}

async fn export_csv(
    State(state): State<AppState>,
    session: Session,
    Query(params): Query<ExportParams>,
) -> Response {
    export(state, session, params, ExportFormat::Csv).await
}

#[tracing::instrument(skip(state, session))]
async fn export(
    state: AppState,
    session: Session,
    params: ExportParams,
    format: ExportFormat,
) -> Response {
    let user = match require(&state, &session, ConsoleRole::Viewer).await {
        Ok(user) => user,
        Err(response) => return response,
    };
    let query = SessionQuery {
        key: params.key,
        scope: params.scope,
        from: params.from,
        to: params.to,
        role: params.role,
        tool: params.tool,
        outcome: params.outcome,
        q: params.q,
        before: None,
    };
    let filter = match filter(&query) {
        Ok(filter) => filter,
        Err(error) => return (StatusCode::BAD_REQUEST, format!("{error}\n")).into_response(),
    };
    let one_session = params
        .session
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty());
    tracing::info!(user = %user.name, session = ?one_session, "audit export");
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Vec<u8>>(4);
    let compliance = Compliance::new(state.store.clone());
    let name = match &one_session {
        Some(id) => sanitize(id),
        None => "sessions".to_owned(),
    };
    tokio::spawn(async move {
        if let Err(error) = compliance
            .export_chunks(one_session.as_deref(), &filter, format, EXPORT_CHUNK, tx)
            .await
        {
            // The body ends early; the partial file fails re-verification at its tail.
            tracing::error!(%error, "audit export failed");
        }
    });
    let body = futures::stream::poll_fn(move |cx| {
        rx.poll_recv(cx)
            .map(|chunk| chunk.map(|c| Ok::<_, Infallible>(Bytes::from(c))))
    });
    let (content_type, ext) = match format {
        ExportFormat::Jsonl => ("application/x-ndjson", "jsonl"),
        ExportFormat::Csv => ("text/csv; charset=utf-8", "csv"),
    };
    let disposition = format!("attachment; filename=\"skillgate-audit-{name}.{ext}\"");
    let mut response = Body::from_stream(body).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    if let Ok(value) = HeaderValue::from_str(&disposition) {
        headers.insert(header::CONTENT_DISPOSITION, value);
    }
    response
}

/// A file-name-safe version of a session id.
fn sanitize(id: &str) -> String {
    id.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(80)
        .collect()
}

#[derive(Debug, Deserialize)]
pub struct RetentionForm {
    days: String,
    prune_now: Option<String>,
}

#[tracing::instrument(skip(state, session, signer))]
async fn set_retention(
    State(state): State<AppState>,
    Extension(signer): Extension<Arc<CheckpointSigner>>,
    session: Session,
    Form(form): Form<RetentionForm>,
) -> Response {
    let user = match require(&state, &session, ConsoleRole::Admin).await {
        Ok(user) => user,
        Err(response) => return response,
    };
    let days = match form.days.trim() {
        "" => None,
        text => match text.parse::<u32>() {
            Ok(days) if days >= 1 => Some(days),
            _ => {
                return (
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "The retention period must be a whole number of days, at least 1.\n",
                )
                    .into_response();
            }
        },
    };
    if let Err(error) = state.admin.set_retention_days(&user.name, days).await {
        return internal(error);
    }
    let compliance = Compliance::new(state.store.clone());
    if let (Some(days), Some(_)) = (days, form.prune_now)
        && let Err(error) = compliance
            .prune_older_than(days, chrono::Utc::now(), &signer, &user.name)
            .await
    {
        return internal(error);
    }
    Redirect::to("/audit?saved=1").into_response()
}

fn internal(error: impl std::fmt::Display) -> Response {
    tracing::error!(%error, "compliance route failed");
    StatusCode::INTERNAL_SERVER_ERROR.into_response()
}

/// Applies the configured retention period once an hour; `signer` signs each prune.
pub fn spawn_retention(store: Store, signer: Arc<CheckpointSigner>) {
    tokio::spawn(async move {
        let compliance = Compliance::new(store);
        let mut tick = tokio::time::interval(Duration::from_secs(3600));
        loop {
            tick.tick().await;
            match compliance.retention_days().await {
                Ok(Some(days)) => {
                    match compliance
                        .prune_older_than(
                            days,
                            chrono::Utc::now(),
                            &signer,
                            &Actor::Retention.to_string(),
                        )
                        .await
                    {
                        Ok(Some(pruned)) => {
                            tracing::info!(through = pruned.anchor.seq, "pruned audit events")
                        }
                        Ok(None) => {}
                        Err(error) => tracing::error!(%error, "audit retention failed"),
                    }
                }
                Ok(None) => {}
                Err(error) => tracing::error!(%error, "cannot read the audit retention"),
            }
        }
    });
}
