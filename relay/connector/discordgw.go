package connector

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/relay"
	"github.com/caduceus-dev/caduceus/relay/discord"
)

// A Discord bot with Gateway set gets a message session (discord.Session)
// in the one connector process that holds the bot's Gateway lease.
//
// The lease reuses the buffer's lease mechanism of relay.Store: one row per
// bot in its tenant's buffer, under the platform gatewayLeasePlatform (which
// no event ever carries, so no drain lists it), leased by the process that
// runs the session and renewed every third of GatewayLeaseTTL. Store.Lease
// is one conditional statement, so two connectors on one store never both
// hold it; when the owner stops renewing (crash, lost database), another
// takes the bot over once the lease has run out.
const gatewayLeasePlatform = "discord.gateway-lease"

// fatalRetry is how long a bot whose Gateway session ended with a close
// code that forbids reconnecting (4004 bad token, 4013/4014 intents not
// allowed) waits before the next try.
const fatalRetry = 10 * time.Minute

// gatewayLeaseID is the buffer row id of app's Gateway lease.
func gatewayLeaseID(app string) string { return gatewayLeasePrefix + app }

const gatewayLeasePrefix = "rbuf_discordgw_"

// isGatewayLeaseID reports a Gateway lease row id (which an inbound_ack
// must not delete).
func isGatewayLeaseID(id string) bool { return strings.HasPrefix(id, gatewayLeasePrefix) }

// gatewayTenant is the tenant whose buffer holds app's Gateway lease: the
// app's own tenant, else the first (sorted) tenant of its guilds, else of
// its users.
func gatewayTenant(a DiscordApp) contract.TenantSlot {
	if a.Tenant != "" {
		return a.Tenant
	}
	for _, m := range []map[string]contract.TenantSlot{a.Guilds, a.Users} {
		var ts []string
		for _, t := range m {
			ts = append(ts, string(t))
		}
		if len(ts) > 0 {
			return contract.TenantSlot(slices.Min(ts))
		}
	}
	return ""
}

// startDiscordGateways starts one lease loop per Gateway-enabled bot.
func (c *Connector) startDiscordGateways() {
	if c.cfg.GatewayLeaseTTL <= 0 {
		c.cfg.GatewayLeaseTTL = 30 * time.Second
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	c.gwOwner = "discordgw_" + hex.EncodeToString(b[:])
	for id, app := range c.cfg.Discord {
		if app.Gateway {
			c.wg.Add(1)
			go c.runDiscordGateway(id, app)
		}
	}
}

// takeGatewayLease takes or renews app's lease until now + GatewayLeaseTTL;
// held is false while another process holds it.
func (c *Connector) takeGatewayLease(ctx context.Context, tenant contract.TenantSlot, app string) (held bool, err error) {
	now := c.now()
	if _, err := c.cfg.Store.Enqueue(ctx, relay.Buffered{ID: gatewayLeaseID(app), Tenant: tenant, Platform: gatewayLeasePlatform,
		Bot: app, Event: []byte("{}"), CreatedAt: now}, 0); err != nil {
		return false, err
	}
	return c.cfg.Store.Lease(ctx, tenant, gatewayLeaseID(app), c.gwOwner, now, now.Add(c.cfg.GatewayLeaseTTL))
}

// runDiscordGateway holds app's lease and, while it does, its Gateway
// session, until Close. Losing the lease (a renewal that fails) stops the
// session at once; the lease is released on Close.
func (c *Connector) runDiscordGateway(id string, app DiscordApp) {
	defer c.wg.Done()
	log := c.log.With("platform", discord.Platform, "bot", id)
	tenant := gatewayTenant(app)
	e := c.edge(discord.Platform, id)
	channels := map[string]discord.ChannelKind{} // used only by the session's read loop
	sess := &discord.Session{API: e.discord, Token: app.BotToken, GatewayURL: app.GatewayURL, Logger: log,
		OnMessage: func(ctx context.Context, m discord.MessageCreate, botUser string) {
			c.discordMessage(ctx, id, app, e, channels, m, botUser)
		}}
	var (
		cancel  context.CancelFunc
		done    chan struct{}
		retryAt time.Time // no new session before this, after a fatal close
	)
	stopSession := func() {
		if cancel != nil {
			cancel()
			<-done
			cancel, done = nil, nil
		}
	}
	defer func() {
		stopSession()
		if err := c.cfg.Store.ReleaseLeases(context.Background(), tenant, c.gwOwner); err != nil {
			log.Error("relay: discord gateway: release lease", "err", err)
		}
	}()
	tick := time.NewTicker(c.cfg.GatewayLeaseTTL / 3)
	defer tick.Stop()
	for {
		held, err := c.takeGatewayLease(context.Background(), tenant, id)
		if err != nil {
			log.Error("relay: discord gateway: lease", "err", err)
		}
		switch {
		case held && cancel == nil && time.Now().Before(retryAt):
			// after a fatal close: wait, keeping the lease
		case held && cancel == nil:
			ctx, stop := context.WithCancel(context.Background())
			cancel, done = stop, make(chan struct{})
			go func(done chan struct{}) {
				defer close(done)
				if err := sess.Run(ctx); err != nil {
					log.Error("relay: discord gateway session ended", "err", err)
				}
			}(done)
			log.Info("relay: discord gateway: this process owns the bot's session")
		case !held && cancel != nil:
			stopSession()
			log.Warn("relay: discord gateway: lease lost; session stopped")
		}
		select {
		case <-c.stop:
			return
		case <-tick.C:
		case <-done: // a session that ended on its own (a fatal close: bad token or intents)
			stopSession()
			// Every retry is an identify, and Discord resets the token of a
			// bot that identifies 1000 times a day: retry rarely.
			retryAt = time.Now().Add(fatalRetry)
			select {
			case <-c.stop:
				return
			case <-tick.C:
			}
		}
	}
}

// discordMessage delivers one MESSAGE_CREATE or edit: threads are told from
// channels by the channel's type (GET /channels/{id}, cached per session),
// the tenant comes from the guild (else the DM user, else the app's).
func (c *Connector) discordMessage(ctx context.Context, id string, app DiscordApp, e *edge, channels map[string]discord.ChannelKind,
	m discord.MessageCreate, botUser string) {
	var ch discord.ChannelKind
	if m.GuildID != "" {
		var ok bool
		if ch, ok = channels[m.ChannelID]; !ok {
			got, err := e.discord.GetChannel(ctx, m.ChannelID)
			if err != nil {
				c.log.Warn("relay: discord gateway: channel lookup failed; keyed as a channel", "channel", m.ChannelID, "err", err)
			} else {
				ch = discord.ChannelKind{Thread: got.Type == 10 || got.Type == 11 || got.Type == 12, ParentID: got.ParentID,
					Name: got.Name, Topic: got.Topic}
				if len(channels) >= 10000 {
					clear(channels)
				}
				channels[m.ChannelID] = ch
			}
		}
	}
	ev, err := discord.NormalizeMessage(m, botUser, ch)
	if errors.Is(err, discord.ErrIgnored) {
		return
	}
	if err != nil {
		c.log.Warn("relay: discord gateway: message dropped", "err", err)
		return
	}
	tenant := app.Tenant
	if m.GuildID != "" {
		if t, ok := app.Guilds[m.GuildID]; ok {
			tenant = t
		}
	} else if t, ok := app.Users[m.Author.ID]; ok {
		tenant = t
	}
	if tenant == "" {
		c.log.Warn("relay: discord gateway: message with no tenant", "bot", id, "guild", m.GuildID, "user", m.Author.ID)
		return
	}
	if atts, rest := discordAttachments(&ev, c.cfg.DiscordBaseURL); len(atts) > 0 {
		ev.MediaURLs, ev.Media = nil, nil
		c.rehost(ctx, tenant, &ev, atts)
		for _, m := range rest {
			ev.MediaURLs = append(ev.MediaURLs, m.URL)
			ev.Media = append(ev.Media, m)
		}
	}
	dedupe := m.ID
	if m.Edit {
		dedupe += ":edit:" + m.EditedTimestamp
	}
	if _, err := c.Deliver(ctx, Inbound{Tenant: tenant, Bot: id, Event: ev, DedupeID: dedupe}); err != nil {
		c.log.Error("relay: discord gateway: deliver", "err", err)
	}
}
