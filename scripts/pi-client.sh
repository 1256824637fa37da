#!/usr/bin/env bash
# Pi 1.6 against nova, on the mock LLM of the test suite, alone (scripts/test.sh runs the same
# tests among all the others): Pi's own RpcClient (scripts/pi-client.mjs) drives nova through
# every public method of the client, and the differential test (tests/suite/differential) runs
# the same scenarios through Pi and nova and compares what they send key by key, allowing only
# tests/pi-differences.txt; nova's model list is compared with Pi's, provider by provider
# (tests/suite/catalog.rs); and Pi extensions and real pi packages run in nova's extension host
# (tests/suite/extensions.rs, tests/suite/pi_packages.rs). Installs Pi, its Node and the
# packages' npm cache the first time (scripts/counterparts.sh says where).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/counterparts.sh
pi_counterpart

cargo test --test all -- --nocapture pi_client differential \
    nova_lists_every_model_pi_lists extensions:: pi_packages:: pis_rpc_client_drives_a_served_session
