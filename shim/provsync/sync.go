// Package provsync loads governed provisions and context entries into the
// shim's store from a provision source (seed 003, H07, H12, HC2): a
// directory of bundles (CLI only), an http(s) URL, or a remote handshake
// server. Every record passes the governance lens (shim.Governor), blob
// digest checks and the max_chars clamp, and is written by compare-and-set;
// a SyncLedger (the memory store) keeps what each sync wrote so a local
// edit is never overwritten. It writes through shim.Service.Writer.
package provsync

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/shim"
)

// Reasons a sync refuses a record or reports a conflict, besides the
// governance lens's (shim.ReasonQuarantined ...); each is a stable code.
const (
	ReasonBlobDigest       = "blob_digest_mismatch"
	reasonBlobUnavailable  = "blob_unavailable"
	reasonBlobRef          = "blob_ref_invalid"
	ReasonBuiltin          = "builtin_protected"
	ReasonInvalid          = "invalid"
	ReasonStale            = "stale_version"
	ReasonLocalEdit        = "local_edit"
	ReasonRevisionMismatch = shim.CodeRevisionMismatch // a CAS write lost, as a stale If-Match does
	reasonStoreError       = "store_error"
)

// Config configures a Syncer.
type Config struct {
	// shim.Governor is the lens records must pass (nil: no tenant is in a cohort).
	Governor *shim.Governor
	// Client fetches HTTP sources, blobs and handshakes (nil: 30s timeout).
	Client *http.Client
	// AllowDir permits directory sources. Only the CLI should set it: over
	// HTTP a directory source would read the server's files.
	AllowDir bool
	// AllowURL says which HTTP(S) sources may be fetched (nil: any). The
	// server should pass an allowlist so a tenant cannot aim the fetch at
	// internal addresses.
	AllowURL func(*url.URL) bool
	// MaxChars is the ceiling every synced max_chars is clamped to (0: 20000).
	MaxChars int
	// MaxBytes bounds a bundle, a handshake answer and a blob (0: 16 MiB).
	MaxBytes int64
	// Ledger remembers what each sync wrote (pass the memory store). With
	// it, a record edited locally since its last sync, or created locally,
	// is never overwritten; without it, only the version comparison holds.
	Ledger shim.SyncLedger
}

// AllowPrefixes is a Config.AllowURL that allows the URLs starting with
// one of prefixes (shim.sync_allow; the Worker's CADUCEUS_SYNC_ALLOW) and
// nothing else; an empty prefix allows nothing.
func AllowPrefixes(prefixes []string) func(*url.URL) bool {
	return func(u *url.URL) bool {
		for _, prefix := range prefixes {
			if prefix != "" && strings.HasPrefix(u.String(), prefix) {
				return true
			}
		}
		return false
	}
}

// defaultMaxCharsCeiling is Config.MaxChars when unset.
const defaultMaxCharsCeiling = 20000

// Syncer loads governed provisions and context entries from a provision
// source into the shim's store (seed 003, HC2).
type Syncer struct {
	w   shim.Writer
	cfg Config
}

// New returns a Syncer writing through svc's store.
func New(svc *shim.Service, cfg Config) *Syncer {
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: 30 * time.Second}
	}
	if cfg.MaxChars <= 0 {
		cfg.MaxChars = defaultMaxCharsCeiling
	}
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = 16 << 20
	}
	if cfg.Governor == nil {
		cfg.Governor = &shim.Governor{}
	}
	return &Syncer{w: svc.Writer(), cfg: cfg}
}

// Sync results of a taken record.
const (
	Created   = "created"
	Updated   = "updated"
	Unchanged = "unchanged"
)

// Item is one record of a sync and what became of it.
type Item struct {
	Kind          string              `json:"kind"` // provision, context
	ID            string              `json:"id"`   // provision id or context ref
	Tenant        contract.TenantSlot `json:"tenant,omitempty"`
	SourceVersion int64               `json:"source_version,omitempty"`
	Version       int64               `json:"version,omitempty"` // the local version after (taken) or found (conflict)
	Result        string              `json:"result,omitempty"`  // created, updated, unchanged (taken only)
	Reason        string              `json:"reason,omitempty"`  // a Reason code (refused, conflicts)
	Detail        string              `json:"detail,omitempty"`
}

// Clamp records a max_chars lowered to the configured ceiling.
type Clamp struct {
	Kind string `json:"kind"`
	ID   string `json:"id"`
	From int    `json:"from"`
	To   int    `json:"to"`
}

// Report is the answer of a sync: every record is in exactly one of
// Taken, Refused and Conflicts.
type Report struct {
	Source    string  `json:"source"`
	Taken     []Item  `json:"taken"`
	Refused   []Item  `json:"refused"`
	Conflicts []Item  `json:"conflicts"`
	Clamped   []Clamp `json:"clamped"`
	AuditID   string  `json:"audit_id,omitempty"`
}

// source is where a bundle and its blobs come from.
type source interface {
	bundle(ctx context.Context) (syncBundle, error)
	blob(ctx context.Context, digest string) ([]byte, error)
}

// Sync reads the provision source — a directory of *.json bundles (with
// blobs under blobs/<hex>), an http(s) URL serving a bundle (blobs
// resolved against it as blobs/<hex>), or "handshake+http(s)://server"
// (POST /handshake, blobs at /blobs/<hex>) — and writes every record the
// governance lens admits for the caller's tenant and attested harness:
// quarantined, unverified, wrong visibility, cohort or harness, a blob
// whose SHA-256 does not match its URI, an invalid document and a
// system_builtin record from a non-admin key are refused with their
// reason; each write is a CAS (create, or update on the local version
// read). A record is left alone and reported as a conflict when the
// source version is not newer than the one last synced (stale_version;
// never synced: than the local version), when it was created or edited
// locally since its last sync (local_edit, with a Ledger), or when another
// writer won the CAS (revision_mismatch, exists). Every max_chars above the
// ceiling is clamped, and the clamp recorded. Starters (system_builtin)
// go to the builtin tenant and fire only through shim.Governor.Admit.
//
// Errors: deny (missing_scope, harness_required, harness_mismatch);
// invalid (bad_source: the source is not allowed or not understood;
// source_unavailable: it could not be read; bad_bundle: it is not a
// bundle). A refused record is a result, not an error.
func (y *Syncer) Sync(ctx context.Context, caller contract.Caller, attested, src string) (Report, error) {
	if err := shim.AuthorizeWrite(caller, attested); err != nil {
		return Report{}, err
	}
	s, err := y.open(caller, attested, src)
	if err != nil {
		return Report{}, err
	}
	b, err := s.bundle(ctx)
	if err != nil {
		return Report{}, err
	}
	rep := Report{Source: src, Taken: []Item{}, Refused: []Item{}, Conflicts: []Item{}, Clamped: []Clamp{}}
	touched := map[contract.TenantSlot]bool{}
	for _, raw := range b.Context {
		it, tenant := y.syncContext(ctx, s, caller, attested, raw, &rep)
		rep.add(it)
		if it.Result == Created || it.Result == Updated {
			touched[tenant] = true
		}
	}
	for _, raw := range b.Provisions {
		it, tenant := y.syncProvision(ctx, caller, attested, raw, &rep)
		rep.add(it)
		if it.Result == Created || it.Result == Updated {
			touched[tenant] = true
		}
	}
	for t := range touched {
		y.w.Invalidate(t)
	}
	y.audit(ctx, caller, &rep)
	return rep, nil
}

func (r *Report) add(it Item) {
	switch {
	case it.Result != "":
		r.Taken = append(r.Taken, it)
	case it.Reason == ReasonStale || it.Reason == ReasonLocalEdit || it.Reason == ReasonRevisionMismatch || it.Reason == shim.CodeExists:
		r.Conflicts = append(r.Conflicts, it)
	default:
		r.Refused = append(r.Refused, it)
	}
}

func (y *Syncer) audit(ctx context.Context, caller contract.Caller, rep *Report) {
	id := caller.Identity
	now := contract.Timestamp(y.w.Now())
	rec, err := y.w.Audit.Append(ctx, audit.Entry{
		Outcome: contract.AuditOutcome{At: now, Identity: id, Action: "shim.sync",
			Resource: "sync/" + strings.TrimPrefix(contract.SHA256([]byte(rep.Source)), "sha256:")[:16], Outcome: contract.OutcomeAllow,
			Reason: fmt.Sprintf("taken %d, refused %d, conflicts %d", len(rep.Taken), len(rep.Refused), len(rep.Conflicts))},
		Provenance: caller.Provenance(contract.ActorUser, now),
		Payload:    rep,
	})
	if err != nil {
		y.w.Logger.Error("shim: sync audit append failed", "err", err)
		return
	}
	rep.AuditID = rec.ID
}

func (y *Syncer) open(caller contract.Caller, attested, src string) (source, error) {
	hs := strings.HasPrefix(src, "handshake+")
	raw := strings.TrimPrefix(src, "handshake+")
	if strings.HasPrefix(raw, "http://") || strings.HasPrefix(raw, "https://") {
		u, err := url.Parse(raw)
		if err != nil || u.Host == "" {
			return nil, contract.FieldError("source", "bad_source", "shim: sync source %q is not a URL", src)
		}
		if y.cfg.AllowURL != nil && !y.cfg.AllowURL(u) {
			return nil, contract.FieldError("source", "bad_source", "shim: sync source %q is not allowed", src)
		}
		if hs {
			return &handshakeSource{y: y, base: u, tenant: caller.Identity.TenantSlot, harness: attested}, nil
		}
		return &httpSource{y: y, u: u}, nil
	}
	if hs {
		return nil, contract.FieldError("source", "bad_source", "shim: a handshake source is handshake+http(s)://host")
	}
	if !y.cfg.AllowDir {
		return nil, contract.FieldError("source", "bad_source", "shim: sync source must be an http(s) URL here")
	}
	if fi, err := os.Stat(src); err != nil || !fi.IsDir() {
		return nil, contract.FieldError("source", "bad_source", "shim: sync source %q is not a directory or URL", src)
	}
	return &dirSource{y: y, dir: src}, nil
}

// checkBlob verifies b hashes to digest.
func checkBlob(b []byte, digest string) bool {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]) == digest
}

func unavailable(format string, args ...any) error {
	return contract.Invalidf("source_unavailable", "shim: sync source: "+format, args...)
}

// dirSource: every *.json file of a directory is a bundle; blobs/<hex> are blobs.
type dirSource struct {
	y   *Syncer
	dir string
}

func (d *dirSource) bundle(context.Context) (syncBundle, error) {
	names, err := filepath.Glob(filepath.Join(d.dir, "*.json"))
	if err != nil {
		return syncBundle{}, unavailable("%v", err)
	}
	slices.Sort(names)
	var out syncBundle
	for _, n := range names {
		b, err := readFileMax(n, d.y.cfg.MaxBytes)
		if err != nil {
			return syncBundle{}, unavailable("%v", err)
		}
		sb, err := parseSyncBundle(b)
		if err != nil {
			e := contract.AsError(err)
			e.Message = filepath.Base(n) + ": " + e.Message
			return syncBundle{}, e
		}
		out.Provisions = append(out.Provisions, sb.Provisions...)
		out.Context = append(out.Context, sb.Context...)
	}
	return out, nil
}

func (d *dirSource) blob(_ context.Context, digest string) ([]byte, error) {
	return readFileMax(filepath.Join(d.dir, "blobs", digest), d.y.cfg.MaxBytes)
}

func readFileMax(name string, max int64) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err == nil && int64(len(b)) > max {
		err = fmt.Errorf("%s is larger than %d bytes", filepath.Base(name), max)
	}
	return b, err
}

// httpSource: GET the URL for the bundle; blobs/<hex> relative to it.
type httpSource struct {
	y *Syncer
	u *url.URL
}

func (h *httpSource) bundle(ctx context.Context) (syncBundle, error) {
	b, err := h.y.fetch(ctx, http.MethodGet, h.u.String(), nil)
	if err != nil {
		return syncBundle{}, unavailable("%v", err)
	}
	return parseSyncBundle(b)
}

func (h *httpSource) blob(ctx context.Context, digest string) ([]byte, error) {
	return h.y.fetch(ctx, http.MethodGet, h.u.ResolveReference(&url.URL{Path: "blobs/" + digest}).String(), nil)
}

func (y *Syncer) fetch(ctx context.Context, method, u string, body []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := y.cfg.Client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, y.cfg.MaxBytes+1))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("%s %s: status %d", method, u, resp.StatusCode)
	}
	if int64(len(b)) > y.cfg.MaxBytes {
		return nil, fmt.Errorf("%s %s: larger than %d bytes", method, u, y.cfg.MaxBytes)
	}
	return b, nil
}

// syncContext takes one context record, or says why not.
func (y *Syncer) syncContext(ctx context.Context, s source, caller contract.Caller, attested string, raw json.RawMessage, rep *Report) (Item, contract.TenantSlot) {
	var meta syncMeta
	_ = json.Unmarshal(raw, &meta)
	it := Item{Kind: "context", ID: meta.Ref, SourceVersion: meta.Version}
	tenant, ok := y.admit(caller, attested, meta, &it)
	if !ok {
		return it, tenant
	}
	doc, err := stripFields(raw, "fabric_governance", "body_uri", "version", "sha256", "updated_at", "system_builtin")
	if err != nil {
		return refuse(it, ReasonInvalid, err.Error()), tenant
	}
	if meta.BodyURI != "" {
		digest, ok := blobDigest(meta.BodyURI)
		if !ok {
			return refuse(it, reasonBlobRef, "body_uri must be tessera://blobs/<64 hex sha256>"), tenant
		}
		blob, err := s.blob(ctx, digest)
		if err != nil {
			return refuse(it, reasonBlobUnavailable, err.Error()), tenant
		}
		if !checkBlob(blob, digest) {
			return refuse(it, ReasonBlobDigest, "the blob's SHA-256 does not match "+meta.BodyURI), tenant
		}
		if !utf8.Valid(blob) {
			return refuse(it, ReasonInvalid, "the blob is not UTF-8 text"), tenant
		}
		var m map[string]any
		_ = json.Unmarshal(doc, &m)
		m["body"] = string(blob)
		doc, _ = json.Marshal(m)
	}
	e, err := shim.DecodeContextEntry(doc)
	if err != nil {
		return refuse(it, ReasonInvalid, contract.AsError(err).Message), tenant
	}
	if e.MaxChars > y.cfg.MaxChars {
		rep.Clamped = append(rep.Clamped, Clamp{Kind: "context", ID: e.Ref, From: e.MaxChars, To: y.cfg.MaxChars})
		e.MaxChars = y.cfg.MaxChars
	}
	st := y.w.Store
	cur, err := st.GetContext(ctx, tenant, e.Ref)
	switch {
	case isNotFound(err):
		got, err := st.CreateContext(ctx, tenant, e)
		return y.mark(ctx, tenant, written(it, got.Version, Created, err)), tenant
	case err != nil:
		return refuse(it, reasonStoreError, err.Error()), tenant
	}
	a, b := cur, e
	a.Version, a.UpdatedAt, b.Version, b.UpdatedAt = 0, "", 0, ""
	a.SystemBuiltin, b.SystemBuiltin = false, false
	a.ContractVersion, b.ContractVersion = "", "" // the server's, not the source's
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if it, ok := y.decide(ctx, tenant, it, cur.Version, bytes.Equal(ja, jb)); !ok {
		return it, tenant
	}
	got, err := st.UpdateContext(ctx, tenant, e, cur.Version)
	return y.mark(ctx, tenant, written(it, got.Version, Updated, err)), tenant
}

// decide says whether a record that exists locally may be updated: not
// when unchanged (taken as is), not when the source version is not newer
// than the one last synced (or, never synced, than the local version),
// and not when it was created or edited locally since its last sync.
func (y *Syncer) decide(ctx context.Context, tenant contract.TenantSlot, it Item, local int64, same bool) (Item, bool) {
	it.Version = local
	var mark shim.SyncMark
	marked := false
	if y.cfg.Ledger != nil {
		m, ok, err := y.cfg.Ledger.GetSyncMark(ctx, tenant, it.Kind, it.ID)
		if err != nil {
			return refuse(it, reasonStoreError, err.Error()), false
		}
		mark, marked = m, ok
	}
	if marked && mark.LocalVersion > local {
		// The ledger is ahead of the record we read: another sync wrote
		// and marked it between our read of the record and of the mark.
		// That writer won, exactly as a failed CAS write would say.
		it.Reason = ReasonRevisionMismatch
		it.Detail = fmt.Sprintf("version %d was replaced by a concurrent sync (now %d)", local, mark.LocalVersion)
		return it, false
	}
	if same {
		it.Result = Unchanged
		if y.cfg.Ledger != nil && (!marked || it.SourceVersion >= mark.SourceVersion) {
			return y.mark(ctx, tenant, it), false
		}
		return it, false
	}
	base := local
	if marked {
		base = mark.SourceVersion
	}
	if it.SourceVersion <= base {
		return conflict(it, base, it.SourceVersion), false
	}
	if y.cfg.Ledger != nil && (!marked || mark.LocalVersion != local) {
		it.Reason = ReasonLocalEdit
		it.Detail = fmt.Sprintf("local version %d was created or edited outside sync; kept the local record", local)
		return it, false
	}
	return it, true
}

// mark records a taken record in the ledger.
func (y *Syncer) mark(ctx context.Context, tenant contract.TenantSlot, it Item) Item {
	if y.cfg.Ledger == nil || it.Result == "" {
		return it
	}
	if err := y.cfg.Ledger.PutSyncMark(ctx, tenant, shim.SyncMark{Kind: it.Kind, ID: it.ID, SourceVersion: it.SourceVersion, LocalVersion: it.Version}); err != nil {
		y.w.Logger.Error("shim: sync mark not stored", "kind", it.Kind, "id", it.ID, "err", err)
	}
	return it
}

// syncProvision takes one provision record, or says why not.
func (y *Syncer) syncProvision(ctx context.Context, caller contract.Caller, attested string, raw json.RawMessage, rep *Report) (Item, contract.TenantSlot) {
	var meta syncMeta
	_ = json.Unmarshal(raw, &meta)
	it := Item{Kind: "provision", ID: meta.ID, SourceVersion: meta.Version}
	tenant, ok := y.admit(caller, attested, meta, &it)
	if !ok {
		return it, tenant
	}
	doc, err := stripFields(raw, "version", "updated_at", "system_builtin")
	if err != nil {
		return refuse(it, ReasonInvalid, err.Error()), tenant
	}
	p, err := shim.DecodeProvision(doc)
	if e := contract.AsError(err); e != nil {
		if e.Code == shim.CodeContributorRefused {
			return refuse(it, shim.CodeContributorRefused, e.Message), tenant
		}
		return refuse(it, ReasonInvalid, e.Message), tenant
	}
	if p.MaxChars > y.cfg.MaxChars {
		rep.Clamped = append(rep.Clamped, Clamp{Kind: "provision", ID: p.ID, From: p.MaxChars, To: y.cfg.MaxChars})
		p.MaxChars = y.cfg.MaxChars
	}
	st := y.w.Store
	cur, err := st.GetProvision(ctx, tenant, p.ID)
	switch {
	case isNotFound(err):
		got, err := st.CreateProvision(ctx, tenant, p)
		return y.mark(ctx, tenant, written(it, got.Version, Created, err)), tenant
	case err != nil:
		return refuse(it, reasonStoreError, err.Error()), tenant
	}
	cur.Defaults()
	a, _ := json.Marshal(withoutServerFields(cur))
	b, _ := json.Marshal(withoutServerFields(p))
	if it, ok := y.decide(ctx, tenant, it, cur.Version, bytes.Equal(a, b)); !ok {
		return it, tenant
	}
	got, err := st.UpdateProvision(ctx, tenant, p, cur.Version)
	return y.mark(ctx, tenant, written(it, got.Version, Updated, err)), tenant
}

func withoutServerFields(p shim.Provision) shim.Provision {
	p.Version, p.UpdatedAt, p.SystemBuiltin, p.ContractVersion = 0, "", false, ""
	return p
}

// admit runs the lens and picks the target tenant.
func (y *Syncer) admit(caller contract.Caller, attested string, meta syncMeta, it *Item) (contract.TenantSlot, bool) {
	tenant := caller.Identity.TenantSlot
	if y.w.Scope != nil {
		tenant = y.w.Scope(caller).Slot()
	}
	if meta.SystemBuiltin {
		tenant = y.w.BuiltinTenant
	}
	it.Tenant = tenant
	if it.ID == "" {
		*it = refuse(*it, ReasonInvalid, "a record needs an id (provision) or ref (context)")
		return tenant, false
	}
	if meta.SystemBuiltin && !caller.Has(contract.ScopeAdmin) {
		*it = refuse(*it, ReasonBuiltin, "system_builtin records are synced only by admin keys")
		return tenant, false
	}
	if ok, why := y.cfg.Governor.Lens(meta.FabricGovernance, caller.Identity.TenantSlot, attested); !ok {
		*it = refuse(*it, why, "fabric_governance does not admit this tenant and harness")
		return tenant, false
	}
	return tenant, true
}

func refuse(it Item, reason, detail string) Item {
	it.Reason, it.Detail = reason, detail
	return it
}

func conflict(it Item, base, src int64) Item {
	it.Reason = ReasonStale
	it.Detail = fmt.Sprintf("source version %d is not newer than %d; kept the local record", src, base)
	return it
}

// written reports a CAS write: taken, or a conflict when another writer won.
func written(it Item, v int64, result string, err error) Item {
	if err != nil {
		e := contract.AsError(err)
		if e.Kind == contract.KindConflict {
			it.Reason, it.Detail = ReasonRevisionMismatch, e.Message
			if e.Code == shim.CodeExists {
				it.Reason = shim.CodeExists
			}
			return it
		}
		return refuse(it, reasonStoreError, e.Message)
	}
	it.Version, it.Result = v, result
	return it
}

func isNotFound(err error) bool { return err != nil && contract.KindOf(err) == contract.KindNotFound }
