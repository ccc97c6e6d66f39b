//! Server functions that change a tool's settings.

use leptos::prelude::*;

#[cfg(feature = "ssr")]
use crate::catalog::authoring as ssr;
use crate::catalog::*;
use crate::shared::ConsoleError;

#[server(prefix = "/console/api", endpoint = "set_sensitive")]
pub async fn set_sensitive(tool: String, args: Checked) -> Result<(), ConsoleError> {
    use skillgate_core::users::ConsoleRole;
    let user = crate::shared::ssr::require(ConsoleRole::Admin).await?;
    let args: Vec<String> = args.unwrap_or_default().into_keys().collect();
    crate::shared::ssr::context()
        .authoring
        .set_sensitive_args(&user.name, &tool, &args)
        .await
        .map_err(ssr::authoring_error)
}
