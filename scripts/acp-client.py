"""The official Python ACP SDK's client side driving `nova --mode acp` (run by
tests/suite/acp_python.rs, which scripts the mock model: a flagged bash call, then "done").

Covers initialize, session/new, a prompt whose tool call needs permission (allowed once),
and session/load replaying the stored conversation. Exits non-zero, saying why on stderr, when
nova answers anything other than expected."""

import asyncio
import os
import sys

import acp
from acp import schema


class Editor:
    """What an editor does with nova's requests: keeps the updates, allows once when asked."""

    def __init__(self):
        self.updates = []
        self.asked = []

    async def request_permission(self, session_id, tool_call, options, **kwargs):
        self.asked.append(tool_call)
        allow = next(o for o in options if o.kind == "allow_once")
        return schema.RequestPermissionResponse(
            outcome=schema.AllowedOutcome(option_id=allow.option_id, outcome="selected")
        )

    async def session_update(self, session_id, update, **kwargs):
        self.updates.append((session_id, update))

    def of(self, session_id, kind):
        return [u for s, u in self.updates if s == session_id and u.session_update == kind]

    def text(self, session_id, kind):
        return "".join(u.content.text for u in self.of(session_id, kind))


def check(ok, what):
    if not ok:
        raise AssertionError(what)


async def main():
    editor = Editor()
    env = dict(os.environ)
    cwd = os.environ["NOVA_CWD"]
    args = ["--mode", "acp", "--provider", "mock-openai", "--model", "test-model"]
    async with acp.spawn_agent_process(
        editor, os.environ["NOVA_BIN"], *args, env=env, cwd=cwd
    ) as (conn, _process):
        init = await conn.initialize(
            protocol_version=acp.PROTOCOL_VERSION,
            client_capabilities=schema.ClientCapabilities(),
            client_info=schema.Implementation(name="acp-python-test", version="1"),
        )
        check(init.protocol_version == 1, f"protocol version {init.protocol_version}")
        check(init.agent_capabilities.load_session, "loadSession is offered")

        session = await conn.new_session(cwd=cwd, mcp_servers=[])
        sid = session.session_id
        categories = {o.category for o in session.config_options}
        check("model" in categories, f"a model option among {categories}")

        answer = await conn.prompt(session_id=sid, prompt=[acp.text_block("clean up")])
        check(answer.stop_reason == "end_turn", f"stop reason {answer.stop_reason}")
        check(len(editor.asked) == 1, f"asked {len(editor.asked)} times")
        check(not os.path.exists(os.path.join(cwd, "build")), "the allowed command ran")
        ended = [u for u in editor.of(sid, "tool_call_update") if u.status == "completed"]
        check(len(ended) == 1, f"one completed call in {editor.updates}")
        check(editor.text(sid, "agent_message_chunk") == "done", "the reply streamed")

        before = len(editor.updates)
        await conn.load_session(cwd=cwd, session_id=sid, mcp_servers=[])
        replayed = editor.updates[before:]
        users = "".join(
            u.content.text for s, u in replayed if u.session_update == "user_message_chunk"
        )
        check(users == "clean up", f"the user's message replayed: {users!r}")
        calls = [u for s, u in replayed if u.session_update == "tool_call"]
        check(len(calls) == 1, f"the call replayed: {replayed}")


if __name__ == "__main__":
    try:
        asyncio.run(asyncio.wait_for(main(), 60))
    except Exception as e:  # the test prints this
        print(f"acp-client.py: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)
