//! Building blocks shared by the read-only catalog pages: pagers, link lists, markdown shown
//! as plain paragraphs, and the not-found notice.

use leptos::either::Either;
use leptos::prelude::*;
use leptos_router::components::A;
use leptos_router::hooks::use_query_map;

/// The 1-based page number in the query parameter `name`; 1 when absent or malformed.
pub fn page_param(name: &'static str) -> impl Fn() -> usize + Copy + Send + Sync + 'static {
    let query = use_query_map();
    move || {
        query
            .read()
            .get(name)
            .and_then(|p| p.parse().ok())
            .unwrap_or(1)
    }
}

/// Previous/next links for a list longer than one page; plain links, so they work without
/// JavaScript. Nothing when everything fits on one page.
#[component]
pub fn Pager(
    page: usize,
    pages: usize,
    total: usize,
    /// The address of page `n`.
    href: impl Fn(usize) -> String + 'static,
    /// What the pager pages through, for screen readers: "Roles pages".
    label: &'static str,
) -> impl IntoView {
    (pages > 1).then(|| {
        view! {
            <nav class="pager" aria-label=label>
                {(page > 1).then(|| view! { <A href=href(page - 1)>"← Previous"</A> })}
                <span class="muted">{format!("Page {page} of {pages} ({total} in all)")}</span>
                {(page < pages).then(|| view! { <A href=href(page + 1)>"Next →"</A> })}
            </nav>
        }
    })
}

/// Links to `{base}/{item}` for each item, or a muted "none".
pub fn link_list(base: &'static str, items: Vec<String>) -> impl IntoView {
    if items.is_empty() {
        return Either::Left(view! { <span class="muted">"none"</span> });
    }
    Either::Right(view! {
        <ul class="inline-list">
            {items
                .into_iter()
                .map(|item| {
                    view! {
                        <li>
                            <A href=format!("{base}/{item}")>{item}</A>
                        </li>
                    }
                })
                .collect_view()}
        </ul>
    })
}

/// Plain items as code chips, or a muted "none".
pub fn code_list(items: Vec<String>) -> impl IntoView {
    if items.is_empty() {
        return Either::Left(view! { <span class="muted">"none"</span> });
    }
    Either::Right(view! {
        <ul class="inline-list">
            {items.into_iter().map(|item| view! { <li><code>{item}</code></li> }).collect_view()}
        </ul>
    })
}

/// Text with `backtick` spans shown as code. Everything is text: nothing is parsed as HTML.
pub fn inline_code(text: &str) -> impl IntoView + use<> {
    text.split('`')
        .enumerate()
        .filter(|(_, part)| !part.is_empty())
        .map(|(i, part)| {
            let part = part.to_owned();
            if i % 2 == 1 {
                Either::Left(view! { <code>{part}</code> })
            } else {
                Either::Right(part)
            }
        })
        .collect_view()
}

enum Block {
    Heading(String),
    Paragraph(String),
}

/// Markdown split into headings (`#` lines) and paragraphs (separated by blank lines).
/// Lines inside a paragraph keep their breaks (CSS `pre-line`), so lists stay readable.
fn blocks(markdown: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut paragraph: Vec<&str> = Vec::new();
    let flush = |paragraph: &mut Vec<&str>, blocks: &mut Vec<Block>| {
        if !paragraph.is_empty() {
            blocks.push(Block::Paragraph(paragraph.join("\n")));
            paragraph.clear();
        }
    };
    for line in markdown.lines() {
        let trimmed = line.trim();
        if trimmed.is_empty() {
            flush(&mut paragraph, &mut blocks);
        } else if trimmed.starts_with('#') {
            flush(&mut paragraph, &mut blocks);
            blocks.push(Block::Heading(
                trimmed.trim_start_matches('#').trim().to_owned(),
            ));
        } else {
            paragraph.push(line.trim_end());
        }
    }
    flush(&mut paragraph, &mut blocks);
    blocks
}

/// Markdown shown as simple headings and paragraphs.
#[component]
pub fn Prose(text: String) -> impl IntoView {
    view! {
        <div class="prose">
            {blocks(&text)
                .into_iter()
                .map(|block| match block {
                    Block::Heading(h) => Either::Left(view! { <h3>{h}</h3> }),
                    Block::Paragraph(p) => Either::Right(view! { <p>{inline_code(&p)}</p> }),
                })
                .collect_view()}
        </div>
    }
}

/// The notice for an unknown slug; on the server it also makes the response a 404.
#[component]
pub fn NotFoundNotice(
    /// What was looked for: "role", "skill", "tool".
    kind: &'static str,
    name: String,
    /// The list to go back to, e.g. `/roles`.
    back: &'static str,
    back_label: &'static str,
) -> impl IntoView {
    #[cfg(feature = "ssr")]
    if let Some(response) = use_context::<leptos_axum::ResponseOptions>() {
        response.set_status(http::StatusCode::NOT_FOUND);
    }
    view! {
        <div class="notice error" role="alert">
            <strong>"Not found"</strong>
            <p>{format!("There is no {kind} named “{name}” in the catalog.")}</p>
        </div>
        <p>
            <A href=back>{back_label}</A>
        </p>
    }
}

#[cfg(test)]
mod tests {
    use super::{Block, blocks};

    #[test]
    fn markdown_becomes_headings_and_paragraphs() {
        let parsed = blocks("# Title\n\nFirst line\nsecond line\n\n\n## Next\ntext\n");
        let shape: Vec<String> = parsed
            .into_iter()
            .map(|b| match b {
                Block::Heading(h) => format!("h:{h}"),
                Block::Paragraph(p) => format!("p:{p}"),
            })
            .collect();
        assert_eq!(
            shape,
            ["h:Title", "p:First line\nsecond line", "h:Next", "p:text"]
        );
    }
}
