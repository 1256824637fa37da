#!/usr/bin/env bash
# The official Python ACP SDK against nova, on the mock LLM of the test suite, alone
# (scripts/test.sh runs it among all the others): its client side (scripts/acp-client.py)
# drives `nova --mode acp` through initialize, a new session, a prompt whose tool call asks
# permission, and a load. Installs the SDK from PyPI into a venv the first time
# (scripts/counterparts.sh says where).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/counterparts.sh
acp_python_counterpart

cargo test --test all -- --nocapture acp_python
