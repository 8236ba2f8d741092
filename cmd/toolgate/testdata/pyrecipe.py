"""The README's Python SDK 2.x recipe for an API key, run as written: its
client calls a tool that answers after httpx2's default timeout, over
toolgate's HTTP front, with both protocols. For cmd/toolgate/python_test.go.

Usage: python pyrecipe.py URL KEY RECIPE
RECIPE is the README's Python expression, in which `url` is the gateway's
URL and "tg_…" stands for the key. Prints one line a protocol: the
negotiated version and the tool's text, or the exception the client raised.
"""

import sys
import warnings

import anyio
import httpx2

from mcp import Client, MCPDeprecationWarning
from mcp.client.streamable_http import streamable_http_client

warnings.filterwarnings("ignore", category=MCPDeprecationWarning)

url, key, recipe = sys.argv[1], sys.argv[2], sys.argv[3]
# Longer than httpx2's own default for a wait (5 s), which a client made
# with httpx2.AsyncClient(headers=...) alone keeps.
seconds = httpx2.Timeout(5.0).read + 1
scope = {"url": url, "httpx2": httpx2, "streamable_http_client": streamable_http_client}


async def run(mode):
    try:
        async with Client(eval(recipe.replace("tg_…", key), scope), mode=mode) as c:
            deadline = anyio.current_time() + 120
            while True:  # the backend up: its tool runs
                r = await c.call_tool("execute_tool", {"name": "pylib__cancelled_naps"})
                if not r.is_error or anyio.current_time() > deadline:
                    break
                await anyio.sleep(0.1)
            r = await c.call_tool("execute_tool", {"name": "pylib__nap", "arguments": {"seconds": seconds}})
            return f"{c.protocol_version} {r.content[0].text}"
    except BaseException as e:  # noqa: BLE001 - reported, the test fails on it
        while isinstance(e, BaseExceptionGroup) and len(e.exceptions) == 1:
            e = e.exceptions[0]
        return f"{mode} raised {type(e).__name__}: {e}"


async def main():
    out = {}

    async def one(mode):
        out[mode] = await run(mode)

    async with anyio.create_task_group() as tg:
        for mode in ("legacy", "auto"):
            tg.start_soon(one, mode)
    print(out["legacy"])
    print(out["auto"])


anyio.run(main)
