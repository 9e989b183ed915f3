package connector

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/relay"
)

// MaxMediaBytes is the largest media body POST /relay/media takes (the
// gateway's own cap, 25 MiB).
const MaxMediaBytes = 25 << 20

// DefaultMediaTTL is how long an uploaded or re-hosted file stays
// readable.
const DefaultMediaTTL = time.Hour

// maxMediaStoreBytes bounds what the in-memory media store holds at once.
const maxMediaStoreBytes = 512 << 20

// mediaItem is one stored file.
type mediaItem struct {
	tenant   contract.TenantSlot
	data     []byte
	mime     string
	filename string
	expires  time.Time
}

// mediaStore keeps media for MediaTTL, in memory, bounded in bytes.
type mediaStore struct {
	mu    sync.Mutex
	items map[string]*mediaItem
	bytes int
}

// put stores data for tenant; false when the store is full even after
// dropping what has expired.
func (m *mediaStore) put(id string, it *mediaItem, now time.Time) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.items == nil {
		m.items = map[string]*mediaItem{}
	}
	if m.bytes+len(it.data) > maxMediaStoreBytes {
		for k, v := range m.items {
			if !now.Before(v.expires) {
				m.bytes -= len(v.data)
				delete(m.items, k)
			}
		}
	}
	if m.bytes+len(it.data) > maxMediaStoreBytes {
		return false
	}
	m.items[id] = it
	m.bytes += len(it.data)
	return true
}

// get returns tenant's unexpired item id.
func (m *mediaStore) get(tenant contract.TenantSlot, id string, now time.Time) (*mediaItem, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	it, ok := m.items[id]
	if !ok {
		return nil, false
	}
	if !now.Before(it.expires) {
		m.bytes -= len(it.data)
		delete(m.items, id)
		return nil, false
	}
	return it, it.tenant == tenant
}

// mediaAuth verifies the bearer (an upgrade token of a configured gateway)
// and returns the gateway's tenant; it answers 401 itself otherwise.
func (c *Connector) mediaAuth(w http.ResponseWriter, r *http.Request) (contract.TenantSlot, string, bool) {
	token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	id, err := relay.VerifyToken(token, func(id string) [][]byte { return c.cfg.Gateways[id].Secrets }, c.now())
	if err != nil {
		reason := relay.CloseReasonUnauthorized
		if errors.Is(err, relay.ErrTokenExpired) {
			reason = relay.CloseReasonExpired
		}
		mediaError(w, http.StatusUnauthorized, reason)
		return "", "", false
	}
	return c.cfg.Gateways[id].Tenant, id, true
}

func mediaError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	b, _ := json.Marshal(map[string]string{"error": msg})
	_, _ = w.Write(b)
}

// serveMediaUpload is POST /relay/media: the raw body (1 byte to 25 MiB)
// with its Content-Type and X-Media-Filename (at most 255 characters),
// authenticated with a gateway's upgrade token; the answer is {id, size}
// and the file is readable at GET /relay/media/{id} by the same tenant's
// gateways for MediaTTL.
func (c *Connector) serveMediaUpload(w http.ResponseWriter, r *http.Request) {
	tenant, gw, ok := c.mediaAuth(w, r)
	if !ok {
		return
	}
	name := r.Header.Get("X-Media-Filename")
	if len([]rune(name)) > 255 || strings.ContainsAny(name, "/\\\x00\r\n") {
		mediaError(w, http.StatusBadRequest, "X-Media-Filename must be a file name of at most 255 characters")
		return
	}
	if r.ContentLength > MaxMediaBytes {
		mediaError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("media is larger than %d bytes", MaxMediaBytes))
		return
	}
	body, err := readAllLimit(r, MaxMediaBytes)
	if err != nil {
		mediaError(w, http.StatusRequestEntityTooLarge, err.Error())
		return
	}
	if len(body) == 0 {
		mediaError(w, http.StatusBadRequest, "media body is empty")
		return
	}
	mime := r.Header.Get("Content-Type")
	if mime == "" {
		mime = "application/octet-stream"
	}
	now := c.now()
	id := contract.NewID("rmed")
	if !c.media.put(id, &mediaItem{tenant: tenant, data: body, mime: mime, filename: name, expires: now.Add(c.cfg.MediaTTL)}, now) {
		mediaError(w, http.StatusInsufficientStorage, "media store is full; try again later")
		return
	}
	c.log.Info("relay: media stored", "gateway", gw, "id", id, "bytes", len(body))
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	b, _ := json.Marshal(map[string]any{"id": id, "size": len(body)})
	_, _ = w.Write(b)
}

// serveMediaDownload is GET /relay/media/{id} for the tenant's gateways
// (bearer = an upgrade token); another tenant's or an expired id is 404.
func (c *Connector) serveMediaDownload(w http.ResponseWriter, r *http.Request) {
	tenant, _, ok := c.mediaAuth(w, r)
	if !ok {
		return
	}
	it, ok := c.media.get(tenant, r.PathValue("id"), c.now())
	if !ok {
		mediaError(w, http.StatusNotFound, "no such media (expired, or never stored for this tenant)")
		return
	}
	w.Header().Set("Content-Type", it.mime)
	w.Header().Set("Content-Length", strconv.Itoa(len(it.data)))
	if it.filename != "" {
		w.Header().Set("Content-Disposition", `attachment; filename="`+strings.ReplaceAll(it.filename, `"`, "")+`"`)
	}
	_, _ = w.Write(it.data)
}

// readAllLimit reads r's body, failing past limit bytes.
func readAllLimit(r *http.Request, limit int64) ([]byte, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("cannot read media body")
	}
	if int64(len(body)) > limit {
		return nil, fmt.Errorf("media is larger than %d bytes", limit)
	}
	return body, nil
}
