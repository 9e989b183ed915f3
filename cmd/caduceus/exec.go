package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/caduceus-dev/caduceus/broker/robinhood"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/executor/executorsql"
)

// EnvRobinhoodToken names the environment variable holding the bearer token
// for the Robinhood MCP server (never a flag: flags show up in ps).
const EnvRobinhoodToken = robinhood.EnvToken

func (a *app) execCmd() *cobra.Command {
	var o execOptions
	var tenant, conversation string
	cmd := &cobra.Command{
		Use:   "exec --payload FILE --skills DIR",
		Short: "Run one executor tick and print the envelope JSON (exit 0 even when the tick aborts)",
		Long: `Run one executor tick: the strategist payload passes pre-flight, per-intent
checks, broker review and the routing rules of its SKILL.md manifest before any
order is placed. Exit 0 with the envelope for every tick, aborted or not; exit 2
when the payload or a file is not valid at all.

The run context decides whether the tick may place. It comes from the
environment, the payload's context_hint and whether standard input is a
terminal (the isatty ioctl: /dev/null, a pipe or a file is not a terminal):
  cron         HERMES_CRON_RUN_ID is set or context_hint is "cron", and
               standard input is not a terminal (and HERMES_SESSION_TYPE is
               not chat): places live manifests' intents after review.
  chat         standard input is a terminal and HERMES_SESSION_TYPE=chat, or
               HERMES_CRON_RUN_ID is set together with HERMES_SESSION_TYPE=chat:
               places only on a matching "EXECUTE: ..." in --message.
  claude-code  anything else, e.g. HERMES_CRON_RUN_ID set while standard input
               is a terminal: reviews, never places.
--context, and a context_hint naming another context, may only make the
detected context stricter (a disagreeing hint is noted). When the context keeps
an intent from being placed, the envelope's notes say which context was
detected and from what.

Environment variables read:
  HERMES_CRON_RUN_ID       set by the scheduler for a cron run (any non-empty value)
  HERMES_SESSION_TYPE      "chat" in an interactive Hermes session
  HERMES_PROFILE           the loaded profile (default claude-code)
  HERMES_PROFILE_ACCOUNT   the account the profile trades (options-trader)
  HERMES_SESSION_KEY       the conversation the tick belongs to (--conversation wins);
                           HERMES_CRON_RUN_ID is recorded as the provenance run_id
  ` + EnvRobinhoodToken + ` bearer token of the Robinhood MCP server

--idempotency-key KEY makes the tick idempotent in the store: the same key with
the same payload and message prints the stored envelope (marked "replay": true)
and calls no broker; the same key with anything else exits 2 (conflict). Keys
are per tenant and kept at least 24 hours.
`,
		Example: `  caduceus exec --payload examples/executor/payload.json --skills examples/executor --scenario examples/executor/paper.yaml
  caduceus exec --payload payload.json --skills ./hermes --broker robinhood --mcp-url http://127.0.0.1:9000/mcp
  caduceus exec --payload - --skills examples/executor --scenario examples/executor/paper.yaml --message "EXECUTE: buy SPY 1" < examples/executor/payload.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !contract.ValidTenantSlot(tenant) {
				return &exitError{2, fmt.Errorf("--tenant %q must look like slot-N", tenant)}
			}
			if o.PayloadFile == "-" {
				b, err := io.ReadAll(io.LimitReader(a.stdin, 1<<20))
				if err != nil {
					return &exitError{2, err}
				}
				o.Payload = b
			}
			o.Env = a.getenv
			o.IsTTY = isTerminal(a.stdin)
			o.MCPToken = a.getenv(EnvRobinhoodToken)
			caller := operatorCaller(contract.TenantSlot(tenant))
			trace, err := a.cliTrace("cli exec", conversation)
			if err != nil {
				return err
			}
			caller.Trace = trace
			o.Identity = caller.Identity
			o.Provenance = caller.Provenance(contract.ActorAssistant, contract.Timestamp(time.Now()))
			db, err := a.openStore(cmd.Context())
			if err != nil {
				return err
			}
			defer db.Close()
			o.Store = executorsql.New(db)
			o.Audit = db.Audit()
			env, err := runTick(cmd.Context(), o)
			if err != nil {
				if k := contract.KindOf(err); k == contract.KindInvalid || k == contract.KindConflict {
					return &exitError{2, fmt.Errorf("%s", userMessage(err))}
				}
				return err
			}
			return printJSON(a.stdout, env)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.PayloadFile, "payload", "", "strategist payload JSON file, or - for stdin (required)")
	f.StringVar(&o.SkillsDir, "skills", "", "skills root holding skills/investing/strategists/<name>/SKILL.md (required)")
	f.StringVar(&o.Broker, "broker", "paper", "broker: paper or robinhood")
	f.StringVar(&o.ScenarioFile, "scenario", "", "paper broker scenario YAML")
	f.StringVar(&o.MCPURL, "mcp-url", "", "Robinhood MCP server URL (token from "+EnvRobinhoodToken+")")
	f.StringVar(&o.Message, "message", "", "the latest user message (chat: its EXECUTE: directive)")
	f.StringVar(&o.Now, "now", "", "the tick's clock, RFC 3339 (default: the scenario's now, else the wall clock)")
	f.StringVar(&o.Context, "context", "", "make the detected run context stricter: chat or claude-code")
	f.StringVar(&tenant, "tenant", "slot-1", "tenant slot whose executor state the tick uses")
	f.StringVar(&o.IdempotencyKey, "idempotency-key", "", "run the tick at most once for this key (8-120 of A-Z a-z 0-9 . _ : -); a repeat prints the stored envelope")
	f.StringVar(&conversation, "conversation", "", "the conversation the tick belongs to: a session key or conv_ id (default "+EnvSessionKey+")")
	cmd.MarkFlagRequired("payload")
	cmd.MarkFlagRequired("skills")
	return cmd
}

// isTerminal reports whether r is a terminal: the isatty ioctl on its file
// descriptor (term.IsTerminal). A character device that is not a terminal,
// such as /dev/null (what cron and systemd give a job), is not one.
func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok || f == nil {
		return false
	}
	return term.IsTerminal(int(f.Fd()))
}
