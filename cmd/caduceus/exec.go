package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/caduceus-dev/caduceus/contract"
	execcli "github.com/caduceus-dev/caduceus/executor/cli"
)

// EnvRobinhoodToken names the environment variable holding the bearer token
// for the Robinhood MCP server (never a flag: flags show up in ps).
const EnvRobinhoodToken = "CADUCEUS_ROBINHOOD_TOKEN"

func (a *app) execCmd() *cobra.Command {
	var o execcli.Options
	var tenant string
	cmd := &cobra.Command{
		Use:   "exec --payload FILE --skills DIR",
		Short: "Run one executor tick and print the envelope JSON (exit 0 even when the tick aborts)",
		Long: `Run one executor tick: the strategist payload passes pre-flight, per-intent
checks, broker review and the routing rules of its SKILL.md manifest before any
order is placed. The run context is detected from the environment
(HERMES_CRON_RUN_ID without a TTY: cron; a TTY with HERMES_SESSION_TYPE=chat:
chat; otherwise claude-code, which never places); --context may only make it
stricter. Exit 0 with the envelope for every tick, aborted or not; exit 2 when
the payload or a file is not valid at all.`,
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
			o.Identity = operatorCaller(contract.TenantSlot(tenant)).Identity
			db, err := a.openStore(cmd.Context())
			if err != nil {
				return err
			}
			defer db.Close()
			o.Store = db.ExecutorState()
			o.Audit = db.Audit()
			env, err := execcli.Exec(cmd.Context(), o)
			if err != nil {
				if contract.KindOf(err) == contract.KindInvalid {
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
	cmd.MarkFlagRequired("payload")
	cmd.MarkFlagRequired("skills")
	return cmd
}

// isTerminal reports whether r is a character device (a TTY).
func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
