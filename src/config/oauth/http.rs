//! The requests the OAuth code sends to the providers' authorization servers, where they go, and
//! how their answers become errors. Answers are read as JSON and only their `error` codes are
//! ever quoted: a token endpoint's body may hold tokens.

use serde_json::{Map, Value};
use std::time::Duration;

/// Replaces the scheme, host and port of every authorization-server address, so that the tests
/// can stand in for all of them with one local server. Only loopback addresses are accepted.
pub const TEST_OVERRIDE: &str = "NOVA_OAUTH_TEST_URL";

/// How long one request to an authorization server may take.
const TIMEOUT: Duration = Duration::from_secs(30);

/// How to read variables (the provider's auth.json `env` over the process's).
pub type Vars<'a> = &'a (dyn Fn(&str) -> Option<String> + Sync);

/// Where `url` goes: to the host the first set variable of `host_vars` names (Pi's own
/// overrides, such as Kimi Code's), else to the test override's, else where it says.
pub fn endpoint(url: &str, host_vars: &[&str], var: Vars<'_>) -> Result<String, String> {
    let path = url
        .split_once("://")
        .and_then(|(_, rest)| rest.find('/').map(|i| &rest[i..]))
        .unwrap_or("/");
    if let Some(host) = host_vars
        .iter()
        .find_map(|v| var(v).filter(|h| !h.trim().is_empty()))
    {
        return Ok(format!("{}{path}", host.trim().trim_end_matches('/')));
    }
    let Some(base) = var(TEST_OVERRIDE).filter(|b| !b.trim().is_empty()) else {
        return Ok(url.to_owned());
    };
    let loopback = reqwest::Url::parse(base.trim()).ok().is_some_and(|u| {
        u.scheme() == "http"
            && matches!(
                u.host_str(),
                Some("127.0.0.1" | "localhost" | "[::1]" | "::1")
            )
    });
    if !loopback {
        return Err(format!(
            "{TEST_OVERRIDE} must be a loopback http:// address (it is for tests only)"
        ));
    }
    Ok(format!("{}{path}", base.trim().trim_end_matches('/')))
}

/// A request's body.
pub enum Body<'a> {
    None,
    Form(&'a [(&'a str, &'a str)]),
    Json(Value),
}

impl<'a> Body<'a> {
    /// `pairs` as a JSON object when the endpoint takes JSON, else as a form: token endpoints
    /// differ only in that.
    pub fn pairs(pairs: &'a [(&'a str, &'a str)], json: bool) -> Body<'a> {
        if json {
            Body::Json(Value::Object(
                pairs
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), Value::from(*v)))
                    .collect(),
            ))
        } else {
            Body::Form(pairs)
        }
    }
}

/// An authorization server's answer: its status and its body as JSON (`Null` when it is not).
pub struct Answer {
    pub status: u16,
    pub body: Value,
}

impl Answer {
    pub fn ok(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// The body's `error` code, when it has one (an object's `code` or `type` too).
    pub fn error(&self) -> Option<&str> {
        match self.body.get("error")? {
            Value::String(code) => Some(code),
            Value::Object(e) => e
                .get("code")
                .or_else(|| e.get("type"))
                .and_then(Value::as_str),
            _ => None,
        }
    }

    pub fn field(&self, key: &str) -> Option<&str> {
        self.body
            .get(key)
            .and_then(Value::as_str)
            .filter(|v| !v.trim().is_empty())
    }

    pub fn object(&self) -> Map<String, Value> {
        self.body.as_object().cloned().unwrap_or_default()
    }

    /// An error for a failed refresh: a dead login (401, 403, `invalid_grant`) names
    /// `nova login <provider>`; anything else says what the server answered.
    pub fn refresh_failure(&self, name: &str, provider: &str, url: &str) -> String {
        let code = self.error().map(short).unwrap_or_default();
        let detail = if code.is_empty() {
            String::new()
        } else {
            format!(": {code}")
        };
        if self.status == 401 || self.status == 403 || code == "invalid_grant" {
            format!(
                "the {name} login has expired or was revoked (the server answered {}{detail}); \
                 log in again with `nova login {provider}`",
                self.status
            )
        } else {
            format!(
                "refreshing the {name} login failed: {url} answered {}{detail}",
                self.status
            )
        }
    }

    /// An error for a failed step of a login.
    pub fn login_failure(&self, what: &str, url: &str) -> String {
        let detail = match self.error().map(short) {
            Some(code) => format!(" ({code})"),
            None => String::new(),
        };
        format!("{what} failed: {url} answered {}{detail}", self.status)
    }
}

/// A server's error code, cut short and kept to printable ASCII: it is the server's text.
fn short(code: &str) -> String {
    code.chars()
        .filter(|c| c.is_ascii_graphic() || *c == ' ')
        .take(80)
        .collect()
}

/// Sends one request (`POST` when it has a body, else `GET`) and reads the answer; only a
/// server that cannot be reached or does not answer in time is an error here.
pub async fn send(
    url: &str,
    headers: &[(&str, &str)],
    body: Body<'_>,
    name: &str,
) -> Result<Answer, String> {
    let client = crate::provider::http::SharedClient::default();
    let client = client.get().map_err(|e| e.to_string())?;
    let mut request = match body {
        Body::None => client.get(url),
        Body::Form(pairs) => client
            .post(url)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(form_encode(pairs)),
        Body::Json(value) => client
            .post(url)
            .header("content-type", "application/json")
            .body(value.to_string()),
    };
    request = request.header("accept", "application/json");
    for (key, value) in headers {
        request = request.header(*key, *value);
    }
    let response = tokio::time::timeout(TIMEOUT, request.send())
        .await
        .map_err(|_| format!("the {name} server {url} did not answer within 30 s"))?
        .map_err(|e| format!("cannot reach the {name} server {url}: {e}"))?;
    let status = response.status().as_u16();
    let body = tokio::time::timeout(TIMEOUT, response.json::<Value>())
        .await
        .ok()
        .and_then(Result::ok)
        .unwrap_or(Value::Null);
    Ok(Answer { status, body })
}

/// `application/x-www-form-urlencoded` pairs.
pub fn form_encode(pairs: &[(&str, &str)]) -> String {
    pairs
        .iter()
        .map(|(k, v)| format!("{}={}", encode(k), encode(v)))
        .collect::<Vec<_>>()
        .join("&")
}

/// One component of a form or a query string.
pub fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                char::from(b).to_string()
            }
            b' ' => "+".to_owned(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn overrides_and_encoding() {
        let none = |_: &str| None;
        assert_eq!(
            endpoint("https://auth.example/v1/token", &[], &none).unwrap(),
            "https://auth.example/v1/token"
        );
        let test = |v: &str| (v == TEST_OVERRIDE).then(|| "http://127.0.0.1:9/".to_owned());
        assert_eq!(
            endpoint("https://auth.example/v1/token", &[], &test).unwrap(),
            "http://127.0.0.1:9/v1/token"
        );
        let own = |v: &str| (v == "OWN_HOST").then(|| "http://127.0.0.1:8".to_owned());
        assert_eq!(
            endpoint("https://auth.example/t", &["OWN_HOST"], &own).unwrap(),
            "http://127.0.0.1:8/t"
        );
        let remote = |v: &str| (v == TEST_OVERRIDE).then(|| "https://evil.example".to_owned());
        assert!(endpoint("https://auth.example/t", &[], &remote).is_err());
        assert_eq!(form_encode(&[("a b", "x/y=z&")]), "a+b=x%2Fy%3Dz%26");
    }
}
