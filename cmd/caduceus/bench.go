package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/caduceus-dev/caduceus/auth"
	"github.com/caduceus-dev/caduceus/bench"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/guard"
	"github.com/caduceus-dev/caduceus/internal/gcfloor"
	"github.com/caduceus-dev/caduceus/server"
	"github.com/caduceus-dev/caduceus/shim/upstream"
	"github.com/caduceus-dev/caduceus/store"
)

// benchTenant owns the harness's key.
const benchTenant contract.TenantSlot = "slot-7"

type benchFlags struct {
	conns, rounds          int
	duration, warmup       time.Duration
	cpuProfile, memProfile string
	profile                string   // the target profiled: pass-through or governed
	compareStores          []string // more stores, each with the Caduceus targets
	peers                  []string // NAME=COMMAND
	peerHeaders            []string // NAME=Header: value
	peerModels             []string // NAME=MODEL
	peerWait               time.Duration
	guardrails             bool // the Caduceus targets redact every kind
	promptBytes            int  // the user message padded to this many bytes
}

func (a *app) benchCmd() *cobra.Command {
	var f benchFlags
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure the shim hot path, pass-through and governed, beside a bare reverse proxy",
		Long: `Start a fast fake OpenAI upstream, a bare net/http httputil.ReverseProxy in
front of it and Caduceus (built by serve's own wiring, on SQLite in a fresh
temporary data directory, or on --store), then load each in turn with the
same chat-completions request over --conns keep-alive connections for
--duration, taking turns for --rounds rounds, and print req/s, p50, p99 and
the process's CPU milliseconds per 1,000 requests of each, and each one's ratio
to the bare proxy. Caduceus runs twice: as a pass-through (shim.upstreams) and
governed (a gateway route with a plan, a price, a grant and a key budget).
Receipts, audit records and spend are written as in production.

Each --peer NAME=COMMAND is another proxy loaded beside them as target NAME:
bench runs COMMAND through sh -c, in a process group of its own, with
CADUCEUS_BENCH_UPSTREAM set to the fake upstream's base URL and
CADUCEUS_BENCH_PORT to a free loopback port to listen on, waits (--peer-wait)
until a POST of the bench's request to /v1/chat/completions there answers
2xx, and loads it with the same request. Each --peer-header 'NAME=Header:
value' is a header sent with every request to peer NAME, the readiness
check's too ($CADUCEUS_BENCH_UPSTREAM or ${CADUCEUS_BENCH_UPSTREAM} in the
value is replaced by the fake upstream's base URL); without one, a peer gets
no Authorization header. Each --peer-model NAME=MODEL has the requests to
peer NAME ask for MODEL instead of ` + bench.Model + ` (for a peer that names
models its own way, as openai/` + bench.Model + `), the readiness check's too;
nothing else in the request changes. A peer's processes' CPU over each
measured window is added to its CPU figure, and its process group is ended
when the bench ends.

After the table, a second one shows the latency each target and peer adds
over "upstream (fake, direct)", the fake upstream loaded directly in the same
rounds: for each round, the target's p50 in that round less the direct
upstream's p50 in that round (and the same for p99), and of those per-round
differences the median over the rounds. With --conns 1 that is the latency a
single request gains by going through the target; with more connections it
also holds their queueing on this machine's cores.`,
		Example: `  caduceus bench
  caduceus bench --conns 16 --rounds 5 --duration 4s --cpuprofile cpu.out
  caduceus bench --store postgres://postgres@127.0.0.1:5432/test?sslmode=disable
  caduceus bench --peer portkey=bench/peers/portkey.sh \
    --peer-header 'portkey=x-portkey-provider: openai' \
    --peer-header 'portkey=x-portkey-custom-host: $CADUCEUS_BENCH_UPSTREAM/v1' \
    --peer-header 'portkey=Authorization: Bearer sk-bench-not-a-key'
  BIFROST_BIN=/path/to/bifrost-http caduceus bench --conns 1 \
    --peer bifrost=bench/peers/bifrost.sh --peer-model bifrost=openai/` + bench.Model + ``,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return a.bench(cmd.Context(), cmd, f) },
	}
	cmd.Flags().IntVar(&f.conns, "conns", 16, "concurrent connections of the load generator")
	cmd.Flags().DurationVar(&f.duration, "duration", 5*time.Second, "measured time per target per round")
	cmd.Flags().IntVar(&f.rounds, "rounds", 3, "rounds: the targets take turns, one duration each, so a machine whose load drifts treats them alike")
	cmd.Flags().DurationVar(&f.warmup, "warmup", time.Second, "unmeasured load before each measurement")
	cmd.Flags().StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile of the Caduceus run to this file")
	cmd.Flags().StringVar(&f.memProfile, "memprofile", "", "write an allocation profile of the Caduceus run to this file")
	cmd.Flags().StringVar(&f.profile, "profile", "pass-through", "the target --cpuprofile profiles (its first round): pass-through, governed or breadth (governed with balancing and rate limits)")
	cmd.Flags().StringArrayVar(&f.compareStores, "compare-store", nil, "another store (a --store value) whose Caduceus targets take their turns in the same rounds, so two stores compare in one run; a store name given without a path, such as 'sqlite:?synchronous=full', gets a data directory of its own; repeatable")
	cmd.Flags().StringArrayVar(&f.peers, "peer", nil, "another proxy to load beside the targets, NAME=COMMAND (run through sh -c, listening on $CADUCEUS_BENCH_PORT, forwarding to $CADUCEUS_BENCH_UPSTREAM); repeatable")
	cmd.Flags().StringArrayVar(&f.peerHeaders, "peer-header", nil, "a header for every request to a --peer, 'NAME=Header: value' ($CADUCEUS_BENCH_UPSTREAM in the value is the fake upstream's base URL); repeatable")
	cmd.Flags().StringArrayVar(&f.peerModels, "peer-model", nil, "the model a --peer's requests ask for instead of "+bench.Model+", 'NAME=MODEL' (as 'bifrost=openai/"+bench.Model+"'); one per peer")
	cmd.Flags().DurationVar(&f.peerWait, "peer-wait", time.Minute, "how long each peer has to answer the bench's request before the bench gives up")
	cmd.Flags().BoolVar(&f.guardrails, "guardrails", false, "run the Caduceus targets with shim.guardrails redacting every kind (docs/guardrails.md); with --prompt-bytes, what a guardrail costs per byte of prompt")
	cmd.Flags().IntVar(&f.promptBytes, "prompt-bytes", 0, "pad the request's user message to this many bytes with lines of a code review (which hold nothing a guardrail finds); not with --peer")
	cmd.Flags().StringVar(&a.otlpEndpoint, "otlp-endpoint", "", "trace Caduceus's requests as serve does, exporting to this OTLP/HTTP collector base URL (default "+envOTLPEndpoint+"; unset: no tracing)")
	return cmd
}

func (a *app) bench(ctx context.Context, cmd *cobra.Command, f benchFlags) error {
	peers, err := checkBenchFlags(f)
	if err != nil {
		return &exitError{2, err}
	}
	// A ctrl-C or SIGTERM ends the rounds and, through the deferred
	// closes, the peers' process groups.
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	// The collector as serve runs it (its targets are serve's wiring).
	defer gcfloor.Start(0, a.getenv("GOGC")).Stop()
	var closers []func() // run last to first when the bench ends
	defer func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}()
	if fl := cmd.Flags().Lookup("data"); fl == nil || !fl.Changed {
		dir, err := os.MkdirTemp("", "caduceus-bench-")
		if err != nil {
			return err
		}
		closers = append(closers, func() { os.RemoveAll(dir) })
		a.cfg.Data = dir
	}
	up, err := bench.FakeUpstream()
	if err != nil {
		return err
	}
	closers = append(closers, func() { up.Close() })
	bare, err := bench.BareProxy(up.URL, f.conns)
	if err != nil {
		return err
	}
	closers = append(closers, func() { bare.Close() })

	// Tracing, as serve sets it up (--otlp-endpoint or the environment).
	endTracing, err := a.startTracing(ctx)
	if err != nil {
		return err
	}
	closers = append(closers, endTracing)

	stores, err := a.benchStores(ctx, f.compareStores, &closers)
	if err != nil {
		return err
	}
	if f.guardrails {
		a.shimSection().Guardrails = guard.Config{Actions: map[string]guard.Action{"default": guard.Redact}}
	}
	caduceusTargets, err := a.caduceusTargets(ctx, stores, up.URL, &closers)
	if err != nil {
		return err
	}
	var started []*bench.Peer
	for _, spec := range peers {
		p, err := bench.StartPeer(ctx, spec, up.URL, spec.Body(), f.peerWait)
		if err != nil {
			return err
		}
		closers = append(closers, func() { p.Close() })
		started = append(started, p)
	}

	names := make([]string, len(stores))
	for i, db := range stores {
		names[i] = db.Name()
	}
	fmt.Fprintf(a.stdout, "caduceus bench: %d connections, %d rounds of %s per target (each after %s warm-up), store %s, GOMAXPROCS %d\n",
		f.conns, f.rounds, f.duration, f.warmup, strings.Join(names, " and "), runtime.GOMAXPROCS(0))
	if f.promptBytes > 0 || f.guardrails {
		policy := "off"
		if a.shimSection().Guardrails.Active() {
			policy = "redact every kind"
		}
		fmt.Fprintf(a.stdout, "request %d bytes; Caduceus's guardrails: %s\n", len(bench.ChatBodySized(f.promptBytes)), policy)
	}
	targets := benchTargets(f, stores, up.URL, bare.URL, caduceusTargets, started)
	results, err := runBenchRounds(ctx, f, targets)
	if err != nil {
		return err
	}
	if f.memProfile != "" {
		if err := writeHeapProfile(f.memProfile); err != nil {
			return err
		}
	}
	bench.Report(a.stdout, "bare-proxy", results)
	bench.ReportAdded(a.stdout, targets[0].name, results)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return nil
}

// checkBenchFlags refuses flag values the bench cannot run with, and reads
// the peers.
func checkBenchFlags(f benchFlags) ([]bench.PeerSpec, error) {
	if f.conns <= 0 || f.rounds <= 0 || f.duration <= 0 || f.warmup < 0 {
		return nil, fmt.Errorf("--conns, --rounds and --duration must be positive, --warmup not negative")
	}
	if f.promptBytes < 0 || f.promptBytes > 16<<20 {
		return nil, fmt.Errorf("--prompt-bytes %d: want 0 to 16 MiB", f.promptBytes)
	}
	if f.promptBytes > 0 && len(f.peers) > 0 {
		return nil, fmt.Errorf("--prompt-bytes is not combined with --peer: a peer is loaded with the bench's own request")
	}
	if f.profile != "pass-through" && f.profile != "governed" && f.profile != "breadth" {
		return nil, fmt.Errorf("--profile %q: want pass-through, governed or breadth", f.profile)
	}
	peers, err := parseBenchPeers(f.peers, f.peerHeaders, f.peerModels)
	if err != nil {
		return nil, err
	}
	if len(peers) > 0 && f.peerWait <= 0 {
		return nil, fmt.Errorf("--peer-wait must be positive")
	}
	return peers, nil
}

// benchStores opens the bench's store and each --compare-store, the
// closes added to closers.
func (a *app) benchStores(ctx context.Context, compare []string, closers *[]func()) ([]*store.DB, error) {
	// Caduceus as serve builds it, over the configured store.
	a.cfg.Gates = []string{"shim"}
	db, err := a.openStore(ctx)
	if err != nil {
		return nil, err
	}
	*closers = append(*closers, func() { db.Close() })
	stores := []*store.DB{db}
	for i, dsn := range compare {
		other, err := store.Open(ctx, dsn, filepath.Join(a.cfg.Data, fmt.Sprintf("compare-%d", i+1)))
		if err != nil {
			return nil, &exitError{2, fmt.Errorf("--compare-store %q: %w", dsn, err)}
		}
		*closers = append(*closers, func() { other.Close() })
		for _, seen := range stores {
			if seen.Name() == other.Name() {
				return nil, &exitError{2, fmt.Errorf("--compare-store %q: a second %s store (its targets would have the same names)", dsn, other.Name())}
			}
		}
		stores = append(stores, other)
	}
	return stores, nil
}

// caduceusTargets starts, on each store, Caduceus three times over: the
// fake upstream as "openai" in shim.upstreams (pass-through), as a
// governed gateway route, and governed with balancing and rate limits.
func (a *app) caduceusTargets(ctx context.Context, stores []*store.DB, upURL string, closers *[]func()) ([][3]benchTarget, error) {
	var out [][3]benchTarget
	for _, db := range stores {
		keys := auth.NewService(db.Keys(), nil, auth.DefaultCacheTTL)
		var ts [3]benchTarget
		for i, t := range []struct {
			gw     *upstream.Config // nil: pass-through
			grants []string
		}{
			{nil, nil},
			{governedBenchConfig(upURL), []string{"openai/" + bench.Model}},
			{breadthBenchConfig(upURL), []string{"eu/" + bench.Model, "us/" + bench.Model}},
		} {
			var err error
			if ts[i], err = a.startBenchTarget(ctx, db, keys, upURL, t.gw, t.grants); err != nil {
				return nil, err
			}
			*closers = append(*closers, ts[i].close)
		}
		out = append(out, ts)
	}
	return out, nil
}

// benchRun is one target of the rounds: its name, its load, and whether
// --cpuprofile profiles it.
type benchRun struct {
	name    string
	load    bench.Load
	profile bool
}

// benchTargets are the rounds' targets, in order: the fake upstream, the
// bare proxy, each store's three Caduceus targets, the peers.
func benchTargets(f benchFlags, stores []*store.DB, upURL, bareURL string, caduceus [][3]benchTarget, peers []*bench.Peer) []benchRun {
	load := func(url string, h http.Header) bench.Load {
		return bench.Load{URL: url + "/v1/chat/completions", Header: h, Body: bench.ChatBodySized(f.promptBytes), Conns: f.conns, Duration: f.duration, Warmup: f.warmup}
	}
	own := benchTargetNames(stores[0].Name())
	targets := []benchRun{{own[0], load(upURL, nil), false}, {own[1], load(bareURL, nil), false}}
	for i, db := range stores {
		// On Postgres the Caduceus targets also report the server's CPU,
		// when it runs on this machine (bench.PostgresCPU; "-" when it
		// cannot be read).
		caduceusLoad := func(url string, h http.Header) bench.Load {
			l := load(url, h)
			if db.Dialect() == store.Postgres {
				l.DBCPU = bench.PostgresCPU
			}
			return l
		}
		names := benchTargetNames(db.Name())
		ts := caduceus[i]
		first := i == 0 // --cpuprofile profiles the first store's target
		targets = append(targets,
			benchRun{names[2], ts[0].load(caduceusLoad), first && f.profile == "pass-through"},
			benchRun{names[3], ts[1].load(caduceusLoad), first && f.profile == "governed"},
			benchRun{names[4], ts[2].load(caduceusLoad), first && f.profile == "breadth"})
	}
	for _, p := range peers {
		l := load(p.URL, p.Header)
		l.Body = p.Body
		l.ExtraCPU = p.CPU
		targets = append(targets, benchRun{p.Name, l, false})
	}
	return targets
}

// runBenchRounds runs the targets in turn for f.rounds rounds, merging
// each target's rounds; --cpuprofile profiles its target's first round.
func runBenchRounds(ctx context.Context, f benchFlags, targets []benchRun) ([]bench.Result, error) {
	results := make([]bench.Result, len(targets))
	for round := range f.rounds {
		for i, tg := range targets {
			stopProfile := func() {}
			if tg.profile && round == 0 {
				var err error
				if stopProfile, err = startProfile(f.cpuProfile); err != nil {
					return nil, err
				}
			}
			r := bench.Run(ctx, tg.name, tg.load)
			stopProfile()
			if round == 0 {
				results[i] = r
			} else {
				results[i].Merge(r)
			}
		}
	}
	return results, nil
}

// benchTargetNames are the names of the bench's own targets on the store
// named storeName (db.Name()): the fake upstream, the bare proxy,
// Caduceus pass-through, governed, and governed with balancing and rate
// limits.
func benchTargetNames(storeName string) [5]string {
	return [5]string{"upstream (fake, direct)", "bare-proxy", "caduceus (" + storeName + ")",
		"caduceus governed (" + storeName + ")", "governed+balance+rpm (" + storeName + ")"}
}

// benchOwnName reports whether name is one of the bench's own targets'
// names on some store: the store is not open yet when the --peer values
// are read, so any store name in the parentheses counts.
func benchOwnName(name string) bool {
	const anyStore = "\x00"
	for _, n := range benchTargetNames(anyStore) {
		prefix, suffix, withStore := strings.Cut(n, anyStore)
		if !withStore && name == n ||
			withStore && len(name) > len(prefix)+len(suffix) && strings.HasPrefix(name, prefix) && strings.HasSuffix(name, suffix) {
			return true
		}
	}
	return false
}

// parseBenchPeers reads the --peer values, NAME=COMMAND each, the names
// unique and none of them a target's of the bench's own, the
// --peer-header values, NAME=Header: value each, NAME one of the peers,
// and the --peer-model values, NAME=MODEL each, at most one per peer.
func parseBenchPeers(values, headers, models []string) ([]bench.PeerSpec, error) {
	taken := map[string]bool{}
	var specs []bench.PeerSpec
	for _, v := range values {
		spec, err := bench.ParsePeer(v)
		if err != nil {
			return nil, fmt.Errorf("--peer: %w", err)
		}
		if taken[spec.Name] || benchOwnName(spec.Name) {
			return nil, fmt.Errorf("--peer %q: the name %q is taken (by the bench's own target or another --peer)", v, spec.Name)
		}
		taken[spec.Name] = true
		specs = append(specs, spec)
	}
	for _, v := range headers {
		name, key, value, err := bench.ParsePeerHeader(v)
		if err != nil {
			return nil, fmt.Errorf("--peer-header: %w", err)
		}
		i := slices.IndexFunc(specs, func(s bench.PeerSpec) bool { return s.Name == name })
		if i < 0 {
			return nil, fmt.Errorf("--peer-header %q: no --peer is named %q", v, name)
		}
		if specs[i].Header == nil {
			specs[i].Header = http.Header{}
		}
		specs[i].Header.Add(key, value)
	}
	for _, v := range models {
		name, model, err := bench.ParsePeerModel(v)
		if err != nil {
			return nil, fmt.Errorf("--peer-model: %w", err)
		}
		i := slices.IndexFunc(specs, func(s bench.PeerSpec) bool { return s.Name == name })
		switch {
		case i < 0:
			return nil, fmt.Errorf("--peer-model %q: no --peer is named %q", v, name)
		case specs[i].Model != "":
			return nil, fmt.Errorf("--peer-model %q: peer %q has a model already (%q)", v, name, specs[i].Model)
		}
		specs[i].Model = model
	}
	return specs, nil
}

// benchTarget is one Caduceus target of the bench: its server and the
// key its load sends.
type benchTarget struct {
	url, token string
	close      func()
}

// load is the target's load, as load makes it from a URL and headers.
func (t benchTarget) load(load func(url string, h http.Header) bench.Load) bench.Load {
	return load(t.url, http.Header{"Authorization": {"Bearer " + t.token}})
}

// startBenchTarget serves Caduceus as serve builds it on db, with the fake
// upstream at upURL as shim.upstreams' "openai" (gw nil) or with gw as the
// shim gateway, and makes a route key granted grants.
func (a *app) startBenchTarget(ctx context.Context, db *store.DB, keys *auth.Service, upURL string, gw *upstream.Config, grants []string) (benchTarget, error) {
	a.shimSection().Upstreams, a.shimSection().Gateway = map[string]string{"openai": upURL}, upstream.Config{}
	if gw != nil {
		if err := gw.Validate(); err != nil {
			return benchTarget{}, err
		}
		a.shimSection().Upstreams, a.shimSection().Gateway = nil, *gw
	}
	gates, closeGates, err := a.gates(ctx, db)
	if err != nil {
		return benchTarget{}, err
	}
	token, _, err := keys.Create(ctx, auth.Spec{Tenant: benchTenant, Scopes: []contract.Scope{contract.ScopeRoute}, Grants: grants})
	if err != nil {
		closeGates()
		return benchTarget{}, err
	}
	srv, err := bench.Serve(server.New(a.serverConfig(db, keys, nil, gates)), httpServer(nil))
	if err != nil {
		closeGates()
		return benchTarget{}, err
	}
	return benchTarget{url: srv.URL, token: token, close: func() { srv.Close(); closeGates() }}, nil
}

// governedBenchConfig is the governed target's gateway: the fake upstream
// as a gateway route with a plan, a price, a grant and a key budget, so
// every request is granted, reserves its maximum cost (from a lease) and
// settles it (through its receipt's transaction and the spend journal).
func governedBenchConfig(upURL string) *upstream.Config {
	return &upstream.Config{
		Routes: map[string]upstream.Route{"openai": {Kind: upstream.KindOpenAI, BaseURL: upURL, Models: []string{bench.Model}}},
		Plans: map[string]upstream.Plan{"main": {Failover: upstream.FailoverNone,
			Models: map[string][]upstream.Step{bench.Model: {{Route: "openai"}}}}},
		Prices:  map[string]upstream.Price{"openai/" + bench.Model: {Input: 150_000, Output: 600_000, MaxOutputTokens: 16_384}},
		Budgets: upstream.Budgets{Key: upstream.Limit{Day: 1_000_000_000}},
	}
}

// breadthBenchConfig is the governed gateway with the breadth features on:
// the model balanced over two routes (two deployments of the one fake
// upstream, weights 3:1, both granted and priced) and requests and tokens
// per minute limited per key and per tenant (far above the load), so every
// request also picks a member and counts in four rate windows.
func breadthBenchConfig(upURL string) *upstream.Config {
	price := upstream.Price{Input: 150_000, Output: 600_000, MaxOutputTokens: 16_384}
	return &upstream.Config{
		Routes: map[string]upstream.Route{
			"eu": {Provider: "eu", Kind: upstream.KindOpenAI, BaseURL: upURL, Models: []string{bench.Model}},
			"us": {Provider: "us", Kind: upstream.KindOpenAI, BaseURL: upURL, Models: []string{bench.Model}},
		},
		Plans: map[string]upstream.Plan{"main": {Failover: upstream.FailoverDefinite,
			Models: map[string][]upstream.Step{bench.Model: {{Balance: []upstream.Member{{Route: "eu", Weight: 3}, {Route: "us", Weight: 1}}}}}}},
		Prices: map[string]upstream.Price{"eu/" + bench.Model: price, "us/" + bench.Model: price},
		Budgets: upstream.Budgets{
			Key:    upstream.Limit{Day: 1_000_000_000, RPM: 1_000_000_000, TPM: 1_000_000_000},
			Tenant: upstream.Limit{RPM: 1_000_000_000, TPM: 1_000_000_000},
		},
	}
}

func startProfile(path string) (func(), error) {
	if path == "" {
		return func() {}, nil
	}
	out, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(out); err != nil {
		out.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); out.Close() }, nil
}

func writeHeapProfile(path string) error {
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	defer out.Close()
	return pprof.Lookup("allocs").WriteTo(out, 0)
}
