package connector

import (
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"time"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/relay/discord"
)

// commandName is Discord's rule for a slash command's name.
var commandName = regexp.MustCompile(`^[-_a-z0-9]{1,32}$`)

// ManifestCommands reads a hello's command_manifest into Discord commands:
// entries that are not objects or whose name breaks Discord's rule
// ([a-z0-9_-]{1,32}) are dropped, descriptions are cut to Discord's 100
// characters (a missing one becomes the name), duplicate names keep the
// first.
func ManifestCommands(manifest json.RawMessage) []discord.Command {
	var raw []json.RawMessage
	if json.Unmarshal(manifest, &raw) != nil {
		return nil
	}
	seen := map[string]bool{}
	out := []discord.Command{}
	for _, r := range raw {
		var c discord.Command
		if json.Unmarshal(r, &c) != nil || !commandName.MatchString(c.Name) || seen[c.Name] {
			continue
		}
		seen[c.Name] = true
		if c.Description == "" {
			c.Description = c.Name
		}
		if d := []rune(c.Description); len(d) > 100 {
			c.Description = string(d[:100])
		}
		if len(c.Options) > 0 {
			var b bytes.Buffer
			if json.Compact(&b, c.Options) != nil || b.String() == "null" || b.String() == "[]" {
				c.Options = nil
			} else {
				c.Options = b.Bytes()
			}
		}
		out = append(out, c)
	}
	return out
}

// sameCommands reports whether two command sets have the same names,
// descriptions and options, in any order.
func sameCommands(a, b []discord.Command) bool {
	if len(a) != len(b) {
		return false
	}
	byName := make(map[string]discord.Command, len(a))
	for _, c := range a {
		byName[c.Name] = c
	}
	for _, c := range b {
		d, ok := byName[c.Name]
		if !ok || d.Description != c.Description || !sameJSON(d.Options, c.Options) {
			return false
		}
	}
	return true
}

func sameJSON(a, b json.RawMessage) bool {
	empty := func(r json.RawMessage) bool { s := string(r); return s == "" || s == "null" || s == "[]" }
	if empty(a) || empty(b) {
		return empty(a) && empty(b)
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

// reconcileCommands makes the Discord application's global commands those
// of manifest: GET, compare, and one bulk PUT only when they differ (so a
// re-dial with the same manifest writes nothing). Best effort: failures are
// logged and audited, never fatal to the connection.
func (c *Connector) reconcileCommands(ctx context.Context, e *edge, manifest json.RawMessage) {
	want := ManifestCommands(manifest)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	have, err := e.discord.GlobalCommands(ctx, e.bot)
	if err == nil && sameCommands(have, want) {
		c.log.Debug("relay: discord commands already match the manifest", "app", e.bot, "commands", len(want))
		return
	}
	if err == nil {
		err = e.discord.PutGlobalCommands(ctx, e.bot, want)
	}
	if err != nil {
		c.log.Warn("relay: discord command reconcile failed", "app", e.bot, "err", err)
		return
	}
	c.log.Info("relay: discord global commands reconciled", "app", e.bot, "commands", len(want))
	if t := e.discordApp.Tenant; t != "" {
		c.record(ctx, entry{tenant: t, action: "relay.commands", resource: "discord:" + e.bot, outcome: contract.OutcomeAllow,
			subjectOf: "discord:" + e.bot, platform: "discord"})
	}
}
