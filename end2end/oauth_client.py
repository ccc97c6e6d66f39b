"""An MCP client that knows only Skillgate's /mcp URL and signs in with OAuth.

The official Python MCP SDK's OAuth client does everything a real client does: it reads
the 401's resource metadata, finds the authorization server, registers itself, and sends
the person to the authorization URL with PKCE. This script prints that URL on a line of
its own (`AUTHORIZE <url>`) for the browser test to open, waits for the browser to reach
its loopback callback, then runs one governed call and prints the results as JSON
(`RESULT {...}`).

Usage: oauth_client.py MCP_URL CALLBACK_PORT
"""

import asyncio
import json
import sys
from urllib.parse import parse_qs, urlparse

import httpx2
from mcp import Client
from mcp.client.auth import OAuthClientProvider, TokenStorage
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)


class MemoryStorage(TokenStorage):
    """Tokens and the registration, for this run only."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


class Callback:
    """The loopback redirect target (RFC 8252): one request, its query is the answer."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.answer: asyncio.Future[str] = asyncio.get_event_loop().create_future()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request_line = (await reader.readline()).decode()
        while (await reader.readline()) not in (b"\r\n", b"\n", b""):
            pass
        target = request_line.split(" ")[1] if " " in request_line else "/"
        body = b"Signed in. You can close this page."
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: "
            + str(len(body)).encode()
            + b"\r\nConnection: close\r\n\r\n"
            + body
        )
        await writer.drain()
        writer.close()
        if urlparse(target).path == "/callback" and not self.answer.done():
            self.answer.set_result(target)

    async def wait(self) -> AuthorizationCodeResult:
        query = parse_qs(urlparse(await self.answer).query)
        if "error" in query:
            raise SystemExit(f"authorization refused: {query['error'][0]}")
        return AuthorizationCodeResult(
            code=query["code"][0],
            state=query.get("state", [None])[0],
            iss=query.get("iss", [None])[0],
        )


def text_of(result) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


async def main(url: str, port: int) -> None:
    callback = Callback(port)
    server = await asyncio.start_server(callback.handle, "127.0.0.1", port)

    async def redirect(authorization_url: str) -> None:
        print(f"AUTHORIZE {authorization_url}", flush=True)

    provider = OAuthClientProvider(
        server_url=url,
        client_metadata=OAuthClientMetadata(
            client_name="Python SDK e2e",
            redirect_uris=[f"http://127.0.0.1:{port}/callback"],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
        ),
        storage=MemoryStorage(),
        redirect_handler=redirect,
        callback_handler=callback.wait,
    )
    async with httpx2.AsyncClient(auth=provider, timeout=120) as http:
        async with Client(streamable_http_client(url, http_client=http), mode="legacy") as client:
            init = await client.call_tool("init_skilder", {"task_summary": "check a refund"})
            session = init.structured_content["session_id"]
            learned = await client.call_tool("learn", {"path": "/roles/tier-1-support", "session_id": session})
            allowed = await client.call_tool(
                "call_tool",
                {
                    "session_id": session,
                    "tool": "check_refund_eligibility",
                    "arguments": {"customer_id": "C-1003", "order_id": "O-5005"},
                },
            )
            denied = await client.call_tool(
                "learn", {"path": "/roles/system-admin", "session_id": session}
            )
    server.close()
    print(
        "RESULT "
        + json.dumps(
            {
                "session_id": session,
                "learned_error": bool(learned.is_error),
                "allowed_error": bool(allowed.is_error),
                "allowed_text": text_of(allowed)[:500],
                "denied_error": bool(denied.is_error),
                "denied_text": text_of(denied)[:200],
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2])))
