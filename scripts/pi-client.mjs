// Drives nova with Pi 1.6's own RpcClient, calling every public method of it, and fails on any
// error, `success: false` or unexpected answer. A mismatch here is a bug in nova.
//
// Run by `scripts/pi-client.sh` (through `tests/suite/pi_client.rs`, which serves the mock LLM)
// with PI_DIR (where Pi 1.6 is installed), NOVA_BIN, NOVA_AGENT_DIR and NOVA_CWD set.
//
// RpcClient starts its agent as `node <cliPath> --mode rpc …`, so this file is also that
// "cliPath": started with `--mode`, it only runs nova with the same arguments and stdio.

import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import assert from "node:assert/strict";

if (process.argv.includes("--mode")) {
    const nova = spawn(process.env.NOVA_BIN, process.argv.slice(2), { stdio: "inherit" });
    // RpcClient.stop() signals this process; nova must get the signal to shut down in order.
    for (const signal of ["SIGTERM", "SIGINT", "SIGHUP"]) {
        process.on(signal, () => nova.kill(signal));
    }
    nova.on("exit", (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
} else {
    await drive().catch((error) => {
        console.error(`pi-client: ${error.stack ?? error}`);
        process.exit(1);
    });
}

async function drive() {
    const clientPath = join(
        process.env.PI_DIR,
        "node_modules/@earendil-works/pi-coding-agent/dist/modes/rpc/rpc-client.js",
    );
    const { RpcClient } = await import(pathToFileURL(clientPath).href);
    const client = new RpcClient({
        cliPath: fileURLToPath(import.meta.url),
        cwd: process.env.NOVA_CWD,
        provider: "mock",
        model: "first",
    });
    const events = [];
    const called = ["onEvent"];
    client.onEvent((event) => events.push(event));
    const seen = (type) => events.filter((e) => e.type === type);
    const step = async (name, work) => {
        called.push(name);
        try {
            return await work();
        } catch (error) {
            error.message = `${name}: ${error.message}`;
            throw error;
        }
    };

    await step("start", () => client.start());

    let state = await step("getState", () => client.getState());
    assert.equal(state.model.id, "first");
    assert.equal(state.thinkingLevel, "medium");
    assert.equal(state.isStreaming, false);

    const models = await step("getAvailableModels", () => client.getAvailableModels());
    assert.deepEqual(models.map((m) => m.id), ["first", "second"]);
    const levels = await step("getAvailableThinkingLevels", () =>
        client.getAvailableThinkingLevels(),
    );
    assert.deepEqual(levels, ["off", "minimal", "low", "medium", "high"]);
    await step("setThinkingLevel", () => client.setThinkingLevel("high"));
    assert.deepEqual(seen("thinking_level_changed").at(-1), {
        type: "thinking_level_changed",
        level: "high",
    });
    assert.deepEqual(await step("cycleThinkingLevel", () => client.cycleThinkingLevel()), {
        level: "off",
    });
    const cycled = await step("cycleModel", () => client.cycleModel());
    assert.equal(cycled.model.id, "second");
    assert.equal(cycled.isScoped, false);
    const model = await step("setModel", () => client.setModel("mock", "first"));
    assert.equal(model.id, "first");

    await step("setSteeringMode", () => client.setSteeringMode("all"));
    await step("setFollowUpMode", () => client.setFollowUpMode("all"));
    await step("setAutoCompaction", () => client.setAutoCompaction(true));
    await step("setAutoRetry", () => client.setAutoRetry(true));
    await step("abortRetry", () => client.abortRetry());

    const idle = client.waitForIdle(20_000);
    assert.equal(await step("prompt", () => client.prompt("hello")), "started");
    await step("waitForIdle", () => idle);
    const run = await step("promptAndWait", () => client.promptAndWait("second question"));
    assert.equal(run.at(-1).type, "agent_settled");
    const collected = client.collectEvents(20_000);
    await step("prompt", () => client.prompt("third question"));
    const third = await step("collectEvents", () => collected);
    assert.ok(third.some((e) => e.type === "turn_end"));

    assert.equal(await step("steer", () => client.steer("later")), "queued");
    assert.equal(await step("followUp", () => client.followUp("after that")), "queued");
    assert.deepEqual(await step("clearQueue", () => client.clearQueue()), {
        steering: ["later"],
        followUp: ["after that"],
    });
    await step("abort", () => client.abort());

    const bash = await step("bash", () => client.bash("echo from-bash"));
    assert.deepEqual(bash, {
        output: "from-bash\n",
        exitCode: 0,
        cancelled: false,
        truncated: false,
    });
    assert.equal(seen("bash_execution_update").at(-1).delta, "from-bash\n");
    await step("abortBash", () => client.abortBash());

    const messages = await step("getMessages", () => client.getMessages());
    assert.ok(messages.some((m) => m.role === "bashExecution"));
    assert.equal(await step("getLastAssistantText", () => client.getLastAssistantText()), "reply 3");
    const stats = await step("getSessionStats", () => client.getSessionStats());
    assert.equal(stats.userMessages, 3);

    const compacted = await step("compact", () => client.compact("keep it short"));
    assert.equal(compacted.summary.startsWith("the summary"), true);
    const exportDir = mkdtempSync(join(tmpdir(), "nova-pi-client-"));
    const exported = await step("exportHtml", () =>
        client.exportHtml(join(exportDir, "session.html")),
    );
    assert.ok(readFileSync(exported.path, "utf8").includes("from-bash"));

    await step("setSessionName", () => client.setSessionName("pi client run"));
    assert.equal(seen("session_info_changed").at(-1).name, "pi client run");
    const entries = await step("getEntries", () => client.getEntries());
    assert.equal(entries.leafId, entries.entries.at(-1).id);
    const since = await step("getEntries", () => client.getEntries(entries.entries.at(-2).id));
    assert.equal(since.entries.length, 1);
    const tree = await step("getTree", () => client.getTree());
    assert.equal(tree.leafId, entries.leafId);
    assert.deepEqual(await step("getCommands", () => client.getCommands()), []);

    state = await step("getState", () => client.getState());
    assert.equal(state.sessionName, "pi client run");
    const sessionFile = state.sessionFile;
    assert.ok(existsSync(sessionFile));
    const forkable = await step("getForkMessages", () => client.getForkMessages());
    assert.equal(forkable.length, 3);
    const forked = await step("fork", () => client.fork(forkable[1].entryId));
    assert.deepEqual(forked, { text: "second question", cancelled: false });
    assert.deepEqual(await step("clone", () => client.clone()), { cancelled: false });
    assert.deepEqual(await step("switchSession", () => client.switchSession(sessionFile)), {
        cancelled: false,
    });
    assert.equal((await client.getState()).sessionFile, sessionFile);
    assert.deepEqual(await step("newSession", () => client.newSession(sessionFile)), {
        cancelled: false,
    });
    assert.equal((await client.getState()).messageCount, 0);

    const failed = events.filter((e) => e.type === "message_end" && e.message.stopReason === "error");
    assert.deepEqual(failed, [], "no reply failed");
    const stderr = await step("getStderr", async () => client.getStderr());
    assert.equal(typeof stderr, "string");
    await step("stop", () => client.stop());

    const publicMethods = Object.getOwnPropertyNames(RpcClient.prototype).filter(
        (name) =>
            name !== "constructor" &&
            !["handleLine", "createProcessExitError", "rejectPendingRequests", "send", "getData"].includes(
                name,
            ),
    );
    const missed = publicMethods.filter((name) => !called.includes(name));
    assert.deepEqual(missed, [], "every public RpcClient method is called");
    console.log(`pi-client: ${new Set(called).size} RpcClient methods against nova, all passed`);
}
