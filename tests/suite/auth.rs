//! auth.json in Pi 1.6's format: its keys (literal, `$VAR`, `!command`) reach the provider in
//! Pi's order (`--api-key`, auth.json, models.json's `apiKey`, the environment), enable built-in
//! providers, and appear nowhere else: not on stdout, stderr, in the session file or an export.
//! An OAuth entry and a loose file mode are warned about.

use super::providers::{last_assistant, text_of};
use crate::support::mock_llm::{MockLlm, Reply};
use crate::support::nova_proc::Nova;
use serde_json::json;

const SECRET: &str = "sk-auth-json-7f3a9c";

fn auth_json() -> String {
    json!({
        "openai": {"type": "api_key", "key": format!("!printf {SECRET}")},
        "acme-sso": {"type": "oauth", "access": "at-secret", "refresh": "rt-secret",
                      "expires": 1},
    })
    .to_string()
}

#[test]
fn auth_json_keys_reach_only_the_provider() {
    let mock = MockLlm::start();
    // models.json names a key too: auth.json's comes first, as in Pi.
    let models = json!({"providers": {"openai": {"baseUrl": mock.base_url_openai(),
        "apiKey": "sk-models-json"}}});
    let mut nova = Nova::builder()
        .models_json(models.clone())
        .agent_file("auth.json", auth_json())
        .env("OPENAI_API_KEY", "sk-from-env")
        .args(["--model", "openai/gpt-5.5"])
        .spawn();
    mock.push(Reply::text("keyed"));
    let events = nova.run_prompt("hi");
    assert_eq!(text_of(&last_assistant(&events)), "keyed");
    let r = &mock.chat_requests()[0];
    assert_eq!(
        r.header("authorization"),
        Some(format!("Bearer {SECRET}").as_str())
    );

    let state = nova.request_ok(json!({"type": "get_state"}));
    let session = std::fs::read_to_string(state["sessionFile"].as_str().unwrap()).unwrap();
    let page = nova.request_ok(json!({"type": "export_html"}));
    let html = std::fs::read_to_string(page["path"].as_str().unwrap()).unwrap();
    let stderr = nova.stderr_with("OAuth");
    assert!(
        stderr.contains("\"acme-sso\" is logged in with OAuth, which nova does not support yet"),
        "{stderr}"
    );
    #[cfg(unix)]
    assert!(stderr.contains("chmod 600"), "{stderr}");
    let stdout: String = nova.log().iter().map(|l| l.raw.clone() + "\n").collect();
    for (what, text) in [
        ("stdout", &stdout),
        ("stderr", &stderr),
        ("session", &session),
        ("export", &html),
    ] {
        for secret in [SECRET, "at-secret", "rt-secret"] {
            assert!(!text.contains(secret), "{secret} in {what}");
        }
    }
    // The unsupported OAuth entry enabled nothing.
    let list = nova.request_ok(json!({"type": "get_available_models"}));
    assert!(
        list["models"]
            .as_array()
            .unwrap()
            .iter()
            .all(|m| m["provider"] == "openai"),
        "{list}"
    );

    // The command line's key wins over auth.json.
    let mut flagged = Nova::builder()
        .models_json(models)
        .agent_file("auth.json", auth_json())
        .args(["--model", "openai/gpt-5.5", "--api-key", "sk-flag"])
        .spawn();
    mock.push(Reply::text("flagged"));
    flagged.run_prompt("hi");
    let r = &mock.chat_requests()[1];
    assert_eq!(r.header("authorization"), Some("Bearer sk-flag"));
    mock.assert_no_violations();
}

#[test]
fn a_key_only_in_auth_json_enables_the_builtin_provider() {
    let mock = MockLlm::start();
    let mut nova = Nova::builder()
        .models_json(json!({"providers": {"groq": {"baseUrl": mock.base_url_openai()}}}))
        .agent_file(
            "auth.json",
            json!({"groq": {"type": "api_key", "key": "gsk-literal"}}).to_string(),
        )
        .spawn();
    let list = nova.request_ok(json!({"type": "get_available_models"}));
    let models = list["models"].as_array().unwrap();
    assert!(!models.is_empty() && models.iter().all(|m| m["provider"] == "groq"));
    mock.push(Reply::text("hello"));
    nova.run_prompt("hi");
    assert_eq!(
        mock.chat_requests()[0].header("authorization"),
        Some("Bearer gsk-literal")
    );
}

/// An entry's `env` applies to its provider only, over the process environment, as Pi applies
/// it: the key's `$VAR` reads it, and so do Bedrock's settings, whose profile then wins over
/// access keys in the environment.
#[test]
fn an_entry_s_env_scopes_variables_to_its_provider() {
    let mock = MockLlm::start();
    let base = format!("http://127.0.0.1:{}", mock.port());
    let auth = json!({
        "groq": {"type": "api_key", "key": "$GROQ_SCOPED", "env": {"GROQ_SCOPED": "gsk-scoped"}},
        "amazon-bedrock": {"type": "api_key",
                           "env": {"AWS_PROFILE": "work", "AWS_REGION": "eu-north-1"}},
    });
    let builder = Nova::builder()
        .models_json(json!({"providers": {
            "groq": {"baseUrl": mock.base_url_openai()},
            "amazon-bedrock": {"baseUrl": base},
        }}))
        .agent_file("auth.json", auth.to_string())
        .env("AWS_ACCESS_KEY_ID", "AKIDAMBIENT")
        .env("AWS_SECRET_ACCESS_KEY", "ambient-secret")
        .args(["--model", "groq/llama-3.3-70b-versatile"]);
    let aws = builder.home().join(".aws");
    std::fs::create_dir_all(&aws).unwrap();
    std::fs::write(
        aws.join("credentials"),
        "[work]\naws_access_key_id = AKIDWORK\naws_secret_access_key = work-secret\n",
    )
    .unwrap();
    let mut nova = builder.spawn();
    mock.push(Reply::text("groq"));
    nova.run_prompt("hi");
    assert_eq!(
        mock.chat_requests()[0].header("authorization"),
        Some("Bearer gsk-scoped")
    );
    nova.request_ok(json!({"type": "set_model", "provider": "amazon-bedrock",
                           "modelId": "amazon.nova-pro-v1:0"}));
    mock.push(Reply::text("bedrock"));
    let events = nova.run_prompt("hi");
    assert_eq!(text_of(&last_assistant(&events)), "bedrock");
    let r = &mock.chat_requests()[1];
    let auth = r.header("authorization").unwrap();
    assert!(
        auth.contains("Credential=AKIDWORK/") && auth.contains("/eu-north-1/bedrock/"),
        "{auth}"
    );
    // The scoped variables are not the process's: the other provider never sees them.
    let stderr = nova.stderr();
    assert!(
        !stderr.contains("gsk-scoped") && !stderr.contains("work-secret"),
        "{stderr}"
    );
    mock.assert_no_violations();
}

/// `nova login <provider>` stores the key read from stdin in auth.json (0600, other entries
/// kept) and says nothing of it; `nova logout` removes the entry.
#[test]
fn login_and_logout_edit_auth_json() {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let dir = tempfile::tempdir().unwrap();
    let agent = dir.path().join("agent");
    let nova = |args: &[&str], stdin: &str| {
        let mut child = Command::new(env!("CARGO_BIN_EXE_nova"))
            .args(args)
            .env("NOVA_AGENT_DIR", &agent)
            .env("HOME", dir.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(stdin.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        (out.status.code(), text)
    };
    let path = agent.join("auth.json");
    let (code, text) = nova(&["login", "groq"], "gsk-typed-secret\n");
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("stored the API key of groq") && !text.contains("gsk-typed-secret"));
    let (code, _) = nova(&["login", "openai", "--api-key"], "sk-other\n");
    assert_eq!(code, Some(0));
    let stored: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(
        stored["groq"],
        json!({"type": "api_key", "key": "gsk-typed-secret"})
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
    let (code, text) = nova(&["logout", "groq"], "");
    assert_eq!(code, Some(0), "{text}");
    let stored: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert!(stored.get("groq").is_none() && stored["openai"]["key"] == "sk-other");
    let (code, text) = nova(&["login", "groq"], "");
    assert_eq!(code, Some(1));
    assert!(text.contains("no key given"), "{text}");
    let (code, text) = nova(&["login"], "");
    assert_eq!(code, Some(2));
    assert!(text.contains("usage: nova login <provider>"), "{text}");
}

/// Pi's subscription logins (Claude Pro/Max, ChatGPT through Codex, GitHub Copilot) in auth.json:
/// each enables its provider, reaches it as Pi sends it, and neither token of any of them shows
/// on stdout, stderr, in the session file or an export.
#[test]
fn subscription_logins_are_used_and_never_shown() {
    use base64::Engine;
    let mock = MockLlm::start();
    let b64 = |v: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v);
    let claims = json!({"https://api.openai.com/auth": {"chatgpt_account_id": "acct-login"}});
    let codex_access = format!(
        "{}.{}.{}",
        b64(br#"{"alg":"RS256"}"#),
        b64(claims.to_string().as_bytes()),
        b64(b"sig-codex-7e1")
    );
    let later = 4_000_000_000_000u64;
    let logins = [
        (
            "anthropic",
            "sk-ant-oat01-login-5d2f".to_owned(),
            "sk-ant-ort01-login-9a4c",
        ),
        ("openai-codex", codex_access.clone(), "rt-codex-login-3b8e"),
        (
            "github-copilot",
            "tid=1;exp=9;copilot-login-6f1a".to_owned(),
            "ghu_login-2c7d",
        ),
    ];
    let mut auth = serde_json::Map::new();
    for (provider, access, refresh) in &logins {
        auth.insert(
            (*provider).to_owned(),
            json!({"type": "oauth", "access": access, "refresh": refresh, "expires": later}),
        );
    }
    let base = mock.base_url_ollama();
    let models = json!({"providers": {
        "anthropic": {"baseUrl": base},
        "openai-codex": {"baseUrl": format!("{base}/backend-api")},
        "github-copilot": {"baseUrl": base},
    }});
    let mut nova = Nova::builder()
        .models_json(models)
        .agent_file("auth.json", serde_json::Value::Object(auth).to_string())
        .args(["--model", "anthropic/claude-sonnet-4-5"])
        .spawn();
    let list = nova.request_ok(json!({"type": "get_available_models"}));
    for (provider, _, _) in &logins {
        assert!(
            list["models"]
                .as_array()
                .unwrap()
                .iter()
                .any(|m| m["provider"] == *provider),
            "{provider} is listed: {list}"
        );
    }
    for (i, (provider, model)) in [
        ("anthropic", "claude-sonnet-4-5"),
        ("openai-codex", "gpt-6.2-sol"),
        ("github-copilot", "claude-sonnet-5"),
    ]
    .into_iter()
    .enumerate()
    {
        nova.request_ok(json!({"type": "set_model", "provider": provider, "modelId": model}));
        mock.push(Reply::text(format!("from {provider}")));
        let events = nova.run_prompt("hi");
        assert_eq!(
            text_of(&last_assistant(&events)),
            format!("from {provider}")
        );
        let r = &mock.chat_requests()[i];
        let access = &logins[i].1;
        assert_eq!(
            r.header("authorization"),
            Some(&*format!("Bearer {access}"))
        );
    }
    let reqs = mock.chat_requests();
    let betas = reqs[0].header("anthropic-beta").unwrap();
    assert!(
        betas.starts_with("claude-code-20250219,oauth-2025-04-20"),
        "{betas}"
    );
    assert_eq!(reqs[1].header("chatgpt-account-id"), Some("acct-login"));
    assert_eq!(reqs[2].header("editor-version"), Some("vscode/1.107.0"));

    let state = nova.request_ok(json!({"type": "get_state"}));
    let session = std::fs::read_to_string(state["sessionFile"].as_str().unwrap()).unwrap();
    let page = nova.request_ok(json!({"type": "export_html"}));
    let html = std::fs::read_to_string(page["path"].as_str().unwrap()).unwrap();
    let stdout: String = nova.log().iter().map(|l| l.raw.clone() + "\n").collect();
    let stderr = nova.stderr();
    for (what, text) in [
        ("stdout", &stdout),
        ("stderr", &stderr),
        ("session", &session),
        ("export", &html),
    ] {
        for (provider, access, refresh) in &logins {
            assert!(
                !text.contains(access.as_str()),
                "{provider}'s access token in {what}"
            );
            assert!(
                !text.contains(refresh),
                "{provider}'s refresh token in {what}"
            );
        }
    }
    mock.assert_no_violations();
}

/// Issue 30 item 9: a key pasted into `nova login --api-key` is stored literally. One starting
/// with `!` is never run, a `$VAR` in it is never expanded: the provider receives exactly what
/// was pasted. The file holds it in Pi 1.6's escaped form (`$!`, `$$`), which Pi reads back
/// the same way.
#[test]
fn a_pasted_key_is_stored_literally_never_run_or_expanded() {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let dir = tempfile::tempdir().unwrap();
    let agent = dir.path().join("agent");
    let marker = dir.path().join("ran");
    let login = |pasted: &str| {
        let mut child = Command::new(env!("CARGO_BIN_EXE_nova"))
            .args(["login", "groq", "--api-key"])
            .env("NOVA_AGENT_DIR", &agent)
            .env("HOME", dir.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        writeln!(stdin, "{pasted}").unwrap();
        drop(stdin);
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{out:?}");
    };
    let mock = MockLlm::start();
    let command = format!("!touch {} #k", marker.display());
    for (i, (pasted, stored)) in [
        (command.as_str(), format!("$!touch {} #k", marker.display())),
        ("$LEAKED${LEAKED}$$", "$$LEAKED$${LEAKED}$$$$".to_owned()),
    ]
    .into_iter()
    .enumerate()
    {
        login(pasted);
        let file: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(agent.join("auth.json")).unwrap())
                .unwrap();
        assert_eq!(file["groq"]["key"], stored.as_str());
        let mut nova = Nova::builder()
            .dirs(&agent, dir.path())
            .models_json(json!({"providers": {"groq": {"baseUrl": mock.base_url_openai()}}}))
            .env("LEAKED", "process-secret")
            .spawn();
        mock.push(Reply::text("hello"));
        nova.run_prompt("hi");
        let bearer = format!("Bearer {pasted}");
        assert_eq!(
            mock.chat_requests()[i].header("authorization"),
            Some(bearer.as_str())
        );
        assert!(!marker.exists(), "the pasted key ran as a command");
    }
    mock.assert_no_violations();
}
