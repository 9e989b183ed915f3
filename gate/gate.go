// Package gate is the shape every gate of Caduceus has. A gate (trader,
// executor, shim, relay) keeps its domain in its own package and offers
// the rest of the program one value of this shape, built in its module
// package (trader/tradergate, executor/executorgate, shim/shimgate,
// relay/relaygate): its routes on the server, its MCP tools and its
// background jobs. Its tables come with its store adapter
// (trader/tradersql, ...), which registers its migrations with the store
// core when the program links it. cmd/caduceus builds the enabled gates and
// iterates over them: adding a gate touches no hub file.
package gate

import (
	"context"
	"log/slog"
	"sync"

	"github.com/caduceus-dev/caduceus/server"
)

// Gate is one gate as serve runs it.
type Gate interface {
	// Name is the gate's name as --gates spells it.
	Name() string
	// Routes are the gate's routes, each registered on the server the one
	// way (server.Route).
	Routes() []server.Route
	// Tools are the gate's MCP tools.
	Tools() []server.Tool
	// Jobs are the gate's background work, run for as long as the server.
	Jobs() []Job
}

// Job is background work of a gate: Run works until ctx is done and
// returns once it has finished what it started, so the store can close
// after it.
type Job struct {
	Name string
	Run  func(ctx context.Context)
}

// Routes are the routes of gates, in order.
func Routes(gates []Gate) []server.Route {
	var out []server.Route
	for _, g := range gates {
		for _, rt := range g.Routes() {
			if rt.Gate == "" {
				rt.Gate = g.Name()
			}
			out = append(out, rt)
		}
	}
	return out
}

// Tools are the MCP tools of gates, in order.
func Tools(gates []Gate) []server.Tool {
	var out []server.Tool
	for _, g := range gates {
		out = append(out, g.Tools()...)
	}
	return out
}

// Start runs every job of gates, each on its own goroutine, until ctx is
// done. The wait it returns blocks until every job has returned.
func Start(ctx context.Context, log *slog.Logger, gates []Gate) (wait func()) {
	var wg sync.WaitGroup
	for _, g := range gates {
		for _, j := range g.Jobs() {
			log.Debug("gate job started", "gate", g.Name(), "job", j.Name)
			wg.Go(func() { j.Run(ctx) })
		}
	}
	return wg.Wait
}

// Paged is a gate with pages for the operator console.
type Paged interface {
	Pages() []Page
}

// Pages are the console pages of gates, in order.
func Pages(gates []Gate) []Page {
	var out []Page
	for _, g := range gates {
		if p, ok := g.(Paged); ok {
			out = append(out, p.Pages()...)
		}
	}
	return out
}
