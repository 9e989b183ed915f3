module github.com/caduceus-dev/caduceus

go 1.26.0

require (
	github.com/santhosh-tekuri/jsonschema/v6 v6.0.3
	golang.org/x/text v0.42.0
)

require go.yaml.in/yaml/v3 v3.0.6 // indirect
