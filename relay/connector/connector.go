package connector

import (
	"context"
	"log/slog"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/relay"
	"github.com/caduceus-dev/caduceus/relay/discord"
	"github.com/caduceus-dev/caduceus/relay/telegram"
)

// Connector is the relay connector. Create it with New, mount Handler, and
// call Close when the server shuts down (http.Server.Shutdown does not
// close hijacked WebSockets).
type Connector struct {
	cfg    Config
	log    *slog.Logger
	now    func() time.Time
	router Router
	keys   relay.SessionKeyOptions
	// tenantKeys are the key options of tenants with a profile-multiplexing
	// gateway; other tenants use keys.
	tenantKeys map[contract.TenantSlot]relay.SessionKeyOptions
	edges      map[identKey]*edge // (platform, bot) -> edge; tenant unset

	media mediaStore

	// sessions files outbound actions under the session of their chat's
	// last inbound message.
	sessions chatSessions

	threadsMu sync.Mutex
	threads   map[createdThread]string // threads this connector created -> current name

	mu     sync.RWMutex
	byID   map[identKey][]*conn // (tenant, platform, bot) -> live connections
	conns  map[*conn]struct{}
	rr     map[identKey]int
	closed bool
	stop   chan struct{}
	wg     sync.WaitGroup
	// gwOwner names this connector in Discord Gateway leases.
	gwOwner string
}

// DedupeWindow is how long an inbound event's dedupe key is remembered.
const DedupeWindow = 24 * time.Hour

type identKey struct {
	tenant   contract.TenantSlot
	platform string
	bot      string
}

// New checks cfg and returns a Connector. It returns an invalid
// *contract.Error naming the bad setting.
func New(cfg Config) (*Connector, error) {
	if err := cfg.check(); err != nil {
		return nil, contract.Invalidf("relay_config", "%v", err)
	}
	c := &Connector{
		cfg:     cfg,
		log:     cfg.Logger,
		now:     cfg.Now,
		router:  cfg.Router,
		keys:    relay.DefaultSessionKeyOptions(),
		edges:   map[identKey]*edge{},
		byID:    map[identKey][]*conn{},
		conns:   map[*conn]struct{}{},
		rr:      map[identKey]int{},
		threads: map[createdThread]string{},
		stop:    make(chan struct{}),
	}
	if c.log == nil {
		c.log = slog.Default()
	}
	c.log = c.log.With("component", "relay")
	if c.now == nil {
		c.now = time.Now
	}
	if c.router == nil {
		c.router = NewLocalRouter()
	}
	if bs, ok := c.router.(BufferSignal); ok {
		bs.OnBuffered(func(tenant contract.TenantSlot, platform, bot string) {
			if tenant == "" {
				c.redrain("")
				return
			}
			c.drainFor(tenant, platform, bot)
		})
	}
	if cfg.SessionKeys != nil {
		c.keys = *cfg.SessionKeys
	}
	c.tenantKeys = map[contract.TenantSlot]relay.SessionKeyOptions{}
	for _, g := range cfg.Gateways {
		if g.MultiplexProfiles {
			o := c.keys
			o.MultiplexProfiles, o.Profile = true, g.Profile
			c.tenantKeys[g.Tenant] = o
		}
	}
	if c.cfg.BufferLimit <= 0 {
		c.cfg.BufferLimit = 10000
	}
	if c.cfg.PingInterval == 0 {
		c.cfg.PingInterval = 30 * time.Second
	}
	if c.cfg.MediaTTL < DefaultMediaTTL {
		c.cfg.MediaTTL = DefaultMediaTTL
	}
	if c.cfg.LeaseTTL <= 0 {
		c.cfg.LeaseTTL = 2 * time.Minute
	}
	for id, app := range cfg.Discord {
		c.edges[identKey{platform: discord.Platform, bot: id}] = &edge{
			platform: discord.Platform, bot: id, desc: relay.DiscordDescriptor(),
			discordApp: app, discordKey: mustKey(app.PublicKey),
			discord: &discord.Client{BaseURL: cfg.DiscordBaseURL, BotToken: app.BotToken, HTTP: cfg.HTTPClient},
		}
	}
	for name, bot := range cfg.Telegram {
		pm := bot.ParseMode
		switch pm {
		case "":
			pm = "MarkdownV2"
		case "plain":
			pm = ""
		}
		c.edges[identKey{platform: telegram.Platform, bot: name}] = &edge{
			platform: telegram.Platform, bot: name, desc: relay.TelegramDescriptor(),
			telegramBot: bot, parseMode: pm,
			telegram: &telegram.Client{BaseURL: cfg.TelegramBaseURL, Token: bot.Token, HTTP: cfg.HTTPClient},
		}
	}
	c.addPlatformEdges()
	c.guardEdges()
	c.wg.Add(1)
	go c.maintain()
	c.startDiscordGateways()
	return c, nil
}

// Handler serves GET /relay, POST /relay/media, GET /relay/media/{id},
// POST /hooks/discord/{app} and POST /hooks/telegram/{bot}. Mount it at
// the server's root (or route those patterns to it).
func (c *Connector) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /relay", c.serveRelay)
	mux.HandleFunc("POST /relay/media", c.serveMediaUpload)
	mux.HandleFunc("GET /relay/media/{id}", c.serveMediaDownload)
	mux.HandleFunc("POST /hooks/discord/{app}", c.serveDiscord)
	mux.HandleFunc("POST /hooks/telegram/{bot}", c.serveTelegram)
	c.platformRoutes(mux)
	return mux
}

// Close closes every gateway connection (status 1001, going away), waits
// for their goroutines, and refuses new ones. It is safe to call twice.
func (c *Connector) Close() error {
	c.mu.Lock()
	if !c.closed {
		close(c.stop)
	}
	c.closed = true
	conns := make([]*conn, 0, len(c.conns))
	for k := range c.conns {
		conns = append(conns, k)
	}
	c.mu.Unlock()
	var wg sync.WaitGroup
	for _, k := range conns {
		wg.Go(func() { k.close(1001, "connector shutting down") })
	}
	wg.Wait()
	c.wg.Wait()
	return nil
}

// Shutdown is Close bounded by ctx, for http.Server.RegisterOnShutdown.
func (c *Connector) Shutdown(ctx context.Context) error {
	done := make(chan struct{})
	go func() { _ = c.Close(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Connections returns how many gateway connections are open.
func (c *Connector) Connections() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.conns)
}

func (c *Connector) register(k *conn) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.conns[k] = struct{}{}
	c.wg.Add(1)
	return true
}

func (c *Connector) serve(k *conn, platform, bot string) {
	key := identKey{k.tenant, platform, bot}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, x := range c.byID[key] {
		if x == k {
			return
		}
	}
	c.byID[key] = append(c.byID[key], k)
}

func (c *Connector) unregister(k *conn) {
	c.mu.Lock()
	delete(c.conns, k)
	c.unserveLocked(k)
	c.mu.Unlock()
	c.router.Forget(k)
}

// unserve takes k out of the live connections of its identities (it keeps
// its socket).
func (c *Connector) unserve(k *conn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.unserveLocked(k)
}

func (c *Connector) unserveLocked(k *conn) {
	for _, id := range k.identities() {
		key := identKey{k.tenant, id.platform, id.bot}
		list := c.byID[key]
		for i, x := range list {
			if x == k {
				list = append(list[:i:i], list[i+1:]...)
				break
			}
		}
		if len(list) == 0 {
			delete(c.byID, key)
		} else {
			c.byID[key] = list
		}
	}
}

// allEdges returns every configured edge, in a stable order.
func (c *Connector) allEdges() []*edge {
	out := make([]*edge, 0, len(c.edges))
	for _, e := range c.edges {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].platform != out[j].platform {
			return out[i].platform < out[j].platform
		}
		return out[i].bot < out[j].bot
	})
	return out
}

// relayDescriptor is the descriptor of a "relay" hello fronting several
// edges: the smallest message length (in UTF-16 units when any edge counts
// them), plain markdown, and only what every edge supports.
func relayDescriptor(edges []*edge) relay.CapabilityDescriptor {
	d := relay.CapabilityDescriptor{ContractVersion: relay.ContractVersion, Platform: relay.PlatformRelay, Label: "Relay",
		MarkdownDialect: "plain", LenUnit: relay.LenChars, SupportsEdit: true, SupportsDraftStreaming: true, SupportsThreads: true}
	for i, e := range edges {
		if i == 0 || e.desc.MaxMessageLength < d.MaxMessageLength {
			d.MaxMessageLength = e.desc.MaxMessageLength
		}
		if e.desc.LenUnit == relay.LenUTF16 {
			d.LenUnit = relay.LenUTF16
		}
		d.SupportsEdit = d.SupportsEdit && e.desc.SupportsEdit
		d.SupportsDraftStreaming = d.SupportsDraftStreaming && e.desc.SupportsDraftStreaming
		d.SupportsThreads = d.SupportsThreads && e.desc.SupportsThreads
	}
	for _, op := range edges[0].desc.SupportedOps {
		all := true
		for _, e := range edges[1:] {
			all = all && e.desc.Supports(op)
		}
		// A descriptor without threads advertises no thread ops.
		if all && (d.SupportsThreads || (op != relay.OpThreadMake && op != relay.OpThreadName)) {
			d.SupportedOps = append(d.SupportedOps, op)
		}
	}
	return d.Normalize()
}

// redrain offers tenant's buffered events (all tenants when tenant is "")
// to one live connection per (tenant, platform, bot).
func (c *Connector) redrain(tenant contract.TenantSlot) {
	c.mu.RLock()
	type job struct {
		k             *conn
		platform, bot string
	}
	var jobs []job
	for id, list := range c.byID {
		if len(list) > 0 && (tenant == "" || id.tenant == tenant) {
			jobs = append(jobs, job{list[0], id.platform, id.bot})
		}
	}
	c.mu.RUnlock()
	for _, j := range jobs {
		go c.drain(j.k, j.platform, j.bot)
	}
}

// maintain redelivers buffered events whose lease ran out without an
// acknowledgement and prunes expired capabilities and old dedupe keys,
// until Close.
func (c *Connector) maintain() {
	defer c.wg.Done()
	t := time.NewTicker(c.cfg.LeaseTTL / 2)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
		}
		c.redrain("")
		now := c.now()
		if err := c.cfg.Store.Prune(context.Background(), now, now.Add(-DedupeWindow)); err != nil {
			c.log.Error("relay: prune", "err", err)
		}
	}
}

// pick returns the connection for an event of (tenant, platform, bot) in
// session key: its owner when it serves that identity, else the next live
// connection (which becomes the owner); nil when none is connected.
func (c *Connector) pick(tenant contract.TenantSlot, platform, bot, key, chatID string) Owner {
	if o, _, ok := c.router.Owner(tenant, key); ok && o.Serves(platform, bot) {
		c.router.SetOwner(tenant, key, chatID, o)
		return o
	}
	id := identKey{tenant, platform, bot}
	c.mu.Lock()
	list := c.byID[id]
	var k *conn
	if len(list) > 0 {
		n := c.rr[id]
		k = list[n%len(list)]
		c.rr[id] = n + 1
	}
	c.mu.Unlock()
	if k == nil {
		return nil
	}
	c.router.SetOwner(tenant, key, chatID, k)
	return k
}

// keysFor returns the session-key options of tenant's gateways.
func (c *Connector) keysFor(tenant contract.TenantSlot) relay.SessionKeyOptions {
	if o, ok := c.tenantKeys[tenant]; ok {
		return o
	}
	return c.keys
}

// SessionKey is the key the tenant's gateway files ev under (the gateway's
// build_session_key after its Slack stamping, with the tenant's profile
// namespace).
func (c *Connector) SessionKey(tenant contract.TenantSlot, ev relay.MessageEvent) (string, error) {
	return relay.EventSessionKey(ev, c.keysFor(tenant))
}

func (c *Connector) edge(platform, bot string) *edge {
	return c.edges[identKey{platform: platform, bot: bot}]
}

// defaultBot returns the only configured bot of platform, if exactly one.
func (c *Connector) defaultBot(platform string) (string, bool) {
	found := ""
	n := 0
	for k := range c.edges {
		if k.platform == platform {
			found = k.bot
			n++
		}
	}
	return found, n == 1
}

// Store is the store the connector buffers in (Config.Store).
func (c *Connector) Store() relay.Store { return c.cfg.Store }
