use leptos::prelude::*;
use leptos_meta::Title;

/// The console sections whose authoring pages are still to be built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SectionKind {
    Candidates,
}

impl SectionKind {
    fn title(self) -> &'static str {
        match self {
            Self::Candidates => "Candidates",
        }
    }

    fn purpose(self) -> &'static str {
        match self {
            Self::Candidates => "Proposed skill revisions with evidence and a gate verdict.",
        }
    }
}

#[component]
pub fn Section(section: SectionKind) -> impl IntoView {
    view! {
        <Title text=section.title() />
        <h1>{section.title()}</h1>
        <p class="lead">{section.purpose()}</p>
        <p class="notice info" role="status">
            "This section is not available in the console yet. Use the command line meanwhile (" <code>"skillgate --help"</code> ")."
        </p>
    }
}
