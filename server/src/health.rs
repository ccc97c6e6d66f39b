//! `GET /healthz`: 200 with the version when the database answers, 503 when it does not.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::serve::AppState;

pub async fn healthz(State(state): State<AppState>) -> (StatusCode, Json<Value>) {
    let version = env!("CARGO_PKG_VERSION");
    if state.store.ping().await {
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
