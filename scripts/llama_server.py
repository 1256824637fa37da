"""Serves a GGUF model with llama.cpp's own HTTP server (OpenAI-compatible, on loopback),
through the prebuilt `xllamacpp` wheel, so no compiler is needed. Used by scripts/local-model.sh
and scripts/llama-cpp.sh.

    python llama_server.py MODEL.gguf PORT CONTEXT [CHAT_TEMPLATE_FILE]

Prints "listening on <address>" once the model is loaded, then serves until killed.
"""

import os
import signal
import sys

import xllamacpp


def main():
    model, port, context = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    params = xllamacpp.CommonParams()
    params.model.path = model
    params.hostnames = ["127.0.0.1"]
    params.port = port
    params.n_ctx = context
    # Jinja templates are what carry the model's tool-call format.
    params.use_jinja = True
    if len(sys.argv) > 4:
        with open(sys.argv[4], encoding="utf-8") as template:
            params.chat_template = template.read()
    threads = os.cpu_count() or 1
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    server = xllamacpp.Server(params)
    print(f"listening on {server.listening_address}", flush=True)
    signal.sigwait({signal.SIGTERM, signal.SIGINT})


if __name__ == "__main__":
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
    main()
