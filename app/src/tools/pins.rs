//! The server function that admits a quarantined tool: re-pins the definition its upstream
//! offers, the one the admin reviewed. Admins only; checked on the server.

use leptos::prelude::*;

use crate::shared::ConsoleError;

/// Admits `tool` if its upstream still offers the definition hashing to `offered_pin` (what
/// the page showed); answers the new pin.
#[server(prefix = "/console/api", endpoint = "admit_tool")]
pub async fn admit_tool(tool: String, offered_pin: String) -> Result<String, ConsoleError> {
    use skillgate_core::users::ConsoleRole;
    let user = crate::shared::ssr::require(ConsoleRole::Admin).await?;
    if offered_pin.len() != 64 || !offered_pin.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(ConsoleError::Invalid(
            "The form names no offered definition (a SHA-256 in hex): reload the tool page and review it again.".into(),
        ));
    }
    crate::shared::ssr::context()
        .authoring
        .admit_tool(&user.name, &tool, &offered_pin.to_ascii_lowercase())
        .await
        .map_err(crate::catalog::authoring::authoring_error)
}
