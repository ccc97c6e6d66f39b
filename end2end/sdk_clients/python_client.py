"""The official Python MCP SDK as an agent: connects to /mcp with an agent key, lists the
tools, and closes (which ends the session with `DELETE /mcp`).

Usage: python_client.py URL KEY. Prints `TOOLS n` on stdout. Log records of the SDK and of
its HTTP client from INFO up go to stderr with their level first (INFO shows each request,
the closing DELETE included), so a test can check that the whole run logged nothing at
WARNING or above and no traceback. (At DEBUG the SDK also logs, with a traceback, the
server's 405 to its optional GET stream, which the spec allows.)
"""

import asyncio
import logging
import sys

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client


async def main(url: str, key: str) -> None:
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx2.AsyncClient(headers=headers) as http:
        async with Client(streamable_http_client(url, http_client=http), mode="legacy") as client:
            tools = await client.list_tools()
            print(f"TOOLS {len(tools.tools)}", flush=True)


if __name__ == "__main__":
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    asyncio.run(main(sys.argv[1], sys.argv[2]))
