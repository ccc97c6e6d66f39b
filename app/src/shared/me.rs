//! The signed-in console user, as the frame and every page need it.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::shared::ConsoleError;
#[cfg(feature = "ssr")]
use crate::shared::ssr;

/// The signed-in console user as the UI needs it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Me {
    pub name: String,
    pub role: String,
    /// The catalog file the gateway serves its catalog from (`serve --catalog`), when the
    /// catalog is managed as code: the console then shows it read-only.
    pub catalog_file: Option<String>,
}

impl Me {
    pub fn is_admin(&self) -> bool {
        self.role == "admin"
    }
}

#[server(prefix = "/console/api")]
pub async fn whoami() -> Result<Option<Me>, ConsoleError> {
    let catalog_file = ssr::context().authoring.catalog_file().map(str::to_owned);
    Ok(ssr::current_user().await?.map(|u| Me {
        name: u.name,
        role: u.role.to_string(),
        catalog_file,
    }))
}
