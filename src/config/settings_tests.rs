#![allow(clippy::unwrap_used)]

use super::*;
use serde_json::json;

struct Files {
    dir: tempfile::TempDir,
}

impl Files {
    fn new(user: Option<&str>, project: Option<&str>) -> Files {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("cwd/.nova")).unwrap();
        if let Some(text) = user {
            std::fs::write(dir.path().join("user.json"), text).unwrap();
        }
        if let Some(text) = project {
            std::fs::write(dir.path().join("cwd/.nova/settings.json"), text).unwrap();
        }
        Files { dir }
    }

    fn load(&self, trust_flag: bool) -> (Settings, Vec<String>) {
        let user = self.dir.path().join("user.json");
        let project = self.dir.path().join("cwd/.nova/settings.json");
        let cwd = self.dir.path().join("cwd");
        let mut warnings = Vec::new();
        let sources = Sources {
            user: &user,
            project: Some(&project),
            pi_project: Some(&self.dir.path().join("cwd/.pi/settings.json")),
            cwd: &cwd,
            trust_flag: trust_flag.then_some(true),
            trust_file: &self.dir.path().join("trust.json"),
        };
        (load(&sources, &mut warnings), warnings)
    }
}

#[test]
fn project_settings_merge_over_global_one_level_deep() {
    let files = Files::new(
        Some(
            r#"{"defaultProvider":"a","defaultModel":"m","steeringMode":"all","compaction":{"enabled":true,"reserveTokens":1}}"#,
        ),
        Some(r#"{"defaultModel":"n","compaction":{"enabled":false},"streamIdleTimeoutSeconds":2}"#),
    );
    let (s, warnings) = files.load(false);
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(s.default_provider.as_deref(), Some("a"));
    assert_eq!(s.default_model.as_deref(), Some("n"));
    assert_eq!(s.steering_mode, QueueMode::All);
    assert_eq!(s.follow_up_mode, QueueMode::OneAtATime);
    assert_eq!(s.stream_idle_timeout, Duration::from_secs(2));
    assert_eq!(
        s.compaction,
        CompactionSettings {
            enabled: false,
            reserve_tokens: 1,
            keep_recent_tokens: 20_000
        }
    );
}

#[test]
fn bad_values_warn_and_fall_back_one_key_at_a_time() {
    let files = Files::new(
        Some(r#"{"steeringMode":"sometimes","defaultModel":3,"followUpMode":"all","unknown":1}"#),
        None,
    );
    let (s, warnings) = files.load(false);
    assert_eq!(s.follow_up_mode, QueueMode::All);
    assert_eq!(s.steering_mode, QueueMode::OneAtATime);
    assert_eq!(s.default_model, None);
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(warnings[0].contains("\"defaultModel\""), "{warnings:?}");
    assert!(warnings[1].contains("\"steeringMode\""), "{warnings:?}");
}

#[test]
fn compaction_keys_decode_one_by_one() {
    let files = Files::new(
        Some(r#"{"compaction":{"enabled":false,"reserveTokens":1000,"other":"ignored"}}"#),
        None,
    );
    let (s, warnings) = files.load(false);
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(
        (
            s.compaction.enabled,
            s.compaction.reserve_tokens,
            s.compaction.keep_recent_tokens
        ),
        (false, 1000, 20000)
    );
    for (value, key) in [
        (
            json!({"keepRecentTokens": -5}),
            "\"compaction.keepRecentTokens\"",
        ),
        (
            json!({"reserveTokens": "big"}),
            "\"compaction.reserveTokens\"",
        ),
        (json!({"enabled": "yes"}), "\"compaction.enabled\""),
        (json!(true), "\"compaction\""),
    ] {
        let files = Files::new(Some(&json!({"compaction": value}).to_string()), None);
        let (s, warnings) = files.load(false);
        assert_eq!(s.compaction, CompactionSettings::default());
        assert!(warnings[0].contains(key), "{warnings:?}");
    }
}

#[test]
fn retry_keys_decode_one_by_one_and_merge_with_the_project() {
    let files = Files::new(
        Some(r#"{"retry":{"baseDelayMs":10,"maxRetries":"many","provider":{"maxRetries":2}}}"#),
        Some(r#"{"retry":{"maxAgentDelayMs":500}}"#),
    );
    let (s, warnings) = files.load(true);
    assert_eq!(
        s.retry,
        RetrySettings {
            enabled: true,
            max_retries: 3,
            base_delay: Duration::from_millis(10),
            max_delay: Duration::from_millis(500),
        }
    );
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains("\"retry.maxRetries\""), "{warnings:?}");
    // Untrusted, the project may not shorten the waits.
    let (s, warnings) = files.load(false);
    assert_eq!(s.retry.max_delay, Duration::from_secs(60));
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(
        warnings[1].contains("a shorter \"maxAgentDelayMs\""),
        "{warnings:?}"
    );
    let files = Files::new(Some(r#"{"retry":{"enabled":false,"maxRetries":-1}}"#), None);
    let (s, warnings) = files.load(false);
    assert!(!s.retry.enabled);
    assert_eq!(s.retry.max_retries, 3);
    assert!(warnings[0].contains("\"retry.maxRetries\""), "{warnings:?}");
}

#[test]
fn invalid_json_names_the_place_and_fails_closed() {
    let files = Files::new(Some(r#"{"defaultModel":"m"}"#), Some("{\n  \"a\": oops\n}"));
    let (s, warnings) = files.load(false);
    assert!(warnings[0].contains("settings.json:2:"), "{warnings:?}");
    assert!(warnings[0].contains("invalid JSON"), "{warnings:?}");
    assert_eq!(s.default_model.as_deref(), Some("m"));
    assert!(s.bash_permissions.is_err());
}

#[test]
fn an_untrusted_project_may_only_tighten_permissions() {
    let user = r#"{"permissions":{"bash":{"mode":"flagged","allow":["make*"],"deny":["curl*"]}}}"#;
    let project = r#"{"permissions":{"bash":{"mode":"never","allow":["rm*"],"deny":["wget*"],"ask":["git*"]}},"trustedProjects":["."]}"#;
    let files = Files::new(Some(user), Some(project));
    let (s, warnings) = files.load(false);
    assert!(!s.project_trusted);
    let rules = s.bash_permissions.unwrap();
    assert_eq!(rules.mode, GateMode::Flagged);
    assert_eq!(rules.allow, ["make*"]);
    assert_eq!(rules.deny, ["curl*", "wget*"]);
    assert_eq!(rules.ask, ["git*"]);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains("\"allow\""), "{warnings:?}");
    assert!(warnings[0].contains("\"mode\""), "{warnings:?}");

    // A stricter mode from the project is taken.
    let files = Files::new(
        Some(user),
        Some(r#"{"permissions":{"bash":{"mode":"always"}}}"#),
    );
    let (s, warnings) = files.load(false);
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(s.bash_permissions.unwrap().mode, GateMode::Always);
}

#[test]
fn a_trusted_project_loosens_too() {
    let user = r#"{"permissions":{"bash":{"allow":["make*"]}}}"#;
    let project = r#"{"permissions":{"bash":{"mode":"never","allow":["rm*"]}}}"#;
    let files = Files::new(Some(user), Some(project));
    let (s, warnings) = files.load(true);
    assert!(warnings.is_empty(), "{warnings:?}");
    assert!(s.project_trusted);
    let rules = s.bash_permissions.unwrap();
    assert_eq!(rules.mode, GateMode::Never);
    assert_eq!(rules.allow, ["make*", "rm*"]);

    // The user's trustedProjects list does it as well; the project's own list does not count.
    let cwd = files.dir.path().join("cwd");
    let user = json!({"trustedProjects": [cwd], "permissions": {"bash": {}}}).to_string();
    let files2 = Files::new(Some(&user), Some(project));
    std::fs::remove_dir_all(&cwd).unwrap();
    std::fs::rename(files2.dir.path().join("cwd"), &cwd).unwrap();
    let sources = Sources {
        user: &files2.dir.path().join("user.json"),
        project: Some(&cwd.join(".nova/settings.json")),
        pi_project: None,
        cwd: &cwd,
        trust_flag: None,
        trust_file: &files2.dir.path().join("trust.json"),
    };
    let s = load(&sources, &mut Vec::new());
    assert!(s.project_trusted);
}

#[test]
fn bad_permission_rules_are_an_error_naming_the_file() {
    let files = Files::new(
        None,
        Some(r#"{"permissions":{"bash":{"mode":"sometimes"}}}"#),
    );
    let (s, _) = files.load(false);
    let err = s.bash_permissions.unwrap_err();
    assert!(
        err.starts_with("project settings permissions.bash.mode"),
        "{err}"
    );
}

#[test]
fn an_untrusted_project_may_only_tighten_the_sandbox() {
    let user = r#"{"sandbox":{"mode":"workspace-write","writableRoots":["/data"]}}"#;
    let loosen = r#"{"sandbox":{"mode":"off","writableRoots":["/"],"network":true}}"#;
    let files = Files::new(Some(user), Some(loosen));
    let (s, warnings) = files.load(false);
    let sandbox = s.sandbox.unwrap();
    assert_eq!(sandbox.mode, SandboxMode::WorkspaceWrite);
    assert_eq!(sandbox.writable_roots, ["/data"]);
    assert!(warnings[0].contains("tighten the sandbox"), "{warnings:?}");

    let tighten = r#"{"sandbox":{"mode":"read-only","network":false}}"#;
    let files = Files::new(Some(user), Some(tighten));
    let (s, warnings) = files.load(false);
    assert!(warnings.is_empty(), "{warnings:?}");
    let sandbox = s.sandbox.unwrap();
    assert_eq!(sandbox.mode, SandboxMode::ReadOnly);
    assert!(!sandbox.network);

    // Trusted, the project's keys replace the user's.
    let files = Files::new(Some(user), Some(loosen));
    let (s, _) = files.load(true);
    assert_eq!(s.sandbox.unwrap().mode, SandboxMode::Off);
}

#[test]
fn resource_lists_add_up_and_resolve_against_their_file() {
    let files = Files::new(
        Some(r#"{"skills":["mine","/abs/skills"],"prompts":"not a list"}"#),
        Some(r#"{"skills":["../shared"],"prompts":["p.md"]}"#),
    );
    let (s, warnings) = files.load(false);
    let dir = files.dir.path();
    let listed = |path: PathBuf, scope| ListedPath { path, scope };
    assert_eq!(
        s.skills,
        [
            listed(dir.join("mine"), SourceScope::User),
            listed(PathBuf::from("/abs/skills"), SourceScope::User),
            listed(dir.join("cwd/.nova/../shared"), SourceScope::Project),
        ]
    );
    assert_eq!(
        s.prompts,
        [listed(dir.join("cwd/.nova/p.md"), SourceScope::Project)]
    );
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains("\"prompts\""), "{warnings:?}");
}

#[test]
fn mcp_permissions_follow_the_same_project_rule() {
    let user = r#"{"permissions":{"mcp":{"allow":["mcp__fs__read*"],"deny":["mcp__*__rm"]}}}"#;
    let project = r#"{"permissions":{"mcp":{"allow":["mcp__*"],"ask":["mcp__fs__*"],"deny":["mcp__gh__*"]},"bash":{"deny":["curl*"]}}}"#;
    let files = Files::new(Some(user), Some(project));
    let (s, warnings) = files.load(false);
    let rules = s.mcp_permissions.unwrap();
    assert_eq!(
        rules.allow,
        ["mcp__fs__read*"],
        "the project's allow is ignored"
    );
    assert_eq!(rules.ask, ["mcp__fs__*"]);
    assert_eq!(rules.deny, ["mcp__*__rm", "mcp__gh__*"]);
    assert_eq!(
        s.bash_permissions.unwrap().deny,
        ["curl*"],
        "bash reads its own key"
    );
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains("permissions.mcp \"allow\""),
        "{warnings:?}"
    );

    let (s, warnings) = files.load(true);
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(
        s.mcp_permissions.unwrap().allow,
        ["mcp__fs__read*", "mcp__*"]
    );

    let files = Files::new(Some(r#"{"permissions":{"mcp":{"ask":"all"}}}"#), None);
    let (s, _) = files.load(false);
    assert!(
        s.mcp_permissions
            .unwrap_err()
            .contains("user settings permissions.mcp"),
        "a bad rule list fails closed"
    );
    assert!(s.bash_permissions.is_ok(), "without spoiling bash's rules");
}

#[test]
fn the_extension_hook_timeout_is_a_positive_number_of_seconds() {
    let (s, _) = Files::new(None, None).load(false);
    assert_eq!(s.extension_hook_timeout, Duration::from_secs(30));
    let (s, _) = Files::new(Some(r#"{"extensionHookTimeoutSeconds":1.5}"#), None).load(false);
    assert_eq!(s.extension_hook_timeout, Duration::from_millis(1500));
    let (s, warnings) = Files::new(Some(r#"{"extensionHookTimeoutSeconds":0}"#), None).load(false);
    assert_eq!(s.extension_hook_timeout, Duration::from_secs(30));
    assert!(
        warnings[0].contains("extensionHookTimeoutSeconds"),
        "{warnings:?}"
    );
}

#[test]
fn the_mcp_startup_wait_is_a_number_of_seconds() {
    let (s, warnings) = Files::new(None, None).load(false);
    assert!(warnings.is_empty());
    assert_eq!(s.mcp_startup_wait, Duration::from_secs(10));
    let (s, _) = Files::new(Some(r#"{"mcpStartupWaitSeconds":2.5}"#), None).load(false);
    assert_eq!(s.mcp_startup_wait, Duration::from_millis(2500));
    let (s, warnings) = Files::new(Some(r#"{"mcpStartupWaitSeconds":-1}"#), None).load(false);
    assert_eq!(s.mcp_startup_wait, Duration::from_secs(10));
    assert!(
        warnings[0].contains("mcpStartupWaitSeconds"),
        "{warnings:?}"
    );
}

#[test]
fn ollama_settings() {
    let files = Files::new(
        Some(r#"{"ollama":{"maxDiscoveredContext":8192,"keepAlive":"30m"}}"#),
        None,
    );
    let (s, warnings) = files.load(false);
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(s.ollama.max_discovered_context, 8192);
    assert_eq!(s.ollama.keep_alive, Some(json!("30m")));

    let files = Files::new(
        Some(r#"{"ollama":{"maxDiscoveredContext":0,"keepAlive":true}}"#),
        None,
    );
    let (s, warnings) = files.load(false);
    assert_eq!(s.ollama, OllamaSettings::default());
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(warnings[0].contains("ollama.maxDiscoveredContext"));
    assert!(warnings[1].contains("\"ollama.keepAlive\" is true"));
}

#[test]
fn max_turns_is_a_positive_number_an_untrusted_project_may_only_lower() {
    let max = |user: Option<&str>, project: Option<&str>, trusted: bool| {
        let (s, warnings) = Files::new(user, project).load(trusted);
        (s.max_turns, warnings)
    };
    assert_eq!(max(None, None, false), (None, vec![]));
    assert_eq!(max(Some(r#"{"maxTurns":8}"#), None, false).0, Some(8));
    assert_eq!(max(None, Some(r#"{"maxTurns":3}"#), false).0, Some(3));
    assert_eq!(
        max(Some(r#"{"maxTurns":8}"#), Some(r#"{"maxTurns":3}"#), false).0,
        Some(3)
    );
    let (limit, warnings) = max(Some(r#"{"maxTurns":8}"#), Some(r#"{"maxTurns":50}"#), false);
    assert_eq!(limit, Some(8));
    assert!(
        warnings[0].contains("may only tighten maxTurns"),
        "{warnings:?}"
    );
    assert_eq!(
        max(Some(r#"{"maxTurns":8}"#), Some(r#"{"maxTurns":50}"#), true).0,
        Some(50)
    );
    for bad in [
        r#"{"maxTurns":0}"#,
        r#"{"maxTurns":-2}"#,
        r#"{"maxTurns":"5"}"#,
    ] {
        let (limit, warnings) = max(Some(bad), None, false);
        assert_eq!(limit, None, "{bad}");
        assert!(warnings[0].contains("\"maxTurns\""), "{warnings:?}");
    }
}

#[test]
fn pis_project_settings_sit_below_novas_and_follow_the_same_rules() {
    let files = Files::new(
        Some(r#"{"permissions":{"bash":{"mode":"always"}}}"#),
        Some(r#"{"defaultModel":"nova-model","compaction":{"enabled":false}}"#),
    );
    let pi = files.dir.path().join("cwd/.pi");
    std::fs::create_dir_all(&pi).unwrap();
    std::fs::write(
        pi.join("settings.json"),
        r#"{"defaultModel":"pi-model","steeringMode":"all","compaction":{"reserveTokens":7},
            "skills":["my-skills"],"defaultProjectTrust":"always",
            "permissions":{"bash":{"mode":"never"}}}"#,
    )
    .unwrap();
    let (s, _) = files.load(false);
    assert_eq!(
        s.default_model.as_deref(),
        Some("nova-model"),
        "nova's file wins"
    );
    assert_eq!(s.steering_mode, QueueMode::All, "Pi's file still counts");
    assert_eq!(
        (s.compaction.enabled, s.compaction.reserve_tokens),
        (false, 7)
    );
    assert_eq!(s.skills[0].path, pi.join("my-skills"), "relative to .pi/");
    assert!(
        !s.project_trusted,
        "a project cannot trust itself from .pi/ either"
    );
    assert_eq!(
        s.bash_permissions.unwrap().mode,
        GateMode::Always,
        "an untrusted .pi/ may not loosen the gate"
    );
}
