#!/usr/bin/env bash
# Regenerates data/models/, the model catalog compiled into nova (src/config/catalog.rs).
#
# Source: the model table published in the npm package @earendil-works/pi-ai (Pi's provider
# library), which its maintainers generate from public model metadata (models.dev and the
# providers' own model lists). nova reads that package's JSON (dist/providers/data/), keeps the
# chat models of the providers it can reach and the facts it uses (ids, names, APIs, addresses,
# reasoning and thinking levels, input kinds, prices, context windows, max tokens, compat,
# headers), and writes one file per provider plus source.json naming the package version. The
# conversion is nova's own `nova update --models` (src/update.rs), so the repository's catalog
# and a user's refreshed one are made the same way.
#
# Usage:
#   scripts/update-models.sh                # the package of the Pi the tests run ($NOVA_PI_DIR,
#                                           # else ~/.cache/nova/pi-1.6.0; scripts/pi-client.sh
#                                           # installs it)
#   scripts/update-models.sh <package dir>  # an unpacked @earendil-works/pi-ai
#   scripts/update-models.sh --latest       # the newest release, fetched with npm
set -euo pipefail
cd "$(dirname "$0")/.."

case "${1:-}" in
    --latest) from=() ;;
    "")
        pi_dir="${NOVA_PI_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/nova/pi-1.6.0}"
        from=(--from "$pi_dir/node_modules/@earendil-works/pi-ai")
        ;;
    *) from=(--from "$1") ;;
esac
agent=$(mktemp -d)
trap 'rm -rf "$agent"' EXIT
NOVA_AGENT_DIR="$agent" cargo run --quiet -- update --models "${from[@]}"
rm -rf data/models
cp -r "$agent/catalog" data/models
echo "data/models: $(grep -h '"version"' data/models/source.json)"
