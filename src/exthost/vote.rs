//! A project's trust put to the user's own extensions (`project_trust`), in a host of their own
//! that stops once they have answered.

use super::*;

const TRUST: &str = "project_trust";

/// What the user's extensions decided about a project (`project_trust`).
#[derive(Debug, Clone, Copy)]
pub struct Vote {
    pub trusted: bool,
    /// Saved in `trust.json` for later sessions (Pi's `remember: true`).
    pub remember: bool,
}

/// Asks `extensions` (the user's own: a project's never vote on its own trust) for their
/// `project_trust` vote on `cwd`, in a host of their own that stops once they have answered,
/// since the session's host loads only once trust is known (then with the project's
/// extensions, if it is trusted). As in Pi's RPC mode, the handlers get no dialogs
/// (`ctx.hasUI` is false); the first yes or no decides. `None`: none decided. The `Vec` says
/// what failed to load or threw, each naming its extension.
pub async fn vote(
    agent_dir: &Path,
    cwd: &Path,
    extensions: &[Extension],
    mode: Mode,
    say: impl Fn(&str) + Send + Sync + 'static,
) -> Result<(Option<Vote>, Vec<String>), HostError> {
    let dir = agent_dir.to_owned();
    let runner = tokio::task::spawn_blocking(move || node::prepare(&dir, &say))
        .await
        .map_err(|e| HostError::Load(e.to_string()))??;
    // When none of them handled the event at their last load, and nothing that load read has
    // changed, there is nobody to ask.
    let key = record::Key::vote(&runner, cwd, extensions, mode);
    if record::recall(agent_dir, &key).is_some_and(|r| !r.events.iter().any(|e| e == TRUST)) {
        return Ok((None, Vec::new()));
    }
    let script = agent_dir.join("exthost").join("host.mjs");
    write_script(&script)?;
    let shim = write_pi_shim(&agent_dir.join("exthost").join("bin"))?;
    let (pid, mut stdin, stdout) = spawn(&runner, &script, &shim, cwd, agent_dir)?;
    // Whatever its extensions started goes with it.
    let _stop = stop_on_drop(pid);
    let paths: Vec<String> = extensions
        .iter()
        .map(|e| e.path.display().to_string())
        .collect();
    let request = json!({
        "id": 1,
        "method": "trust",
        "params": {"cwd": cwd, "paths": paths, "mode": mode.name(), "watch": true},
    });
    let asked = async {
        stdin
            .write_all(format!("{request}\n").as_bytes())
            .await
            .map_err(|e| HostError::Load(e.to_string()))?;
        let mut lines = BufReader::new(stdout).lines();
        while let Some(line) = lines
            .next_line()
            .await
            .map_err(|e| HostError::Load(e.to_string()))?
        {
            let Ok(incoming) = serde_json::from_str::<wire::Incoming>(&line) else {
                continue;
            };
            if incoming.id != Some(json!(1)) || incoming.method.is_some() {
                continue;
            }
            if let Some(error) = incoming.error {
                return Err(HostError::Load(error));
            }
            return serde_json::from_value::<wire::Voted>(incoming.result.unwrap_or_default())
                .map_err(|e| HostError::Load(e.to_string()));
        }
        Err(HostError::Load(GONE.into()))
    };
    let voted = tokio::time::timeout(LOAD_TIMEOUT, asked)
        .await
        .map_err(|_| {
            HostError::Load(format!(
                "no project_trust answer in {}s",
                LOAD_TIMEOUT.as_secs()
            ))
        })??;
    if let Some(reads) = &voted.reads {
        // Kept as a load that registered nothing but, perhaps, its handling of the event.
        let loaded = wire::Loaded {
            errors: voted.errors.clone(),
            events: voted
                .handled
                .then(|| TRUST.to_owned())
                .into_iter()
                .collect(),
            ..wire::Loaded::default()
        };
        record::remember(agent_dir, &key, &loaded, reads);
    }
    let failures = voted
        .errors
        .iter()
        .map(|e| format!("extension {}: {}", e.path, e.error))
        .collect();
    let vote = voted.trusted.map(|trusted| Vote {
        trusted,
        remember: voted.remember,
    });
    Ok((vote, failures))
}

/// Stops the process group `pid` when dropped.
fn stop_on_drop(pid: u32) -> impl Drop {
    struct Stop(u32);
    impl Drop for Stop {
        fn drop(&mut self) {
            let _ = killpg(Pid::from_raw(self.0 as i32), Signal::SIGTERM);
        }
    }
    Stop(pid)
}
