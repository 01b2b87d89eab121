# syntax=docker/dockerfile:1
#
# Portcullis container image.
#
#   docker build -t ghcr.io/portcullis/portcullis:0.1.0 .
#
# Needs BuildKit (the default builder since Docker 23) for the cache mounts:
# they keep the cargo registry and target/ between builds, so a source change
# does not recompile every dependency.

ARG RUST_VERSION=1.95

FROM rust:${RUST_VERSION}-bookworm AS builder
WORKDIR /src
COPY . .
# target/ is a cache mount and is not part of the image layer, so copy the
# binary out of it within the same RUN.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/usr/local/cargo/git \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked \
 && install -D -m 0755 target/release/portcullis /out/portcullis

# glibc-based distroless (Debian 12, same glibc as the bookworm builder);
# no shell, no package manager. The :nonroot tag already runs as 65532.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=builder /out/portcullis /portcullis
USER 65532:65532
# 8443: HTTPS webhook (/validate, /mutate); 8080: plain-HTTP admin
# (/healthz, /readyz, /metrics).
EXPOSE 8443 8080
ENTRYPOINT ["/portcullis"]
CMD ["serve"]
