//! The console's navigation: the features in a few groups, one line wide.
//!
//! Each group is a disclosure (`<details>`): it opens with a click, Enter or Space, without
//! JavaScript too, and only one is open at a time (`name`). The group of the page showing
//! is marked, and its pages are listed under the bar, so moving within a group is one
//! click and where you are is always in view.

use leptos::prelude::*;
use leptos_router::components::A;
use leptos_router::hooks::use_location;

/// A page of the navigation: its link and the paths (with everything under them) that
/// belong to it, e.g. `/roles/ops/edit` to Roles.
struct Link {
    href: &'static str,
    label: &'static str,
    owns: &'static [&'static str],
}

struct Group {
    label: &'static str,
    links: &'static [Link],
}

const GROUPS: &[Group] = &[
    Group {
        label: "Catalog",
        links: &[
            Link {
                href: "/roles",
                label: "Roles",
                owns: &["/roles"],
            },
            Link {
                href: "/skills",
                label: "Skills",
                owns: &["/skills"],
            },
            Link {
                href: "/tools",
                label: "Tools",
                owns: &["/tools", "/changes"],
            },
            Link {
                href: "/upstreams",
                label: "Upstreams",
                owns: &["/upstreams"],
            },
            Link {
                href: "/inspectors",
                label: "Inspectors",
                owns: &["/inspectors"],
            },
        ],
    },
    Group {
        label: "Access",
        links: &[
            Link {
                href: "/scopes",
                label: "Scopes & keys",
                owns: &["/scopes"],
            },
            Link {
                href: "/connect",
                label: "Connect an agent",
                owns: &["/connect"],
            },
            Link {
                href: "/connected",
                label: "Connected clients",
                owns: &["/connected", "/oauth"],
            },
            Link {
                href: "/tokens",
                label: "API tokens",
                owns: &["/tokens"],
            },
            Link {
                href: "/users",
                label: "Users",
                owns: &["/users"],
            },
        ],
    },
    Group {
        label: "Review",
        links: &[
            Link {
                href: "/holds",
                label: "Holds",
                owns: &["/holds"],
            },
            Link {
                href: "/notifications",
                label: "Notifications",
                owns: &["/notifications"],
            },
            Link {
                href: "/candidates",
                label: "Candidates",
                owns: &["/candidates"],
            },
        ],
    },
    Group {
        label: "Compliance",
        links: &[
            Link {
                href: "/sessions",
                label: "Sessions",
                owns: &["/sessions"],
            },
            Link {
                href: "/audit",
                label: "Audit integrity",
                owns: &["/audit"],
            },
        ],
    },
];

/// `path` is `prefix` or a page under it (`/connect` does not own `/connected`).
fn under(path: &str, prefix: &str) -> bool {
    path.strip_prefix(prefix)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// The index of the group a path belongs to; `None` for the dashboard.
fn group_of(path: &str) -> Option<usize> {
    GROUPS.iter().position(|group| {
        group
            .links
            .iter()
            .any(|link| link.owns.iter().any(|prefix| under(path, prefix)))
    })
}

/// The top bar's navigation: the dashboard and one disclosure menu per group.
#[component]
pub fn SectionsNav() -> impl IntoView {
    let location = use_location();
    let current = Memo::new(move |_| group_of(&location.pathname.read()));
    let menus: Vec<NodeRef<leptos::html::Details>> =
        GROUPS.iter().map(|_| NodeRef::new()).collect();
    // A client-side navigation keeps the frame: close the menu whose link was followed.
    Effect::new({
        let menus = menus.clone();
        move |_| {
            location.pathname.track();
            for menu in &menus {
                if let Some(menu) = menu.get_untracked() {
                    let _ = menu.remove_attribute("open");
                }
            }
        }
    });
    view! {
        <nav aria-label="Sections" class="sections">
            <ul class="nav">
                <li>
                    <A href="/" exact=true>
                        "Dashboard"
                    </A>
                </li>
                {GROUPS
                    .iter()
                    .zip(menus)
                    .enumerate()
                    .map(|(index, (group, menu))| {
                        let is_current = move || current.get() == Some(index);
                        view! {
                            <li class="nav-group" class:current=is_current>
                                <details
                                    name="nav-group"
                                    node_ref=menu
                                    on:keydown=move |ev| {
                                        if ev.key() == "Escape"
                                            && let Some(menu) = menu.get_untracked()
                                        {
                                            let _ = menu.remove_attribute("open");
                                        }
                                    }
                                >
                                    <summary aria-current=move || is_current().then_some("true")>
                                        {group.label}
                                    </summary>
                                    <ul class="nav-menu">{link_items(group)}</ul>
                                </details>
                            </li>
                        }
                    })
                    .collect_view()}
            </ul>
        </nav>
    }
}

/// A group's pages as list items, in the menu and in the bar under the top bar alike.
fn link_items(group: &'static Group) -> impl IntoView {
    group
        .links
        .iter()
        .map(|link| {
            view! {
                <li>
                    <A href=link.href exact=true>
                        {link.label}
                    </A>
                </li>
            }
        })
        .collect_view()
}

/// The pages of the current group, under the top bar; nothing on the dashboard.
#[component]
pub fn GroupNav() -> impl IntoView {
    let location = use_location();
    let current = Memo::new(move |_| group_of(&location.pathname.read()));
    move || {
        current.get().map(|index| {
            let group = &GROUPS[index];
            view! {
                <nav aria-label=format!("{} pages", group.label) class="group-nav">
                    <span class="group-name">{group.label}</span>
                    <ul>{link_items(group)}</ul>
                </nav>
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_page_belongs_to_the_group_of_its_link() {
        assert_eq!(group_of("/"), None);
        assert_eq!(group_of("/roles/ops/edit"), Some(0));
        assert_eq!(group_of("/changes/role/ops"), Some(0));
        assert_eq!(group_of("/connect"), Some(1));
        assert_eq!(group_of("/connected"), Some(1));
        assert_eq!(group_of("/oauth/consent/abc"), Some(1));
        assert_eq!(group_of("/candidates/7"), Some(2));
        assert_eq!(group_of("/audit"), Some(3));
        assert_eq!(group_of("/rolesque"), None);
    }
}
