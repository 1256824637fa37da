//! ChatGPT's Codex backend, where a ChatGPT Plus/Pro subscription's token (Pi's `openai-codex`
//! login) reaches OpenAI's models: the Responses API ([`super::openai_responses`], its Codex
//! flavour) at `<base>/codex/responses`, with the account the token belongs to named in a header
//! of its own. Pi's api name for it is `openai-codex-responses`.

use base64::Engine;
use serde_json::Value;

/// The backend's address, as Pi 1.6 has it.
pub const DEFAULT_BASE_URL: &str = "https://chatgpt.com/backend-api";
/// Where in the access token's claims the ChatGPT account is.
const AUTH_CLAIM: &str = "https://api.openai.com/auth";
/// Who the request says it comes from: the backend wants an originator on every request, and
/// Pi's is one it knows.
const ORIGINATOR: &str = "pi";

/// `<base>/codex/responses`; a base that already ends in `/codex` or `/codex/responses` is
/// kept, as Pi resolves it.
pub fn endpoint(base_url: &str) -> String {
    let base = match base_url.trim() {
        "" => DEFAULT_BASE_URL,
        base => base,
    }
    .trim_end_matches('/');
    if base.ends_with("/codex/responses") {
        base.to_owned()
    } else if base.ends_with("/codex") {
        format!("{base}/responses")
    } else {
        format!("{base}/codex/responses")
    }
}

/// The ChatGPT account an access token (a JWT) was issued for: its
/// `https://api.openai.com/auth` claim's `chatgpt_account_id`. The error never quotes the token.
pub fn account_id(token: &str) -> Result<String, String> {
    let refused = || {
        "the key is not a ChatGPT access token with an account in it (log in again with \
         `nova login openai-codex`, or with Pi's /login)"
            .to_owned()
    };
    let mut parts = token.split('.');
    let (Some(_), Some(payload), Some(_), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(refused());
    };
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .map_err(|_| refused())?;
    let claims: Value = serde_json::from_slice(&bytes).map_err(|_| refused())?;
    claims
        .get(AUTH_CLAIM)
        .and_then(|auth| auth.get("chatgpt_account_id"))
        .and_then(Value::as_str)
        .filter(|id| !id.is_empty())
        .map(str::to_owned)
        .ok_or_else(refused)
}

/// The headers a request sends beside its bearer token, as Pi sends them over HTTP; configured
/// headers of the same names replace them.
pub fn headers(account: String, configured: &[(String, String)]) -> Vec<(&'static str, String)> {
    let mut headers = vec![
        ("originator", ORIGINATOR.to_owned()),
        ("chatgpt-account-id", account),
        ("openai-beta", "responses=experimental".to_owned()),
        ("accept", "text/event-stream".to_owned()),
    ];
    headers.retain(|(name, _)| !configured.iter().any(|(n, _)| n.eq_ignore_ascii_case(name)));
    headers
}

/// An HTTP error's body as Pi words it when the subscription's limit is reached (a 429, or a
/// usage-limit code): which plan, and when it resets; any other body as it came.
pub fn http_error_text(status: u16, body: &str, now_secs: u64) -> String {
    let Ok(parsed) = serde_json::from_str::<Value>(body) else {
        return body.to_owned();
    };
    let Some(error) = parsed.get("error") else {
        return body.to_owned();
    };
    let code = ["code", "type"]
        .iter()
        .find_map(|k| error.get(*k).and_then(Value::as_str))
        .unwrap_or_default();
    let limited = [
        "usage_limit_reached",
        "usage_not_included",
        "rate_limit_exceeded",
    ]
    .iter()
    .any(|c| code.eq_ignore_ascii_case(c));
    if !limited && status != 429 {
        return body.to_owned();
    }
    let plan = error
        .get("plan_type")
        .and_then(Value::as_str)
        .map(|p| format!(" ({} plan)", p.to_lowercase()))
        .unwrap_or_default();
    let when = error
        .get("resets_at")
        .and_then(Value::as_f64)
        .map(|at| {
            let minutes = ((at - now_secs as f64) / 60.0).round().max(0.0);
            format!(" Try again in ~{minutes} min.")
        })
        .unwrap_or_default();
    format!("You have hit your ChatGPT usage limit{plan}.{when}")
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn jwt(claims: &Value) -> String {
        let b64 = |v: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v);
        format!(
            "{}.{}.{}",
            b64(br#"{"alg":"RS256"}"#),
            b64(claims.to_string().as_bytes()),
            b64(b"sig")
        )
    }

    #[test]
    fn the_account_comes_from_the_token() {
        let token = jwt(&serde_json::json!({
            "https://api.openai.com/auth": {"chatgpt_account_id": "acct-123"}, "exp": 1
        }));
        assert_eq!(account_id(&token).unwrap(), "acct-123");
        for bad in [
            "sk-plain-key".to_owned(),
            "a.b.c".to_owned(),
            jwt(&serde_json::json!({"sub": "x"})),
        ] {
            let err = account_id(&bad).unwrap_err();
            assert!(err.contains("nova login openai-codex"), "{err}");
            assert!(!err.contains(&bad));
        }
    }

    #[test]
    fn endpoints_as_pi_resolves_them() {
        assert_eq!(
            endpoint("https://chatgpt.com/backend-api/"),
            "https://chatgpt.com/backend-api/codex/responses"
        );
        assert_eq!(
            endpoint(""),
            "https://chatgpt.com/backend-api/codex/responses"
        );
        assert_eq!(endpoint("http://h/codex"), "http://h/codex/responses");
        assert_eq!(
            endpoint("http://h/codex/responses"),
            "http://h/codex/responses"
        );
    }

    #[test]
    fn a_usage_limit_is_worded_as_pi_words_it() {
        let body =
            r#"{"error":{"code":"usage_limit_reached","plan_type":"PLUS","resets_at":1000}}"#;
        assert_eq!(
            http_error_text(429, body, 1000 - 600),
            "You have hit your ChatGPT usage limit (plus plan). Try again in ~10 min."
        );
        assert_eq!(http_error_text(500, "oops", 0), "oops");
        let other = r#"{"error":{"code":"bad_request","message":"no"}}"#;
        assert_eq!(http_error_text(400, other, 0), other);
    }
}
