//! Pi 1.6's command shapes that nova matches: queue dispositions and `clear_queue`, thinking
//! levels (commands, flag, setting, events, session entries and what the requests carry),
//! `cycle_model` with and without a scope, `session_info_changed`, and the commands nova
//! accepts or refuses for features it lacks.

use crate::support::mock_llm::{Gate, MockLlm, Reply};
use crate::support::nova_proc::{EVENT_TIMEOUT, Nova, NovaBuilder};
use serde_json::{Value, json};
use std::time::Duration;

fn error_text(r: &Value) -> String {
    assert_eq!(r["success"], false, "expected a failure: {r}");
    r["error"].as_str().unwrap_or_default().to_owned()
}

fn finish(mut nova: Nova) {
    nova.close_stdin();
    assert!(nova.wait_exit(Duration::from_secs(10)).success());
}

/// A models.json with `reasoner` (reasons), `plain` (does not) and `gpt-oss` (reasons, takes
/// level names and cannot turn thinking off), all on `api` at the mock.
fn models(mock: &MockLlm, api: &str) -> Value {
    let base = match api {
        "ollama" => mock.base_url_ollama(),
        _ => mock.base_url_openai(),
    };
    json!({"providers": {"mock": {"baseUrl": base, "api": api, "models": [
        {"id": "reasoner", "reasoning": true},
        {"id": "plain"},
        {"id": "gpt-oss", "reasoning": true, "thinkingLevelMap": {
            "off": null, "minimal": "low", "low": "low", "medium": "medium", "high": "high",
            "xhigh": "high"}},
    ]}}})
}

fn builder(mock: &MockLlm, api: &str, model: &str) -> NovaBuilder {
    Nova::builder()
        .models_json(models(mock, api))
        .args(["--model", &format!("mock/{model}")])
}

fn thinking_events(nova: &mut Nova) -> Vec<Value> {
    nova.drain_pending()
        .into_iter()
        .filter(|e| e["type"] == "thinking_level_changed")
        .collect()
}

fn level(nova: &mut Nova) -> Value {
    nova.request_ok(json!({"type": "get_state"}))["thinkingLevel"].clone()
}

#[test]
fn steer_and_follow_up_are_queued_and_clear_queue_returns_their_texts() {
    let mock = MockLlm::start();
    let gate = Gate::new();
    mock.push(Reply::text("working").text_chunks(2).gate_after(1, &gate));
    mock.push(Reply::text("done"));
    let mut nova = Nova::builder().ollama(&mock).spawn();

    // Nothing queued: both lists empty, and the queue is still reported.
    let cleared = nova.request_ok(json!({"type": "clear_queue"}));
    assert_eq!(cleared, json!({"steering": [], "followUp": []}));
    let update = nova.wait_for_type("queue_update", EVENT_TIMEOUT);
    assert_eq!(update["pendingMessageCount"], 0);

    nova.request_ok(json!({"type": "prompt", "message": "go"}));
    gate.wait_reached(EVENT_TIMEOUT);
    for (kind, text) in [("steer", "turn left"), ("follow_up", "then stop")] {
        let data = nova.request_ok(json!({"type": kind, "message": text}));
        assert_eq!(data, json!({"disposition": "queued"}), "{kind}");
    }
    let data = nova.request_ok(
        json!({"type": "prompt", "message": "and wave", "streamingBehavior": "followUp"}),
    );
    assert_eq!(data, json!({"disposition": "queued"}));

    let cleared = nova.request_ok(json!({"type": "clear_queue"}));
    assert_eq!(
        cleared,
        json!({"steering": ["turn left"], "followUp": ["then stop", "and wave"]})
    );
    let update = nova.wait_for(
        |e| e["type"] == "queue_update" && e["pendingMessageCount"] == 0,
        EVENT_TIMEOUT,
    );
    assert_eq!(update["steering"], json!([]));
    assert_eq!(
        nova.request_ok(json!({"type": "get_state"}))["pendingMessageCount"],
        0
    );

    gate.open();
    nova.events_until("agent_settled");
    // The cleared messages never reached the model.
    assert_eq!(mock.chat_requests().len(), 1);
    finish(nova);
}

#[test]
fn get_state_has_every_field_of_pis_state_and_a_null_model_when_none_is_selected() {
    let mut nova = Nova::builder().spawn();
    let state = nova.request_ok(json!({"type": "get_state"}));
    assert!(state.get("model").is_some_and(Value::is_null), "{state}");
    assert_eq!(state["thinkingLevel"], "off");
    for key in [
        "isStreaming",
        "isCompacting",
        "steeringMode",
        "followUpMode",
        "sessionId",
        "autoCompactionEnabled",
        "messageCount",
        "pendingMessageCount",
    ] {
        assert!(state.get(key).is_some(), "get_state lacks {key}: {state}");
    }
    finish(nova);
}

#[test]
fn thinking_levels_follow_the_model() {
    let mock = MockLlm::start();
    let mut nova = builder(&mock, "ollama", "reasoner").spawn();
    assert_eq!(level(&mut nova), "medium");
    let levels = nova.request_ok(json!({"type": "get_available_thinking_levels"}));
    assert_eq!(
        levels,
        json!({"levels": ["off", "minimal", "low", "medium", "high"]})
    );

    // More than the model has is clamped to its most.
    assert_eq!(
        nova.request_ok(json!({"type": "set_thinking_level", "level": "max"})),
        Value::Null
    );
    assert_eq!(level(&mut nova), "high");
    let events = thinking_events(&mut nova);
    assert_eq!(
        events,
        [json!({"type": "thinking_level_changed", "level": "high"})]
    );
    // The same level again changes nothing and says nothing.
    nova.request_ok(json!({"type": "set_thinking_level", "level": "high"}));
    assert!(thinking_events(&mut nova).is_empty());

    let r = nova.request(json!({"type": "set_thinking_level", "level": "extreme"}));
    let e = error_text(&r);
    assert!(e.contains("extreme") && e.contains("xhigh"), "{e}");

    // Cycling wraps from the most to `off`.
    let cycled = nova.request_ok(json!({"type": "cycle_thinking_level"}));
    assert_eq!(cycled, json!({"level": "off"}));
    assert_eq!(
        nova.request_ok(json!({"type": "cycle_thinking_level"})),
        json!({"level": "minimal"})
    );

    let entries = nova.request_ok(json!({"type": "get_entries"}));
    let recorded: Vec<&str> = entries["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "thinking_level_change")
        .map(|e| e["thinkingLevel"].as_str().unwrap())
        .collect();
    assert_eq!(recorded, ["medium", "high", "off", "minimal"]);

    // A model that does not reason offers only `off` and has nothing to cycle.
    nova.request_ok(json!({"type": "set_model", "provider": "mock", "modelId": "plain"}));
    assert_eq!(level(&mut nova), "off");
    assert_eq!(
        nova.request_ok(json!({"type": "get_available_thinking_levels"})),
        json!({"levels": ["off"]})
    );
    let r = nova.request(json!({"type": "cycle_thinking_level"}));
    assert_eq!(r["success"], true);
    assert_eq!(r["data"], Value::Null, "{r}");
    finish(nova);
}

#[test]
fn a_level_map_offers_xhigh_and_can_rule_out_off() {
    let mock = MockLlm::start();
    let mut nova = builder(&mock, "ollama", "gpt-oss").spawn();
    let levels = nova.request_ok(json!({"type": "get_available_thinking_levels"}));
    assert_eq!(
        levels,
        json!({"levels": ["minimal", "low", "medium", "high", "xhigh"]})
    );
    // `off` is not offered: the nearest level above it is taken.
    nova.request_ok(json!({"type": "set_thinking_level", "level": "off"}));
    assert_eq!(level(&mut nova), "minimal");
    let model = nova.request_ok(json!({"type": "get_state"}))["model"].clone();
    assert_eq!(model["thinkingLevelMap"]["off"], Value::Null);
    assert_eq!(model["thinkingLevelMap"]["xhigh"], "high");
    finish(nova);
}

/// The `think` field of each Ollama request, for each level set before it.
#[test]
fn ollama_requests_carry_think() {
    let mock = MockLlm::start();
    for _ in 0..4 {
        mock.push(Reply::text("ok"));
    }
    let mut nova = builder(&mock, "ollama", "reasoner").spawn();
    let mut sent = Vec::new();
    for (model, level) in [
        ("reasoner", "off"),
        ("reasoner", "high"),
        ("gpt-oss", "minimal"),
        ("plain", "high"),
    ] {
        nova.request_ok(json!({"type": "set_model", "provider": "mock", "modelId": model}));
        nova.request_ok(json!({"type": "set_thinking_level", "level": level}));
        nova.run_prompt("hi");
        let body = mock.chat_requests().last().unwrap().body.clone();
        sent.push(body.get("think").cloned());
    }
    assert_eq!(
        sent,
        [
            Some(json!(false)),
            Some(json!(true)),
            Some(json!("low")),
            None
        ]
    );
    finish(nova);
}

#[test]
fn openai_requests_carry_reasoning_effort_and_read_reasoning_back_as_thinking() {
    let mock = MockLlm::start();
    mock.push(
        Reply::text("answer")
            .thinking("pondering")
            .reasoning_field("reasoning"),
    );
    for _ in 0..3 {
        mock.push(Reply::text("ok"));
    }
    let mut nova = builder(&mock, "openai-completions", "reasoner")
        .args(["--thinking", "low"])
        .spawn();
    let events = nova.run_prompt("think");
    let end = events
        .iter()
        .rev()
        .find(|e| e["type"] == "message_end" && e["message"]["role"] == "assistant")
        .unwrap();
    assert_eq!(
        end["message"]["content"][0],
        json!({"type": "thinking", "thinking": "pondering", "thinkingSignature": "reasoning"})
    );
    let mut sent = vec![
        mock.chat_requests()[0]
            .body
            .get("reasoning_effort")
            .cloned(),
    ];
    for (model, level) in [("reasoner", "off"), ("gpt-oss", "xhigh"), ("plain", "high")] {
        nova.request_ok(json!({"type": "set_model", "provider": "mock", "modelId": model}));
        nova.request_ok(json!({"type": "set_thinking_level", "level": level}));
        nova.run_prompt("hi");
        let body = mock.chat_requests().last().unwrap().body.clone();
        sent.push(body.get("reasoning_effort").cloned());
    }
    assert_eq!(sent, [Some(json!("low")), None, Some(json!("high")), None]);
    // The same model gets its reasoning back in the field it came in, as Pi sends it.
    let second = &mock.chat_requests()[1].body;
    assert_eq!(
        second["messages"][2],
        json!({"role": "assistant", "content": "answer", "reasoning": "pondering"}),
        "{second}"
    );
    mock.assert_no_violations();
    finish(nova);
}

#[test]
fn a_model_switch_keeps_the_level_or_takes_the_default_setting() {
    let mock = MockLlm::start();
    let mut nova = builder(&mock, "ollama", "reasoner")
        .args(["--thinking", "high"])
        .spawn();
    assert_eq!(level(&mut nova), "high");
    // Pi carries the level in force (clamped) across a switch.
    nova.request_ok(json!({"type": "set_model", "provider": "mock", "modelId": "plain"}));
    assert_eq!(level(&mut nova), "off");
    nova.request_ok(json!({"type": "set_model", "provider": "mock", "modelId": "reasoner"}));
    assert_eq!(level(&mut nova), "off");
    let changes: Vec<Value> = thinking_events(&mut nova)
        .into_iter()
        .map(|e| e["level"].clone())
        .collect();
    assert_eq!(changes, [json!("off")]);
    finish(nova);

    // With `defaultThinkingLevel`, a switch goes to it, and a session starts with it.
    let mut nova = builder(&mock, "ollama", "plain")
        .settings(json!({"defaultThinkingLevel": "low"}))
        .spawn();
    assert_eq!(level(&mut nova), "off");
    nova.request_ok(json!({"type": "set_model", "provider": "mock", "modelId": "reasoner"}));
    assert_eq!(level(&mut nova), "low");
    finish(nova);
    let mut nova = builder(&mock, "ollama", "reasoner")
        .settings(json!({"defaultThinkingLevel": "minimal"}))
        .spawn();
    assert_eq!(level(&mut nova), "minimal");
    finish(nova);
}

#[test]
fn an_unknown_thinking_flag_is_a_usage_error() {
    let mut nova = Nova::builder().args(["--thinking", "lots"]).spawn();
    let status = nova.wait_exit(Duration::from_secs(10));
    assert_eq!(status.code(), Some(2));
    assert!(nova.stderr().contains("xhigh"), "{}", nova.stderr());
}

fn cycle(nova: &mut Nova) -> Value {
    nova.request_ok(json!({"type": "cycle_model"}))
}

fn id_of(cycled: &Value) -> String {
    format!(
        "{}:{}:{}",
        cycled["model"]["id"].as_str().unwrap(),
        cycled["thinkingLevel"].as_str().unwrap(),
        cycled["isScoped"]
    )
}

#[test]
fn cycle_model_goes_through_every_model_in_order() {
    let mock = MockLlm::start();
    let mut nova = builder(&mock, "ollama", "reasoner").spawn();
    let ids: Vec<String> = (0..3).map(|_| id_of(&cycle(&mut nova))).collect();
    // The level in force is carried, and clamped for the model that cannot reach it.
    assert_eq!(
        ids,
        [
            "plain:off:false",
            "gpt-oss:minimal:false",
            "reasoner:minimal:false"
        ]
    );
    let state = nova.request_ok(json!({"type": "get_state"}));
    assert_eq!(state["model"]["id"], "reasoner");
    finish(nova);
}

#[test]
fn cycle_model_stays_in_the_scope_and_takes_its_levels() {
    let mock = MockLlm::start();
    let mut nova = Nova::builder()
        .models_json(models(&mock, "ollama"))
        .args(["--models", "gpt-oss:high,plain"])
        .spawn();
    // No --model: the scope's first model starts, with its level.
    let state = nova.request_ok(json!({"type": "get_state"}));
    assert_eq!(state["model"]["id"], "gpt-oss");
    assert_eq!(state["thinkingLevel"], "high");
    let ids: Vec<String> = (0..2).map(|_| id_of(&cycle(&mut nova))).collect();
    assert_eq!(ids, ["plain:off:true", "gpt-oss:high:true"]);
    finish(nova);

    // `enabledModels` is the same scope from settings; a scope of one has nothing to cycle to.
    let mut nova = Nova::builder()
        .models_json(models(&mock, "ollama"))
        .settings(json!({"enabledModels": ["Plai?"]}))
        .spawn();
    let state = nova.request_ok(json!({"type": "get_state"}));
    assert_eq!(state["model"]["id"], "plain");
    let r = nova.request(json!({"type": "cycle_model"}));
    assert_eq!((&r["success"], &r["data"]), (&json!(true), &Value::Null));
    finish(nova);
}

#[test]
fn set_session_name_announces_the_name() {
    let mut nova = Nova::builder().spawn();
    nova.request_ok(json!({"type": "set_session_name", "name": "  feature work "}));
    let event = nova.wait_for_type("session_info_changed", EVENT_TIMEOUT);
    assert_eq!(
        event,
        json!({"type": "session_info_changed", "name": "feature work"})
    );
    finish(nova);
}

#[test]
fn retry_commands_are_accepted_and_extension_ui_without_extensions_is_refused() {
    let mut nova = Nova::builder().spawn();
    assert_eq!(
        nova.request_ok(json!({"type": "set_auto_retry", "enabled": false})),
        Value::Null
    );
    assert_eq!(nova.request_ok(json!({"type": "abort_retry"})), Value::Null);
    let r = nova.request(json!({"type": "extension_ui_response", "id": "ui-1", "value": "x"}));
    assert_eq!(r["id"], "ui-1");
    let e = error_text(&r);
    assert!(e.contains("no extension is loaded"), "{e}");
    finish(nova);
}
