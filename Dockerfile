# `nova serve` in a container (docs/server.md, "Past one machine").
#
#   docker build -t nova .
#   docker run -e NOVA_SERVE_TOKEN=… -v nova-sessions:/agent/sessions nova
#
# Two stages: Alpine's Rust toolchain targets musl, so the first builds one static binary
# (rustls needs no system TLS library; ring's C parts build with the musl toolchain); the second
# is a small Alpine with what the agent's tools run: a shell, git, and the CA certificates
# nova's HTTP client loads from the system. Add `nodejs` for Pi extensions.

FROM rust:1-alpine AS build
RUN apk add --no-cache musl-dev
WORKDIR /src
COPY . .
# The release profile's fat LTO as in every release build; `--locked` builds Cargo.lock's
# versions and nothing else.
RUN cargo build --release --locked --bin nova \
 && install -D target/release/nova /out/nova

FROM alpine:3
RUN apk add --no-cache bash git ca-certificates \
 && adduser -D -h /home/nova nova \
 && mkdir -p /agent/sessions /work \
 && chown -R nova:nova /agent /work
COPY --from=build /out/nova /usr/local/bin/nova
USER nova
ENV NOVA_AGENT_DIR=/agent
WORKDIR /work
# Loopback inside the pod, with a TLS proxy (or the mesh) in front of it, as docs/server.md
# says; the token comes from NOVA_SERVE_TOKEN. No port is exposed: another address needs
# --unsafe-listen-anywhere, and TLS in front.
ENTRYPOINT ["nova"]
CMD ["serve", "--listen", "127.0.0.1:7878", "--root", "/work", "--grace", "30"]
