# syntax=docker/dockerfile:1
# Builds the controller image: `make docker-build IMG=...`.
# The builder runs on the build machine and cross-compiles (no emulation).
FROM --platform=$BUILDPLATFORM golang:1.26 AS builder
WORKDIR /src
# Modules first, so that the download layer survives source changes.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod \
    go mod download
COPY api/ api/
COPY cmd/ cmd/
COPY internal/ internal/
ARG TARGETOS
ARG TARGETARCH
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=${TARGETOS:-linux} GOARCH=${TARGETARCH} \
    go build -trimpath -ldflags="-s -w" -o /out/timeout-controller ./cmd/timeout-controller

# Static binary, no shell, no package manager; runs as the nonroot user.
FROM gcr.io/distroless/static:nonroot
COPY --from=builder /out/timeout-controller /timeout-controller
USER 65532:65532
ENTRYPOINT ["/timeout-controller"]
