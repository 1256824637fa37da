# Sourced by the scripts that drive a real nova (scripts/llama-cpp.sh, scripts/local-model.sh):
# `find_nova REPO` sets `nova` to `$NOVA_BIN`, else the release or debug nova of
# `$CARGO_TARGET_DIR` (else REPO/target), building a debug one when there is none.
find_nova() {
    local repo="$1" target="${CARGO_TARGET_DIR:-$1/target}" candidate
    nova="${NOVA_BIN:-}"
    if [ -n "$nova" ]; then return; fi
    for candidate in "$target/release/nova" "$target/debug/nova"; do
        if [ -x "$candidate" ]; then nova="$candidate" && return; fi
    done
    echo "building nova (debug)" >&2
    (cd "$repo" && cargo build --quiet)
    nova="$target/debug/nova"
}
