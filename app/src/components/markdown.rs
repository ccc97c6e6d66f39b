//! Markdown previews: rendered on the server, sanitized, shown beside an editor.

use leptos::prelude::*;

use crate::shared::ConsoleError;

/// Markdown to sanitized HTML, for the live preview of an editor.
#[server(prefix = "/console/api", endpoint = "preview_markdown")]
pub async fn preview_markdown(text: String) -> Result<String, ConsoleError> {
    use skillgate_core::users::ConsoleRole;
    crate::shared::ssr::require(ConsoleRole::Viewer).await?;
    Ok(ssr::markdown_html(&text))
}

#[cfg(feature = "ssr")]
pub(crate) mod ssr {
    use pulldown_cmark::{CowStr, Event, Parser, Tag};

    /// Markdown to HTML. Raw HTML in the source becomes text and links may only use safe
    /// schemes, so an instruction can never inject markup or script into the console.
    pub fn markdown_html(markdown: &str) -> String {
        fn safe(url: CowStr<'_>) -> CowStr<'_> {
            let lower = url.to_ascii_lowercase();
            let scheme = lower.split_once(':').map(|(s, _)| s);
            match scheme {
                None => url,
                Some(s) if s.contains('/') || s.contains('#') || s.contains('?') => url,
                Some("http" | "https" | "mailto") => url,
                Some(_) => CowStr::Borrowed("#"),
            }
        }
        let events = Parser::new(markdown).map(|event| match event {
            Event::Html(html) | Event::InlineHtml(html) => Event::Text(html),
            Event::Start(Tag::Link {
                link_type,
                dest_url,
                title,
                id,
            }) => Event::Start(Tag::Link {
                link_type,
                dest_url: safe(dest_url),
                title,
                id,
            }),
            Event::Start(Tag::Image {
                link_type,
                dest_url,
                title,
                id,
            }) => Event::Start(Tag::Image {
                link_type,
                dest_url: safe(dest_url),
                title,
                id,
            }),
            other => other,
        });
        let mut html = String::new();
        pulldown_cmark::html::push_html(&mut html, events);
        html
    }

    #[cfg(test)]
    mod tests {
        use super::markdown_html;

        #[test]
        fn markdown_renders_but_raw_html_and_script_links_do_not() {
            let html = markdown_html(
                "# Refunds\n\n**Check** first.\n\n<script>alert(1)</script>\n\n[x](javascript:alert(1)) [ok](https://example.org/a)",
            );
            assert!(html.contains("<h1>Refunds</h1>"), "{html}");
            assert!(html.contains("<strong>Check</strong>"), "{html}");
            assert!(!html.contains("<script>"), "{html}");
            assert!(html.contains("&lt;script&gt;"), "{html}");
            assert!(!html.contains("javascript:"), "{html}");
            assert!(html.contains("href=\"https://example.org/a\""), "{html}");
        }
    }
}
