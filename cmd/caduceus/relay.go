package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/caduceus-dev/caduceus/relay"
	"github.com/caduceus-dev/caduceus/relay/connector"
)

// relaySection is the relay section of the configuration.
func (a *app) relaySection() *connector.FileConfig {
	return a.sections().Of("relay").(*connector.FileConfig)
}

func (a *app) relayCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "relay",
		Short: "Run the relay connector alone, mint gateway tokens, compute session keys",
		Long: `With no subcommand, run the relay connector alone (the same as
caduceus serve --gates relay): GET /relay for gateways (a Hermes gateway points
GATEWAY_RELAY_URL, GATEWAY_RELAY_ID and GATEWAY_RELAY_SECRET at it; see
docs/relay.md), POST /relay/media and GET /relay/media/{id} for their media,
POST /hooks/discord/{app}, /hooks/telegram/{bot}, /hooks/slack/{app},
/hooks/twilio/{account_sid}, /hooks/whatsapp/{phone_number_id} and
/hooks/wecom/{corp_id} for the platforms, as configured in the relay section of
the config file (docs/relay-platforms.md).`,
		Example: `  caduceus relay --config caduceus.yaml --addr 0.0.0.0:7601
  caduceus relay token --gateway gw-acme --ttl 5m --config caduceus.yaml
  echo '{"platform":"telegram","chat_id":"-1001","chat_type":"group","user_id":"42"}' | caduceus relay session-key`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			a.cfg.Gates = []string{"relay"}
			return a.serve(cmd.Context())
		},
	}
	cmd.Flags().StringVar(&a.cfg.Addr, "addr", "", "listen address (default 127.0.0.1:7600)")

	var gateway string
	var ttl time.Duration
	token := &cobra.Command{
		Use:     "token --gateway ID",
		Short:   "Mint an HMAC bearer token for a configured gateway",
		Example: "  caduceus relay token --gateway gw-acme --ttl 5m --config caduceus.yaml",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Only this gateway's secret is read: minting a token needs no
			// platform secret.
			only, ok := a.relaySection().Gateways[gateway]
			if !ok || len(only.Secrets) == 0 {
				return &exitError{2, fmt.Errorf("gateway %q is not configured (relay.gateways in the config file)", gateway)}
			}
			rc, err := connector.FileConfig{Gateways: map[string]connector.FileGateway{gateway: only}}.Config(a.getenv)
			if err != nil {
				return &exitError{2, fmt.Errorf("%s", userMessage(err))}
			}
			gw := rc.Gateways[gateway]
			if ttl < 0 {
				return &exitError{2, fmt.Errorf("--ttl %s: must not be negative", ttl)}
			}
			fmt.Fprintln(a.stdout, relay.MintToken(gw.Secrets[0], gateway, ttl))
			return nil
		},
	}
	token.Flags().StringVar(&gateway, "gateway", "", "gateway id (required)")
	token.Flags().DurationVar(&ttl, "ttl", 5*time.Minute, "token lifetime (0: never expires)")
	token.MarkFlagRequired("gateway")

	var group, thread bool
	var profile string
	sessionKey := &cobra.Command{
		Use:   "session-key",
		Short: "Read SessionSource JSON objects, one per line, and print the gateway's session key for each",
		Long: `Read one SessionSource JSON object per line on stdin and print one session
key per line, as the gateway's build_session_key() would. A source the gateway
could not key prints a line starting "error:" and the run goes on.

--profile NAME computes keys as a gateway that multiplexes profiles does
(multiplex_profiles on) with NAME as its active profile: a source's own
"profile" wins, else NAME; "default" (or "") is agent:main, "main" is
agent:main~, any other profile P is agent:P. Without --profile the namespace
is always agent:main and a source's profile is ignored, as on a gateway that
does not multiplex.`,
		Example: `  echo '{"platform":"discord","chat_id":"333","chat_type":"group","user_id":"555"}' | caduceus relay session-key
  caduceus relay session-key --group-sessions-per-user=false < sources.jsonl
  echo '{"platform":"discord","chat_id":"333","chat_type":"group","user_id":"555"}' | caduceus relay session-key --profile coder`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts := relay.SessionKeyOptions{GroupSessionsPerUser: group, ThreadSessionsPerUser: thread}
			if cmd.Flags().Changed("profile") {
				opts.MultiplexProfiles, opts.Profile = true, profile
			}
			return relay.SessionKeyLines(a.stdin, a.stdout, opts)
		},
	}
	sessionKey.Flags().StringVar(&profile, "profile", "", "key as a profile-multiplexing gateway whose active profile is this")
	sessionKey.Flags().BoolVar(&group, "group-sessions-per-user", true, "key group chats per user")
	sessionKey.Flags().BoolVar(&thread, "thread-sessions-per-user", false, "key threads per user")
	cmd.AddCommand(token, sessionKey)
	return cmd
}
