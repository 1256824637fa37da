//! Who may use the server: the bearer token every TCP request carries, compared in constant
//! time; the Unix socket's mode; the `Origin` allowlist.

use ring::digest::{SHA256, digest};
use std::io::Write;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use subtle::ConstantTimeEq;

/// The environment variable that gives the token.
pub const TOKEN_VAR: &str = "NOVA_SERVE_TOKEN";

/// The token's SHA-256: what a request's token is compared with (both digests have one
/// length, so the comparison says nothing about the token's).
pub struct Token(Option<[u8; 32]>);

impl Token {
    /// No token: the Unix socket alone.
    pub fn none() -> Token {
        Token(None)
    }

    /// `NOVA_SERVE_TOKEN`, or a new random token written to `file` (mode 0600), whose path is
    /// then returned.
    pub fn from_env_or_file(file: &Path) -> Result<(Token, Option<PathBuf>), String> {
        if let Some(token) = std::env::var(TOKEN_VAR).ok().filter(|t| !t.is_empty()) {
            return Ok((Token::of(&token), None));
        }
        let mut bytes = [0u8; 32];
        ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut bytes)
            .map_err(|_| "cannot draw a random token".to_owned())?;
        let token: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        write_private(file, &token)
            .map_err(|e| format!("cannot write the token to {}: {e}", file.display()))?;
        Ok((Token::of(&token), Some(file.to_path_buf())))
    }

    fn of(token: &str) -> Token {
        let mut hash = [0u8; 32];
        hash.copy_from_slice(digest(&SHA256, token.as_bytes()).as_ref());
        Token(Some(hash))
    }

    /// Whether an `Authorization` header value carries the token.
    pub fn admits(&self, authorization: Option<&[u8]>) -> bool {
        let Some(expected) = &self.0 else {
            return true;
        };
        let Some(given) = authorization.and_then(|h| h.strip_prefix(b"Bearer ")) else {
            return false;
        };
        let given = digest(&SHA256, given);
        bool::from(given.as_ref().ct_eq(expected))
    }
}

fn write_private(file: &Path, token: &str) -> std::io::Result<()> {
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(file)?;
    // A file that existed keeps its mode through open: tighten it.
    f.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    writeln!(f, "{token}")
}

/// Whether a request's `Origin` may drive the server: none (not a browser) or one listed.
pub fn origin_allowed(origin: Option<&[u8]>, allowed: &[String]) -> bool {
    origin.is_none_or(|o| allowed.iter().any(|a| a.as_bytes() == o))
}

/// Binds a Unix socket only its owner can connect to. A stale socket file (nothing listening)
/// is replaced; anything else at `path` is left alone.
pub fn bind_private_socket(path: &Path) -> Result<tokio::net::UnixListener, String> {
    let shown = path.display();
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        if !meta.file_type().is_socket() {
            return Err(format!("--socket {shown}: exists and is not a socket"));
        }
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            return Err(format!(
                "--socket {shown}: another server is listening there"
            ));
        }
        std::fs::remove_file(path).map_err(|e| format!("--socket {shown}: {e}"))?;
    }
    // Created under a umask that leaves the owner alone, so it is never reachable by others,
    // not even between bind and chmod.
    let old = nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o177));
    let bound = tokio::net::UnixListener::bind(path);
    nix::sys::stat::umask(old);
    let listener = bound.map_err(|e| format!("cannot listen on {shown}: {e}"))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| format!("--socket {shown}: {e}"))?;
    Ok(listener)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_token_is_required_exactly() {
        let token = Token::of("secret");
        assert!(token.admits(Some(b"Bearer secret")));
        assert!(!token.admits(Some(b"Bearer secre")));
        assert!(!token.admits(Some(b"secret")));
        assert!(!token.admits(None));
        assert!(Token::none().admits(None));
    }

    #[test]
    fn origins_are_checked_only_when_given() {
        let allowed = vec!["https://app.example".to_owned()];
        assert!(origin_allowed(None, &allowed));
        assert!(origin_allowed(Some(b"https://app.example"), &allowed));
        assert!(!origin_allowed(Some(b"https://evil.example"), &allowed));
        assert!(!origin_allowed(Some(b"null"), &[]));
    }
}
