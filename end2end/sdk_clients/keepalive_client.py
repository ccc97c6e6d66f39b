"""The official Python MCP SDK's OAuth flow on one kept-alive connection.

httpx (the SDK's HTTP client) sends a request's body a moment after its headers. A server that
refuses the request on its headers and then closes the connection unannounced makes the
client lose the request that follows on that connection: for the SDK, the OAuth discovery
after the 401. This script runs the SDK's OAuth client against /mcp, `ROUNDS` times, on a
pool of one connection: each round is the 401 and the protected-resource and
authorization-server discovery (the first round registers the client too; later rounds reuse
it, as a client does), stopped when the SDK would send the person to the authorization URL.
It prints `RESULT {...}`: the rounds that reached the authorization URL, the errors of the
others, and how many connections the client opened.

Usage: keepalive_client.py MCP_URL ROUNDS
"""

import asyncio
import json
import logging
import sys
from pathlib import Path

import httpx2
from mcp.client.auth import OAuthClientProvider
from mcp.shared.auth import OAuthClientMetadata

# The token store of the browser-driven OAuth client (end2end/oauth_client.py).
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from oauth_client import MemoryStorage  # noqa: E402


class ReachedAuthorization(Exception):
    """The SDK asked to send the person to the authorization URL: discovery is done."""


async def redirect(url: str) -> None:
    raise ReachedAuthorization(url)


async def callback():
    raise AssertionError("the flow stops before the callback")


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "keepalive-check", "version": "1"},
    },
}


async def main(url: str, rounds: int) -> None:
    # The SDK logs the stop at the authorization URL as a failed flow.
    logging.getLogger("mcp.client.auth").setLevel(logging.CRITICAL)
    streams = []

    async def note_connection(response: httpx2.Response) -> None:
        stream = response.extensions.get("network_stream")
        if stream is not None and not any(stream is seen for seen in streams):
            streams.append(stream)

    reached, errors = 0, []
    storage = MemoryStorage()
    limits = httpx2.Limits(max_connections=1, max_keepalive_connections=1)
    async with httpx2.AsyncClient(
        limits=limits, timeout=30, event_hooks={"response": [note_connection]}
    ) as http:
        for round_ in range(rounds):
            provider = OAuthClientProvider(
                server_url=url,
                client_metadata=OAuthClientMetadata(
                    client_name="keep-alive check",
                    redirect_uris=["http://127.0.0.1:9/callback"],
                    grant_types=["authorization_code", "refresh_token"],
                    response_types=["code"],
                    token_endpoint_auth_method="none",
                ),
                storage=storage,
                redirect_handler=redirect,
                callback_handler=callback,
            )
            try:
                await http.post(
                    url,
                    json=INITIALIZE,
                    auth=provider,
                    headers={"accept": "application/json, text/event-stream"},
                )
                errors.append(f"round {round_}: the SDK never reached the authorization URL")
            except ReachedAuthorization:
                reached += 1
            except Exception as error:  # noqa: BLE001 - what the client saw is the result
                errors.append(f"round {round_}: {type(error).__name__}: {error}")
    print(
        "RESULT "
        + json.dumps({"reached": reached, "errors": errors, "connections": len(streams)}),
        flush=True,
    )


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2])))
