#!/usr/bin/env bash
# The official Python ACP SDK against nova, on the mock LLM of the test suite: its client side
# (scripts/acp-client.py) drives `nova --mode acp` through initialize, a new session, a prompt
# whose tool call asks permission, and a load. Installs the SDK from PyPI into a venv outside
# the repository the first time: $NOVA_ACP_PY_DIR, else ~/.cache/nova/acp-python-0.12.1.
set -euo pipefail
cd "$(dirname "$0")/.."

version=0.12.1
venv="${NOVA_ACP_PY_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/nova/acp-python-$version}"
if ! "$venv/bin/python" -c 'import acp' >/dev/null 2>&1; then
    if ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
        echo "python3's venv module is missing; installing Debian's python3-venv"
        apt-get update -qq && apt-get install -y -qq python3-venv >/dev/null
    fi
    echo "installing the Python ACP SDK $version into $venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check "agent-client-protocol==$version"
fi

NOVA_ACP_PYTHON="$venv/bin/python" cargo test --test all -- --nocapture acp_python
