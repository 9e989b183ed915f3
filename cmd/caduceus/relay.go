package main

import (
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/caduceus-dev/caduceus/guard/detect"
	"github.com/caduceus-dev/caduceus/relay"
	"github.com/caduceus-dev/caduceus/relay/connector"
	"github.com/caduceus-dev/caduceus/relay/relaysql"
	"github.com/caduceus-dev/caduceus/server"
	"github.com/caduceus-dev/caduceus/store"
)

// relayConfigured reports whether the config names any gateway or platform.
func (a *app) relayConfigured() bool {
	return a.cfg.Relay.Configured()
}

// relayConnector builds the connector from the relay section of the config.
// With --nats, session ownership is routed across connector processes
// through NATS; otherwise in this process. close releases the connector and
// the NATS connection.
func (a *app) relayConnector(db *store.DB) (c *connector.Connector, close func(), err error) {
	rc, err := a.cfg.Relay.Config(a.getenv)
	if err != nil {
		return nil, nil, &exitError{2, fmt.Errorf("%s", userMessage(err))}
	}
	rc.Store, rc.Audit, rc.Logger = relaysql.New(db), db.Audit(), a.log
	if rc.GuardrailsActive() {
		// The detectors are built here, once, and only when a platform's
		// policy looks for anything (the shim's are the same ones).
		det, err := detect.Default()
		if err != nil {
			return nil, nil, err
		}
		rc.Scanner, rc.OnGuardrail = det, server.GuardrailFinding
	}
	var nc *nats.Conn
	if a.cfg.NATS != "" {
		if nc, err = nats.Connect(a.cfg.NATS, nats.Name("caduceus-relay"),
			// Through an outage of any length: reconnect for good, and fail
			// a publish at once rather than keep it for the reconnection
			// (a forwarded event that failed is buffered in the store; sent
			// again later it would arrive twice).
			nats.MaxReconnects(-1), nats.ReconnectWait(time.Second), nats.ReconnectBufSize(-1)); err != nil {
			return nil, nil, fmt.Errorf("relay: nats %s: %w", a.cfg.NATS, err)
		}
		if rc.Router, err = connector.NewNATSRouter(nc, connector.NATSOptions{}); err != nil {
			nc.Close()
			return nil, nil, err
		}
	}
	if c, err = connector.New(rc); err != nil {
		if nc != nil {
			nc.Close()
		}
		return nil, nil, &exitError{2, fmt.Errorf("%s", userMessage(err))}
	}
	return c, func() {
		c.Close()
		if nc != nil {
			nc.Close()
		}
	}, nil
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
			only, ok := a.cfg.Relay.Gateways[gateway]
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
