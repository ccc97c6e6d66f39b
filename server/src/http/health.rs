//! `GET /healthz`: 200 with the version when the database answers, 503 when it does not.

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{Value, json};
use skillgate_core::store::Store;

use crate::state::AppState;

/// `GET /healthz`.
pub fn router() -> Router<AppState> {
    Router::new().route("/healthz", get(healthz))
}

pub async fn healthz(State(store): State<Store>) -> (StatusCode, Json<Value>) {
    let version = env!("CARGO_PKG_VERSION");
    if store.ping().await {
        (
            StatusCode::OK,
            Json(json!({"status": "ok", "version": version})),
        )
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"status": "database unavailable", "version": version})),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn health_is_ok_with_the_version_while_the_database_answers_and_503_after() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("h.db").display());
        let store = Store::open(&url).await.unwrap();
        let (status, Json(body)) = healthz(State(store.clone())).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(body["version"], env!("CARGO_PKG_VERSION"));

        store.close().await;
        let (status, Json(body)) = healthz(State(store)).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(body["status"], "database unavailable");
    }
}
