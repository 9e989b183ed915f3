package connector

import (
	"context"
	"fmt"
	"net/http"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/guard"
	"github.com/caduceus-dev/caduceus/relay/slack"
)

// SlackApp is one Slack app, by app id (the {app} of /hooks/slack/{app}
// and the botId of a gateway's hello).
type SlackApp struct {
	SigningSecret string // from the app's Basic Information page
	BotToken      string // xoxb-…
	// Teams maps workspace (team) ids to tenants; Tenant takes the rest.
	Teams  map[string]contract.TenantSlot
	Tenant contract.TenantSlot
	// NoTopLevelStamp turns off the mirror of the gateway's top-level
	// stamping (set it when the gateway's reply_in_thread or
	// dm_top_level_threads_as_sessions is off).
	NoTopLevelStamp bool
	APIBaseURL      string // slack.DefaultBaseURL when empty
	Guardrails      guard.Config
}

// serveSlack is POST /hooks/slack/{app}: the Events API.
func (c *Connector) serveSlack(w http.ResponseWriter, r *http.Request) {
	app, a, body, ok := webhookEntry(w, r, c.cfg.Slack, "app", slack.MaxBodyBytes)
	if !ok {
		return
	}
	if err := slack.Verify(a.SigningSecret, r.Header.Get(slack.TimestampHeader), r.Header.Get(slack.SignatureHeader), body, c.now()); err != nil {
		c.log.Warn("relay: slack request refused", "app", app, "remote", r.RemoteAddr, "err", err)
		http.Error(w, "invalid request signature", http.StatusUnauthorized)
		return
	}
	env, err := slack.ParseEnvelope(body)
	if err != nil {
		http.Error(w, "bad event", http.StatusBadRequest)
		return
	}
	if env.Type == slack.TypeURLVerification {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(slack.ChallengeResponse(env))
		return
	}
	if env.APIAppID != "" && env.APIAppID != app {
		c.log.Warn("relay: slack event for another app", "app", app, "event_app", env.APIAppID)
		http.Error(w, "event for another app", http.StatusBadRequest)
		return
	}
	in, err := slack.Normalize(env, slack.Options{StampTopLevel: !a.NoTopLevelStamp})
	if answerUnnormalized(w, err, slack.ErrIgnored, "bad event") {
		return
	}
	tenant := tenantOr(a.Teams, in.Team, a.Tenant)
	if tenant == "" {
		c.log.Warn("relay: slack event with no tenant", "app", app, "team", in.Team)
		w.WriteHeader(http.StatusOK) // answered, so Slack does not retry it
		return
	}
	c.rehostWithin(r.Context(), SlackRehostTimeout, tenant, &in.Event, slackAttachments(a, in.Files))
	c.acceptDelivery(w, r, slack.Platform, Inbound{Tenant: tenant, Bot: app, Event: in.Event, DedupeID: in.DedupeID}, nil)
}

// slackClient answers outbound ops through the Web API.
type slackClient struct{ api *slack.Client }

// threadOf is the thread a Slack reply goes to: the metadata's thread_ts or
// thread_id (the gateway's session thread), else the message replied to.
func threadOf(meta map[string]any, replyTo string) string {
	for _, k := range []string{"thread_ts", "thread_id"} {
		if v := metaString(meta, k); v != "" {
			return v
		}
	}
	return replyTo
}

func (s *slackClient) send(ctx context.Context, chatID, content, replyTo string, meta map[string]any) (string, error) {
	return s.api.PostMessage(ctx, chatID, content, threadOf(meta, replyTo))
}

func (s *slackClient) edit(ctx context.Context, chatID, messageID, content string) error {
	return s.api.Update(ctx, chatID, messageID, content)
}

// typing sets the thread's status ("is thinking…"): Slack shows typing
// only for assistant threads, so a typing op outside a thread fails.
func (s *slackClient) typing(ctx context.Context, chatID string, meta map[string]any) error {
	thread := threadOf(meta, "")
	if thread == "" {
		return fmt.Errorf("slack: typing needs metadata.thread_id (Slack shows status only in threads)")
	}
	return s.api.SetStatus(ctx, chatID, thread, "is thinking…")
}

func (s *slackClient) chatInfo(ctx context.Context, chatID string) (string, string, error) {
	info, err := s.api.ConversationInfo(ctx, chatID)
	return info.Name, info.Type, err
}
