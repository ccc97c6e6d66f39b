//! The Connect page's ready-to-paste client configurations and the MCP endpoint's public
//! URL they name: pure text, tested without a server. Configurations never carry a
//! secret: they hold [`KEY_PLACEHOLDER`] and say where the key comes from.

use super::api::{ClientConfig, KEY_PLACEHOLDER, KeyChoice, SERVER_NAME};

/// The configurations for `url`, for a key (`key_name`) or a scope. Pure, so it is tested
/// without a server.
pub fn client_configs(
    url: &str,
    scope: &str,
    key: Option<&KeyChoice>,
    first_role: Option<&str>,
) -> Vec<ClientConfig> {
    let p = KEY_PLACEHOLDER;
    let bearer = format!("Bearer {p}");
    let role = first_role.unwrap_or("/roles/<role>");
    let pretty = |value: serde_json::Value| {
        serde_json::to_string_pretty(&value).unwrap_or_else(|_| value.to_string())
    };
    let mut remote_args = vec![
        serde_json::json!("-y"),
        serde_json::json!("mcp-remote"),
        serde_json::json!(url),
        serde_json::json!("--header"),
        serde_json::json!("Authorization:${SKILLGATE_AUTH}"),
    ];
    let plain_http = url.starts_with("http://");
    if plain_http {
        remote_args.push(serde_json::json!("--allow-http"));
    }
    let who = match key {
        Some(k) => format!("the key {} ({}…)", k.name, k.prefix),
        None => format!("a key of scope {scope}"),
    };
    vec![
        ClientConfig {
            id: "claude-desktop".into(),
            client: "Claude Desktop".into(),
            place: "claude_desktop_config.json (Settings → Developer → Edit Config; macOS: ~/Library/Application Support/Claude/, Windows: %APPDATA%\\Claude\\)".into(),
            text: pretty(serde_json::json!({
                "mcpServers": {
                    SERVER_NAME: {
                        "command": "npx",
                        "args": remote_args,
                        "env": { "SKILLGATE_AUTH": bearer },
                    }
                }
            })),
            note: format!(
                "Claude Desktop's configuration file starts local (stdio) servers only, so the mcp-remote bridge (Node.js 18 or later) connects it to {url}. The header is written without a space after the colon and the key sits in env, because Claude Desktop on Windows mangles spaces inside args.{} Restart Claude Desktop after saving.",
                if plain_http { " --allow-http lets the bridge use plain HTTP; serve Skillgate behind HTTPS off this machine." } else { "" }
            ),
        },
        ClientConfig {
            id: "claude-code".into(),
            client: "Claude Code".into(),
            place: "a terminal".into(),
            text: format!(
                "claude mcp add --transport http {SERVER_NAME} {url} --header \"Authorization: {bearer}\""
            ),
            note: "Add --scope user to use it in every project. --scope project writes .mcp.json into the repository: keep the key out of version control.".into(),
        },
        ClientConfig {
            id: "vscode".into(),
            client: "VS Code".into(),
            place: ".vscode/mcp.json in the workspace (or MCP: Open User Configuration)".into(),
            text: pretty(serde_json::json!({
                "servers": {
                    SERVER_NAME: {
                        "type": "http",
                        "url": url,
                        "headers": { "Authorization": bearer },
                    }
                }
            })),
            note: "To keep the key out of the file, declare \"inputs\": [{\"type\": \"promptString\", \"id\": \"skillgate-key\", \"description\": \"Skillgate agent key\", \"password\": true}] and write \"Bearer ${input:skillgate-key}\"; VS Code asks once and stores it.".into(),
        },
        ClientConfig {
            id: "cursor".into(),
            client: "Cursor".into(),
            place: "~/.cursor/mcp.json (every project) or .cursor/mcp.json (one project)".into(),
            text: pretty(serde_json::json!({
                "mcpServers": {
                    SERVER_NAME: {
                        "url": url,
                        "headers": { "Authorization": bearer },
                    }
                }
            })),
            note: "Cursor connects to streamable HTTP servers directly. Check the server is on under Settings → MCP.".into(),
        },
        ClientConfig {
            id: "python".into(),
            client: "Python (MCP SDK)".into(),
            place: "a Python 3.10+ program; pip install \"mcp>=1.9,<2\"".into(),
            text: format!(
                r#"import asyncio

from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client

URL = "{url}"
KEY = "{p}"  # {who}


async def main() -> None:
    headers = {{"Authorization": f"Bearer {{KEY}}"}}
    async with streamablehttp_client(URL, headers=headers) as (read, write, _):
        async with ClientSession(read, write) as session:
            await session.initialize()
            started = await session.call_tool("init_skilder", {{"task_summary": "what the agent is about to do"}})
            print(started.content[0].text)
            session_id = started.structuredContent["session_id"]
            learned = await session.call_tool("learn", {{"path": "{role}", "session_id": session_id}})
            print(learned.content[0].text)


asyncio.run(main())
"#
            ),
            note: "Written for the mcp 1.x line of the SDK (streamablehttp_client with headers). Pass session_id to every later learn and call_tool.".into(),
        },
        ClientConfig {
            id: "typescript".into(),
            client: "TypeScript (MCP SDK)".into(),
            place: "an ES module; npm install @modelcontextprotocol/sdk".into(),
            text: format!(
                r#"import {{ Client }} from "@modelcontextprotocol/sdk/client/index.js";
import {{ StreamableHTTPClientTransport }} from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const key = "{p}"; // {who}
const transport = new StreamableHTTPClientTransport(new URL("{url}"), {{
  requestInit: {{ headers: {{ Authorization: `Bearer ${{key}}` }} }},
}});
const client = new Client({{ name: "my-agent", version: "1.0.0" }});
await client.connect(transport);

const started = await client.callTool({{
  name: "init_skilder",
  arguments: {{ task_summary: "what the agent is about to do" }},
}});
console.log(started.content);
const {{ session_id }} = started.structuredContent as {{ session_id: string }};
const learned = await client.callTool({{
  name: "learn",
  arguments: {{ path: "{role}", session_id }},
}});
console.log(learned.content);
await client.close();
"#
            ),
            note: "requestInit.headers goes with every request of the transport. Pass session_id to every later learn and call_tool.".into(),
        },
    ]
}

/// The MCP endpoint's public URL: a configured public origin (the one the request came
/// through, else the first), else `http://` and the request's `Host`, else the bind
/// address. Only characters an origin needs pass, so the URL is safe inside the shell,
/// JSON and source snippets.
pub fn mcp_url(public_origins: &[String], host: Option<&str>, bind: &str) -> String {
    let safe = |text: &str| {
        !text.is_empty()
            && text
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '[' | ']'))
    };
    let origins: Vec<&str> = public_origins
        .iter()
        .map(|o| o.trim().trim_end_matches('/'))
        .filter(|o| {
            o.split_once("://")
                .is_some_and(|(scheme, rest)| matches!(scheme, "http" | "https") && safe(rest))
        })
        .collect();
    let host = host.filter(|h| safe(h));
    let matching = host.and_then(|h| {
        origins.iter().find(|o| {
            o.split_once("://")
                .is_some_and(|(_, rest)| rest.eq_ignore_ascii_case(h))
        })
    });
    if let Some(origin) = matching.or(origins.first()) {
        return format!("{origin}/mcp");
    }
    match host {
        Some(host) => format!("http://{host}/mcp"),
        None => format!("http://{bind}/mcp"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn origins(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn the_mcp_url_prefers_the_public_origin_the_request_came_through() {
        let public = origins(&["https://a.example.com", "https://b.example.com/"]);
        assert_eq!(
            mcp_url(&public, Some("b.example.com"), "0.0.0.0:3000"),
            "https://b.example.com/mcp"
        );
        assert_eq!(
            mcp_url(&public, Some("10.0.0.5:3000"), "0.0.0.0:3000"),
            "https://a.example.com/mcp"
        );
        assert_eq!(
            mcp_url(&[], Some("127.0.0.1:3000"), "127.0.0.1:3000"),
            "http://127.0.0.1:3000/mcp"
        );
        assert_eq!(
            mcp_url(&[], None, "127.0.0.1:4000"),
            "http://127.0.0.1:4000/mcp"
        );
    }

    #[test]
    fn a_host_that_could_break_out_of_a_snippet_is_not_used() {
        for host in ["evil\"; rm -rf ~", "a b", "x`y`", "h/../p", ""] {
            assert_eq!(
                mcp_url(&[], Some(host), "127.0.0.1:3000"),
                "http://127.0.0.1:3000/mcp",
                "{host}"
            );
        }
    }

    #[test]
    fn every_configuration_names_the_url_and_the_placeholder_and_no_secret() {
        let key = KeyChoice {
            name: "bot".into(),
            scope: "support".into(),
            prefix: "sgk_AbCdEfGh".into(),
            status: "active".into(),
        };
        let url = "http://127.0.0.1:3000/mcp";
        let configs = client_configs(url, "support", Some(&key), Some("/roles/tier-1-support"));
        let ids: Vec<&str> = configs.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "claude-desktop",
                "claude-code",
                "vscode",
                "cursor",
                "python",
                "typescript"
            ]
        );
        for config in &configs {
            assert!(config.text.contains(url), "{}: {}", config.id, config.text);
            assert!(
                config.text.contains(KEY_PLACEHOLDER),
                "{}: {}",
                config.id,
                config.text
            );
        }
        // The JSON ones parse, in the shape each client reads.
        let json = |id: &str| -> serde_json::Value {
            let c = configs.iter().find(|c| c.id == id).unwrap();
            serde_json::from_str(&c.text).unwrap()
        };
        let desktop = json("claude-desktop");
        let server = &desktop["mcpServers"][SERVER_NAME];
        assert_eq!(server["command"], "npx");
        assert_eq!(server["args"][1], "mcp-remote");
        assert_eq!(server["args"][2], url);
        assert!(
            server["args"]
                .as_array()
                .unwrap()
                .contains(&"--allow-http".into())
        );
        assert_eq!(
            server["env"]["SKILLGATE_AUTH"],
            "Bearer <YOUR SKILLGATE KEY>"
        );
        let vscode = json("vscode");
        assert_eq!(vscode["servers"][SERVER_NAME]["type"], "http");
        assert_eq!(vscode["servers"][SERVER_NAME]["url"], url);
        let cursor = json("cursor");
        assert_eq!(
            cursor["mcpServers"][SERVER_NAME]["headers"]["Authorization"],
            "Bearer <YOUR SKILLGATE KEY>"
        );
        let python = &configs.iter().find(|c| c.id == "python").unwrap().text;
        assert!(python.contains("streamablehttp_client(URL, headers=headers)"));
        assert!(python.contains("\"/roles/tier-1-support\""));
        assert!(python.contains("sgk_AbCdEfGh"), "names the key's prefix");
    }

    #[test]
    fn an_https_url_needs_no_allow_http_flag() {
        let configs = client_configs("https://gw.example.com/mcp", "support", None, None);
        assert!(!configs[0].text.contains("--allow-http"));
    }
}
