//! Why an admin change was refused or failed.

use crate::api_tokens::ApiTokenError;
use crate::audit::AuditError;
use crate::keys::KeyError;
use crate::model::CatalogError;
use crate::store::StoreError;
use crate::users::UserError;

/// Why an admin change was refused or failed. A refusal changed nothing.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    /// The entry is invalid; nothing was saved.
    #[error(transparent)]
    Invalid(#[from] CatalogError),
    /// Someone else saved first, or the entry already exists; nothing was saved.
    #[error("{0}")]
    Conflict(String),
    #[error("{0} not found")]
    NotFound(String),
    /// Malformed input that is not a catalog entry (e.g. an upstream URL), about `field`.
    #[error("{message}")]
    BadInput {
        field: &'static str,
        message: String,
    },
    /// An agent-key request the key rules refused (bad name, unknown scope, …).
    #[error(transparent)]
    Key(KeyError),
    /// A console-user change the user rules refused (bad name, weak password, …).
    #[error(transparent)]
    User(UserError),
    /// An API token request the token rules refused (bad name, another person's token, …).
    #[error(transparent)]
    ApiToken(ApiTokenError),
    /// The catalog is managed as code (`serve --catalog FILE`): change the file instead.
    #[error(
        "the catalog is managed as code in `{file}`: change it there (in git) and it is applied; the console is read-only for the catalog"
    )]
    ManagedAsCode { file: String },
    /// The upstream is a copy the platform shared into this workspace: read-only here.
    #[error(
        "upstream `{upstream}` is shared into this workspace by workspace `{from}`: it is read-only here; change it there"
    )]
    SharedUpstream { upstream: String, from: String },
    #[error("the store failed: {0}")]
    Store(StoreError),
    #[error("the change was saved but could not be audited: {0}")]
    Audit(#[from] AuditError),
}

impl AdminError {
    pub(crate) fn bad_input(field: &'static str, message: impl Into<String>) -> Self {
        Self::BadInput {
            field,
            message: message.into(),
        }
    }

    /// Whether the admin can fix this by changing the input (as opposed to a server fault).
    pub fn is_user_error(&self) -> bool {
        match self {
            Self::Invalid(_)
            | Self::Conflict(_)
            | Self::NotFound(_)
            | Self::BadInput { .. }
            | Self::ManagedAsCode { .. }
            | Self::SharedUpstream { .. } => true,
            Self::Key(e) => !matches!(e, KeyError::Store(_)),
            Self::User(e) => e.is_user_error(),
            Self::ApiToken(e) => !matches!(e, ApiTokenError::Store(_)),
            Self::Store(_) | Self::Audit(_) => false,
        }
    }

    /// The input field the refusal is about, when it is about one (else it concerns the
    /// whole change), so a form shows it beside that field.
    pub fn field(&self) -> Option<&'static str> {
        match self {
            Self::Invalid(e) => Some(e.field()),
            Self::BadInput { field, .. } => Some(field),
            Self::Key(e) => e.field(),
            Self::User(e) => e.field(),
            Self::ApiToken(e) => e.field(),
            Self::Conflict(_)
            | Self::NotFound(_)
            | Self::ManagedAsCode { .. }
            | Self::SharedUpstream { .. }
            | Self::Store(_)
            | Self::Audit(_) => None,
        }
    }
}

impl From<StoreError> for AdminError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::Invalid(e) => Self::Invalid(e),
            StoreError::Conflict(m) => Self::Conflict(m),
            StoreError::NotFound(m) => Self::NotFound(m),
            other => Self::Store(other),
        }
    }
}

impl From<KeyError> for AdminError {
    fn from(error: KeyError) -> Self {
        match error {
            KeyError::Store(e) => e.into(),
            other => Self::Key(other),
        }
    }
}

impl From<ApiTokenError> for AdminError {
    fn from(error: ApiTokenError) -> Self {
        match error {
            ApiTokenError::Store(e) => e.into(),
            other => Self::ApiToken(other),
        }
    }
}

impl From<UserError> for AdminError {
    fn from(error: UserError) -> Self {
        match error {
            UserError::Store(e) => e.into(),
            UserError::Audit(e) => super::from_audit(e),
            other => Self::User(other),
        }
    }
}
