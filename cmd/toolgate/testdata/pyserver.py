"""A small MCP server on the official Python SDK (mcp 2.x MCPServer; with mcp
1.x, FastMCP), a backend of toolgate in cmd/toolgate/python_test.go.

Usage: python pyserver.py stdio | streamable-http PORT | stateless-http PORT | sse PORT
"""

import sys
import warnings
from typing import Literal

from pydantic import BaseModel, Field

from mcp.types import SamplingMessage, TextContent

try:  # mcp 2.x
    from mcp import MCPDeprecationWarning
    from mcp.server.mcpserver import Context, MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    # ctx.info (logging) is deprecated from 2026-07-28 on, and used on purpose.
    warnings.filterwarnings("ignore", category=MCPDeprecationWarning)
    V1 = False
except ImportError:  # mcp 1.x: FastMCP, the initialize handshake only
    from mcp.server.fastmcp import Context
    from mcp.server.fastmcp import FastMCP as MCPServer
    from mcp.server.fastmcp.exceptions import ToolError

    V1 = True

server = MCPServer("pylibrary", instructions="A lending library's catalogue and loans.")


@server.tool()
def find_books(author: str, limit: int = 3) -> str:
    """Find books in the library catalogue written by an author."""
    return f"{min(limit, 2)} books by {author}: The First Book, The Second Book"


class ShelfReport(BaseModel):
    shelf: str
    books: int = Field(description="how many books stand on the shelf")
    fullness: float = Field(description="share of the shelf in use, 0 to 1")
    rfid: int = Field(description="the shelf's 64-bit RFID tag")


@server.tool()
def shelf_report(shelf: str) -> ShelfReport:
    """Count the books standing on a library shelf and how full it is."""
    return ShelfReport(shelf=shelf, books=42, fullness=0.75, rfid=12345678901234567891)


@server.tool()
def renew_loan(loan_id: str) -> str:
    """Renew the loan of a borrowed library book for two more weeks."""
    raise ToolError(f"loan {loan_id} is overdue and cannot be renewed")


@server.tool()
def reshelve_crash(shelf: str) -> str:
    """Move every book of a library shelf to another building (always crashes)."""
    raise RuntimeError("secret internal detail")


class Reader(BaseModel):
    name: str
    card: int = Field(ge=1, description="library card number")


class Request(BaseModel):
    reader: Reader
    titles: list[str] = Field(min_length=1)
    note: str | None = None


@server.tool()
def order_books(delivery: Literal["pickup", "post", "locker"], request: Request) -> str:
    """Order library books to be delivered to a reader by pickup, post or locker."""
    return f"{len(request.titles)} book(s) for {request.reader.name} (card {request.reader.card}) by {delivery}"


@server.tool()
async def scan_catalogue(pages: int, ctx: Context) -> str:
    """Scan the pages of the library catalogue, reporting progress and logging each page."""
    for page in range(1, pages + 1):
        await ctx.info(f"scanned page {page}")
        await ctx.report_progress(page, pages, f"page {page} of {pages}")
    return f"scanned {pages} pages"


naps = {"cancelled": 0}


@server.tool()
async def nap(seconds: float) -> str:
    """Let the librarian rest for some seconds (a slow tool, for cancellation)."""
    import anyio

    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        naps["cancelled"] += 1
        raise
    return "rested"


@server.tool()
def cancelled_naps() -> str:
    """How many naps were cancelled so far."""
    return f"{naps['cancelled']} cancelled"


class Confirmation(BaseModel):
    confirm: bool


def summary_prompt(topic: str) -> list[SamplingMessage]:
    return [SamplingMessage(role="user", content=TextContent(type="text", text=f"Summarise {topic} in one line."))]


if V1:

    @server.tool()
    async def withdraw_book(title: str, ctx: Context) -> str:
        """Withdraw a book from the library for good, once the user confirms."""
        answer = await ctx.elicit(f"Withdraw {title} for good?", Confirmation)
        return f"withdrawn: {answer.action}"

    @server.tool()
    async def summarise_topic(topic: str, ctx: Context) -> str:
        """Summarise a topic of the library's collection with the client's model."""
        answer = await ctx.session.create_message(summary_prompt(topic), max_tokens=50)
        return f"summary: {answer.content.text}"

    @server.tool()
    async def reading_rooms(ctx: Context) -> str:
        """List the reading rooms open to the client (its roots)."""
        answer = await ctx.session.list_roots()
        return "rooms: " + " ".join(str(r.uri) for r in answer.roots)

else:
    from typing import Annotated

    from mcp.server.mcpserver import Elicit, ListRoots, Resolve, Sample
    from mcp.types import CreateMessageResult, ListRootsResult

    def ask_withdraw(title: str) -> Elicit[Confirmation]:
        return Elicit(f"Withdraw {title} for good?", Confirmation)

    @server.tool()
    async def withdraw_book(title: str, answer: Annotated[Confirmation, Resolve(ask_withdraw)]) -> str:
        """Withdraw a book from the library for good, once the user confirms."""
        return f"withdrawn: {answer.confirm}"

    def ask_summary(topic: str) -> Sample:
        return Sample(summary_prompt(topic), max_tokens=50)

    @server.tool()
    async def summarise_topic(topic: str, answer: Annotated[CreateMessageResult, Resolve(ask_summary)]) -> str:
        """Summarise a topic of the library's collection with the client's model."""
        return f"summary: {answer.content.text}"

    def ask_roots() -> ListRoots:
        return ListRoots()

    @server.tool()
    async def reading_rooms(answer: Annotated[ListRootsResult, Resolve(ask_roots)]) -> str:
        """List the reading rooms open to the client (its roots)."""
        return "rooms: " + " ".join(str(r.uri) for r in answer.roots)


def rare_manuscripts(century: int) -> str:
    """List the rare illuminated manuscripts of the library from a century."""
    return f"manuscripts of century {century}: Book of Hours"


@server.tool()
async def open_archive(ctx: Context) -> str:
    """Open the library's archive room: adds the rare manuscripts tool."""
    server.add_tool(rare_manuscripts)
    # Both eras: 2025-11-25 sessions get the notification on the session,
    # 2026-07-28 ones on their subscriptions/listen stream.
    if not V1:
        await ctx.notify_tools_changed()
    try:
        await ctx.session.send_tool_list_changed()
    except Exception as e:  # no session channel at the 2026-07-28 era
        print(f"pyserver: send_tool_list_changed: {e!r}", file=sys.stderr)
    return "archive open"


if __name__ == "__main__":
    transport = sys.argv[1] if len(sys.argv) > 1 else "stdio"
    opts = {}
    if transport == "stateless-http":  # stateless_http=True, json_response=True: a common deployment
        transport, opts = "streamable-http", {"stateless_http": True, "json_response": True}
    if transport != "stdio":
        opts |= {"host": "127.0.0.1", "port": int(sys.argv[2])}
    if V1:  # settings, not run()'s arguments
        for k, v in opts.items():
            setattr(server.settings, k, v)
        opts = {}
    server.run(transport, **opts)
