package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func whoamiTool() Tool {
	return Tool{
		Name:        "whoami",
		Description: "Returns the caller's identity as Caduceus resolved it from the API key: tenant slot, hashed subject, surface, trust, scopes, harness, run context and bound broker account.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false}`),
		Call:        func(context.Context, contract.Caller, json.RawMessage) (any, error) { return nil, nil },
	}
}

// Whoami is the whoami tool's answer.
type Whoami struct {
	Identity   contract.Identity   `json:"identity"`
	Scopes     []contract.Scope    `json:"scopes"`
	Harness    string              `json:"harness,omitempty"`
	RunContext contract.RunContext `json:"run_context,omitempty"`
	Account    string              `json:"account,omitempty"`
}

// mcpHandler is the stateless streamable-HTTP endpoint. A fresh MCP server
// is built per request with the tools the caller's scopes allow.
func (s *Server) mcpHandler() HandlerFunc {
	h := mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		caller, _ := contract.CallerFrom(r.Context())
		c, _ := r.Context().Value(callKey{}).(*Call)
		return s.mcpServer(caller, c)
	}, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true, Logger: s.log})
	return func(w http.ResponseWriter, r *http.Request, c *Call) error {
		if o := r.Header.Get("Origin"); o != "" && !slices.ContainsFunc(s.cfg.MCPAllowedOrigins, func(a string) bool { return strings.EqualFold(strings.TrimSuffix(a, "/"), o) }) {
			c.Resource = "mcp"
			return contract.Denyf("origin_refused", "origin %q may not call /mcp (not in the allowed origins)", Clip(o, 100))
		}
		if r.Method == http.MethodPost {
			body, err := ReadBody(r)
			if err != nil {
				return err
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			method, tool := peekRPC(body)
			c.Resource = "mcp:" + method
			if tool != "" {
				c.Resource += ":" + tool
				// A tool the key may not see is refused by the SDK as
				// unknown; the record says why.
				c.Outcome, c.Reason = contract.OutcomeNotFound, "unknown_tool"
				for _, t := range s.tools {
					if t.Name == tool {
						c.Outcome, c.Reason = "", ""
						if t.Scope != "" && !c.Caller.Has(t.Scope) {
							c.Outcome, c.Reason = contract.OutcomeDeny, contract.CodeMissingScope
						}
					}
				}
			}
		}
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), callKey{}, c)))
		return nil
	}
}

// callKey carries the request's *Call to the tool handlers, which tell the
// wrapper whether the domain recorded the call and how it ended.
type callKey struct{}

// MCP _meta keys of a tool call that tie its records to a conversation
// and a run (as X-Caduceus-Conversation and HERMES_CRON_RUN_ID do).
const (
	MetaConversation = "conversation"
	MetaRunID        = "run_id"
)

// traceOfMeta is the trace of a tool call: the request's (its
// X-Caduceus-Conversation header), with the route set to the tool and the
// _meta's conversation and run_id taking precedence.
func traceOfMeta(t contract.Trace, tool string, meta map[string]any) (contract.Trace, error) {
	t.Route = "mcp " + tool
	for key, dst := range map[string]*string{MetaConversation: &t.Conversation, MetaRunID: &t.RunID} {
		v, ok := meta[key]
		if !ok {
			continue
		}
		s, isString := v.(string)
		where := "_meta." + key
		if !isString {
			return t, contract.Invalidf("bad_meta", "%s must be a string", where)
		}
		var err error
		if key == MetaRunID {
			err = contract.CheckRunID(where, s)
		} else {
			err = contract.CheckConversation(where, s)
		}
		if err != nil {
			return t, err
		}
		*dst = s
	}
	return t, nil
}

func peekRPC(body []byte) (method, tool string) {
	var msg struct {
		Method string `json:"method"`
		Params struct {
			Name string `json:"name"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &msg) != nil {
		return "batch_or_invalid", ""
	}
	if msg.Method == "tools/call" {
		return msg.Method, Clip(msg.Params.Name, 100)
	}
	return msg.Method, ""
}

func (s *Server) mcpServer(caller contract.Caller, call *Call) *mcp.Server {
	if call == nil {
		call = &Call{}
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "caduceus", Version: s.cfg.Version}, nil)
	for _, t := range s.tools {
		if t.Scope != "" && !caller.Has(t.Scope) {
			continue
		}
		t := t
		srv.AddTool(&mcp.Tool{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema},
			func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				var out any
				caller := caller
				trace, err := traceOfMeta(caller.Trace, t.Name, req.Params.GetMeta())
				caller.Trace = trace
				switch {
				case err != nil: // a bad _meta: answered below as any tool error
				case t.Name == "whoami":
					out = Whoami{Identity: caller.Identity, Scopes: caller.Scopes, Harness: caller.Harness, RunContext: caller.RunContext, Account: caller.Account}
				default:
					args := req.Params.Arguments
					if len(args) == 0 {
						args = json.RawMessage(`{}`)
					}
					out, err = t.Call(contract.WithCaller(ctx, caller), caller, args)
				}
				if err == nil && t.Audited {
					call.Audited = true
				}
				if err != nil {
					e := s.classify(err)
					call.Outcome, call.Reason = e.Kind.Outcome(), e.Code
					if e.Kind == contract.KindInternal && !e.IsUnavailable() {
						s.log.Error("mcp tool failed", "tool", t.Name, "err", e.Err)
					}
					msg := e.Message
					if e.Code != "" {
						msg = e.Code + ": " + msg
					}
					if e.Kind == contract.KindInternal && !e.IsUnavailable() {
						msg = "internal error"
					}
					return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}, nil
				}
				b, err := json.Marshal(out)
				if err != nil {
					return nil, err
				}
				return &mcp.CallToolResult{
					Content:           []mcp.Content{&mcp.TextContent{Text: string(b)}},
					StructuredContent: json.RawMessage(b),
				}, nil
			})
	}
	return srv
}
