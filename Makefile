# Caduceus. `make run` starts the server on the embedded SQLite store in
# ./.caduceus; `make test` runs every test (set CADUCEUS_TEST_POSTGRES to a DSN
# to include the Postgres runs, as .ci/run does).

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS := -X main.version=$(VERSION) -X main.commit=$(COMMIT)

.PHONY: run test build vet bench

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
