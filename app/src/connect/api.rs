//! Server functions of the Connect page: ready-to-paste MCP client configurations for an
//! agent key or a scope, and the admin's **try it** panel, which runs `init_skilder`,
//! `learn` and `call_tool` through the real gateway as an agent of a scope would.
//!
//! Configurations never carry a secret: keys are stored hashed and shown once, so they
//! hold a marked placeholder and say where the key comes from. Try-it acts as
//! [`skillgate_core::gateway::AgentIdentity::console_user`]: decided, limited, held and
//! audited like an agent, with the console user (`console:<name>`) as the actor.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::shared::ConsoleError;

/// What the configurations hold where the agent key goes.
pub const KEY_PLACEHOLDER: &str = "<YOUR SKILLGATE KEY>";

/// The name the configurations give the server in each client.
pub const SERVER_NAME: &str = "skillgate";

/// An agent key as the page offers it: name, scope and display prefix, never the key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KeyChoice {
    pub name: String,
    pub scope: String,
    pub prefix: String,
    /// `active`, `expired` or `revoked`.
    pub status: String,
}

/// What the configurations are for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Target {
    pub scope: String,
    /// The key chosen, when one was (its scope is `scope`).
    pub key: Option<KeyChoice>,
    /// The learn path of the scope's first role, for the code samples.
    pub first_role: Option<String>,
}

/// One client's configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClientConfig {
    /// An id for the page's anchors and tests: `claude-desktop`, `claude-code`, …
    pub id: String,
    pub client: String,
    /// Where it goes: a file, or a terminal.
    pub place: String,
    pub text: String,
    /// What to know about it, one sentence or two.
    pub note: String,
}

/// One step of try-it: what an agent would send and, exactly, what it would get back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TryStep {
    /// The platform tool: `init_skilder`, `learn` or `call_tool`.
    pub tool: String,
    /// The `tools/call` parameters an agent would send, as JSON.
    pub request: String,
    /// The result's text blocks, as the model reads them.
    pub text: Vec<String>,
    /// `structuredContent`, pretty-printed JSON, when the result has it.
    pub structured: Option<String>,
    pub is_error: bool,
    /// The whole MCP `CallToolResult`, as JSON on the wire.
    pub result: String,
}

/// The try-it session so far. Kept in the console session too, so a browser without
/// JavaScript sees it after the redirect that answers its form post.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Transcript {
    pub scope: String,
    /// The governance session `init_skilder` started; the next forms carry it.
    pub session_id: Option<String>,
    /// Who acts: `console:<user>`, as the audit log names them.
    pub actor: String,
    pub steps: Vec<TryStep>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConnectView {
    /// The MCP endpoint as clients reach it.
    pub mcp_url: String,
    pub keys: Vec<KeyChoice>,
    pub scopes: Vec<String>,
    pub target: Option<Target>,
    pub configs: Vec<ClientConfig>,
    /// Why nothing is shown for the request's `key` or `scope`, when it named none there is.
    pub problem: Option<String>,
    /// Whether the signed-in user may use try-it (admins).
    pub can_try: bool,
    /// The admin's try-it session so far.
    pub transcript: Option<Transcript>,
    /// The learn paths of the try-it scope's roles, as suggestions.
    pub learn_paths: Vec<String>,
    /// Whether MCP clients may sign in with OAuth instead of a key.
    pub oauth: bool,
}

#[server(prefix = "/console/api", endpoint = "connect_overview")]
pub async fn connect_overview(
    key: Option<String>,
    scope: Option<String>,
) -> Result<ConnectView, ConsoleError> {
    use skillgate_core::users::ConsoleRole;
    let user = crate::shared::ssr::require(ConsoleRole::Viewer).await?;
    ssr::overview(key, scope, user.role.allows(ConsoleRole::Admin)).await
}

/// `init_skilder` as an agent of `scope`: starts the try-it session.
#[server(prefix = "/console/api", endpoint = "try_init")]
pub async fn try_init(
    scope: String,
    task_summary: Option<String>,
) -> Result<Transcript, ConsoleError> {
    ssr::try_step(ssr::Step::Init {
        scope,
        task_summary,
    })
    .await
}

/// `learn` in the try-it session.
#[server(prefix = "/console/api", endpoint = "try_learn")]
pub async fn try_learn(
    scope: String,
    session_id: String,
    path: String,
) -> Result<Transcript, ConsoleError> {
    ssr::try_step(ssr::Step::Learn {
        scope,
        session_id,
        path,
    })
    .await
}

/// `call_tool` in the try-it session; `arguments` is the JSON an agent would send.
#[server(prefix = "/console/api", endpoint = "try_call")]
pub async fn try_call(
    scope: String,
    session_id: String,
    tool: String,
    arguments: String,
) -> Result<Transcript, ConsoleError> {
    ssr::try_step(ssr::Step::Call {
        scope,
        session_id,
        tool,
        arguments,
    })
    .await
}

#[cfg(feature = "ssr")]
pub mod ssr {
    use std::net::SocketAddr;

    use serde_json::Value;
    use skillgate_core::gateway::{AgentIdentity, Gateway};
    use skillgate_core::slug::Slug;
    use skillgate_core::users::{ConsoleRole, ConsoleUser};

    use super::*;
    use crate::connect::configs::{client_configs, mcp_url};
    use crate::shared::ssr::{context, internal, require};

    /// What the Connect page needs beyond the console context, provided by the server:
    /// the gateway try-it drives, and where the server is reached.
    #[derive(Clone)]
    pub struct ConnectContext {
        pub gateway: Gateway,
        /// `--public-origin`s, as configured (checked at startup).
        pub public_origins: Vec<String>,
        pub bind: SocketAddr,
        /// Whether the OAuth authorization server is on (`serve --oauth`).
        pub oauth: bool,
    }

    /// The console-session key of the try-it transcript.
    const TRANSCRIPT_KEY: &str = "connect_try_it";
    /// Steps kept in a transcript; the oldest after the first go first.
    const MAX_STEPS: usize = 12;
    /// Longer than any name the console accepts for a key or scope.
    const MAX_NAME: usize = 200;

    fn connect() -> ConnectContext {
        expect_context::<ConnectContext>()
    }

    fn field(field: &str, message: impl Into<String>) -> ConsoleError {
        ConsoleError::Field {
            field: field.to_owned(),
            message: message.into(),
        }
    }

    async fn request_host() -> Option<String> {
        let headers = leptos_axum::extract::<http::HeaderMap>().await.ok()?;
        headers
            .get(http::header::HOST)?
            .to_str()
            .ok()
            .map(str::to_owned)
    }

    async fn session() -> Result<tower_sessions::Session, ConsoleError> {
        leptos_axum::extract().await.map_err(internal)
    }

    pub async fn overview(
        key: Option<String>,
        scope: Option<String>,
        can_try: bool,
    ) -> Result<ConnectView, ConsoleError> {
        let ctx = context();
        let settings = connect();
        let catalog = ctx.catalog.load();
        let now = chrono::Utc::now();
        let keys: Vec<KeyChoice> = ctx
            .keys
            .list()
            .await
            .map_err(internal)?
            .iter()
            .map(|k| KeyChoice {
                name: k.name.clone(),
                scope: k.scope.as_str().to_owned(),
                prefix: k.prefix.clone(),
                status: if k.revoked_at.is_some() {
                    "revoked"
                } else if k.is_active(now) {
                    "active"
                } else {
                    "expired"
                }
                .to_owned(),
            })
            .collect();
        let scopes: Vec<String> = catalog
            .catalog()
            .scopes
            .iter()
            .map(|s| s.slug.as_str().to_owned())
            .collect();
        let key = key.map(|k| k.trim().to_owned()).filter(|k| !k.is_empty());
        let scope = scope.map(|s| s.trim().to_owned()).filter(|s| !s.is_empty());
        let clip = |text: &str| text.chars().take(MAX_NAME).collect::<String>();
        let (target, problem) = match (key, scope) {
            (Some(name), _) => match keys.iter().find(|k| k.name == name) {
                Some(k) => (
                    Some((k.scope.clone(), Some(k.clone()))),
                    (k.status != "active").then(|| {
                        format!(
                            "The key {} is {}: agents cannot connect with it. Create a new key for scope {}.",
                            k.name, k.status, k.scope
                        )
                    }),
                ),
                None => (
                    None,
                    Some(format!("There is no agent key named “{}”.", clip(&name))),
                ),
            },
            (None, Some(slug)) => match scopes.iter().find(|s| **s == slug) {
                Some(s) => (Some((s.clone(), None)), None),
                None => (
                    None,
                    Some(format!("There is no scope named “{}”.", clip(&slug))),
                ),
            },
            (None, None) => (scopes.first().map(|s| (s.clone(), None)), None),
        };
        let url = mcp_url(
            &settings.public_origins,
            request_host().await.as_deref(),
            &settings.bind.to_string(),
        );
        let target = target.map(|(scope, key)| Target {
            first_role: catalog
                .roles_in_scope(&scope)
                .first()
                .map(|r| format!("/roles/{}", r.slug)),
            scope,
            key,
        });
        let configs = target
            .as_ref()
            .map(|t| client_configs(&url, &t.scope, t.key.as_ref(), t.first_role.as_deref()))
            .unwrap_or_default();
        let transcript = if can_try {
            session()
                .await?
                .get::<Transcript>(TRANSCRIPT_KEY)
                .await
                .map_err(internal)?
        } else {
            None
        };
        let paths_of = transcript
            .as_ref()
            .map(|t| t.scope.clone())
            .or_else(|| target.as_ref().map(|t| t.scope.clone()));
        let learn_paths = paths_of
            .map(|scope| {
                catalog
                    .roles_in_scope(&scope)
                    .iter()
                    .map(|r| format!("/roles/{}", r.slug))
                    .collect()
            })
            .unwrap_or_default();
        Ok(ConnectView {
            mcp_url: url,
            keys,
            scopes,
            target,
            configs,
            problem,
            can_try,
            transcript,
            learn_paths,
            oauth: settings.oauth,
        })
    }

    pub enum Step {
        Init {
            scope: String,
            task_summary: Option<String>,
        },
        Learn {
            scope: String,
            session_id: String,
            path: String,
        },
        Call {
            scope: String,
            session_id: String,
            tool: String,
            arguments: String,
        },
    }

    fn scope_slug(scope: &str) -> Result<Slug, ConsoleError> {
        let known = context().catalog.load().scope(scope.trim()).is_some();
        match Slug::parse(scope.trim()) {
            Ok(slug) if known => Ok(slug),
            _ => Err(field("scope", "Choose a scope of the catalog.")),
        }
    }

    fn session_field(session_id: &str) -> Result<String, ConsoleError> {
        let id = session_id.trim();
        if id.is_empty() {
            return Err(field(
                "session_id",
                "Run init_skilder first: learn and call_tool need its session.",
            ));
        }
        Ok(id.to_owned())
    }

    /// The identity the user acts as in `session_id`: in the scope that session started
    /// in when it is theirs (a session never changes scope), else in `scope` (and the
    /// gateway refuses the session as not theirs, and audits that under them).
    async fn identity_for(
        user: &ConsoleUser,
        scope: &str,
        session_id: &str,
    ) -> Result<AgentIdentity, ConsoleError> {
        let own = AgentIdentity::console_user(user.id, &user.name, scope_slug(scope)?)
            .ok_or_else(|| internal(format!("console user id {} is not positive", user.id)))?;
        let stored = context()
            .store
            .load_session(session_id)
            .await
            .map_err(internal)?;
        Ok(match stored {
            Some(s) if s.view.owner_key_id == own.key_id.to_string() => AgentIdentity {
                scope: s.view.scope,
                ..own
            },
            _ => own,
        })
    }

    #[tracing::instrument(skip_all, fields(user = tracing::field::Empty))]
    pub async fn try_step(step: Step) -> Result<Transcript, ConsoleError> {
        let user = require(ConsoleRole::Admin).await?;
        tracing::Span::current().record("user", user.name.as_str());
        let gateway = connect().gateway;
        let (agent, session_id, request, reply) = match step {
            Step::Init {
                scope,
                task_summary,
            } => {
                let agent = AgentIdentity::console_user(user.id, &user.name, scope_slug(&scope)?)
                    .ok_or_else(|| internal("console user id is not positive"))?;
                let task_summary = task_summary.filter(|t| !t.trim().is_empty());
                let mut arguments = serde_json::Map::new();
                if let Some(task) = &task_summary {
                    arguments.insert("task_summary".into(), Value::String(task.clone()));
                }
                let request = serde_json::json!({"name": "init_skilder", "arguments": arguments});
                let reply = gateway.init(&agent, task_summary).await.map_err(internal)?;
                (agent, None, request, reply)
            }
            Step::Learn {
                scope,
                session_id,
                path,
            } => {
                let session_id = session_field(&session_id)?;
                if path.trim().is_empty() {
                    return Err(field("path", "Enter a learn path, such as /roles/<role>."));
                }
                let agent = identity_for(&user, &scope, &session_id).await?;
                let request = serde_json::json!({"name": "learn",
                    "arguments": {"path": path, "session_id": session_id}});
                let reply = gateway
                    .learn(&agent, Some(session_id.clone()), &path)
                    .await
                    .map_err(internal)?;
                (agent, Some(session_id), request, reply)
            }
            Step::Call {
                scope,
                session_id,
                tool,
                arguments,
            } => {
                let session_id = session_field(&session_id)?;
                let tool = tool.trim().to_owned();
                if tool.is_empty() {
                    return Err(field("tool", "Enter the name of the tool to call."));
                }
                // Nothing an agent could send: an MCP request with broken JSON never
                // reaches a tool. Refused here, and nothing is called or audited.
                let arguments = if arguments.trim().is_empty() {
                    Value::Object(serde_json::Map::new())
                } else {
                    serde_json::from_str::<Value>(&arguments).map_err(|e| {
                        field(
                            "arguments",
                            format!("The arguments are not JSON ({e}); write an object such as {{\"customer_id\": \"C-1001\"}}."),
                        )
                    })?
                };
                let agent = identity_for(&user, &scope, &session_id).await?;
                let request = serde_json::json!({"name": "call_tool",
                    "arguments": {"tool": tool, "arguments": arguments, "session_id": session_id}});
                let reply = gateway
                    .call(&agent, Some(session_id.clone()), &tool, arguments)
                    .await
                    .map_err(internal)?;
                (agent, Some(session_id), request, reply)
            }
        };
        let tool = request["name"].as_str().unwrap_or_default().to_owned();
        let result = serde_json::to_value(reply.into_call_result()).map_err(internal)?;
        let step = step_of(tool, &request, &result);
        let session_id = session_id.or_else(|| {
            result["structuredContent"]["session_id"]
                .as_str()
                .map(str::to_owned)
        });
        let stored = session().await?;
        let previous: Option<Transcript> = stored.get(TRANSCRIPT_KEY).await.map_err(internal)?;
        let mut transcript = match previous {
            Some(t) if step.tool != "init_skilder" && t.session_id == session_id => t,
            _ => Transcript {
                scope: agent.scope.to_string(),
                session_id,
                actor: agent.key_name.clone(),
                steps: Vec::new(),
            },
        };
        transcript.steps.push(step);
        if transcript.steps.len() > MAX_STEPS {
            transcript.steps.remove(1);
        }
        stored
            .insert(TRANSCRIPT_KEY, transcript.clone())
            .await
            .map_err(internal)?;
        Ok(transcript)
    }

    /// A step as the page shows it, from the exact result an agent would get.
    fn step_of(tool: String, request: &Value, result: &Value) -> TryStep {
        let pretty = |v: &Value| serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string());
        let text = result["content"]
            .as_array()
            .map(|blocks| {
                blocks
                    .iter()
                    .map(|b| match b["text"].as_str() {
                        Some(text) if b["type"] == "text" => text.to_owned(),
                        _ => pretty(b),
                    })
                    .collect()
            })
            .unwrap_or_default();
        let structured = result
            .get("structuredContent")
            .filter(|v| !v.is_null())
            .map(pretty);
        TryStep {
            tool,
            request: pretty(request),
            text,
            structured,
            is_error: result["isError"].as_bool().unwrap_or(false),
            result: pretty(result),
        }
    }
}
