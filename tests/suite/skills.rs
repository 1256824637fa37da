//! Skills and prompt templates: where they are found, what wins a name, what the system prompt
//! lists, what `/skill:name` and `/template args` expand to in `prompt`, `steer` and
//! `follow_up`, and what `get_commands` reports.

use super::cli::system_message;
use crate::support::mock_llm::{MockLlm, Recorded, Reply};
use crate::support::nova_proc::{Nova, NovaBuilder};
use crate::support::wire::{Out, ResponseData, SlashCommand};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn skill(name: &str, description: &str, body: &str) -> String {
    format!("---\nname: {name}\ndescription: {description}\n---\n{body}\n")
}

/// The user messages' texts of a recorded chat request.
pub(super) fn user_texts(req: &Recorded) -> Vec<String> {
    req.messages()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| match &m["content"] {
            Value::String(s) => s.clone(),
            blocks => blocks
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|b| b["text"].as_str())
                .collect(),
        })
        .collect()
}

/// `get_commands`, decoded with the mirror types.
fn commands(nova: &mut Nova) -> Vec<SlashCommand> {
    nova.request_ok(json!({"type": "get_commands"}));
    let line = nova
        .log()
        .iter()
        .rev()
        .find(|l| l.value["command"] == "get_commands")
        .unwrap();
    match &line.out {
        Out::Response(r) => match r.decoded_data().unwrap() {
            ResponseData::Commands(c) => c.commands,
            other => panic!("not a commands answer: {other:?}"),
        },
        other => panic!("not a response: {other:?}"),
    }
}

/// A project tree with skills in every place nova looks, a name claimed twice, an invalid
/// skill, and a `.agents` directory above the git root that must not be searched:
///
/// ```text
/// top/.agents/skills/above/SKILL.md     (outside the repository)
/// top/repo/.git/
/// top/repo/.agents/skills/shared/SKILL.md, dup/SKILL.md (loses to the agent dir's)
/// top/repo/work/                        the cwd
/// top/repo/work/.agents/skills/near/SKILL.md
/// top/repo/work/.nova/skills/project.md
/// agent/skills/dup/SKILL.md, agent/skills/broken/SKILL.md (no description)
/// home/.agents/skills/home-skill/SKILL.md
/// ```
struct Tree {
    _dir: tempfile::TempDir,
    agent: PathBuf,
    cwd: PathBuf,
    home: PathBuf,
    repo: PathBuf,
}

fn tree() -> Tree {
    let dir = tempfile::tempdir().unwrap();
    let top = dir.path().to_path_buf();
    let (agent, home, repo) = (top.join("agent"), top.join("home"), top.join("repo"));
    let cwd = repo.join("work");
    std::fs::create_dir_all(repo.join(".git")).unwrap();
    std::fs::create_dir_all(&cwd).unwrap();
    write(
        &top.join(".agents/skills/above/SKILL.md"),
        &skill("above", "Outside the repository", "x"),
    );
    write(
        &agent.join("skills/dup/SKILL.md"),
        &skill("dup", "The agent dir's", "Agent dup body"),
    );
    write(
        &agent.join("skills/broken/SKILL.md"),
        "---\nname: broken\n---\nno description",
    );
    write(
        &home.join(".agents/skills/home-skill/SKILL.md"),
        &skill("home-skill", "From ~/.agents", "Home body"),
    );
    write(
        &cwd.join(".nova/skills/project.md"),
        &skill("project", "From .nova", "Project body"),
    );
    write(
        &cwd.join(".agents/skills/near/SKILL.md"),
        &skill("near", "The cwd's .agents", "Near body"),
    );
    write(
        &repo.join(".agents/skills/shared/SKILL.md"),
        &skill("shared", "The repository root's .agents", "Shared body"),
    );
    write(
        &repo.join(".agents/skills/dup/SKILL.md"),
        &skill("dup", "Loses", "Repo dup body"),
    );
    Tree {
        _dir: dir,
        agent,
        cwd,
        home,
        repo,
    }
}

/// nova in the tree's cwd, trusting the project (so its skills and templates load).
fn in_tree(t: &Tree, mock: &MockLlm) -> NovaBuilder {
    Nova::builder()
        .dirs(&t.agent, &t.cwd)
        .env("HOME", t.home.to_str().unwrap())
        .ollama(mock)
        .args(["--trust-project"])
}

#[test]
fn skills_are_found_in_order_and_problems_reported_once() {
    let t = tree();
    let mock = MockLlm::start();
    let flagged = t.repo.join("flag-skill");
    write(
        &flagged.join("SKILL.md"),
        &skill("flagged", "Named by --skill", "Flag body"),
    );
    let mut nova = in_tree(&t, &mock)
        .settings(json!({"skills": ["../repo/listed.md"]}))
        .args(["--skill", "../flag-skill"])
        .spawn();
    let names: Vec<String> = commands(&mut nova).into_iter().map(|c| c.name).collect();
    assert_eq!(
        names,
        [
            "skill:dup",
            "skill:home-skill",
            "skill:project",
            "skill:near",
            "skill:shared",
            "skill:flagged",
        ]
    );
    let stderr = nova.stderr_with(&t.repo.join("listed.md").display().to_string());
    let broken = t.agent.join("skills/broken/SKILL.md");
    let loser = t.repo.join(".agents/skills/dup/SKILL.md");
    let winner = t.agent.join("skills/dup/SKILL.md");
    for needle in [
        format!(
            "nova: warning: {}: the frontmatter has no description; not loaded",
            broken.display()
        ),
        format!(
            "nova: warning: {}: skill \"dup\" ignored: {} has the same name",
            loser.display(),
            winner.display()
        ),
        format!(
            "nova: warning: {}: no such file or directory",
            t.repo.join("listed.md").display()
        ),
    ] {
        assert_eq!(stderr.matches(&needle).count(), 1, "{needle}\n{stderr}");
    }
}

#[test]
fn the_system_prompt_lists_skills_only_with_read() {
    let t = tree();
    write(
        &t.agent.join("skills/manual/SKILL.md"),
        "---\nname: manual\ndescription: Only by command\ndisable-model-invocation: true\n---\nM",
    );
    let mock = MockLlm::start();
    mock.push(Reply::text("ok"));
    let mut nova = in_tree(&t, &mock).spawn();
    nova.run_prompt("hi");
    let system = system_message(&mock.chat_requests()[0]);
    let listed: Vec<&str> = system
        .split("<name>")
        .skip(1)
        .map(|s| s.split('<').next().unwrap())
        .collect();
    assert_eq!(
        listed,
        ["dup", "home-skill", "project", "near", "shared"],
        "{system}"
    );
    assert!(
        system.contains(&format!(
            "<location>{}</location>",
            t.cwd.join(".nova/skills/project.md").display()
        )),
        "{system}"
    );
    let skills_at = system.find("<available_skills>").unwrap();
    assert!(
        skills_at < system.find("Current date:").unwrap(),
        "{system}"
    );

    mock.push(Reply::text("ok"));
    let mut nova = in_tree(&t, &mock).args(["--tools", "bash"]).spawn();
    nova.run_prompt("hi");
    let system = system_message(&mock.chat_requests()[1]);
    assert!(!system.contains("available_skills"), "{system}");
}

#[test]
fn skill_and_template_commands_expand_in_prompt_steer_and_follow_up() {
    let t = tree();
    write(
        &t.cwd.join(".nova/prompts/fix.md"),
        "---\ndescription: Fix a thing\n---\nFix $1, please.",
    );
    let mock = MockLlm::start();
    mock.push(Reply::text("ok"));
    mock.push(Reply::text("ok"));
    let mut nova = in_tree(&t, &mock).spawn();
    // Queued while idle: the steer rides along with the prompt, the follow-up comes after.
    nova.request_ok(json!({"type": "steer", "message": "/fix \"the build\""}));
    nova.request_ok(json!({"type": "follow_up", "message": "/skill:near"}));
    nova.run_prompt("/skill:project   look at src/  ");
    let requests = mock.chat_requests();
    let near = t.cwd.join(".agents/skills/near");
    let project = t.cwd.join(".nova/skills");
    let project_block = format!(
        "<skill name=\"project\" location=\"{}\">\nReferences are relative to {}.\n\n\
         Project body\n</skill>\n\nlook at src/",
        project.join("project.md").display(),
        project.display()
    );
    let near_block = format!(
        "<skill name=\"near\" location=\"{}\">\nReferences are relative to {}.\n\n\
         Near body\n</skill>",
        near.join("SKILL.md").display(),
        near.display()
    );
    assert_eq!(
        user_texts(&requests[0]),
        [project_block.clone(), "Fix the build, please.".to_owned()]
    );
    assert_eq!(
        user_texts(&requests[1]),
        [
            project_block,
            "Fix the build, please.".to_owned(),
            near_block
        ]
    );
}

#[test]
fn templates_fill_every_argument_form_and_unknown_commands_pass_through() {
    let mock = MockLlm::start();
    let template = "1=$1 2=$2 9=$9 all=[$@] args=[$ARGUMENTS] from2=[${@:2}] \
                    one-from2=[${@:2:1}] d1=${1:-none} d5=${5:-none} dall=${@:-empty}";
    let mut nova = Nova::builder()
        .ollama(&mock)
        .agent_file("prompts/t.md", template)
        .spawn();
    let cases = [
        (
            r#"/t one "two words" 'it\'s' four"#,
            "1=one 2=two words 9= all=[one two words it's four] \
             args=[one two words it's four] from2=[two words it's four] \
             one-from2=[two words] d1=one d5=none dall=one two words it's four",
        ),
        (
            "/t",
            "1= 2= 9= all=[] args=[] from2=[] one-from2=[] d1=none d5=none dall=empty",
        ),
        ("/nope x y", "/nope x y"),
        ("/skill:nope x", "/skill:nope x"),
        ("t one", "t one"),
    ];
    for (i, (sent, expected)) in cases.iter().enumerate() {
        mock.push(Reply::text("ok"));
        nova.run_prompt(sent);
        let texts = user_texts(&mock.chat_requests()[i]);
        assert_eq!(texts.last().unwrap(), expected, "for {sent}");
    }
}

#[test]
fn get_commands_lists_templates_then_skills_with_their_sources() {
    let t = tree();
    let mock = MockLlm::start();
    let extra = t.repo.join("extra");
    write(&extra.join("flag.md"), "Named by --prompt-template\nbody");
    write(
        &extra.join("listed.md"),
        "---\ndescription: From settings\n---\nb",
    );
    write(&t.agent.join("prompts/user.md"), "User template");
    write(&t.cwd.join(".nova/prompts/user.md"), "Loses to the user's");
    write(&t.cwd.join(".nova/prompts/proj.md"), "Project template");
    write(
        &extra.join("one/SKILL.md"),
        &skill("one", "Named by --skill", "b"),
    );
    let mut nova = in_tree(&t, &mock)
        .settings(json!({"prompts": ["../repo/extra/listed.md"]}))
        .args([
            "--prompt-template",
            "../extra/flag.md",
            "--skill",
            "../extra/one/SKILL.md",
        ])
        .spawn();
    let commands = commands(&mut nova);
    let shown: Vec<Value> = commands
        .iter()
        .map(|c| {
            let i = &c.source_info;
            json!([
                c.name,
                c.description,
                c.source,
                i.path,
                i.source,
                i.scope,
                i.origin,
                i.base_dir
            ])
        })
        .collect();
    let p = |p: &Path| p.to_str().unwrap().to_owned();
    let agent_skill = t.agent.join("skills/dup/SKILL.md");
    let expected = [
        json!([
            "user",
            "User template",
            "prompt",
            p(&t.agent.join("prompts/user.md")),
            "auto",
            "user",
            "top-level",
            p(&t.agent)
        ]),
        json!([
            "proj",
            "Project template",
            "prompt",
            p(&t.cwd.join(".nova/prompts/proj.md")),
            "auto",
            "project",
            "top-level",
            p(&t.cwd.join(".nova"))
        ]),
        json!([
            "listed",
            "From settings",
            "prompt",
            p(&extra.join("listed.md")),
            "local",
            "user",
            "top-level",
            null
        ]),
        json!([
            "flag",
            "Named by --prompt-template",
            "prompt",
            p(&extra.join("flag.md")),
            "local",
            "temporary",
            "top-level",
            p(&extra)
        ]),
        json!([
            "skill:dup",
            "The agent dir's",
            "skill",
            p(&agent_skill),
            "auto",
            "user",
            "top-level",
            p(&t.agent)
        ]),
        json!([
            "skill:home-skill",
            "From ~/.agents",
            "skill",
            p(&t.home.join(".agents/skills/home-skill/SKILL.md")),
            "auto",
            "user",
            "top-level",
            p(&t.home.join(".agents"))
        ]),
    ];
    assert_eq!(shown[..expected.len()], expected);
    let last = shown.last().unwrap();
    assert_eq!(
        last,
        &json!([
            "skill:one",
            "Named by --skill",
            "skill",
            p(&extra.join("one/SKILL.md")),
            "local",
            "temporary",
            "top-level",
            p(&extra.join("one"))
        ])
    );
    let stderr = nova.stderr_with("prompt template \"user\" ignored");
    assert!(
        stderr.contains(&format!(
            "{}: prompt template \"user\" ignored: {} has the same name",
            t.cwd.join(".nova/prompts/user.md").display(),
            t.agent.join("prompts/user.md").display()
        )),
        "{stderr}"
    );
}
