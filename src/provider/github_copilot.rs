//! GitHub Copilot (`github-copilot`), as Pi 1.6 reaches it: one provider whose models speak
//! three APIs (chat completions, Responses, Anthropic Messages), each with a bearer token, at
//! the address the Copilot token names (`proxy-ep=proxy.<host>` becomes `https://api.<host>`),
//! with the editor's headers Copilot expects and, per request, who started it (`X-Initiator`),
//! its intent, and whether it carries images.

use crate::protocol::{ContentBlock, Message, UserContent};
use std::sync::Arc;

/// The provider's name: Pi keys Copilot's request differences on it.
pub const PROVIDER: &str = "github-copilot";
/// The address of an individual subscription, when the token names none.
pub const DEFAULT_BASE_URL: &str = "https://api.individual.githubcopilot.com";

/// The headers every request carries as Pi's catalog gives them: Copilot serves editors.
const EDITOR_HEADERS: [(&str, &str); 4] = [
    ("user-agent", "GitHubCopilotChat/0.35.0"),
    ("editor-version", "vscode/1.107.0"),
    ("editor-plugin-version", "copilot-chat/0.35.0"),
    ("copilot-integration-id", "vscode-chat"),
];

/// The API address a Copilot token names in its `proxy-ep` field, `None` when it names none
/// (a token given by hand, or a host that is not a plain host name).
pub fn base_url_of_token(token: &str) -> Option<String> {
    let proxy = token
        .split(';')
        .find_map(|field| field.trim().strip_prefix("proxy-ep="))?;
    let host = proxy
        .strip_prefix("proxy.")
        .map_or_else(|| proxy.to_owned(), |rest| format!("api.{rest}"));
    let plain = !host.is_empty()
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':'));
    plain.then(|| format!("https://{host}"))
}

/// The API address of a GitHub Enterprise domain's Copilot.
pub fn enterprise_base_url(domain: &str) -> String {
    format!("https://copilot-api.{domain}")
}

/// Where a request goes, in Pi's order: the address the token names, else the enterprise
/// login's (`enterprise`), else the model's own.
pub fn base_url(token: Option<&str>, enterprise: Option<&str>, model_base: &str) -> String {
    token
        .and_then(base_url_of_token)
        .or_else(|| enterprise.map(str::to_owned))
        .unwrap_or_else(|| model_base.to_owned())
}

/// The headers a request to Copilot sends beside its token, as Pi sends them; configured headers
/// of the same names replace them.
pub fn headers(
    messages: &[Arc<Message>],
    configured: &[(String, String)],
) -> Vec<(&'static str, String)> {
    // The last message decides: a user's prompt, or the agent going on after a reply or a tool.
    let initiator = match messages.last().map(|m| &**m) {
        Some(Message::Assistant(_) | Message::ToolResult(_)) => "agent",
        _ => "user",
    };
    let mut headers: Vec<(&'static str, String)> = EDITOR_HEADERS
        .iter()
        .map(|(name, value)| (*name, (*value).to_owned()))
        .collect();
    headers.push(("x-initiator", initiator.to_owned()));
    headers.push(("openai-intent", "conversation-edits".to_owned()));
    if messages.iter().any(|m| has_image(m)) {
        headers.push(("copilot-vision-request", "true".to_owned()));
    }
    headers.retain(|(name, _)| !configured.iter().any(|(n, _)| n.eq_ignore_ascii_case(name)));
    headers
}

fn has_image(message: &Message) -> bool {
    let image = |blocks: &[ContentBlock]| {
        blocks
            .iter()
            .any(|b| matches!(b, ContentBlock::Image { .. }))
    };
    match message {
        Message::User(u) => match &u.content {
            UserContent::Blocks(blocks) => image(blocks),
            UserContent::Text(_) => false,
        },
        Message::ToolResult(r) => image(&r.content),
        Message::Custom(c) => match &c.content {
            UserContent::Blocks(blocks) => image(blocks),
            UserContent::Text(_) => false,
        },
        Message::Assistant(_) | Message::CompactionSummary(_) | Message::BashExecution(_) => false,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::protocol::StopReason;
    use crate::provider::prepare::tests::{assistant, user_text};

    #[test]
    fn the_token_names_the_address() {
        assert_eq!(
            base_url_of_token("tid=1;exp=2;proxy-ep=proxy.individual.githubcopilot.com;st=dotcom")
                .as_deref(),
            Some("https://api.individual.githubcopilot.com")
        );
        assert_eq!(
            base_url_of_token("tid=1;proxy-ep=proxy.business.githubcopilot.com").as_deref(),
            Some("https://api.business.githubcopilot.com")
        );
        assert_eq!(base_url_of_token("ghu_plain"), None);
        assert_eq!(base_url_of_token("proxy-ep=evil.com/path?x"), None);
        let enterprise = enterprise_base_url("ghe.example.com");
        assert_eq!(enterprise, "https://copilot-api.ghe.example.com");
        let model = "https://api.individual.githubcopilot.com";
        assert_eq!(
            base_url(
                Some("tid=1;proxy-ep=proxy.x.example"),
                Some(&enterprise),
                model
            ),
            "https://api.x.example"
        );
        assert_eq!(
            base_url(Some("tid=1"), Some(&enterprise), model),
            enterprise
        );
        assert_eq!(base_url(Some("tid=1"), None, model), model);
    }

    #[test]
    fn who_started_the_request_and_its_images() {
        let prompt = [Arc::new(user_text("hi"))];
        let h = headers(&prompt, &[]);
        let value = |h: &[(&str, String)], name: &str| {
            h.iter().find(|(n, _)| *n == name).map(|(_, v)| v.clone())
        };
        assert_eq!(value(&h, "x-initiator").as_deref(), Some("user"));
        assert_eq!(
            value(&h, "openai-intent").as_deref(),
            Some("conversation-edits")
        );
        assert_eq!(value(&h, "copilot-vision-request"), None);
        assert_eq!(
            value(&h, "editor-version").as_deref(),
            Some("vscode/1.107.0")
        );
        let picture = Message::User(crate::protocol::UserMessage {
            content: UserContent::Blocks(vec![ContentBlock::Image {
                data: "aW1n".into(),
                mime_type: "image/png".into(),
            }]),
            timestamp: 1,
        });
        let going_on = [
            Arc::new(picture),
            Arc::new(assistant(vec![ContentBlock::text("ok")], StopReason::Stop)),
        ];
        let configured = [("Editor-Version".to_owned(), "mine".to_owned())];
        let h = headers(&going_on, &configured);
        assert_eq!(value(&h, "x-initiator").as_deref(), Some("agent"));
        assert_eq!(value(&h, "copilot-vision-request").as_deref(), Some("true"));
        assert_eq!(value(&h, "editor-version"), None);
    }
}
