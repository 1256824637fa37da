// Pi 1.6's own RpcClient driving a session inside `nova serve` through `nova attach`: the
// client believes it spawned `pi --mode rpc`. Fails on any error or unexpected answer.
//
// Run by tests/suite/serve.rs with PI_DIR (where Pi 1.6 is installed), NOVA_BIN, NOVA_SOCKET
// (the server's Unix socket) and NOVA_CWD set. RpcClient starts its agent as
// `node <cliPath> --mode rpc …`, so this file is also that "cliPath": started with `--mode`, it
// runs `nova attach` on the same stdio instead.

import { spawn } from "node:child_process";
import { fileURLToPath, pathToFileURL } from "node:url";
import { join } from "node:path";
import assert from "node:assert/strict";

if (process.argv.includes("--mode")) {
    const nova = spawn(
        process.env.NOVA_BIN,
        ["attach", process.env.NOVA_SOCKET, "--new", "--cwd", process.env.NOVA_CWD,
            "--model", "mock/first"],
        { stdio: "inherit" },
    );
    for (const signal of ["SIGTERM", "SIGINT", "SIGHUP"]) {
        process.on(signal, () => nova.kill(signal));
    }
    nova.on("exit", (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
} else {
    await drive().catch((error) => {
        console.error(`pi-attach: ${error.stack ?? error}`);
        process.exit(1);
    });
}

async function drive() {
    const clientPath = join(
        process.env.PI_DIR,
        "node_modules/@earendil-works/pi-coding-agent/dist/modes/rpc/rpc-client.js",
    );
    const { RpcClient } = await import(pathToFileURL(clientPath).href);
    const client = new RpcClient({ cliPath: fileURLToPath(import.meta.url) });
    await client.start();
    const state = await client.getState();
    assert.equal(state.model.id, "first");
    assert.equal(state.isStreaming, false);
    const run = await client.promptAndWait("hello through the server", undefined, 20_000);
    assert.equal(run.at(-1).type, "agent_settled");
    assert.ok(run.some((e) => e.type === "message_update"));
    assert.equal(await client.getLastAssistantText(), "served reply");
    const messages = await client.getMessages();
    assert.equal(messages.length, 2);
    await client.stop();
}
