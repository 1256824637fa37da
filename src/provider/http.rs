// TEMPORARY STUB: replaced by the provider branch.
use super::{ProviderEvent, Request};
use std::time::Duration;
use tokio_util::sync::CancellationToken;
pub fn client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}
pub async fn stream(
    _c: &reqwest::Client,
    _r: &Request<'_>,
    _x: &CancellationToken,
    _t: Duration,
    _f: impl FnMut(ProviderEvent),
) -> Result<(), String> {
    Err("stub".into())
}
pub async fn list_ollama_models(
    _c: &reqwest::Client,
    _b: &str,
    _t: Duration,
) -> Result<Vec<String>, String> {
    Ok(vec![])
}
