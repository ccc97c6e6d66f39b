//! Preload hints: the page the server renders names, in its `<head>`, every module of the
//! browser bundle the page needs, so the browser fetches them beside the main module.
//!
//! Without them a lazy page's modules were found one step at a time: the main module, then
//! its JavaScript imports the split loader, then the router asks for the page's chunk, and
//! only then are its modules (42 for the roles list) requested. Leptos has the same idea
//! (`prefetch_lazy_fn_on_server`), but its integration reads the manifest outside the
//! render's owner and so never finds it: no hint was ever sent.
//!
//! The manifest is the splitter's (`tools/site-build` writes it): each lazy function's name,
//! `<name>_<hash of its place in the source>`, with the modules it needs.

use leptos::prelude::*;

/// The split loader's preload, in the shell's `<head>` when the site has a manifest: the
/// main module's JavaScript imports it, so without the hint it is found one round trip later.
#[component]
pub fn SplitLoaderPreload() -> impl IntoView {
    #[cfg(feature = "ssr")]
    let href = use_context::<ssr::RenderPreloads>().map(|preloads| preloads.manifest.loader_url());
    // Only the server renders the shell.
    #[cfg(not(feature = "ssr"))]
    let href: Option<String> = None;
    href.map(|href| view! { <link rel="modulepreload" href=href crossorigin="anonymous" /> })
}

#[cfg(feature = "ssr")]
pub mod ssr {
    use std::collections::{HashMap, HashSet};
    use std::path::Path;
    use std::sync::{Arc, Mutex};

    use leptos::prelude::*;
    use leptos_meta::Link;

    /// The split loader's file name (what `tools/site-build` writes and Leptos'
    /// `HydrationScripts` imports).
    const SPLIT_LOADER: &str = "__wasm_split.______________________.js";
    const SPLIT_MANIFEST: &str = "__wasm_split_manifest.json";

    /// Which modules each lazy page needs, read once when the server starts; provided to
    /// every render.
    #[derive(Clone, Debug)]
    pub struct SplitManifest(Arc<Inner>);

    #[derive(Debug)]
    struct Inner {
        /// The URL path of the bundle's directory, `/pkg`.
        pkg: String,
        /// Page function name (the key without its hash) → module file stems.
        pages: HashMap<String, Vec<String>>,
    }

    /// Why the manifest beside the bundle could not be used.
    #[derive(Debug, thiserror::Error)]
    pub enum ManifestError {
        #[error("reading {path}: {source}")]
        Read {
            path: String,
            source: std::io::Error,
        },
        #[error("{path} is not the splitter's manifest: {reason}")]
        Invalid { path: String, reason: String },
    }

    impl SplitManifest {
        /// The manifest in `<site_root>/<pkg_dir>`; `Ok(None)` when the site has none (a
        /// server started without a built console).
        pub fn load(site_root: &Path, pkg_dir: &str) -> Result<Option<Self>, ManifestError> {
            let path = site_root.join(pkg_dir).join(SPLIT_MANIFEST);
            let text = match std::fs::read_to_string(&path) {
                Ok(text) => text,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
                Err(source) => {
                    return Err(ManifestError::Read {
                        path: path.display().to_string(),
                        source,
                    });
                }
            };
            Self::parse(&format!("/{pkg_dir}"), &text)
                .map(Some)
                .map_err(|reason| ManifestError::Invalid {
                    path: path.display().to_string(),
                    reason,
                })
        }

        fn parse(pkg: &str, text: &str) -> Result<Self, String> {
            let keyed: HashMap<String, Vec<String>> =
                serde_json::from_str(text).map_err(|e| e.to_string())?;
            let mut pages = HashMap::with_capacity(keyed.len());
            for (key, modules) in keyed {
                let page =
                    page_name(&key).ok_or_else(|| format!("`{key}` does not end in `_<hash>`"))?;
                if let Some(module) = modules.iter().find(|m| !is_file_stem(m)) {
                    return Err(format!("`{key}` names the module `{module}`"));
                }
                if pages.insert(page.to_owned(), modules).is_some() {
                    return Err(format!("two lazy functions are named `{page}`"));
                }
            }
            Ok(Self(Arc::new(Inner {
                pkg: pkg.to_owned(),
                pages,
            })))
        }

        /// The URLs of the modules a browser fetches to show `page` (a lazy function's
        /// name), in the manifest's order. Empty for a name the manifest does not know.
        pub fn urls(&self, page: &str) -> Vec<String> {
            let Some(modules) = self.0.pages.get(page) else {
                return Vec::new();
            };
            modules
                .iter()
                .map(|m| format!("{}/{m}.wasm", self.0.pkg))
                .collect()
        }

        /// The split loader's URL: every page's JavaScript imports it.
        pub fn loader_url(&self) -> String {
            format!("{}/{SPLIT_LOADER}", self.0.pkg)
        }

        /// What one render provides to its pages.
        pub fn for_render(&self) -> RenderPreloads {
            RenderPreloads {
                manifest: self.clone(),
                announced: Arc::default(),
            }
        }
    }

    /// The manifest, and the pages one render has already named: the router may build a
    /// page's view more than once while it renders.
    #[derive(Clone, Debug)]
    pub struct RenderPreloads {
        pub(super) manifest: SplitManifest,
        announced: Arc<Mutex<HashSet<&'static str>>>,
    }

    /// `roles_page_17518729677967757969` → `roles_page`: the macro appends a hash of the
    /// function's place in the source, the same on the server and in the browser build.
    fn page_name(key: &str) -> Option<&str> {
        let (name, hash) = key.rsplit_once('_')?;
        (!name.is_empty() && !hash.is_empty() && hash.bytes().all(|b| b.is_ascii_digit()))
            .then_some(name)
    }

    /// A module name the splitter writes (`chunk_12`, `split_roles_page_…`): it goes into a
    /// URL unescaped, so nothing else is accepted.
    fn is_file_stem(name: &str) -> bool {
        !name.is_empty()
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    }

    /// Adds to the page's `<head>` a preload of every module the lazy page `page` needs.
    /// Called while the server renders the page; nothing when no manifest was loaded.
    pub fn announce(page: &'static str) {
        let Some(preloads) = use_context::<RenderPreloads>() else {
            return;
        };
        let first = preloads
            .announced
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(page);
        if !first {
            return;
        }
        for href in preloads.manifest.urls(page) {
            // Registered with the head (leptos_meta renders it there), not the body: the
            // browser's render has no counterpart to hydrate.
            let _ = view! {
                <Link
                    rel="preload"
                    href=href
                    as_="fetch"
                    type_="application/wasm"
                    // The loader fetches with `fetch()`, a CORS request: only a preload
                    // in the same mode is reused.
                    crossorigin="anonymous"
                />
            }
            .to_html();
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn a_page_is_found_by_its_function_name_without_the_hash() {
            let manifest = SplitManifest::parse(
                "/pkg",
                r#"{"roles_page_17518729677967757969": ["split_roles_page_1", "chunk_4"],
                    "role_page_17518729677967757969": ["chunk_4"]}"#,
            )
            .expect("a valid manifest");
            assert_eq!(
                manifest.urls("roles_page"),
                ["/pkg/split_roles_page_1.wasm", "/pkg/chunk_4.wasm"]
            );
            assert_eq!(manifest.urls("role_page"), ["/pkg/chunk_4.wasm"]);
            assert!(manifest.urls("roles").is_empty());
            assert_eq!(
                manifest.loader_url(),
                "/pkg/__wasm_split.______________________.js"
            );
        }

        #[test]
        fn a_manifest_that_would_put_anything_but_a_file_name_into_a_url_is_refused() {
            for text in [
                r#"{"roles_page_1": ["../secret"]}"#,
                r#"{"roles_page_1": ["a\"><script>"]}"#,
                r#"{"roles_page": ["chunk_1"]}"#,
                r#"{"roles_page_1": ["chunk_1"], "roles_page_2": ["chunk_2"]}"#,
                r#"["chunk_1"]"#,
            ] {
                assert!(SplitManifest::parse("/pkg", text).is_err(), "{text}");
            }
        }
    }
}
