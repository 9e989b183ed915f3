module github.com/caduceus-dev/caduceus

go 1.26.0

require (
	github.com/santhosh-tekuri/jsonschema/v6 v6.0.3
	golang.org/x/text v0.42.0
)

require github.com/coder/websocket v1.8.15 // indirect
