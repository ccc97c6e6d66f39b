"""The official Python MCP SDK as an agent that reads call_tool's answers: it learns
tier-1-support, then makes calls that are refused, held and run. The SDK checks each
successful result against the outputSchema call_tool publishes and raises when one does
not fit, so a run that finishes is that check passed.

Usage: answers_client.py URL KEY CALLS (answers_calls.json: the calls, as `[tool,
arguments]`). Prints `RESULT <json>`: per call, its isError and the answer's decision,
code, remedy type, hold id and whether it carries the tool's own result.
"""

import asyncio
import json
import sys

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client



def summary(tool, is_error, structured):
    structured = structured or {}
    remedy = structured.get("remedy") or {}
    return {
        "tool": tool,
        "is_error": is_error,
        "decision": structured.get("decision"),
        "code": structured.get("code"),
        "remedy": remedy.get("type"),
        "has_result": "result" in structured,
        "hold_id": structured.get("hold_id"),
    }


async def main(url: str, key: str, calls_file: str) -> None:
    with open(calls_file) as f:
        calls = json.load(f)
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx2.AsyncClient(headers=headers) as http:
        async with Client(streamable_http_client(url, http_client=http), mode="legacy") as client:
            tools = await client.list_tools()
            schema = next(t.output_schema for t in tools.tools if t.name == "call_tool")
            init = await client.call_tool("init_skilder", {"task_summary": "refund an order"})
            session = init.structured_content["session_id"]
            await client.call_tool("learn", {"path": "/roles/tier-1-support", "session_id": session})
            answers = []
            for tool, arguments in calls:
                result = await client.call_tool(
                    "call_tool", {"tool": tool, "arguments": arguments, "session_id": session}
                )
                answers.append(summary(tool, bool(result.is_error), result.structured_content))
    print("RESULT " + json.dumps({"output_schema": schema is not None, "answers": answers}), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3]))
