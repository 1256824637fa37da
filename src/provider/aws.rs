//! How a Bedrock request reaches AWS, decided as Pi 1.6 decides it: which region, which
//! endpoint, and which credentials — a bearer token, access keys from the environment, or a
//! named profile in the shared credentials file — and the SigV4 signature over the request,
//! made by AWS's own `aws-sigv4`. Everything here is a pure function of the variables and
//! files it is given, so it is tested without touching the environment; nothing AWS runs
//! unless a Bedrock model is used.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// The region when nothing names one, as Pi falls back to it.
const DEFAULT_REGION: &str = "us-east-1";
/// The service name requests are signed for.
const SIGNING_NAME: &str = "bedrock";

/// Access keys, as the environment or a profile holds them.
#[derive(Clone, PartialEq, Eq)]
pub struct AccessKeys {
    pub access_key_id: String,
    pub secret_access_key: String,
    pub session_token: Option<String>,
}

impl std::fmt::Debug for AccessKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print a secret, even in a debug dump.
        f.debug_struct("AccessKeys").finish_non_exhaustive()
    }
}

/// How a Bedrock request authenticates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credential {
    /// `Authorization: Bearer …` (a Bedrock API key).
    Bearer(String),
    /// A SigV4 signature with these keys.
    Keys(AccessKeys),
}

/// Where a Bedrock request goes and how it proves who sends it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub region: String,
    /// The base URL requests go to (`https://bedrock-runtime.<region>.amazonaws.com`, or the
    /// model's own when it names a custom endpoint).
    pub base_url: String,
    pub credential: Credential,
}

/// What [`target`] reads: variables (the process environment with auth.json's `env` over it)
/// and the home directory the shared AWS files are found in.
pub struct Sources<'a> {
    pub var: &'a dyn Fn(&str) -> Option<String>,
    pub home: Option<PathBuf>,
    /// `AWS_PROFILE` was chosen for this provider (an auth.json entry's `env`), so the profile
    /// wins over access keys in the environment, as Pi lets it.
    pub stored_profile: bool,
}

impl Sources<'_> {
    fn get(&self, name: &str) -> Option<String> {
        (self.var)(name).filter(|v| !v.is_empty())
    }

    fn file(&self, variable: &str, default: &str) -> Option<PathBuf> {
        self.get(variable)
            .map(PathBuf::from)
            .or_else(|| self.home.as_ref().map(|h| h.join(".aws").join(default)))
    }
}

/// The region, endpoint and credential for a request to `model_id` at `base_url`. `key` is a
/// key nova was given for the provider (the command line or auth.json): Pi uses it as the
/// bearer token. The error says what to set.
pub fn target(
    model_id: &str,
    base_url: &str,
    key: Option<&str>,
    env: &Sources,
) -> Result<Target, String> {
    let configured = env
        .get("AWS_REGION")
        .or_else(|| env.get("AWS_DEFAULT_REGION"));
    let profile = env.get("AWS_PROFILE");
    let endpoint_region = standard_endpoint_region(base_url);
    // A standard endpoint in the catalog yields to a configured region or profile; any other
    // endpoint (a VPC endpoint, a proxy) is used as it is.
    let explicit = endpoint_region.is_none() || (configured.is_none() && profile.is_none());
    let region = arn_region(model_id)
        .or(configured)
        .or_else(|| endpoint_region.filter(|_| explicit))
        .or_else(|| {
            profile
                .as_deref()
                .and_then(|p| profile_value(env, "AWS_CONFIG_FILE", "config", p, "region"))
        })
        .unwrap_or_else(|| DEFAULT_REGION.to_owned());
    let base_url = if explicit {
        base_url.trim_end_matches('/').to_owned()
    } else {
        standard_endpoint(&region)
    };
    let credential = credential(key, profile.as_deref(), env)?;
    Ok(Target {
        region,
        base_url,
        credential,
    })
}

/// Pi's order: a proxy that needs no auth, a stored key or `AWS_BEARER_TOKEN_BEDROCK`, then
/// the AWS chain (a profile chosen explicitly, access keys in the environment, the profile the
/// environment names or the default one).
fn credential(
    key: Option<&str>,
    profile: Option<&str>,
    env: &Sources,
) -> Result<Credential, String> {
    if env.get("AWS_BEDROCK_SKIP_AUTH").as_deref() == Some("1") {
        return Ok(Credential::Keys(AccessKeys {
            access_key_id: "dummy-access-key".to_owned(),
            secret_access_key: "dummy-secret-key".to_owned(),
            session_token: None,
        }));
    }
    if let Some(token) = key
        .filter(|k| !k.is_empty())
        .map(str::to_owned)
        .or_else(|| env.get("AWS_BEARER_TOKEN_BEDROCK"))
    {
        return Ok(Credential::Bearer(token));
    }
    if env.stored_profile
        && let Some(keys) = profile.and_then(|name| profile_keys(env, name))
    {
        return Ok(Credential::Keys(keys));
    }
    if let (Some(id), Some(secret)) = (
        env.get("AWS_ACCESS_KEY_ID"),
        env.get("AWS_SECRET_ACCESS_KEY"),
    ) {
        return Ok(Credential::Keys(AccessKeys {
            access_key_id: id,
            secret_access_key: secret,
            session_token: env.get("AWS_SESSION_TOKEN"),
        }));
    }
    let name = profile.unwrap_or("default");
    if let Some(keys) = profile_keys(env, name) {
        return Ok(Credential::Keys(keys));
    }
    Err(match profile {
        Some(name) => format!(
            "AWS profile \"{name}\" has no aws_access_key_id and aws_secret_access_key in the \
             shared credentials or config file (nova reads static keys only; for SSO or a \
             role, export the keys, e.g. with `aws configure export-credentials`)"
        ),
        None => "no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, \
                 AWS_PROFILE, or AWS_BEARER_TOKEN_BEDROCK"
            .to_owned(),
    })
}

/// A profile's static keys, from the credentials file (`[name]`) or the config file
/// (`[profile name]`, `[default]`).
fn profile_keys(env: &Sources, name: &str) -> Option<AccessKeys> {
    let from = |variable: &str, default: &str| {
        let text = read_small(&env.file(variable, default)?)?;
        let section = section(&text, name, variable == "AWS_CONFIG_FILE")?;
        let get = |key: &str| {
            section
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.clone())
        };
        Some(AccessKeys {
            access_key_id: get("aws_access_key_id").filter(|v| !v.is_empty())?,
            secret_access_key: get("aws_secret_access_key").filter(|v| !v.is_empty())?,
            session_token: get("aws_session_token").filter(|v| !v.is_empty()),
        })
    };
    from("AWS_SHARED_CREDENTIALS_FILE", "credentials").or_else(|| from("AWS_CONFIG_FILE", "config"))
}

fn profile_value(
    env: &Sources,
    variable: &str,
    default: &str,
    name: &str,
    key: &str,
) -> Option<String> {
    let text = read_small(&env.file(variable, default)?)?;
    section(&text, name, variable == "AWS_CONFIG_FILE")?
        .into_iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v)
        .filter(|v| !v.is_empty())
}

/// Reads a shared AWS file, as long as it is a regular file of sane size.
fn read_small(path: &Path) -> Option<String> {
    const LIMIT: u64 = 1 << 20;
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_file() || meta.len() > LIMIT {
        return None;
    }
    std::fs::read_to_string(path).ok()
}

/// The `key = value` pairs of profile `name` in an INI file as AWS writes them. In the config
/// file a profile's section is `[profile name]`, except `[default]`.
fn section(text: &str, name: &str, config: bool) -> Option<Vec<(String, String)>> {
    let wanted = |header: &str| {
        let header = header.trim();
        if config && name != "default" {
            header
                .strip_prefix("profile")
                .filter(|rest| rest.starts_with(char::is_whitespace))
                .is_some_and(|rest| rest.trim() == name)
        } else {
            header == name
        }
    };
    let mut found = None;
    let mut inside = false;
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(header) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            inside = wanted(header);
            if inside {
                found.get_or_insert_with(Vec::new);
            }
            continue;
        }
        if inside && let Some((key, value)) = line.split_once('=') {
            let pairs = found.get_or_insert_with(Vec::new);
            pairs.push((key.trim().to_ascii_lowercase(), value.trim().to_owned()));
        }
    }
    found
}

/// The region in an inference profile ARN (`arn:aws…:bedrock:<region>:…`).
fn arn_region(model_id: &str) -> Option<String> {
    let mut parts = model_id.split(':');
    let (arn, partition, service, region) =
        (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    let aws = partition == "aws" || partition.starts_with("aws-");
    (arn == "arn" && aws && service == "bedrock" && is_region(region)).then(|| region.to_owned())
}

fn is_region(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// The region of a standard runtime endpoint (`bedrock-runtime[-fips].<region>.amazonaws.com`).
fn standard_endpoint_region(base_url: &str) -> Option<String> {
    let url = reqwest::Url::parse(base_url).ok()?;
    let host = url.host_str()?.to_ascii_lowercase();
    let rest = host
        .strip_prefix("bedrock-runtime-fips.")
        .or_else(|| host.strip_prefix("bedrock-runtime."))?;
    let region = rest
        .strip_suffix(".amazonaws.com")
        .or_else(|| rest.strip_suffix(".amazonaws.com.cn"))?;
    is_region(region).then(|| region.to_owned())
}

fn standard_endpoint(region: &str) -> String {
    let suffix = if region.starts_with("cn-") { ".cn" } else { "" };
    format!("https://bedrock-runtime.{region}.amazonaws.com{suffix}")
}

/// The headers that sign a POST of `body` to `url` with `keys` for `region`, at `time`.
pub fn sign(
    keys: &AccessKeys,
    region: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: &[u8],
    time: SystemTime,
) -> Result<Vec<(String, String)>, String> {
    use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
    let identity = aws_credential_types::Credentials::new(
        &keys.access_key_id,
        &keys.secret_access_key,
        keys.session_token.clone(),
        None,
        "nova",
    )
    .into();
    let params = aws_sigv4::sign::v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name(SIGNING_NAME)
        .time(time)
        .settings(SigningSettings::default())
        .build()
        .map_err(|e| format!("cannot sign the request: {e}"))?
        .into();
    let request = SignableRequest::new(
        "POST",
        url,
        headers.iter().copied(),
        SignableBody::Bytes(body),
    )
    .map_err(|e| format!("cannot sign the request to {url}: {e}"))?;
    let (instructions, _) = sign(request, &params)
        .map_err(|e| format!("cannot sign the request to {url}: {e}"))?
        .into_parts();
    Ok(instructions
        .headers()
        .map(|(name, value)| (name.to_owned(), value.to_owned()))
        .collect())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    const CATALOG_URL: &str = "https://bedrock-runtime.us-east-1.amazonaws.com";

    fn resolve(
        vars: &[(&str, &str)],
        home: Option<&Path>,
        model: &str,
        base: &str,
    ) -> Result<Target, String> {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect();
        let var = move |name: &str| map.get(name).cloned();
        let sources = Sources {
            var: &var,
            home: home.map(Path::to_owned),
            stored_profile: false,
        };
        target(model, base, None, &sources)
    }

    fn keys(id: &str) -> Credential {
        Credential::Keys(AccessKeys {
            access_key_id: id.into(),
            secret_access_key: "s".into(),
            session_token: None,
        })
    }

    #[test]
    fn regions_and_endpoints_follow_pi() {
        let env = [("AWS_ACCESS_KEY_ID", "A"), ("AWS_SECRET_ACCESS_KEY", "s")];
        // The catalog's endpoint with nothing configured: used as it is.
        let t = resolve(&env, None, "anthropic.claude", CATALOG_URL).unwrap();
        assert_eq!(
            (t.region.as_str(), t.base_url.as_str()),
            ("us-east-1", CATALOG_URL)
        );
        assert_eq!(t.credential, keys("A"));
        // A configured region moves a standard endpoint to that region.
        let with_region = [env[0], env[1], ("AWS_REGION", "eu-west-1")];
        let t = resolve(&with_region, None, "m", CATALOG_URL).unwrap();
        assert_eq!(t.region, "eu-west-1");
        assert_eq!(
            t.base_url,
            "https://bedrock-runtime.eu-west-1.amazonaws.com"
        );
        // A custom endpoint stays, signed for the configured region.
        let t = resolve(&with_region, None, "m", "http://127.0.0.1:9/").unwrap();
        assert_eq!(
            (t.region.as_str(), t.base_url.as_str()),
            ("eu-west-1", "http://127.0.0.1:9")
        );
        // An inference profile ARN names its own region.
        let arn = "arn:aws:bedrock:ap-south-1:123456789012:inference-profile/x";
        let t = resolve(&with_region, None, arn, CATALOG_URL).unwrap();
        assert_eq!(t.region, "ap-south-1");
        assert_eq!(
            standard_endpoint("cn-north-1"),
            "https://bedrock-runtime.cn-north-1.amazonaws.com.cn"
        );
    }

    #[test]
    fn credentials_in_pi_s_order() {
        let dir = tempfile::tempdir().unwrap();
        let aws = dir.path().join(".aws");
        std::fs::create_dir(&aws).unwrap();
        std::fs::write(
            aws.join("credentials"),
            "[default]\naws_access_key_id = DEF\naws_secret_access_key = s\n\n\
             # a comment\n[work]\naws_access_key_id=WORK\naws_secret_access_key = s\n\
             aws_session_token = tok\n",
        )
        .unwrap();
        std::fs::write(aws.join("config"), "[profile work]\nregion = eu-central-1\n[profile cfg]\naws_access_key_id = CFG\naws_secret_access_key = s\n").unwrap();
        let home = Some(dir.path());
        let t = resolve(&[], home, "m", CATALOG_URL).unwrap();
        assert_eq!(t.credential, keys("DEF"));
        let t = resolve(&[("AWS_PROFILE", "work")], home, "m", CATALOG_URL).unwrap();
        let Credential::Keys(k) = &t.credential else {
            panic!()
        };
        assert_eq!(
            (k.access_key_id.as_str(), k.session_token.as_deref()),
            ("WORK", Some("tok"))
        );
        // The profile's region, and the standard endpoint for it.
        assert_eq!(t.region, "eu-central-1");
        assert_eq!(
            t.base_url,
            "https://bedrock-runtime.eu-central-1.amazonaws.com"
        );
        let t = resolve(&[("AWS_PROFILE", "cfg")], home, "m", CATALOG_URL).unwrap();
        assert_eq!(t.credential, keys("CFG"));
        let e = resolve(&[("AWS_PROFILE", "nope")], home, "m", CATALOG_URL).unwrap_err();
        assert!(e.contains("profile \"nope\""), "{e}");
        // The bearer token wins over keys; keys in the environment over the profile.
        let t = resolve(
            &[("AWS_BEARER_TOKEN_BEDROCK", "bt"), ("AWS_PROFILE", "work")],
            home,
            "m",
            CATALOG_URL,
        )
        .unwrap();
        assert_eq!(t.credential, Credential::Bearer("bt".into()));
        let t = resolve(
            &[("AWS_ACCESS_KEY_ID", "ENV"), ("AWS_SECRET_ACCESS_KEY", "s")],
            home,
            "m",
            CATALOG_URL,
        )
        .unwrap();
        assert_eq!(t.credential, keys("ENV"));
        let e = resolve(&[], None, "m", CATALOG_URL).unwrap_err();
        assert!(e.contains("AWS_BEARER_TOKEN_BEDROCK"), "{e}");
        assert!(!format!("{:?}", t).contains("ENV"), "keys never print");
    }

    #[test]
    fn signatures_are_aws_sigv4() {
        let keys = AccessKeys {
            access_key_id: "AKIDEXAMPLE".into(),
            secret_access_key: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY".into(),
            session_token: Some("session".into()),
        };
        let time = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000);
        let url = "https://bedrock-runtime.us-east-1.amazonaws.com/model/a%3Ab/converse-stream";
        let headers = sign(
            &keys,
            "us-east-1",
            url,
            &[("content-type", "application/json")],
            b"{}",
            time,
        )
        .unwrap();
        let get = |name: &str| {
            headers
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.as_str())
        };
        let auth = get("authorization").unwrap();
        assert!(
            auth.starts_with("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20231114/us-east-1/bedrock/aws4_request, SignedHeaders="),
            "{auth}"
        );
        assert!(
            auth.contains("content-type;host;x-amz-date;x-amz-security-token"),
            "{auth}"
        );
        assert_eq!(get("x-amz-date"), Some("20231114T221320Z"));
        assert_eq!(get("x-amz-security-token"), Some("session"));
    }
}
