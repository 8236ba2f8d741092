"""An MCP client on the official Python SDK (mcp 2.x) that drives `toolgate
serve` for cmd/toolgate/python_test.go.

Usage:
  python pyclient.py SCRIPT stdio COMMAND [ARG...]   # launches toolgate, environment inherited
  python pyclient.py SCRIPT http URL [API_KEY]

SCRIPT is JSON: {"mode": "auto"|"legacy"|VERSION, "ready": [TOOL, ...], "steps": [STEP, ...]}.
Before the steps, each TOOL (server__tool) is waited for, up to 120 s, until
search_tools finds it runnable (its server up, its tools indexed): a Python
backend's start can outlast its connect timeout on a loaded machine. A STEP
{"tool": NAME, "arguments": {...}} with, optionally, "timeout": SECONDS (the
call is cancelled then: {"timedOut": true}) or "until": TEXT (the call is
repeated, for up to 30 s, until its text holds TEXT: waiting on state).
The client answers questions: it confirms whatever a tool asks (elicitation)
and its model answers "py summary of <prompt>" (sampling).
Prints one JSON object: the negotiated protocol, the listed tools and, per
step, the result (isError, text, structuredContent) or the exception the SDK
raised (a result the SDK refused to accept is an interop bug).
"""

import asyncio
import json
import os
import sys
import warnings

import anyio
import httpx2

from mcp import Client, MCPDeprecationWarning, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CreateMessageResult, ElicitResult, TextContent

# logging/setLevel is deprecated from 2026-07-28 on, and asked for on purpose.
warnings.filterwarnings("ignore", category=MCPDeprecationWarning)


def result_json(res):
    return {
        "isError": bool(res.is_error),
        "text": "\n".join(c.text for c in res.content if getattr(c, "type", "") == "text"),
        "structuredContent": res.structured_content,
    }


async def ready(client, tool):
    """Waits until search_tools finds tool (server__tool) runnable: its server
    up and its tools in the index served, not marked unavailable."""
    server = tool.split("__", 1)[0]
    deadline = anyio.current_time() + 120
    while True:
        res = await client.call_tool("search_tools", {"query": tool.split("__", 1)[1].replace("_", " "), "server": server, "limit": 5})
        found = [] if res.is_error else (res.structured_content or {}).get("tools") or []
        if any(t.get("name") == tool and not t.get("unavailable") for t in found):
            return
        if anyio.current_time() > deadline:
            raise RuntimeError(f"pyclient: {tool} not runnable within 120 s: {result_json(res)}")
        await anyio.sleep(0.1)


async def run(script, server):
    out = {"steps": [], "logs": []}

    async def on_log(params):
        out["logs"].append({"level": params.level, "logger": params.logger, "data": params.data})

    # The user confirms whatever a tool asks; the model answers "py summary of <prompt>".
    async def on_elicit(context, params):
        return ElicitResult(action="accept", content={"confirm": True})

    async def on_sample(context, params):
        prompt = params.messages[0].content.text if params.messages else ""
        return CreateMessageResult(role="assistant", model="py-model", content=TextContent(type="text", text=f"py summary of {prompt}"))

    mode = script.get("mode", "auto")
    # Log messages: 2026-07-28 clients opt in per request (log_level), earlier
    # ones with logging/setLevel after connecting.
    async with Client(
        server,
        mode=mode,
        logging_callback=on_log,
        log_level="info" if mode != "legacy" else None,
        elicitation_callback=on_elicit,
        sampling_callback=on_sample,
    ) as client:
        out["protocol"] = client.protocol_version
        if mode == "legacy":
            await client.set_logging_level("info")
        listed = await client.list_tools()
        out["tools"] = {t.name: t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in listed.tools}
        for tool in script.get("ready", []):
            await ready(client, tool)
        for step in script["steps"]:
            progress = []

            async def on_progress(p, total, message, progress=progress):
                progress.append({"progress": p, "total": total, "message": message})

            try:
                deadline = anyio.current_time() + 30
                while True:
                    with anyio.move_on_after(step.get("timeout", 600)) as scope:
                        res = await client.call_tool(step["tool"], step.get("arguments", {}), progress_callback=on_progress)
                    if scope.cancelled_caught:
                        out["steps"].append({"timedOut": True})
                        break
                    done = result_json(res) | {"progress": progress}
                    if "until" not in step or step["until"] in done["text"] or anyio.current_time() > deadline:
                        out["steps"].append(done)
                        break
                    await anyio.sleep(0.05)
            except Exception as e:  # the SDK refused the answer: report it, go on
                out["steps"].append({"exception": f"{type(e).__name__}: {e}"})
    return out


def main():
    script = json.loads(sys.argv[1])
    kind = sys.argv[2]
    if kind == "stdio":
        server = StdioServerParameters(command=sys.argv[3], args=sys.argv[4:], env=dict(os.environ))
        out = asyncio.run(run(script, server))
    elif kind == "http":
        url = sys.argv[3]
        headers = {"Authorization": f"Bearer {sys.argv[4]}"} if len(sys.argv) > 4 else {}

        async def http():
            async with httpx2.AsyncClient(headers=headers, timeout=120) as hc:
                return await run(script, streamable_http_client(url, http_client=hc))

        out = asyncio.run(http())
    else:
        sys.exit(f"pyclient: unknown transport {kind!r}")
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
