#!/usr/bin/env bash
# Installs the third-party MCP servers the integration tests talk to, into a cache outside the
# repository (`$NOVA_MCP_SERVERS_DIR`, else `~/.cache/nova/mcp-servers`), when they are missing:
#   npm/   the reference filesystem server (@modelcontextprotocol/server-filesystem, stdio)
#   py/    a virtualenv with the `mcp` Python SDK (tests/mcp/http_server.py serves streamable HTTP)
# A failed install is reported and the script goes on: the tests that need a missing server skip
# with a message naming it. Versions are pinned so a registry release cannot change the tests.
set -uo pipefail

FS_SERVER_VERSION="2026.8.31"
PY_MCP_VERSION="2.3.0"

dir="${NOVA_MCP_SERVERS_DIR:-$HOME/.cache/nova/mcp-servers}"
mkdir -p "$dir"

fs_entry="$dir/npm/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"
if [ -f "$fs_entry" ]; then
    echo "scripts/mcp-servers.sh: filesystem server present in $dir/npm"
elif ! command -v npm >/dev/null 2>&1; then
    echo "scripts/mcp-servers.sh: npm is not installed; the filesystem server tests will skip" >&2
else
    echo "scripts/mcp-servers.sh: installing @modelcontextprotocol/server-filesystem@$FS_SERVER_VERSION"
    if ! npm install --silent --no-audit --no-fund --prefix "$dir/npm" \
        "@modelcontextprotocol/server-filesystem@$FS_SERVER_VERSION" >&2; then
        echo "scripts/mcp-servers.sh: installing the filesystem server failed; its tests will skip" >&2
    fi
fi

if [ -x "$dir/py/bin/python" ] && "$dir/py/bin/python" -c "import mcp" 2>/dev/null; then
    echo "scripts/mcp-servers.sh: Python mcp SDK present in $dir/py"
elif ! command -v python3 >/dev/null 2>&1; then
    echo "scripts/mcp-servers.sh: python3 is not installed; the streamable HTTP tests will skip" >&2
else
    echo "scripts/mcp-servers.sh: installing the Python mcp SDK $PY_MCP_VERSION"
    if ! { python3 -m venv "$dir/py" &&
        "$dir/py/bin/pip" install --quiet --disable-pip-version-check "mcp==$PY_MCP_VERSION"; } >&2; then
        echo "scripts/mcp-servers.sh: installing the Python mcp SDK failed; its tests will skip" >&2
    fi
fi
exit 0
