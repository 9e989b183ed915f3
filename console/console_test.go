package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/auth"
	"github.com/caduceus-dev/caduceus/console"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/executor/executorgate"
	"github.com/caduceus-dev/caduceus/gate"
	"github.com/caduceus-dev/caduceus/relay/relaygate"
	"github.com/caduceus-dev/caduceus/relay/relaysql"
	"github.com/caduceus-dev/caduceus/server"
	"github.com/caduceus-dev/caduceus/shim/shimgate"
	"github.com/caduceus-dev/caduceus/shim/shimsql"
	"github.com/caduceus-dev/caduceus/store"
	"github.com/caduceus-dev/caduceus/store/storetest"
	"github.com/caduceus-dev/caduceus/trader"
	"github.com/caduceus-dev/caduceus/trader/tradergate"
	"github.com/caduceus-dev/caduceus/trader/tradersql"
	"github.com/caduceus-dev/caduceus/trail"
)

// recordTrails is a trail.Reader over the store's audit records that name
// a conversation in their provenance: enough to drive the console's pages
// from real, chained records.
type recordTrails struct{ db *store.DB }

func (r recordTrails) matching(ctx context.Context, tenant string) ([]audit.Record, error) {
	recs, err := r.db.Audit().Tail(ctx, store.AuditFilter{Tenant: contract.TenantSlot(tenant), Limit: 1000})
	slices.Reverse(recs)
	return slices.DeleteFunc(recs, func(x audit.Record) bool { return x.Provenance == nil || x.Provenance.ConversationID == "" }), err
}

func (r recordTrails) List(ctx context.Context, tenant string, limit int) ([]trail.Summary, error) {
	recs, err := r.matching(ctx, tenant)
	var out []trail.Summary
	for _, x := range recs {
		id := contract.ConversationFor(x.Tenant, x.Provenance.ConversationID)
		i := slices.IndexFunc(out, func(s trail.Summary) bool { return s.ConversationID == id && s.Tenant == string(x.Tenant) })
		if i < 0 {
			out = append(out, trail.Summary{ConversationID: id, SessionKey: x.Provenance.SessionID, Tenant: string(x.Tenant)})
			i = len(out) - 1
		}
		out[i].Events++
	}
	return out, err
}

func (r recordTrails) Get(ctx context.Context, tenant, id string) (trail.Trail, error) {
	recs, err := r.matching(ctx, tenant)
	if err != nil {
		return trail.Trail{}, err
	}
	var t trail.Trail
	for _, x := range recs {
		cid := contract.ConversationFor(x.Tenant, x.Provenance.ConversationID)
		if cid != id && cid != contract.ConversationFor(x.Tenant, id) {
			continue
		}
		t.ConversationID, t.Tenant, t.SessionKey, t.Verified = cid, string(x.Tenant), x.Provenance.SessionID, true
		at, _ := time.Parse(time.RFC3339Nano, x.Outcome.At)
		gate, _, _ := strings.Cut(x.Outcome.Action, ".")
		t.Events = append(t.Events, trail.Event{At: at, Gate: trail.Gate(gate), Kind: x.Outcome.Action, Summary: x.Outcome.Resource,
			AuditID: x.ID, AuditSeq: x.Seq, Verified: true, Outcome: string(x.Outcome.Outcome), Detail: map[string]any{"receipt": "rcpt_" + x.ID, "route": json.RawMessage(`{"requested":"` + x.Outcome.Action + `"}`)}})
	}
	if len(t.Events) == 0 {
		return trail.Trail{}, trail.ErrNotFound
	}
	return t, nil
}

// fixture is a real server (SQLite, keys, audit log) with the console
// mounted, and two tenants: slot-1 has a conversation, slot-2 none.
type fixture struct {
	db        *store.DB
	srv       *httptest.Server
	keys      *auth.Service
	secret    []byte
	key1      auth.Key
	token1    string // slot-1 API key
	key2      auth.Key
	conv      string // slot-1's conversation id
	recordIDs []string
}

const sessionKey = "agent:main:telegram:dm:42"

func newFixture(t testing.TB, db *store.DB) *fixture {
	t.Helper()
	ctx := t.Context()
	f := &fixture{db: db, keys: auth.NewService(db.Keys(), nil, 0)}
	var err error
	f.token1, f.key1, err = f.keys.Create(ctx, auth.Spec{Tenant: "slot-1", Scopes: contract.Scopes})
	if err != nil {
		t.Fatal(err)
	}
	if _, f.key2, err = f.keys.Create(ctx, auth.Spec{Tenant: "slot-2", Scopes: contract.Scopes}); err != nil {
		t.Fatal(err)
	}
	for i, action := range []string{"relay.deliver", "shim.proxy", "trader.apply", "executor.tick", "relay.outbound"} {
		rec, err := db.Audit().Append(ctx, audit.Entry{
			Outcome: contract.AuditOutcome{At: contract.Timestamp(time.Now()), Identity: auth.CallerOf(f.key1).Identity,
				Action: action, Resource: fmt.Sprintf("step-%d", i), Outcome: contract.OutcomeAllow},
			Provenance: &contract.Provenance{Surface: contract.SurfaceAPI, Actor: contract.Actor{Type: contract.ActorAssistant, ID: "agent"}, RecordedAt: contract.Timestamp(time.Now()), SessionID: sessionKey, ConversationID: contract.ConversationFor("slot-1", sessionKey)},
			Payload:    map[string]any{"step": i, "note": "payload of " + action},
		})
		if err != nil {
			t.Fatal(err)
		}
		f.recordIDs = append(f.recordIDs, rec.ID)
	}
	f.conv = contract.ConversationFor("slot-1", sessionKey)
	con, err := console.New(ctx, console.Config{DB: db, Trails: recordTrails{db}, Pages: gatePages(t, db)})
	if err != nil {
		t.Fatal(err)
	}
	if f.secret, err = db.Console().Secret(ctx); err != nil {
		t.Fatal(err)
	}
	srv := server.New(server.Config{Auth: f.keys, Audit: db.Audit(), Records: db.Audit(), Store: db, Console: con})
	f.srv = httptest.NewServer(srv)
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fixture) mint(t testing.TB, l console.Login, now time.Time, ttl time.Duration) string {
	t.Helper()
	tok, err := console.MintLogin(f.secret, l, now, ttl)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// client is a browser-like client: it keeps cookies and does not follow
// redirects.
func client(t testing.TB) *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func get(t testing.TB, c *http.Client, u string) (int, string, http.Header) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// login opens a session for l and returns its client.
func (f *fixture) login(t testing.TB, l console.Login) *http.Client {
	t.Helper()
	c := client(t)
	code, body, _ := get(t, c, console.LoginURL(f.srv.URL, f.mint(t, l, time.Now(), time.Minute)))
	if code != http.StatusOK || !strings.Contains(body, "Signed in") {
		t.Fatalf("login: %d %s", code, body)
	}
	return c
}

func TestLoginSetsScopedCookie(t *testing.T) {
	f := newFixture(t, storetest.OpenSQLite(t))
	resp, err := client(t).Get(console.LoginURL(f.srv.URL, f.mint(t, console.Login{Tenant: "slot-1", KeyID: f.key1.ID}, time.Now(), time.Minute)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("login: %d", resp.StatusCode)
	}
	set := resp.Header.Values("Set-Cookie")
	if len(set) != 1 {
		t.Fatalf("Set-Cookie: %q", set)
	}
	for _, want := range []string{console.CookieName + "=cs1.", "Path=/console", "HttpOnly", "SameSite=Strict"} {
		if !strings.Contains(set[0], want) {
			t.Errorf("cookie %q lacks %q", set[0], want)
		}
	}
	if strings.Contains(set[0], "Secure") {
		t.Errorf("cookie over plain HTTP is marked Secure (the browser would drop it): %q", set[0])
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("CSP = %q", csp)
	}
	if rp := resp.Header.Get("Referrer-Policy"); rp != "no-referrer" {
		t.Errorf("Referrer-Policy = %q", rp)
	}
}

func TestLoginOverTLSMarksCookieSecure(t *testing.T) {
	db := storetest.OpenSQLite(t)
	keys := auth.NewService(db.Keys(), nil, 0)
	con, err := console.New(t.Context(), console.Config{DB: db, Trails: recordTrails{db}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewTLSServer(server.New(server.Config{Auth: keys, Audit: db.Audit(), Records: db.Audit(), Store: db, Console: con}))
	defer srv.Close()
	secret, _ := db.Console().Secret(t.Context())
	tok, _ := console.MintLogin(secret, console.Login{AllTenants: true}, time.Now(), time.Minute)
	resp, err := srv.Client().Get(console.LoginURL(srv.URL, tok))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if c := resp.Header.Get("Set-Cookie"); resp.StatusCode != 200 || !strings.Contains(c, "Secure") {
		t.Fatalf("login over TLS: %d, cookie %q", resp.StatusCode, c)
	}
}

func TestEveryPageRendersForItsTenant(t *testing.T) {
	f := newFixture(t, storetest.OpenSQLite(t))
	c := f.login(t, console.Login{Tenant: "slot-1", KeyID: f.key1.ID})
	pages := map[string][]string{
		"/console/":                        {f.conv, sessionKey},
		"/console/conversations/" + f.conv: append([]string{"✓ every record verifies", "relay.deliver", "executor.tick", `href="/console/receipts#rcpt_` + f.recordIDs[1] + `"`, "route.requested", "2 details"}, f.recordIDs...),
		"/console/conversations/" + url.PathEscape(sessionKey): {f.conv},
		"/console/records/" + f.recordIDs[2]:                   {"trader.apply", "payload of trader.apply", "verifies from genesis", "/console/conversations/"},
		"/console/receipts":                                    {"No shim receipts yet."},
		"/console/decisions":                                   {"No trader decisions yet."},
		"/console/ticks":                                       {"/console/records/" + f.recordIDs[3], "conversation"},
		"/console/relay":                                       {"not served by this process", "Nothing is waiting"},
		"/console/keys":                                        {f.key1.ID, "never shown"},
		"/console/audit":                                       {"slot-1", "✓ verified"},
	}
	for path, wants := range pages {
		code, body, _ := get(t, c, f.srv.URL+path)
		if code != http.StatusOK {
			t.Errorf("GET %s: %d %s", path, code, body)
			continue
		}
		for _, w := range wants {
			if !strings.Contains(body, w) {
				t.Errorf("GET %s: page lacks %q", path, w)
			}
		}
		if strings.Contains(body, f.key2.ID) || strings.Contains(body, "slot-2") {
			t.Errorf("GET %s: slot-1's page shows slot-2", path)
		}
		if strings.Contains(body, f.key1.SecretHash) {
			t.Errorf("GET %s: page shows a key's secret hash", path)
		}
	}
	if code, _, _ := get(t, c, f.srv.URL+"/console/static/console.css"); code != http.StatusOK {
		t.Errorf("stylesheet: %d", code)
	}
	if code, _, _ := get(t, c, f.srv.URL+"/console/nothing-here"); code != http.StatusNotFound {
		t.Errorf("unknown page: %d", code)
	}
}

func TestOtherTenantSeesNothing(t *testing.T) {
	f := newFixture(t, storetest.OpenSQLite(t))
	c := f.login(t, console.Login{Tenant: "slot-2", KeyID: f.key2.ID})
	for _, path := range []string{
		"/console/conversations/" + f.conv,
		"/console/conversations/" + url.PathEscape(sessionKey),
		"/console/records/" + f.recordIDs[0],
	} {
		code, body, _ := get(t, c, f.srv.URL+path)
		if code != http.StatusNotFound {
			t.Errorf("slot-2 GET %s: %d, want 404", path, code)
		}
		if strings.Contains(body, f.recordIDs[0]) || strings.Contains(body, "relay.deliver") {
			t.Errorf("slot-2 GET %s shows slot-1's records", path)
		}
	}
	for _, path := range []string{"/console/", "/console/keys", "/console/audit", "/console/ticks"} {
		code, body, _ := get(t, c, f.srv.URL+path)
		if code != http.StatusOK {
			t.Errorf("slot-2 GET %s: %d", path, code)
		}
		for _, leak := range []string{f.conv, sessionKey, f.key1.ID, "slot-1"} {
			if strings.Contains(body, leak) {
				t.Errorf("slot-2 GET %s shows %q of slot-1", path, leak)
			}
		}
	}

	// The operator's all-tenants session sees both, and can narrow to one.
	all := f.login(t, console.Login{AllTenants: true})
	_, body, _ := get(t, all, f.srv.URL+"/console/keys")
	if !strings.Contains(body, f.key1.ID) || !strings.Contains(body, f.key2.ID) {
		t.Errorf("all-tenants keys page lacks a tenant's key")
	}
	_, body, _ = get(t, all, f.srv.URL+"/console/keys?tenant=slot-2")
	if strings.Contains(body, f.key1.ID) || !strings.Contains(body, f.key2.ID) {
		t.Errorf("all-tenants keys page filtered to slot-2 shows the wrong keys")
	}
	if code, _, _ := get(t, all, f.srv.URL+"/console/conversations/"+f.conv); code != http.StatusOK {
		t.Errorf("all-tenants conversation page: %d", code)
	}
}

func TestTokensRefused(t *testing.T) {
	f := newFixture(t, storetest.OpenSQLite(t))
	l := console.Login{Tenant: "slot-1", KeyID: f.key1.ID}
	valid := f.mint(t, l, time.Now(), time.Minute)
	other, _ := console.MintLogin([]byte("another installation's secret.."), l, time.Now(), time.Minute)
	body, mac, _ := strings.Cut(strings.TrimPrefix(valid, "ct1."), ".")
	other0 := "A"
	if mac[0] == 'A' {
		other0 = "B"
	}
	flipped := "ct1." + body + "." + other0 + mac[1:] // a valid MAC's encoding, one character off
	revokedKey := func() string {
		_, k, err := f.keys.Create(t.Context(), auth.Spec{Tenant: "slot-1", Scopes: []contract.Scope{contract.ScopeRoute}})
		if err != nil {
			t.Fatal(err)
		}
		tok := f.mint(t, console.Login{Tenant: "slot-1", KeyID: k.ID}, time.Now(), time.Minute)
		if err := f.keys.Revoke(t.Context(), k.ID); err != nil {
			t.Fatal(err)
		}
		return tok
	}()
	cases := map[string]struct{ token, want string }{
		"expired":             {f.mint(t, l, time.Now().Add(-10*time.Minute), 5*time.Minute), "expired"},
		"forged signature":    {flipped, "signature does not match"},
		"other installation":  {other, "signature does not match"},
		"malformed":           {"ct1.not-a-token", "malformed"},
		"empty":               {"", "malformed"},
		"revoked key":         {revokedKey, "revoked"},
		"key in other tenant": {f.mint(t, console.Login{Tenant: "slot-2", KeyID: f.key1.ID}, time.Now(), time.Minute), "revoked, gone, or in another tenant"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := client(t)
			code, page, hdr := get(t, c, console.LoginURL(f.srv.URL, tc.token))
			if code != http.StatusUnauthorized || !strings.Contains(page, tc.want) {
				t.Errorf("login: %d, page lacks %q:\n%s", code, tc.want, page)
			}
			if hdr.Get("Set-Cookie") != "" {
				t.Errorf("refused login set a cookie: %q", hdr.Get("Set-Cookie"))
			}
			if code, _, _ := get(t, c, f.srv.URL+"/console/"); code != http.StatusUnauthorized {
				t.Errorf("console after a refused login: %d", code)
			}
		})
	}

	t.Run("reused", func(t *testing.T) {
		if code, _, _ := get(t, client(t), console.LoginURL(f.srv.URL, valid)); code != http.StatusOK {
			t.Fatalf("first use: %d", code)
		}
		code, page, _ := get(t, client(t), console.LoginURL(f.srv.URL, valid))
		if code != http.StatusUnauthorized || !strings.Contains(page, "already used") {
			t.Errorf("second use: %d %s", code, page)
		}
	})

	t.Run("token as cookie", func(t *testing.T) {
		req, _ := http.NewRequest("GET", f.srv.URL+"/console/", nil)
		req.AddCookie(&http.Cookie{Name: console.CookieName, Value: f.mint(t, l, time.Now(), time.Minute)})
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("a login token presented as the session cookie: %d", resp.StatusCode)
		}
	})
}

func TestNoSessionNoPage(t *testing.T) {
	f := newFixture(t, storetest.OpenSQLite(t))
	for _, path := range []string{"/console/", "/console/conversations/" + f.conv, "/console/keys", "/console/audit", "/console/records/" + f.recordIDs[0], "/console/whatever"} {
		code, body, _ := get(t, client(t), f.srv.URL+path)
		if code != http.StatusUnauthorized || !strings.Contains(body, "caduceus console") {
			t.Errorf("GET %s without a session: %d", path, code)
		}
		if strings.Contains(body, f.recordIDs[0]) {
			t.Errorf("GET %s without a session shows a record", path)
		}
	}
}

func TestRevokingTheKeyEndsTheSession(t *testing.T) {
	f := newFixture(t, storetest.OpenSQLite(t))
	c := f.login(t, console.Login{Tenant: "slot-1", KeyID: f.key1.ID})
	if code, _, _ := get(t, c, f.srv.URL+"/console/"); code != http.StatusOK {
		t.Fatalf("before revocation: %d", code)
	}
	if err := f.keys.Revoke(t.Context(), f.key1.ID); err != nil {
		t.Fatal(err)
	}
	if code, _, _ := get(t, c, f.srv.URL+"/console/"); code != http.StatusUnauthorized {
		t.Errorf("after revocation: %d, want 401", code)
	}
}

func TestLogout(t *testing.T) {
	f := newFixture(t, storetest.OpenSQLite(t))
	c := f.login(t, console.Login{AllTenants: true})
	resp, err := c.Post(f.srv.URL+"/console/logout", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if code, _, _ := get(t, c, f.srv.URL+"/console/"); code != http.StatusUnauthorized {
		t.Errorf("after logout: %d", code)
	}
}

// TestAPIIgnoresTheConsoleCookie: the session cookie is no credential for
// the API, and the API keeps refusing cookies and browser navigations.
func TestAPIIgnoresTheConsoleCookie(t *testing.T) {
	f := newFixture(t, storetest.OpenSQLite(t))
	c := f.login(t, console.Login{AllTenants: true})
	u, _ := url.Parse(f.srv.URL + "/console/")
	cookies := c.Jar.Cookies(u)
	if len(cookies) != 1 {
		t.Fatalf("session cookies: %v", cookies)
	}
	if api, _ := url.Parse(f.srv.URL + "/v1/audit"); len(c.Jar.Cookies(api)) != 0 {
		t.Errorf("the jar sends the console cookie to /v1: its Path is not /console")
	}
	do := func(path string, hdr map[string]string) (int, string) {
		req, _ := http.NewRequest("GET", f.srv.URL+path, nil)
		req.AddCookie(cookies[0])
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, path := range []string{"/v1/audit", "/v1/admin/keys", "/v1/audit/checkpoint", "/v1/nothing", "/mcp"} {
		if code, body := do(path, nil); code != http.StatusUnauthorized || !strings.Contains(body, "cookie_refused") {
			t.Errorf("GET %s with the console cookie: %d %s", path, code, body)
		}
		if code, body := do(path, map[string]string{"Sec-Fetch-Mode": "navigate"}); code != http.StatusForbidden || !strings.Contains(body, "browser_refused") {
			t.Errorf("GET %s as a navigation with the console cookie: %d %s", path, code, body)
		}
		if code, body := do(path, map[string]string{"Sec-Fetch-Mode": "navigate", "Authorization": "Bearer " + f.token1}); code != http.StatusForbidden || !strings.Contains(body, "browser_refused") {
			t.Errorf("GET %s as a navigation with a key: %d %s", path, code, body)
		}
	}
	// With a key the cookie changes nothing: the key's tenant answers.
	code, body := do("/v1/admin/keys", map[string]string{"Authorization": "Bearer " + f.token1})
	if code != http.StatusOK || strings.Contains(body, f.key2.ID) {
		t.Errorf("GET /v1/admin/keys with a slot-1 key and an all-tenants console cookie: %d %s", code, body)
	}
}

// TestLoginWorksOnceAcrossProcesses: two consoles on one database (two
// store handles, as two processes have) redeem one token at the same time;
// exactly one signs in.
func TestLoginWorksOnceAcrossProcesses(t *testing.T) {
	dsns := map[string]string{"sqlite": "sqlite:" + filepath.Join(t.TempDir(), "shared.db")}
	if pg := os.Getenv(storetest.EnvPostgres); pg != "" {
		dsns["postgres"] = storetest.FreshSchema(t, pg)
	}
	for name, dsn := range dsns {
		t.Run(name, func(t *testing.T) {
			db, db2 := open(t, dsn), open(t, dsn)
			f := newFixture(t, db)
			con2, err := console.New(t.Context(), console.Config{DB: db2, Trails: recordTrails{db2}, Pages: gatePages(t, db2)})
			if err != nil {
				t.Fatal(err)
			}
			srv2 := httptest.NewServer(server.New(server.Config{Auth: auth.NewService(db2.Keys(), nil, 0), Audit: db2.Audit(), Records: db2.Audit(), Store: db2, Console: con2}))
			defer srv2.Close()
			for range 10 {
				tok := f.mint(t, console.Login{AllTenants: true}, time.Now(), time.Minute)
				var wg sync.WaitGroup
				codes := make([]int, 2)
				for i, base := range []string{f.srv.URL, srv2.URL} {
					wg.Go(func() { codes[i], _, _ = get(t, client(t), console.LoginURL(base, tok)) })
				}
				wg.Wait()
				slices.Sort(codes)
				if codes[0] != http.StatusOK || codes[1] != http.StatusUnauthorized {
					t.Fatalf("one token at two processes: %v, want one 200 and one 401", codes)
				}
			}
		})
	}
}

func open(t *testing.T, dsn string) *store.DB {
	t.Helper()
	db, err := store.Open(t.Context(), dsn, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestMalformedAddressesAreRefused: path values and the tenant filter that
// are not text are a 400, never a store error, on either backend.
func TestMalformedAddressesAreRefused(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db)
		c := f.login(t, console.Login{AllTenants: true})
		for _, path := range []string{"/console/records/%ff%fe", "/console/conversations/%00", "/console/conversations/a%ffb", "/console/keys?tenant=%ff", "/console/receipts?tenant=%00"} {
			code, body, _ := get(t, c, f.srv.URL+path)
			if code != http.StatusBadRequest || !strings.Contains(body, "not valid UTF-8") {
				t.Errorf("GET %s: %d %s", path, code, body)
			}
		}
		long := strings.Repeat("x", 5000)
		for _, path := range []string{"/console/records/" + long, "/console/conversations/" + long} {
			if code, body, _ := get(t, c, f.srv.URL+path); code != http.StatusNotFound {
				t.Errorf("GET %s…: %d %s", path[:40], code, body)
			}
		}
	})
}

// BenchmarkConversationPage: one conversation page of five events over
// HTTP (session check, trail read, chain verification, render); compare
// BenchmarkAuditAPI, the JSON of the same records through the API.
func BenchmarkConversationPage(b *testing.B) {
	f := newFixture(b, storetest.OpenSQLite(b))
	c := f.login(b, console.Login{Tenant: "slot-1", KeyID: f.key1.ID})
	u := f.srv.URL + "/console/conversations/" + f.conv
	for b.Loop() {
		resp, err := c.Get(u)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatal(resp.StatusCode)
		}
	}
}

func BenchmarkAuditAPI(b *testing.B) {
	f := newFixture(b, storetest.OpenSQLite(b))
	for b.Loop() {
		req, _ := http.NewRequest("GET", f.srv.URL+"/v1/audit?limit=5", nil)
		req.Header.Set("Authorization", "Bearer "+f.token1)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatal(resp.StatusCode)
		}
	}
}

// TestRecordPageShowsSensitivityAndRedaction: a record's page shows its
// sensitivity (seed 002) and, when its payload was reduced, the redaction's
// level and reason.
func TestRecordPageShowsSensitivityAndRedaction(t *testing.T) {
	f := newFixture(t, storetest.OpenSQLite(t))
	rec, err := f.db.Audit().Append(t.Context(), audit.Entry{
		Outcome: contract.AuditOutcome{At: contract.Timestamp(time.Now()), Identity: auth.CallerOf(f.key1).Identity,
			Action: "relay.deliver", Resource: "telegram:42", Outcome: contract.OutcomeAllow},
		Payload:   map[string]any{"content_sha256": contract.SHA256([]byte("hi"))},
		Redaction: &contract.Redaction{Level: contract.RedactionPartial, Reason: "message text kept as its sha256"},
	})
	if err != nil {
		t.Fatal(err)
	}
	c := f.login(t, console.Login{Tenant: "slot-1", KeyID: f.key1.ID})
	for id, wants := range map[string][]string{
		rec.ID:         {"Sensitivity", ">personal<", "Redaction", ">partial<", "message text kept as its sha256"},
		f.recordIDs[2]: {"Sensitivity", ">sensitive<"}, // trader.apply
	} {
		code, body, _ := get(t, c, f.srv.URL+"/console/records/"+id)
		if code != http.StatusOK {
			t.Fatalf("GET record %s: %d", id, code)
		}
		for _, w := range wants {
			if !strings.Contains(body, w) {
				t.Errorf("record %s: page lacks %q", id, w)
			}
		}
	}
}

// TestKeysPageShowsTheBoundAccount: the keys page shows the broker account
// a key is bound to.
func TestKeysPageShowsTheBoundAccount(t *testing.T) {
	f := newFixture(t, storetest.OpenSQLite(t))
	_, bound, err := f.keys.Create(t.Context(), auth.Spec{Tenant: "slot-1", Scopes: []contract.Scope{contract.ScopeOperate}, Account: "777000222"})
	if err != nil {
		t.Fatal(err)
	}
	c := f.login(t, console.Login{Tenant: "slot-1", KeyID: f.key1.ID})
	code, body, _ := get(t, c, f.srv.URL+"/console/keys")
	if code != http.StatusOK || !strings.Contains(body, "<th>Account</th>") || !strings.Contains(body, bound.ID) || !strings.Contains(body, `<td class="mono">777000222</td>`) {
		t.Errorf("GET /console/keys: %d; want the Account column with 777000222:\n%s", code, body)
	}
}

// gatePages are the pages serve's gates hand the console over db: the
// shim's receipts, the trader's decisions, the executor's ticks and the
// relay's (not served by this process).
func gatePages(t testing.TB, db *store.DB) []gate.Page {
	t.Helper()
	svc, err := trader.New(tradersql.New(db), trader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return []gate.Page{shimgate.ReceiptsPage(shimsql.New(db)), tradergate.DecisionsPage(svc),
		executorgate.TicksPage(db.Audit()), relaygate.RelayPage(relaysql.New(db), nil)}
}
