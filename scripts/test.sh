#!/usr/bin/env bash
# The project's test command. The HTML export test renders its page in headless Chromium, so
# Debian's package is installed first when it is missing, and so are the third-party MCP servers
# (scripts/mcp-servers.sh), Pi 1.6 with its Node and the pinned pi packages, and the Python ACP
# SDK (scripts/counterparts.sh), so that no test skips for want of its counterpart; arguments go
# to `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."

run() {
    echo "+ $*"
    "$@"
}

if ! command -v chromium >/dev/null 2>&1; then
    echo "scripts/test.sh: chromium is not on PATH; installing Debian's chromium package"
    if ! { run apt-get update && run apt-get install -y --no-install-recommends chromium; }; then
        echo "scripts/test.sh: installing chromium failed; the export tests need it" >&2
        echo "scripts/test.sh: install it by hand (apt-get install chromium) and run this again" >&2
        exit 1
    fi
    echo "scripts/test.sh: installed $(chromium --version)"
fi

# The MCP integration tests talk to third-party servers installed outside the repository; each
# test skips with a message when its server is missing.
scripts/mcp-servers.sh

# Pi's RpcClient, the differential test, the extension host, real pi packages and the Python
# SDK's client drive nova in the same run as every other test.
source scripts/counterparts.sh
pi_counterpart
acp_python_counterpart

run cargo test "$@"
