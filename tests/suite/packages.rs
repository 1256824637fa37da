//! Pi packages through the nova binary: `nova install`, `list`, `update --extensions` and
//! `remove` against a local package directory and a tarball `npm pack` made (npm installs it
//! from the file: no network), then a session that loads what the settings name — the
//! package's extensions (through the real extension host) and prompt templates, narrowed by
//! the setting's filters, a project's only when it is trusted.

use super::extensions::{commands, pi_modules, with_pi};
use crate::support::nova_proc::Nova;
use serde_json::{Value, json};
use std::path::Path;
use std::process::{Command, Output};

/// A package with two extensions, a prompt template and a skill, in Pi's conventional
/// directories.
fn write_package(dir: &Path, name: &str) {
    let file = |rel: &str, text: &str| {
        let path = dir.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    file(
        "package.json",
        &json!({"name": name, "version": "1.0.0", "keywords": ["pi-package"]}).to_string(),
    );
    file(
        "extensions/main.ts",
        r#"export default function (pi) {
          pi.registerCommand("from-package", { description: "from a package", handler: async () => {} });
        }"#,
    );
    file(
        "extensions/legacy.ts",
        r#"export default function (pi) {
          pi.registerCommand("legacy", { handler: async () => {} });
        }"#,
    );
    file(
        "prompts/review.md",
        "---\ndescription: Review a file\n---\nReview $1 carefully.\n",
    );
    file(
        "skills/tidy/SKILL.md",
        "---\nname: tidy\ndescription: Tidy things up\n---\nTidy.\n",
    );
}

/// `nova <args>` as a one-shot command in `cwd`, with this agent dir; npm quiet and offline
/// about its own updates.
fn nova(agent: &Path, cwd: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nova"))
        .args(args)
        .current_dir(cwd)
        .env("NOVA_AGENT_DIR", agent)
        .env("HOME", agent.parent().unwrap())
        .env("npm_config_update_notifier", "false")
        .env(
            "npm_config_cache",
            agent.parent().unwrap().join("npm-cache"),
        )
        .output()
        .expect("run nova")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn names(listed: &[Value]) -> Vec<String> {
    listed
        .iter()
        .filter_map(|c| c["name"].as_str().map(str::to_owned))
        .collect()
}

fn settings(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn a_local_package_installs_lists_loads_with_its_filters_and_is_removed() {
    let tmp = tempfile::tempdir().unwrap();
    let (agent, cwd, pkg) = (
        tmp.path().join("agent"),
        tmp.path().join("project"),
        tmp.path().join("tools"),
    );
    std::fs::create_dir_all(&cwd).unwrap();
    write_package(&pkg, "tools");

    let missing = nova(&agent, &cwd, &["install"]);
    assert_eq!(missing.status.code(), Some(2));
    let nowhere = nova(&agent, &cwd, &["install", "./nowhere"]);
    assert_eq!(nowhere.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&nowhere.stderr).contains("does not exist"));

    let out = nova(&agent, &cwd, &["install", "../tools"]);
    assert!(out.status.success(), "{out:?}");
    assert!(stdout(&out).contains("Installed ../tools"), "{out:?}");
    // Written relative to the user's settings file, as Pi writes it.
    assert_eq!(
        settings(&agent.join("settings.json"))["packages"],
        json!(["../tools"])
    );
    // Installing it again changes nothing.
    assert!(
        nova(&agent, &cwd, &["install", "../tools"])
            .status
            .success()
    );
    assert_eq!(
        settings(&agent.join("settings.json"))["packages"],
        json!(["../tools"])
    );

    let list = stdout(&nova(&agent, &cwd, &["list"]));
    assert_eq!(
        list,
        format!("User packages:\n  ../tools\n    {}\n", pkg.display())
    );

    if let Some(modules) = pi_modules() {
        let mut session = with_pi(Nova::builder().dirs(&agent, &cwd), &modules).spawn();
        let listed = commands(&mut session);
        let found = names(&listed);
        for name in ["from-package", "legacy", "review", "skill:tidy"] {
            assert!(found.contains(&name.to_owned()), "{name} in {found:?}");
        }
        let command = listed.iter().find(|c| c["name"] == "from-package").unwrap();
        assert_eq!(command["source"], "extension");
        assert_eq!(command["sourceInfo"]["scope"], "user");
        drop(session);

        // The object form narrows what loads: no legacy extension, no skills.
        std::fs::write(
            agent.join("settings.json"),
            json!({"packages": [{
                "source": "../tools",
                "extensions": ["!extensions/legacy.ts"],
                "skills": [],
            }]})
            .to_string(),
        )
        .unwrap();
        let mut session = with_pi(Nova::builder().dirs(&agent, &cwd), &modules).spawn();
        let found = names(&commands(&mut session));
        assert!(found.contains(&"from-package".to_owned()), "{found:?}");
        assert!(found.contains(&"review".to_owned()), "{found:?}");
        assert!(!found.contains(&"legacy".to_owned()), "{found:?}");
        assert!(!found.contains(&"skill:tidy".to_owned()), "{found:?}");
    }

    // `uninstall` is `remove`; a filtered entry goes too, and the directory stays.
    let out = nova(&agent, &cwd, &["uninstall", "../tools"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        settings(&agent.join("settings.json"))["packages"],
        json!([])
    );
    assert!(pkg.join("package.json").is_file());
    let again = nova(&agent, &cwd, &["remove", "../tools"]);
    assert_eq!(again.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("No matching package found for ../tools")
    );
    assert_eq!(
        stdout(&nova(&agent, &cwd, &["list"])),
        "No packages installed.\n"
    );
}

#[test]
fn an_npm_tarball_installs_into_the_agent_dir_and_a_projects_package_needs_trust() {
    let tmp = tempfile::tempdir().unwrap();
    let (agent, cwd, pkg) = (
        tmp.path().join("agent"),
        tmp.path().join("project"),
        tmp.path().join("src"),
    );
    std::fs::create_dir_all(&cwd).unwrap();
    write_package(&pkg, "packed-tools");
    let packed = Command::new("npm")
        .args(["pack", "--silent", "--pack-destination"])
        .arg(tmp.path())
        .current_dir(&pkg)
        .env("npm_config_update_notifier", "false")
        .output()
        .expect("npm runs (it comes with Node)");
    assert!(packed.status.success(), "{packed:?}");
    let tarball = tmp.path().join("packed-tools-1.0.0.tgz");
    assert!(tarball.is_file());
    let source = format!("npm:packed-tools@file:{}", tarball.display());

    let out = nova(&agent, &cwd, &["install", &source, "-l"]);
    assert!(out.status.success(), "{out:?}");
    // `-l` names it in the project's settings and installs it in the agent dir, not the project.
    assert_eq!(
        settings(&cwd.join(".nova/settings.json"))["packages"],
        json!([source])
    );
    assert!(!agent.join("settings.json").exists());
    assert!(!cwd.join("node_modules").exists() && !cwd.join(".nova/npm").exists());
    let projects = std::fs::read_dir(agent.join("projects"))
        .unwrap()
        .flatten()
        .count();
    assert_eq!(projects, 1);
    let installed = agent
        .join("projects")
        .join(
            std::fs::read_dir(agent.join("projects"))
                .unwrap()
                .flatten()
                .next()
                .unwrap()
                .file_name(),
        )
        .join("npm/node_modules/packed-tools/extensions/main.ts");
    assert!(installed.is_file(), "{}", installed.display());

    // Untrusted, the project's packages are neither listed nor loaded.
    let untrusted = nova(&agent, &cwd, &["list"]);
    assert_eq!(stdout(&untrusted), "No packages installed.\n");
    assert!(String::from_utf8_lossy(&untrusted.stderr).contains("not trusted"));
    let trusted = stdout(&nova(&agent, &cwd, &["list", "--approve"]));
    assert!(
        trusted.starts_with(&format!("Project packages:\n  {source}\n")),
        "{trusted}"
    );

    if let Some(modules) = pi_modules() {
        let mut session = with_pi(Nova::builder().dirs(&agent, &cwd), &modules).spawn();
        let found = names(&commands(&mut session));
        assert!(!found.contains(&"from-package".to_owned()), "{found:?}");
        assert!(!found.contains(&"review".to_owned()), "{found:?}");
        drop(session);
        let mut session = with_pi(
            Nova::builder().dirs(&agent, &cwd).args(["--approve"]),
            &modules,
        )
        .spawn();
        let listed = commands(&mut session);
        let command = listed.iter().find(|c| c["name"] == "from-package").unwrap();
        assert_eq!(command["sourceInfo"]["scope"], "project");
    }

    // An update reinstalls the unpinned spec; nothing changed, and it says so.
    let updated = nova(&agent, &cwd, &["update", "--extensions", "--approve"]);
    assert!(updated.status.success(), "{updated:?}");
    assert_eq!(stdout(&updated), "Packages are already up to date\n");
    let unknown = nova(&agent, &cwd, &["update", "npm:elsewhere", "--approve"]);
    assert_eq!(unknown.status.code(), Some(1));

    let out = nova(&agent, &cwd, &["remove", "npm:packed-tools", "-l"]);
    assert!(out.status.success(), "{out:?}");
    assert!(!installed.exists());
    assert_eq!(
        settings(&cwd.join(".nova/settings.json"))["packages"],
        json!([])
    );
}
