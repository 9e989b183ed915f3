// Package console is the operator console: read-only HTML pages under
// /console (conversations and their trails, receipts, decisions, ticks,
// relay gateways and buffered events, keys, audit chain status), rendered
// on the server with html/template from embedded assets, no JavaScript.
//
// It authenticates apart from the API: `caduceus console` mints a
// one-time login token (MintLogin), GET /console/login redeems it once
// (the nonce is recorded in the store) and sets a session cookie scoped to
// /console (HttpOnly, SameSite=Strict, Secure over TLS). The API never
// accepts that cookie. A session sees its key's tenant only; an
// all-tenants session (the operator's) sees every tenant.
package console

import (
	"context"
	"crypto/ed25519"
	"embed"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/gate"
	"github.com/caduceus-dev/caduceus/store"
	"github.com/caduceus-dev/caduceus/trail"
)

//go:embed assets
var assets embed.FS

// Config is what the console reads.
type Config struct {
	// DB holds the keys, receipts, decisions, audit records, the relay
	// buffer and the console's own secret and login ledger.
	DB *store.DB
	// Trails reads conversations.
	Trails trail.Reader
	// Pages are the modules' pages, their tabs in this order.
	Pages []gate.Page
	// CheckpointFile is the audit checkpoint file serve writes (empty:
	// none); CheckpointKey the public key it is checked against.
	CheckpointFile string
	CheckpointKey  ed25519.PublicKey
	// SessionTTL bounds a session (default DefaultSessionTTL).
	SessionTTL time.Duration
	Logger     *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Console serves /console. Create it with New.
type Console struct {
	cfg        Config
	log        *slog.Logger
	loginKey   []byte
	sessionKey []byte
	pages      map[string]*template.Template
	nav        []navPage
	related    map[string]string
	mux        *http.ServeMux
}

// New reads (or creates) the installation's console secret and returns
// the console.
func New(ctx context.Context, cfg Config) (*Console, error) {
	if cfg.DB == nil || cfg.Trails == nil {
		return nil, errors.New("console: a store and a trail reader are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = DefaultSessionTTL
	}
	secret, err := cfg.DB.Console().Secret(ctx)
	if err != nil {
		return nil, err
	}
	c := &Console{cfg: cfg, log: cfg.Logger, mux: http.NewServeMux()}
	c.loginKey, c.sessionKey = keys(secret)
	c.nav, c.related = navOf(cfg.Pages)
	if c.pages, err = c.parsePages(); err != nil {
		return nil, err
	}
	static, _ := fs.Sub(assets, "assets/static")
	c.mux.Handle("GET /console/static/", http.StripPrefix("/console/static/", http.FileServerFS(static)))
	c.mux.HandleFunc("GET /console/login", c.login)
	c.mux.HandleFunc("POST /console/logout", c.logout)
	c.mux.HandleFunc("GET /console", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/console/", http.StatusSeeOther)
	})
	c.page("GET /console/{$}", c.conversations)
	c.page("GET /console/conversations/{id}", c.conversation)
	c.page("GET /console/records/{id}", c.record)
	for _, p := range cfg.Pages {
		c.page("GET /console/"+p.Name, c.modulePage(p))
	}
	c.page("GET /console/keys", c.keys)
	c.page("GET /console/audit", c.audit)
	c.mux.HandleFunc("/console/", func(w http.ResponseWriter, r *http.Request) {
		if _, ok := c.session(r); !ok {
			c.unauthorized(w, "")
			return
		}
		c.render(w, http.StatusNotFound, "error", view{Title: "Not found"}, errorView{Message: "There is no console page at " + r.URL.Path + "."})
	})
	return c, nil
}

// ServeHTTP implements http.Handler. Every response carries a strict
// content security policy (own styles only, no scripts, no frames) and is
// never cached or sent as a referrer.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cache-Control", "no-store")
	texts := []string{r.URL.Path}
	for k, vs := range r.URL.Query() {
		texts = append(append(texts, k), vs...)
	}
	for _, s := range texts {
		// Path values and the tenant filter reach the store: text that is
		// not valid UTF-8 or holds a NUL is refused before (Postgres would
		// refuse it as an error).
		if !utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0 {
			c.render(w, http.StatusBadRequest, "error", view{Title: "Bad request"}, errorView{Message: "The address is not valid UTF-8 text or holds a NUL character."})
			return
		}
	}
	c.mux.ServeHTTP(w, r)
}

// pageFunc renders one page for the session's scope.
type pageFunc func(w http.ResponseWriter, r *http.Request, s scope) error

// page registers a page that needs a session.
func (c *Console) page(pattern string, fn pageFunc) {
	c.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		sess, ok := c.session(r)
		if !ok {
			c.unauthorized(w, "")
			return
		}
		s := scope{Login: sess.Login, ctx: r.Context()}
		if s.AllTenants {
			if t := r.URL.Query().Get("tenant"); t != "" {
				s.filter = contract.TenantSlot(t)
			}
		}
		if err := fn(w, r, s); err != nil {
			if errors.Is(err, errNotFound) {
				c.render(w, http.StatusNotFound, "error", view{Title: "Not found", Scope: s}, errorView{Message: "Nothing here for this session: it does not exist, or it belongs to another tenant."})
				return
			}
			c.log.Error("console page failed", "path", r.URL.Path, "err", err)
			c.render(w, http.StatusInternalServerError, "error", view{Title: "Error", Scope: s}, errorView{Message: "The page could not be read; the server log says why."})
		}
	})
}

var errNotFound = errors.New("console: not found")

// scope is what a session may see: one tenant, or every tenant (filtered
// to one by ?tenant= when asked).
type scope struct {
	Login
	filter contract.TenantSlot
	ctx    context.Context
}

// tenant is the tenant to read: the session's, the filter, or "" (all).
func (s scope) tenant() contract.TenantSlot {
	if s.AllTenants {
		return s.filter
	}
	return s.Tenant
}

// sees reports whether the session may see tenant t's records.
func (s scope) sees(t contract.TenantSlot) bool {
	if s.AllTenants {
		return s.filter == "" || s.filter == t
	}
	return t == s.Tenant
}

// Filter is the tenant an all-tenants session narrowed the view to ("" for none).
func (s scope) Filter() contract.TenantSlot { return s.filter }
