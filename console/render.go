package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/gate"
	"github.com/caduceus-dev/caduceus/trail"
)

// view is what the layout renders around a page.
type view struct {
	Title   string
	Nav     string // the page's name, to mark its tab
	Scope   scope
	Tenants []contract.TenantSlot // for an all-tenants session's filter
	Data    any
}

// SignedIn reports whether the view belongs to a session.
func (v view) SignedIn() bool { return v.Scope.AllTenants || v.Scope.Tenant != "" }

type errorView struct{ Message string }

// navPage is one tab.
type navPage struct{ Name, Title, Path string }

// navOf is the tabs, in order: conversations, the modules' pages, keys
// and audit; and the detail keys linked to a module page's rows.
func navOf(pages []gate.Page) ([]navPage, map[string]string) {
	nav := []navPage{{"conversations", "Conversations", "/console/"}}
	related := map[string]string{"audit_id": "/console/records/"}
	for _, p := range pages {
		nav = append(nav, navPage{p.Name, p.Title, "/console/" + p.Name})
		for _, k := range p.Rows {
			related[k] = "/console/" + p.Name + "#"
		}
	}
	nav = append(nav, navPage{"keys", "Keys", "/console/keys"}, navPage{"audit", "Audit", "/console/audit"})
	return nav, related
}

var funcs = template.FuncMap{
	"nav": func() any { return nil }, // each console's own (parsePages)
	"when": func(v any) string {
		switch t := v.(type) {
		case time.Time:
			if t.IsZero() {
				return "—"
			}
			return t.UTC().Format("2006-01-02 15:04:05")
		case *time.Time:
			if t == nil {
				return "—"
			}
			return t.UTC().Format("2006-01-02 15:04:05")
		case string:
			if p, err := time.Parse(time.RFC3339Nano, t); err == nil {
				return p.UTC().Format("2006-01-02 15:04:05")
			}
			return t
		}
		return fmt.Sprint(v)
	},
	"clock": func(t time.Time) string { return t.UTC().Format("15:04:05.000") },
	"short": func(s string) string {
		if i := strings.IndexByte(s, ':'); i > 0 && i < 10 {
			s = s[i+1:]
		}
		return clip(s, 12)
	},
	"convURL": func(id string) string { return "/console/conversations/" + url.PathEscape(id) },
	"recURL":  func(id string) string { return "/console/records/" + url.PathEscape(id) },
	"join":    func(s []string, sep string) string { return strings.Join(s, sep) },
	"gates": func(gs []trail.Gate) []string {
		out := make([]string, len(gs))
		for i, g := range gs {
			out[i] = string(g)
		}
		return out
	},
	"fields": func(m map[string]any) []field {
		if len(m) == 0 {
			return nil
		}
		// Details may hold raw JSON or typed values: read them back as
		// plain JSON values, so nested ones flatten into lines too.
		b, err := json.Marshal(m)
		if err != nil {
			return []field{{Key: "detail", Value: err.Error()}}
		}
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			return []field{{Key: "detail", Value: err.Error()}}
		}
		return flatten(v) // each console links them (parsePages)
	},
	"tone":  tone,
	"deref": func(s *string) string { return deref(s) },
	"pct": func(f *float64) string {
		if f == nil {
			return ""
		}
		return fmt.Sprintf("%.2f%%", *f)
	},
	"usd": func(f float64) string { return fmt.Sprintf("$%.2f", f) },
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// tone maps an outcome or status word to a badge colour class.
func tone(s string) string {
	switch s {
	case "allow", "allowed", "applied", "placed", "forward", "ok", "reviewed", "cancelled", "verified", "noop":
		return "good"
	case "deny", "denied", "refused", "rejected", "failed", "error", "place_failed", "cancel_failed", "broken", "slippage_aborted", "intent_drift_aborted", "review_anomaly":
		return "bad"
	case "skipped", "respond_directly", "replay", "dry_run", "idle", "revoked", "already_placed":
		return "warn"
	}
	return "plain"
}

func (c *Console) parsePages() (map[string]*template.Template, error) {
	own := template.FuncMap{
		"nav": func() any { return c.nav },
		"fields": func(m map[string]any) []field {
			return c.linked(funcs["fields"].(func(map[string]any) []field)(m))
		},
	}
	layout, err := template.New("layout.html").Funcs(funcs).Funcs(own).ParseFS(assets, "assets/layout.html")
	if err != nil {
		return nil, err
	}
	names, err := fs.Glob(assets, "assets/pages/*.html")
	if err != nil {
		return nil, err
	}
	pages := map[string]*template.Template{}
	for _, n := range names {
		t, err := template.Must(layout.Clone()).ParseFS(assets, n)
		if err != nil {
			return nil, err
		}
		pages[strings.TrimSuffix(path.Base(n), ".html")] = t
	}
	for _, p := range c.cfg.Pages {
		if _, dup := pages[p.Name]; dup {
			return nil, fmt.Errorf("console: page %q is handed twice, or is one of the console's own", p.Name)
		}
		t, err := template.Must(layout.Clone()).Parse(p.Template)
		if err != nil {
			return nil, fmt.Errorf("console: the %s page's template: %w", p.Name, err)
		}
		pages[p.Name] = t
	}
	return pages, nil
}

// renderPage renders a signed-in page with the tenant filter.
func (c *Console) renderPage(w http.ResponseWriter, r *http.Request, s scope, name, title string, data any) error {
	v := view{Title: title, Nav: name, Scope: s}
	if s.AllTenants {
		ts, err := c.visibleTenants(scope{Login: s.Login, ctx: r.Context()})
		if err != nil {
			return err
		}
		v.Tenants = ts
	}
	c.render(w, http.StatusOK, name, v, data)
	return nil
}

// render writes page name with the layout. The page is rendered into a
// buffer first, so a template error never sends half a page.
func (c *Console) render(w http.ResponseWriter, status int, name string, v view, data any) {
	v.Data = data
	var b bytes.Buffer
	t, ok := c.pages[name]
	if !ok {
		c.log.Error("console: no template", "page", name)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	if err := t.ExecuteTemplate(&b, "layout.html", v); err != nil {
		c.log.Error("console: render", "page", name, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write(b.Bytes())
}

// field is one line of a flattened record: a dotted path, a short value
// and, for an id the console has a page for, the link to it.
type field struct{ Key, Value, Link string }

// linked links the fields whose keys hold ids to the console page listing
// them (each row carries its id as its anchor; Page.Rows).
func (c *Console) linked(fs []field) []field {
	for i, f := range fs {
		if p, ok := c.related[f.Key]; ok && f.Value != "" {
			fs[i].Link = p + url.PathEscape(f.Value)
		}
	}
	return fs
}

// flatten turns a decoded JSON value into sorted path = value lines:
// objects by key, lists of scalars joined, lists of objects by index, so
// a payload reads as a table rather than as JSON.
func flatten(v any) []field {
	var out []field
	var walk func(prefix string, v any, depth int)
	walk = func(prefix string, v any, depth int) {
		switch x := v.(type) {
		case map[string]any:
			if len(x) == 0 {
				return
			}
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for _, k := range keys {
				walk(join(prefix, k), x[k], depth+1)
			}
		case []any:
			if len(x) == 0 {
				return
			}
			if scalars(x) {
				parts := make([]string, len(x))
				for i, e := range x {
					parts[i] = scalar(e)
				}
				out = append(out, field{Key: prefix, Value: clip(strings.Join(parts, ", "), 300)})
				return
			}
			for i, e := range x {
				walk(fmt.Sprintf("%s[%d]", prefix, i), e, depth+1)
			}
		default:
			out = append(out, field{Key: prefix, Value: clip(scalar(x), 300)})
		}
	}
	walk("", v, 0)
	return out
}

func join(prefix, k string) string {
	if prefix == "" {
		return k
	}
	return prefix + "." + k
}

func scalars(xs []any) bool {
	for _, x := range xs {
		switch x.(type) {
		case map[string]any, []any:
			return false
		}
	}
	return true
}

func scalar(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return x
	case float64, bool, json.Number:
		return fmt.Sprint(x)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// clip cuts s to n bytes on a rune boundary, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}
