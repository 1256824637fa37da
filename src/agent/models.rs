//! The model and its thinking level: `set_model`, `cycle_model` and the thinking-level commands.
//! Levels follow Pi: a model offers the levels its `reasoning` and `thinkingLevelMap` allow, a
//! level it does not offer is clamped to the nearest one it does, and a change is recorded in
//! the session and announced with `thinking_level_changed`.

use super::{Agent, CommandError, ModelSource, State};
use crate::config::scope::same;
use crate::protocol::{CycledModel, Event, Model, ThinkingLevel};

impl Agent {
    pub fn set_model(&self, provider: &str, id: &str) -> Result<Model, CommandError> {
        let mut state = self.state();
        if state.run.is_some() {
            return Err(CommandError::Busy("change the model"));
        }
        let model = self
            .inner
            .registry
            .find_with(&state.providers, provider, id)
            .ok_or_else(|| CommandError::ModelNotFound {
                provider: provider.to_owned(),
                id: id.to_owned(),
            })?;
        self.switch_model(&mut state, model.clone(), None, ModelSource::Set);
        Ok(model)
    }

    /// The next model of the scope (`--models`, `enabledModels`), else of every declared model;
    /// `None` when there is no other one to go to.
    pub fn cycle_model(&self) -> Result<Option<CycledModel>, CommandError> {
        let mut state = self.state();
        if state.run.is_some() {
            return Err(CommandError::Busy("change the model"));
        }
        let scope = &self.inner.scope;
        let candidates: Vec<(Model, Option<ThinkingLevel>)> = if scope.is_empty() {
            let all = self.inner.registry.models_with(&state.providers);
            all.into_iter().map(|m| (m, None)).collect()
        } else {
            scope
                .iter()
                .map(|s| (s.model.clone(), s.thinking))
                .collect()
        };
        let current = state
            .model
            .as_ref()
            .and_then(|c| candidates.iter().position(|(m, _)| same(m, c)));
        let next = match current {
            _ if candidates.is_empty() => return Ok(None),
            None => 0,
            Some(_) if candidates.len() == 1 => return Ok(None),
            Some(i) => (i + 1) % candidates.len(),
        };
        let (model, thinking) = candidates[next].clone();
        self.switch_model(&mut state, model.clone(), thinking, ModelSource::Cycle);
        Ok(Some(CycledModel {
            model,
            thinking_level: state.thinking_level,
            is_scoped: !scope.is_empty(),
        }))
    }

    /// Makes `model` current with the level Pi picks for a switch: the scope's level for it,
    /// else `defaultThinkingLevel`, else the level in force; clamped to what it offers. The
    /// extensions hear of it after the level (`model_select` after `thinking_level_select`, as
    /// in Pi), unless the model was already the current one.
    fn switch_model(
        &self,
        state: &mut State,
        model: Model,
        scoped: Option<ThinkingLevel>,
        source: ModelSource,
    ) {
        self.retool(state, Some(&model));
        let wanted = scoped
            .or(self.inner.default_thinking_level)
            .unwrap_or(state.thinking_level);
        let recorded = state
            .session
            .append_model_change(&model.provider, &model.id);
        if let Err(e) = recorded {
            self.report_session_error(&e);
        }
        let previous = state.model.replace(model);
        self.apply_thinking_level(state, wanted);
        if let (Some(extensions), Some(model)) = (self.extensions(), &state.model)
            && previous.as_ref().is_none_or(|p| !same(p, model))
        {
            extensions.model_selected(model, previous.as_ref(), source);
        }
    }

    /// An extension's `pi.registerProvider(name, config)`: its models become the session's
    /// (replacing the provider's), or its address and headers change the provider's models. A
    /// second registration of `name` replaces the first.
    pub fn register_provider(&self, name: &str, config: serde_json::Value) -> Result<(), String> {
        let mut warnings = Vec::new();
        let registered = self.inner.registry.register(name, config, &mut warnings)?;
        for warning in &warnings {
            self.inner.warnings.warn(warning);
        }
        let mut state = self.state();
        state.providers.retain(|r| r.name != name);
        state.providers.push(registered);
        Ok(())
    }

    /// An extension's `pi.unregisterProvider(name)`: the provider's models are the registry's
    /// again. The current model stays chosen, as in Pi; a model the registry does not have at
    /// that address then gets no credentials.
    pub fn unregister_provider(&self, name: &str) {
        self.state().providers.retain(|r| r.name != name);
    }

    /// How this session's requests reach a provider with `credentials`; `hooks` are the
    /// extensions' provider hooks, for the requests they shape.
    pub(super) fn transport<'a>(
        &'a self,
        credentials: crate::config::models::Credentials,
        hooks: Option<&'a dyn crate::provider::hooks::Hooks>,
    ) -> crate::provider::http::Transport<'a> {
        crate::provider::http::Transport {
            client: &self.inner.client,
            idle_timeout: self.inner.idle_timeout,
            api_key: credentials.api_key,
            headers: credentials.headers,
            route: credentials.route,
            warnings: &self.inner.warnings,
            hooks,
        }
    }

    /// What a request to `model` carries to be let in, given the extensions' providers.
    pub(super) async fn credentials(
        &self,
        model: &Model,
    ) -> Result<crate::config::models::Credentials, crate::config::ConfigError> {
        let registered = self
            .state()
            .providers
            .iter()
            .find(|r| r.name == model.provider)
            .cloned();
        self.inner
            .registry
            .credentials_with(registered.as_ref(), model)
            .await
    }

    pub fn set_thinking_level(&self, level: ThinkingLevel) {
        let mut state = self.state();
        self.apply_thinking_level(&mut state, level);
    }

    /// The next level the model offers after the current one; `None` for a model that does not
    /// reason.
    pub fn cycle_thinking_level(&self) -> Option<ThinkingLevel> {
        let mut state = self.state();
        let levels = state
            .model
            .as_ref()
            .filter(|m| m.reasoning)?
            .thinking_levels();
        let next = levels
            .iter()
            .position(|l| *l == state.thinking_level)
            .map_or(0, |i| (i + 1) % levels.len());
        self.apply_thinking_level(&mut state, levels[next]);
        Some(state.thinking_level)
    }

    pub fn available_thinking_levels(&self) -> Vec<ThinkingLevel> {
        available(self.state().model.as_ref())
    }

    /// Sets the level, clamped to the model, and records and announces it if it changed.
    fn apply_thinking_level(&self, state: &mut State, wanted: ThinkingLevel) {
        let level = clamp(state.model.as_ref(), wanted);
        if level == state.thinking_level {
            return;
        }
        state.thinking_level = level;
        if let Err(e) = state.session.append_thinking_level(level.as_str()) {
            self.report_session_error(&e);
        }
        self.emit(Event::ThinkingLevelChanged { level });
    }
}

/// Pi offers every level while no model is selected; it only narrows them once one is.
fn available(model: Option<&Model>) -> Vec<ThinkingLevel> {
    model.map_or_else(|| ThinkingLevel::ALL.to_vec(), Model::thinking_levels)
}

/// As Pi: without a model any level is kept, to be clamped once a model is chosen.
fn clamp(model: Option<&Model>, level: ThinkingLevel) -> ThinkingLevel {
    model.map_or(level, |m| m.clamp_thinking(level))
}

/// The level a session starts with: `--thinking` (or the scope's), else the one the session
/// recorded, else `defaultThinkingLevel`, else Pi's `medium`; clamped to the model, and `off`
/// without one.
pub(super) fn startup_level(
    model: Option<&Model>,
    flag: Option<ThinkingLevel>,
    recorded: Option<&str>,
    default: Option<ThinkingLevel>,
) -> ThinkingLevel {
    let wanted = flag
        .or(recorded.and_then(ThinkingLevel::parse))
        .or(default)
        .unwrap_or_default();
    model.map_or(ThinkingLevel::Off, |m| m.clamp_thinking(wanted))
}
