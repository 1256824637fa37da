"""A streamable HTTP MCP server built on the `mcp` Python SDK, for nova's integration tests.

Usage: http_server.py PORT. It serves http://127.0.0.1:PORT/mcp until it is killed.
"""

import sys

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("py-http")


@server.tool(description="Add two integers and return the sum.")
def add(a: int, b: int) -> int:
    return a + b


@server.tool(name="shout.loud", description="Upper-case a text.")
def shout(text: str) -> str:
    return text.upper()


@server.tool(description="Always fails, with a message.")
def broken() -> str:
    raise ToolError("the broken tool always fails")


if __name__ == "__main__":
    server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]))
