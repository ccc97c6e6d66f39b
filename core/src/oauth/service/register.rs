//! Client registration: dynamic registration (RFC 7591), and resolving a `client_id` to
//! a registered client or a Client ID Metadata Document fetched from its URL.

use chrono::Utc;
use serde_json::Value;

use super::OAuthService;
use crate::keys::{hash_key, random_secret};
use crate::limited_read::{BodyError, read_body_limited};
use crate::oauth::client::{self, ClientInfo, MAX_DOCUMENT_BYTES, Registration};
use crate::oauth::{CLIENT_ID_PREFIX, CLIENT_SECRET_PREFIX, OAuthError};
use crate::store::oauth::ClientRow;

impl OAuthService {
    /// Dynamic client registration (RFC 7591): returns the client information response.
    #[tracing::instrument(skip_all)]
    pub async fn register(&self, body: Value) -> Result<Value, OAuthError> {
        if !self.settings.dynamic_registration {
            return Err(OAuthError::Disabled(
                "dynamic client registration is turned off on this server".into(),
            ));
        }
        let registration: Registration = serde_json::from_value(body.clone()).map_err(|e| {
            OAuthError::InvalidClientMetadata(format!(
                "the registration is not valid client metadata: {e}"
            ))
        })?;
        let checked = client::check(&registration, false)?;
        let client_id = random_secret(CLIENT_ID_PREFIX);
        let secret = (checked.auth_method != "none").then(|| random_secret(CLIENT_SECRET_PREFIX));
        let now = Utc::now();
        self.store
            .insert_oauth_client(&ClientRow {
                client_id: client_id.clone(),
                registration: "dynamic".into(),
                name: checked.name.clone(),
                redirect_uris: checked.redirect_uris.clone(),
                auth_method: checked.auth_method.clone(),
                secret_hash: secret.as_deref().map(hash_key),
                metadata: body.to_string(),
                created_at: now,
            })
            .await?;
        tracing::info!(client = %client_id, name = %checked.name, "oauth client registered");
        // The response echoes the registered metadata with the server's additions.
        let mut response = match body {
            Value::Object(map) => map,
            _ => serde_json::Map::new(),
        };
        response.insert("client_id".into(), client_id.into());
        response.insert("client_id_issued_at".into(), now.timestamp().into());
        response.insert("client_name".into(), checked.name.into());
        response.insert("redirect_uris".into(), checked.redirect_uris.into());
        response.insert(
            "token_endpoint_auth_method".into(),
            checked.auth_method.into(),
        );
        response.insert(
            "grant_types".into(),
            serde_json::json!(["authorization_code", "refresh_token"]),
        );
        response.insert("response_types".into(), serde_json::json!(["code"]));
        if let Some(secret) = secret {
            response.insert("client_secret".into(), secret.into());
            response.insert("client_secret_expires_at".into(), 0.into());
        }
        Ok(Value::Object(response))
    }

    /// The client `client_id` names: a registered one, or the metadata document at that
    /// URL, fetched now (and its row refreshed).
    pub(super) async fn resolve_client(&self, client_id: &str) -> Result<ClientInfo, OAuthError> {
        if client::is_document_url(client_id) {
            if !self.settings.metadata_documents {
                return Err(OAuthError::Disabled(
                    "clients identified by a metadata document URL are turned off on this server"
                        .into(),
                ));
            }
            return self.fetch_document(client_id).await;
        }
        if !client_id.starts_with(CLIENT_ID_PREFIX) {
            return Err(OAuthError::InvalidClient(format!(
                "unknown client `{client_id}`"
            )));
        }
        let row = self
            .store
            .oauth_client(client_id)
            .await?
            .filter(|row| row.registration == "dynamic")
            .ok_or_else(|| OAuthError::InvalidClient(format!("unknown client `{client_id}`")))?;
        Ok(info(&row))
    }

    async fn fetch_document(&self, client_id: &str) -> Result<ClientInfo, OAuthError> {
        let url = client::check_document_url(client_id, self.settings.loopback_metadata_documents)?;
        let unreadable = |why: String| {
            OAuthError::InvalidClient(format!("the client metadata document at {client_id} {why}"))
        };
        let response = self
            .http
            .get(url)
            .header(reqwest::header::ACCEPT, "application/json")
            .send()
            .await
            .map_err(|e| unreadable(format!("cannot be fetched: {e}")))?;
        if !response.status().is_success() {
            return Err(unreadable(format!(
                "answered HTTP {}",
                response.status().as_u16()
            )));
        }
        let body = read_body_limited(response, MAX_DOCUMENT_BYTES)
            .await
            .map_err(|e| match e {
                BodyError::TooLarge(_) => unreadable("is too large".into()),
                BodyError::Read(e) => unreadable(format!("cannot be read: {e}")),
            })?;
        let document: Value =
            serde_json::from_slice(&body).map_err(|e| unreadable(format!("is not JSON: {e}")))?;
        let registration: Registration = serde_json::from_value(document.clone())
            .map_err(|e| unreadable(format!("is not client metadata: {e}")))?;
        if registration.client_id.as_deref() != Some(client_id) {
            return Err(unreadable("does not name its own URL as client_id".into()));
        }
        let checked = client::check(&registration, true)
            .map_err(|e| unreadable(format!("is refused: {e}")))?;
        let row = ClientRow {
            client_id: client_id.to_owned(),
            registration: "metadata_document".into(),
            name: checked.name,
            redirect_uris: checked.redirect_uris,
            auth_method: checked.auth_method,
            secret_hash: None,
            metadata: document.to_string(),
            created_at: Utc::now(),
        };
        self.store.insert_oauth_client(&row).await?;
        Ok(info(&row))
    }
}

fn info(row: &ClientRow) -> ClientInfo {
    ClientInfo {
        client_id: row.client_id.clone(),
        name: row.name.clone(),
        redirect_uris: row.redirect_uris.clone(),
        auth_method: row.auth_method.clone(),
        registration: row.registration.clone(),
    }
}
