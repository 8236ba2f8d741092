"""An MCP server on the official Python SDK's low-level Server (mcp 2.x),
which sends what its tool returns as it is: its tool declares an
outputSchema and answers, by the argument "mode", structuredContent that
fits it ("fits"), that does not ("wrong"), none ("none"), an isError
result ("error"), or 2 MB that does not fit ("big"). A backend of toolgate in cmd/toolgate/outputcheck_test.go;
MCPServer (FastMCP) checks its own tools' answers, which a server built
otherwise (or on an SDK that does not) may not.

Usage: python pyoutput.py (stdio)
"""

import anyio

import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

OUTPUT = {
    "type": "object",
    "properties": {
        "temperature": {"type": "number"},
        "conditions": {"type": "string"},
    },
    "required": ["temperature", "conditions"],
}

ANSWERS = {
    "fits": {"temperature": 22.5, "conditions": "sunny"},
    "wrong": {"temperature": "warm", "conditions": "sunny"},
    # Over maxResultBytes (2.1 MB) and over the 1 MiB from which toolgate
    # keeps a structuredContent as written; does not fit either.
    "big": {"temperature": "warm", "conditions": "cloudy " * 300_000},
}


async def list_tools(ctx, params):
    return types.ListToolsResult(
        tools=[
            types.Tool(
                name="forecast",
                description="Weather forecast for a city: temperature in degrees Celsius and conditions.",
                input_schema={
                    "type": "object",
                    "properties": {"mode": {"type": "string", "enum": ["fits", "wrong", "none", "error", "big"]}},
                    "required": ["mode"],
                },
                output_schema=OUTPUT,
            )
        ]
    )


async def call_tool(ctx, params):
    mode = (params.arguments or {}).get("mode")
    if mode == "error":
        return types.CallToolResult(content=[types.TextContent(type="text", text="no forecast for that city")], is_error=True)
    text = types.TextContent(type="text", text=f"forecast ({mode})")
    if mode == "none":
        return types.CallToolResult(content=[text])
    return types.CallToolResult(content=[text], structured_content=ANSWERS[mode])


server = Server("pyweather", on_list_tools=list_tools, on_call_tool=call_tool)


async def main():
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
