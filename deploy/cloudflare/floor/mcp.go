//go:build js && wasm && caduceus_floor_mcp

package main

import (
	"context"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// With -tags caduceus_floor_mcp the floor also serves a stateless POST
// /mcp with the MCP SDK, as the edge does (a server built per request
// with one tool): what linking the SDK, and initialising the packages it
// links (encoding/gob, jsonschema-go, its own), adds to a cold start
// before any of the edge's code (BenchmarkEdgeWorkerColdStart's
// floor+mcp; docs/edge.md).
func init() {
	routes = append(routes, func(mux *http.ServeMux) {
		mux.Handle("POST /mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server {
			s := mcp.NewServer(&mcp.Implementation{Name: "floor"}, nil)
			s.AddTool(&mcp.Tool{Name: "ping", InputSchema: map[string]any{"type": "object"}},
				func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
					return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "pong"}}}, nil
				})
			return s
		}, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true}))
	})
}
