//! The one integration-test binary: shared test support plus the suite, one file per capability.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
mod support;
