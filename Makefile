# Caduceus. `make run` starts the server on the embedded SQLite store in
# ./.caduceus; `make test` runs every test (set CADUCEUS_TEST_POSTGRES to a DSN
# to include the Postgres runs, as .ci/run does). `make release` writes the
# static release binaries to dist/; `make image` builds the container image
# (docs/operations.md); `make edge` builds the Cloudflare Worker into
# deploy/cloudflare/dist (docs/edge.md).

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS := -X main.version=$(VERSION) -X main.commit=$(COMMIT)
# The release build: static (no cgo), no build paths, version-stamped.
GOBUILD := CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags "-s -w $(LDFLAGS)"
ARCH    ?= $(shell go env GOARCH)
IMAGE   ?= caduceus:$(VERSION)
IMAGE_CONTEXT ?= dist/image

.PHONY: run test build vet bench release image edge

run:
	go run -ldflags "$(LDFLAGS)" ./cmd/caduceus serve

test:
	go test ./...

build:
	CGO_ENABLED=0 go build -ldflags "$(LDFLAGS)" -o bin/caduceus ./cmd/caduceus

vet:
	go vet ./...

bench:
	go test -run '^$$' -bench . -benchtime 2s ./...

# dist/caduceus-linux-amd64, dist/caduceus-linux-arm64 and their SHA256SUMS.
release:
	rm -rf dist && mkdir -p dist
	for arch in amd64 arm64; do \
	  GOARCH=$$arch $(GOBUILD) -o dist/caduceus-linux-$$arch ./cmd/caduceus || exit 1; \
	done
	cd dist && sha256sum caduceus-linux-* > SHA256SUMS

# The container image (Containerfile) for ARCH: FROM scratch, so nothing is
# pulled; the build context is the static binary with this machine's CA
# certificates and tzdata and an empty /data. --format docker keeps the
# HEALTHCHECK, which the OCI image format has no field for.
image:
	rm -rf $(IMAGE_CONTEXT) && mkdir -p $(IMAGE_CONTEXT)/etc/ssl/certs $(IMAGE_CONTEXT)/usr/share $(IMAGE_CONTEXT)/data
	GOARCH=$(ARCH) $(GOBUILD) -o $(IMAGE_CONTEXT)/caduceus ./cmd/caduceus
	cp /etc/ssl/certs/ca-certificates.crt $(IMAGE_CONTEXT)/etc/ssl/certs/
	cp -rL /usr/share/zoneinfo $(IMAGE_CONTEXT)/usr/share/zoneinfo
	podman build --format docker --arch $(ARCH) -f Containerfile -t $(IMAGE) $(IMAGE_CONTEXT)

# The Cloudflare Worker (docs/edge.md): the edge package compiled to
# WebAssembly beside the Go toolchain's own wasm_exec.js, which
# deploy/cloudflare/worker.mjs imports; then `cd deploy/cloudflare && npm ci
# && npx wrangler deploy`, or `node miniflare.mjs` to run it locally.
edge:
	mkdir -p deploy/cloudflare/dist
	GOOS=js GOARCH=wasm go build -trimpath -ldflags "-s -w -X main.version=$(VERSION)" -o deploy/cloudflare/dist/caduceus.wasm ./deploy/cloudflare
	cp "$$(go env GOROOT)/lib/wasm/wasm_exec.js" deploy/cloudflare/dist/
