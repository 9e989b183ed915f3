// Package bench is the side-by-side load harness of the shim hot path: a
// fast fake OpenAI upstream, a bare httputil.ReverseProxy in
// front of it, and a closed-loop load generator that runs the same
// chat-completions request over N keep-alive connections for a fixed time
// and reports req/s, p50 and p99. `caduceus bench` puts Caduceus, started
// through serve's own wiring, beside the bare proxy in one run.
package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Model is the model ChatBody asks for.
const Model = "gpt-4o-mini"

// ChatBody is the chat-completions request every target receives (a peer
// given a model of its own gets ChatBodyFor that model).
var ChatBody = ChatBodyFor(Model)

// ChatBodyFor is ChatBody asking for model instead of Model: the same
// messages and max_tokens, for a peer that names models its own way (as
// "openai/gpt-4o-mini", say).
func ChatBodyFor(model string) []byte {
	q, _ := json.Marshal(model) // a string always marshals
	return []byte(`{"model":` + string(q) + `,"messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"Summarise the release notes of version 2.3 in three bullet points."}],"max_tokens":128}`)
}

// reviewLine is the filler of a padded prompt: a line of a code review,
// which holds no secret and no personal data (nothing a guardrail finds).
const reviewLine = "The handler returns early when the request body is empty; add a test for that path and log the status code.\n"

// ChatBodySized is ChatBody with its user message padded with lines of a
// code review to at least promptBytes bytes (0 or less: ChatBody), for
// measuring what a target costs per byte of prompt.
func ChatBodySized(promptBytes int) []byte {
	if promptBytes <= 0 {
		return ChatBody
	}
	var b strings.Builder
	b.WriteString("Summarise the release notes of version 2.3 in three bullet points.\n")
	for b.Len() < promptBytes {
		b.WriteString(reviewLine)
	}
	content, _ := json.Marshal(b.String()) // a string always marshals
	return []byte(`{"model":"` + Model + `","messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":` + string(content) + `}],"max_tokens":128}`)
}

// chatAnswer is the fake upstream's answer (a realistic small completion).
var chatAnswer = []byte(`{"id":"chatcmpl-bench","object":"chat.completion","created":1700000000,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"- Faster startup\n- Fewer allocations\n- A new bench command"},"finish_reason":"stop"}],"usage":{"prompt_tokens":32,"completion_tokens":16,"total_tokens":48}}`)

// Server is an HTTP server on a loopback port.
type Server struct {
	URL string
	srv *http.Server
}

// Close stops the server.
func (s *Server) Close() error { return s.srv.Close() }

// Serve serves h on 127.0.0.1:0 with srv's settings (nil: defaults).
func Serve(h http.Handler, srv *http.Server) (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	if srv == nil {
		srv = &http.Server{}
	}
	srv.Handler = h
	go srv.Serve(ln)
	return &Server{URL: "http://" + ln.Addr().String(), srv: srv}, nil
}

// FakeUpstream answers every POST .../chat/completions with one fixed
// completion after draining the request body: the fastest upstream the
// proxies can have, so the figures measure the proxies.
func FakeUpstream() (*Server, error) {
	n := strconv.Itoa(len(chatAnswer))
	return Serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		h := w.Header()
		h["Content-Type"] = []string{"application/json"}
		h["Content-Length"] = []string{n}
		_, _ = w.Write(chatAnswer)
	}), nil)
}

// Transport is the upstream transport of the bare proxy: the same pool
// sizing the shim uses, so the comparison is between the proxies and not
// their connection pools.
func Transport(conns int) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 0
	t.MaxIdleConnsPerHost = conns
	return t
}

// BareProxy is a net/http httputil.ReverseProxy to target with nothing
// else: no authentication, no rules, no record.
func BareProxy(target string, conns int) (*Server, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	rp := &httputil.ReverseProxy{
		Rewrite:   func(pr *httputil.ProxyRequest) { pr.SetURL(u) },
		Transport: Transport(conns),
	}
	return Serve(rp, nil)
}

// Load is one load run.
type Load struct {
	URL      string
	Header   http.Header // added to every request
	Body     []byte
	Conns    int           // concurrent connections, each with one request in flight
	Duration time.Duration // measured time (after Warmup)
	Warmup   time.Duration // run but not measured
	// DBCPU, when set, reads the database server's CPU time so far
	// (PostgresCPU); the result then has the server's share too.
	DBCPU func() (time.Duration, error)
	// ExtraCPU, when set, reads the CPU time so far of the target's own
	// processes outside this one (a peer: Peer.CPU); the result's CPU then
	// has their share added.
	ExtraCPU func() (time.Duration, error)
}

// Result is what a load run measured.
type Result struct {
	Name     string
	Requests int // answered 2xx within the measured time
	Errors   int // transport errors and non-2xx answers
	Elapsed  time.Duration
	P50, P99 time.Duration
	FirstErr string
	// CPU is the process's user and system CPU time over the measured
	// window: the load generator's and the fake upstream's share is alike
	// for every target, so the difference between two targets' CPU per
	// request is what the target itself costs. With Load.ExtraCPU it also
	// has the target's own processes' (CPUUnknown when that could not be
	// read in full).
	CPU        time.Duration
	CPUUnknown bool
	// DBCPU is the database server's CPU time over the measured window,
	// when the load could read it (HasDBCPU).
	DBCPU    time.Duration
	HasDBCPU bool
	// Rounds are the figures of each round merged into this result, in
	// order (one for a result of Run).
	Rounds []Round
	lat    []time.Duration // sorted
}

// Round is one round's latency figures of a target.
type Round struct {
	Requests int // answered 2xx
	P50, P99 time.Duration
}

// CPUPer1k is the process's CPU milliseconds per 1,000 answered requests.
func (r Result) CPUPer1k() float64 {
	if r.Requests == 0 {
		return 0
	}
	return float64(r.CPU.Microseconds()) / float64(r.Requests)
}

// DBCPUPer1k is the database server's CPU milliseconds per 1,000 answered
// requests.
func (r Result) DBCPUPer1k() float64 {
	if r.Requests == 0 {
		return 0
	}
	return float64(r.DBCPU.Microseconds()) / float64(r.Requests)
}

// processCPU is the process's user plus system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Merge adds other (a further round of the same target) to r.
func (r *Result) Merge(other Result) {
	r.Requests += other.Requests
	r.Errors += other.Errors
	r.Elapsed += other.Elapsed
	r.CPU += other.CPU
	r.CPUUnknown = r.CPUUnknown || other.CPUUnknown
	r.DBCPU += other.DBCPU
	r.HasDBCPU = r.HasDBCPU && other.HasDBCPU
	if r.FirstErr == "" {
		r.FirstErr = other.FirstErr
	}
	r.Rounds = append(r.Rounds, other.Rounds...)
	r.lat = append(r.lat, other.lat...)
	slices.Sort(r.lat)
	r.P50, r.P99 = percentile(r.lat, 50), percentile(r.lat, 99)
}

// RPS is the successful requests per second.
func (r Result) RPS() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Requests) / r.Elapsed.Seconds()
}

// Run runs l: Conns workers, each sending the request again as soon as the
// previous answer is read in full.
func Run(ctx context.Context, name string, l Load) Result {
	if l.Conns <= 0 {
		l.Conns = 16
	}
	tr := &http.Transport{MaxIdleConnsPerHost: l.Conns, MaxConnsPerHost: l.Conns, DisableCompression: true}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	start := time.Now()
	measureFrom := start.Add(l.Warmup)
	stop := measureFrom.Add(l.Duration)
	type worker struct {
		lat      []time.Duration
		errs     int
		firstErr string
	}
	ws := make([]worker, l.Conns)
	var cpu0, cpu1, db0, db1 time.Duration
	extraOK := true
	sampleCPU := func() time.Duration {
		cpu := processCPU()
		if l.ExtraCPU != nil {
			d, err := l.ExtraCPU()
			extraOK = extraOK && err == nil
			cpu += d
		}
		return cpu
	}
	dbOK := l.DBCPU != nil
	dbCPU := func() time.Duration {
		if !dbOK {
			return 0
		}
		d, err := l.DBCPU()
		dbOK = err == nil
		return d
	}
	var cpuWG sync.WaitGroup
	cpuWG.Go(func() {
		select {
		case <-time.After(time.Until(measureFrom)):
			cpu0, db0 = sampleCPU(), dbCPU()
		case <-ctx.Done():
			dbOK, extraOK = false, false
			return
		}
		select {
		case <-time.After(time.Until(stop)):
			cpu1, db1 = sampleCPU(), dbCPU()
		case <-ctx.Done():
			dbOK, extraOK = false, false
		}
	})
	var wg sync.WaitGroup
	for i := range ws {
		wg.Add(1)
		go func(w *worker) {
			defer wg.Done()
			w.lat = make([]time.Duration, 0, 1<<14)
			for ctx.Err() == nil {
				t0 := time.Now()
				if !t0.Before(stop) {
					return
				}
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, l.URL, bytes.NewReader(l.Body))
				for k, v := range l.Header {
					req.Header[k] = v
				}
				req.Header.Set("Content-Type", "application/json")
				resp, err := client.Do(req)
				if err == nil {
					_, err = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if err == nil && resp.StatusCode/100 != 2 {
						err = fmt.Errorf("status %d", resp.StatusCode)
					}
				}
				t1 := time.Now()
				if t0.Before(measureFrom) || t1.After(stop) {
					continue
				}
				if err != nil {
					w.errs++
					if w.firstErr == "" {
						w.firstErr = err.Error()
					}
					continue
				}
				w.lat = append(w.lat, t1.Sub(t0))
			}
		}(&ws[i])
	}
	wg.Wait()
	cpuWG.Wait()
	res := Result{Name: name, Elapsed: l.Duration, CPUUnknown: l.ExtraCPU != nil && !extraOK}
	if cpu1 > cpu0 {
		res.CPU = cpu1 - cpu0
	}
	if res.HasDBCPU = dbOK; dbOK && db1 > db0 {
		res.DBCPU = db1 - db0
	}
	var all []time.Duration
	for _, w := range ws {
		all = append(all, w.lat...)
		res.Errors += w.errs
		if res.FirstErr == "" {
			res.FirstErr = w.firstErr
		}
	}
	res.Requests = len(all)
	slices.Sort(all)
	res.P50, res.P99 = percentile(all, 50), percentile(all, 99)
	res.Rounds = []Round{{Requests: res.Requests, P50: res.P50, P99: res.P99}}
	res.lat = all
	return res
}

func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := (len(sorted)*p + 99) / 100
	if i > 0 {
		i--
	}
	return sorted[i]
}

// Report formats results as a table, with each one's ratio to base (by
// name; "" for none); a CPU that could not be read in full shows as "-".
// When a result has its database server's CPU, a db-cpu-ms/1k column shows
// it ("-" for the others).
func Report(w io.Writer, base string, rs []Result) {
	var baseRPS float64
	db := false
	for _, r := range rs {
		if r.Name == base {
			baseRPS = r.RPS()
		}
		db = db || r.HasDBCPU
	}
	dbHead := ""
	if db {
		dbHead = fmt.Sprintf(" %12s", "db-cpu-ms/1k")
	}
	width := 28 // the name column: as wide as the longest name
	for _, r := range rs {
		width = max(width, len(r.Name))
	}
	fmt.Fprintf(w, "%-*s %10s %10s %10s %8s %12s%s %s\n", width, "target", "req/s", "p50", "p99", "errors", "cpu-ms/1k", dbHead, "vs "+base)
	for _, r := range rs {
		ratio := "-"
		if baseRPS > 0 && r.Name != base {
			ratio = fmt.Sprintf("%.2fx", r.RPS()/baseRPS)
		}
		dbCol := ""
		switch {
		case r.HasDBCPU:
			dbCol = fmt.Sprintf(" %12.0f", r.DBCPUPer1k())
		case db:
			dbCol = fmt.Sprintf(" %12s", "-")
		}
		cpu := fmt.Sprintf("%12.0f", r.CPUPer1k())
		if r.CPUUnknown {
			cpu = fmt.Sprintf("%12s", "-")
		}
		fmt.Fprintf(w, "%-*s %10.0f %10s %10s %8d %s%s %s\n", width, r.Name, r.RPS(), round(r.P50), round(r.P99), r.Errors, cpu, dbCol, ratio)
		if r.FirstErr != "" {
			fmt.Fprintf(w, "  first error: %s\n", r.FirstErr)
		}
	}
}

func round(d time.Duration) time.Duration {
	switch {
	case d >= time.Millisecond || d <= -time.Millisecond:
		return d.Round(10 * time.Microsecond)
	default:
		return d.Round(time.Microsecond)
	}
}

// Added is the latency a target adds over another (the upstream called
// directly), from their rounds taken pairwise: round i's P50 is the
// target's p50 in round i less the other's p50 in round i, and likewise
// P99; the figures are the median of those differences over the rounds in
// which both answered a request (Rounds of them; none: no figure). A
// difference can be negative: within a round's noise, the target was no
// slower.
type Added struct {
	P50, P99 time.Duration
	Rounds   int
}

// AddedLatency is what target adds over direct, round by round (Added).
func AddedLatency(target, direct Result) Added {
	var d50, d99 []time.Duration
	for i := range min(len(target.Rounds), len(direct.Rounds)) {
		t, d := target.Rounds[i], direct.Rounds[i]
		if t.Requests == 0 || d.Requests == 0 {
			continue
		}
		d50 = append(d50, t.P50-d.P50)
		d99 = append(d99, t.P99-d.P99)
	}
	return Added{P50: median(d50), P99: median(d99), Rounds: len(d50)}
}

// median is the middle of ds (the mean of the two middle ones when their
// number is even); 0 for none.
func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return s[n/2-1] + (s[n/2]-s[n/2-1])/2
}

// ReportAdded formats, for every result but direct's (by name), the
// latency it adds over direct (AddedLatency): a table after Report's,
// "-" where no round has figures of both. It prints nothing when no
// result is named direct.
func ReportAdded(w io.Writer, direct string, rs []Result) {
	i := slices.IndexFunc(rs, func(r Result) bool { return r.Name == direct })
	if i < 0 {
		return
	}
	d := rs[i]
	width := 28
	for _, r := range rs {
		width = max(width, len(r.Name))
	}
	fmt.Fprintf(w, "\nadded latency over %s: each round's p50 and p99 less %s's in the same round, the median over rounds\n", direct, direct)
	fmt.Fprintf(w, "%-*s %10s %10s %7s\n", width, "target", "added-p50", "added-p99", "rounds")
	for _, r := range rs {
		if r.Name == direct {
			continue
		}
		a := AddedLatency(r, d)
		p50, p99 := "-", "-"
		if a.Rounds > 0 {
			p50, p99 = round(a.P50).String(), round(a.P99).String()
		}
		fmt.Fprintf(w, "%-*s %10s %10s %7d\n", width, r.Name, p50, p99, a.Rounds)
	}
}
