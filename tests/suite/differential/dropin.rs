//! What a Pi user's setup changes on the wire, run through Pi 1.6 and through nova alike: which
//! context files reach the system prompt and in what order, the `PI_*` variables a shell
//! command sees, where `PI_CODING_AGENT_SESSION_DIR` and the `sessionDir` setting put the
//! session, and what `PI_CACHE_RETENTION=long` adds to a request. Each must agree exactly.

use super::rpc::{Rpc, Side};
use super::{ask, final_state, is_event};
use crate::support::mock_llm::{MockLlm, Recorded, Reply};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// One side's run: the requests the mock received and the final `get_state`.
struct Observed {
    requests: Vec<Recorded>,
    state: Value,
}

/// The files and environment of one comparison, laid out afresh for each side.
struct Setup<'a> {
    api: &'a str,
    replies: Vec<Reply>,
    /// `(path under the scratch dir, text)`; the cwd is `project/sub`.
    files: &'a [(&'a str, &'a str)],
    /// `(name, value)`; a value starting with `@` names a path under the scratch dir.
    env: &'a [(&'a str, &'a str)],
    /// The agent dir's settings.json.
    settings: Value,
    /// Prompts sent (one reply each from `replies`), and whether a `compact` follows them.
    prompts: usize,
    compact: bool,
}

fn observe(side: Side, pi_dir: &Path, setup: &Setup) -> (Observed, PathBuf, tempfile::TempDir) {
    let mock = MockLlm::start();
    for reply in &setup.replies {
        mock.push(reply.clone());
    }
    let scratch = tempfile::tempdir().unwrap();
    let root = scratch.path().canonicalize().unwrap();
    let agent = root.join("agent");
    let cwd = root.join("project/sub");
    std::fs::create_dir_all(&cwd).unwrap();
    std::fs::create_dir_all(&agent).unwrap();
    for (path, text) in setup.files {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        if text.is_empty() {
            std::fs::create_dir_all(&path).unwrap();
        } else {
            std::fs::write(&path, text).unwrap();
        }
    }
    let base_url = match setup.api {
        "anthropic-messages" => mock.base_url_anthropic(),
        _ => mock.base_url_openai(),
    };
    let models = json!({"providers": {"mock": {
        "baseUrl": base_url, "api": setup.api, "apiKey": "mock-key",
        "models": [{"id": "test-model", "name": "Test model", "contextWindow": 128000,
                    "maxTokens": 4096, "input": ["text"], "reasoning": false}]}}});
    std::fs::write(agent.join("models.json"), models.to_string()).unwrap();
    std::fs::write(agent.join("settings.json"), setup.settings.to_string()).unwrap();
    let env: Vec<(&str, PathBuf)> = setup
        .env
        .iter()
        .map(|(name, value)| match value.strip_prefix('@') {
            Some(rel) => (*name, root.join(rel)),
            None => (*name, PathBuf::from(value)),
        })
        .collect();
    let env: Vec<(&str, &Path)> = env.iter().map(|(n, v)| (*n, v.as_path())).collect();
    let args = ["--provider", "mock", "--model", "test-model"];
    let mut rpc = Rpc::start_with(side, pi_dir, &agent, &cwd, &args, &env);
    for i in 0..setup.prompts {
        rpc.send(&json!({"id": "p", "type": "prompt", "message": format!("question {i}")}));
        rpc.until("agent_end", is_event("agent_end"));
        ask(&mut rpc, json!({"type": "get_state"}));
    }
    if setup.compact {
        ask(&mut rpc, json!({"type": "compact"}));
    }
    let state = final_state(rpc);
    let observed = Observed {
        requests: mock.chat_requests(),
        state,
    };
    (observed, root, scratch)
}

/// `what` of each side, which must be equal.
fn compare<T: std::fmt::Debug + PartialEq>(
    pi_dir: &Path,
    name: &str,
    setup: &Setup,
    what: impl Fn(&Observed, &Path) -> T,
) {
    let [pi, nova] = [Side::Pi, Side::Nova].map(|side| {
        let (observed, root, _scratch) = observe(side, pi_dir, setup);
        what(&observed, &root)
    });
    assert_eq!(pi, nova, "{name}: Pi 1.6 (left) and nova (right) differ");
}

fn system_prompt(body: &Value) -> String {
    if let Some(system) = body["system"].as_array() {
        return system
            .iter()
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n");
    }
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "system" || m["role"] == "developer")
        .filter_map(|m| m["content"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

const CONTEXT_MARKERS: [&str; 7] = [
    "AGENT-OVERRIDE",
    "AGENT-PLAIN",
    "PROJECT-UPPER",
    "PROJECT-CLAUDE",
    "SUB-CLAUDE-UPPER",
    "SUB-PLAIN-CLAUDE",
    "SUB-DIR-NAMED-LIKE-A-FILE",
];

fn context_files(pi_dir: &Path) {
    let setup = Setup {
        api: "openai-completions",
        replies: vec![Reply::text("ok")],
        files: &[
            ("agent/AGENTS.override.md", "AGENT-OVERRIDE"),
            ("agent/AGENTS.md", "AGENT-PLAIN"),
            ("project/AGENTS.MD", "PROJECT-UPPER"),
            ("project/CLAUDE.md", "PROJECT-CLAUDE"),
            ("project/sub/AGENTS.md", ""),
            ("project/sub/CLAUDE.MD", "SUB-CLAUDE-UPPER"),
        ],
        env: &[],
        settings: json!({}),
        prompts: 1,
        compact: false,
    };
    compare(pi_dir, "context files", &setup, held_markers);
    // The cwd a linked worktree nested in its main checkout, each with an `AGENTS.md`.
    let worktree = Setup {
        files: &[
            ("project/.git/HEAD", "ref: refs/heads/main\n"),
            ("project/.git/worktrees/sub/HEAD", "ref: refs/heads/sub\n"),
            ("project/.git/worktrees/sub/commondir", "../..\n"),
            ("project/sub/.git", "gitdir: ../.git/worktrees/sub\n"),
            ("project/AGENTS.md", "PROJECT-UPPER"),
            ("project/sub/AGENTS.md", "SUB-PLAIN-CLAUDE"),
        ],
        ..setup
    };
    compare(
        pi_dir,
        "context files in a worktree",
        &worktree,
        held_markers,
    );
}

/// The markers the first request's system prompt holds, in order.
fn held_markers(o: &Observed, _: &Path) -> Vec<&'static str> {
    let system = system_prompt(&o.requests[0].body);
    let mut held: Vec<(usize, &str)> = CONTEXT_MARKERS
        .iter()
        .filter_map(|m| system.find(m).map(|at| (at, *m)))
        .collect();
    held.sort();
    held.into_iter().map(|(_, m)| m).collect()
}

const SHOW_PI_ENV: &str = "for v in PI_CODING_AGENT PI_SESSION_ID PI_SESSION_FILE PI_PROVIDER \
                           PI_MODEL PI_REASONING_LEVEL; do echo \"$v=${!v--}\"; done";

fn shell_environment(pi_dir: &Path) {
    let setup = Setup {
        api: "openai-completions",
        replies: vec![
            Reply::new()
                .tool_call("call_env", "bash", json!({"command": SHOW_PI_ENV}))
                .finish("tool_calls"),
            Reply::text("done"),
        ],
        files: &[],
        env: &[("PI_SESSION_ID", "inherited-id")],
        settings: json!({}),
        prompts: 1,
        compact: false,
    };
    compare(pi_dir, "PI_* variables", &setup, |o, _| {
        let result = o.requests[1]
            .messages()
            .iter()
            .find(|m| m["role"] == "tool")
            .and_then(|m| m["content"].as_str())
            .unwrap_or_default()
            .to_owned();
        let id = o.state["sessionId"].as_str().unwrap_or("?");
        let file = o.state["sessionFile"].as_str().unwrap_or("?");
        result
            .replace(file, "<session file>")
            .replace(id, "<session id>")
    });
}

fn session_dir(pi_dir: &Path) {
    // Pi reports a file in a relative `sessionDir` by its relative path, nova by the absolute
    // one (a client's cwd need not be the agent's): both name the same place.
    let parent = |o: &Observed, root: &Path| {
        let file = o.state["sessionFile"].as_str().unwrap_or_default();
        let file = root.join("project/sub").join(file);
        let dir = file.parent().unwrap_or(Path::new(""));
        dir.strip_prefix(root)
            .map(|d| d.display().to_string())
            .unwrap_or_else(|_| dir.display().to_string())
    };
    let by_env = Setup {
        api: "openai-completions",
        replies: Vec::new(),
        files: &[],
        env: &[("PI_CODING_AGENT_SESSION_DIR", "@env-sessions")],
        settings: json!({"sessionDir": "setting-sessions"}),
        prompts: 0,
        compact: false,
    };
    compare(pi_dir, "PI_CODING_AGENT_SESSION_DIR", &by_env, parent);
    let by_setting = Setup { env: &[], ..by_env };
    compare(pi_dir, "sessionDir", &by_setting, parent);
}

/// The cache fields of a request: OpenAI's two, and Anthropic's breakpoints, each kind once.
fn cache_fields(body: &Value) -> Value {
    let mut breakpoints = Vec::new();
    let mut stack = vec![body];
    while let Some(v) = stack.pop() {
        match v {
            Value::Object(map) => {
                if let Some(c) = map.get("cache_control")
                    && !breakpoints.contains(c)
                {
                    breakpoints.push(c.clone());
                }
                stack.extend(map.values());
            }
            Value::Array(items) => stack.extend(items),
            _ => {}
        }
    }
    json!({
        "prompt_cache_retention": body["prompt_cache_retention"],
        "prompt_cache_key": body.get("prompt_cache_key").is_some(),
        "cache_control": breakpoints,
    })
}

fn cache_retention(pi_dir: &Path) {
    for api in [
        "openai-completions",
        "openai-responses",
        "anthropic-messages",
    ] {
        for retention in ["long", "short"] {
            let setup = Setup {
                api,
                replies: vec![Reply::text("ok")],
                files: &[],
                env: &[("PI_CACHE_RETENTION", retention)],
                settings: json!({}),
                prompts: 1,
                compact: false,
            };
            let name = format!("PI_CACHE_RETENTION={retention} on {api}");
            compare(pi_dir, &name, &setup, |o, _| {
                cache_fields(&o.requests[0].body)
            });
        }
    }
    // A compaction's summaries cache nothing (Pi's `cacheRetention: "none"`), long or not.
    for api in ["openai-completions", "anthropic-messages"] {
        let setup = Setup {
            api,
            replies: vec![
                Reply::text("first answer").usage(100, 10),
                Reply::text("second answer").usage(200, 20),
                Reply::text("The summary.").usage(50, 5),
                Reply::text("The summary.").usage(50, 5),
            ],
            files: &[],
            env: &[("PI_CACHE_RETENTION", "long")],
            settings: json!({"compaction": {"keepRecentTokens": 1}}),
            prompts: 2,
            compact: true,
        };
        let name = format!("a compaction's summaries on {api}");
        compare(pi_dir, &name, &setup, |o, _| {
            let mut kinds: Vec<String> = o.requests[2..]
                .iter()
                .map(|r| cache_fields(&r.body).to_string())
                .collect();
            kinds.sort();
            kinds.dedup();
            assert!(!kinds.is_empty(), "no summary request");
            kinds
        });
    }
}

#[test]
#[allow(clippy::print_stderr)]
fn a_pi_users_setup_reaches_the_wire_alike() {
    let Some(pi_dir) = std::env::var_os("NOVA_PI_DIR") else {
        eprintln!("skipped: NOVA_PI_DIR is not set (scripts/test.sh sets it)");
        return;
    };
    let pi_dir = Path::new(&pi_dir);
    context_files(pi_dir);
    shell_environment(pi_dir);
    session_dir(pi_dir);
    cache_retention(pi_dir);
}
