package connector

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/guard"
	"github.com/caduceus-dev/caduceus/relay"
	"github.com/caduceus-dev/caduceus/relay/discord"
	"github.com/caduceus-dev/caduceus/relay/telegram"
)

// edge is one configured platform identity (a Discord application or a
// Telegram bot) and its outbound client.
type edge struct {
	platform string
	bot      string
	desc     relay.CapabilityDescriptor

	discordApp DiscordApp
	discordKey ed25519.PublicKey
	discord    *discord.Client

	telegramBot TelegramBot
	parseMode   string
	telegram    *telegram.Client

	// client answers the outbound ops of the platforms added after
	// Discord and Telegram (Slack, Twilio, WhatsApp Cloud, WeCom).
	client platformClient

	// guard is the identity's guardrails policy; nil when it looks for
	// nothing (guardrails.go).
	guard guard.Policy
}

// tenantOf resolves a chat's tenant from configuration alone (Telegram
// chat maps); "" when configuration does not say.
func (e *edge) tenantOf(chatID string) contract.TenantSlot {
	if e.platform == telegram.Platform {
		return tenantOr(e.telegramBot.Chats, chatID, "")
	}
	return ""
}

func metaString(meta map[string]any, key string) string {
	switch v := meta[key].(type) {
	case string:
		return v
	case float64:
		return strconv.FormatInt(int64(v), 10)
	}
	return ""
}

func (e *edge) send(ctx context.Context, chatID, content, replyTo string, meta map[string]any) (string, error) {
	if e.client != nil {
		return e.client.send(ctx, chatID, content, replyTo, meta)
	}
	switch e.platform {
	case discord.Platform:
		return e.discord.Send(ctx, chatID, content, replyTo)
	case telegram.Platform:
		return e.sendTelegram(ctx, chatID, content, telegram.SendOptions{ThreadID: metaString(meta, "thread_id"), ReplyTo: replyTo})
	}
	return "", fmt.Errorf("relay: platform %s cannot send", e.platform)
}

// sendTelegram sends content with o in the bot's parse mode, and again as
// plain text when Telegram cannot parse the markup.
func (e *edge) sendTelegram(ctx context.Context, chatID, content string, o telegram.SendOptions) (string, error) {
	o.ParseMode = e.parseMode
	id, err := e.telegram.SendMessage(ctx, chatID, content, o)
	if cannotParse(err) {
		o.ParseMode = ""
		id, err = e.telegram.SendMessage(ctx, chatID, content, o)
	}
	return id, err
}

func (e *edge) edit(ctx context.Context, chatID, messageID, content string) error {
	if e.client != nil {
		return e.client.edit(ctx, chatID, messageID, content)
	}
	switch e.platform {
	case discord.Platform:
		return e.discord.Edit(ctx, chatID, messageID, content)
	case telegram.Platform:
		err := e.telegram.EditMessageText(ctx, chatID, messageID, content, e.parseMode)
		if cannotParse(err) {
			err = e.telegram.EditMessageText(ctx, chatID, messageID, content, "")
		}
		return err
	}
	return fmt.Errorf("relay: platform %s cannot edit", e.platform)
}

func (e *edge) typing(ctx context.Context, chatID string, meta map[string]any) error {
	if e.client != nil {
		return e.client.typing(ctx, chatID, meta)
	}
	switch e.platform {
	case discord.Platform:
		return e.discord.Typing(ctx, chatID)
	case telegram.Platform:
		return e.telegram.SendChatAction(ctx, chatID, metaString(meta, "thread_id"), "typing")
	}
	return fmt.Errorf("relay: platform %s cannot show typing", e.platform)
}

func (e *edge) chatInfo(ctx context.Context, chatID string) (string, string, error) {
	if e.client != nil {
		return e.client.chatInfo(ctx, chatID)
	}
	switch e.platform {
	case discord.Platform:
		info, err := e.discord.Channel(ctx, chatID)
		return info.Name, info.Type, err
	case telegram.Platform:
		info, err := e.telegram.GetChat(ctx, chatID)
		return info.Name, info.Type, err
	}
	return "", "", fmt.Errorf("relay: platform %s has no chat info", e.platform)
}

func (e *edge) followUp(ctx context.Context, c relay.Capability, content string) (string, error) {
	if e.platform != discord.Platform || c.Kind != relay.KindDiscordInteractionToken {
		return "", fmt.Errorf("relay: capability kind %s is not usable on %s", c.Kind, e.platform)
	}
	return e.discord.FollowUp(ctx, c.Bot, c.Secret, content)
}

func (e *edge) react(ctx context.Context, chatID, messageID, emoji string, remove bool) error {
	switch e.platform {
	case discord.Platform:
		return e.discord.React(ctx, chatID, messageID, emoji, remove)
	case telegram.Platform:
		return e.telegram.SetMessageReaction(ctx, chatID, messageID, emoji, remove)
	}
	return fmt.Errorf("relay: platform %s cannot react", e.platform)
}

func (e *edge) delete(ctx context.Context, chatID, messageID string) error {
	switch e.platform {
	case discord.Platform:
		return e.discord.Delete(ctx, chatID, messageID)
	case telegram.Platform:
		return e.telegram.DeleteMessage(ctx, chatID, messageID)
	}
	return fmt.Errorf("relay: platform %s cannot delete", e.platform)
}

// sendPrompt posts content with buttons: Discord components, or a
// Telegram inline keyboard (two buttons a row).
func (e *edge) sendPrompt(ctx context.Context, chatID, content, replyTo string, buttons []discord.Button, meta map[string]any) (string, error) {
	switch e.platform {
	case discord.Platform:
		return e.discord.SendPrompt(ctx, chatID, content, replyTo, buttons)
	case telegram.Platform:
		var rows [][]telegram.InlineButton
		for i, b := range buttons {
			if i%2 == 0 {
				rows = append(rows, nil)
			}
			rows[len(rows)-1] = append(rows[len(rows)-1], telegram.InlineButton{Text: b.Label, CallbackData: b.CustomID})
		}
		return e.sendTelegram(ctx, chatID, content, telegram.SendOptions{ThreadID: metaString(meta, "thread_id"), ReplyTo: replyTo, Keyboard: rows})
	}
	return "", fmt.Errorf("relay: platform %s cannot prompt", e.platform)
}

// createThread starts a thread (Discord) or forum topic (Telegram) under
// chatID and returns its id.
func (e *edge) createThread(ctx context.Context, chatID, name string) (string, error) {
	switch e.platform {
	case discord.Platform:
		return e.discord.CreateThread(ctx, chatID, name)
	case telegram.Platform:
		return e.telegram.CreateForumTopic(ctx, chatID, name)
	}
	return "", fmt.Errorf("relay: platform %s cannot create threads", e.platform)
}

// renameThread renames thread threadID (in chatID, for Telegram topics).
func (e *edge) renameThread(ctx context.Context, chatID, threadID, name string) error {
	switch e.platform {
	case discord.Platform:
		return e.discord.RenameChannel(ctx, threadID, name)
	case telegram.Platform:
		return e.telegram.EditForumTopic(ctx, chatID, threadID, name)
	}
	return fmt.Errorf("relay: platform %s cannot rename threads", e.platform)
}

// cannotParse reports a Telegram refusal of the message's markup.
func cannotParse(err error) bool {
	var apiErr *telegram.APIError
	return errors.As(err, &apiErr) && apiErr.Code == 400 && strings.Contains(strings.ToLower(apiErr.Description), "can't parse entities")
}
