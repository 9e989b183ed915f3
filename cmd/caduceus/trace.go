package main

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/store"
	"github.com/caduceus-dev/caduceus/trail"
)

// Environment variables a Hermes agent sets that tie a CLI run's records to
// a conversation and a scheduler run.
const (
	EnvSessionKey = "HERMES_SESSION_KEY"
	EnvCronRunID  = "HERMES_CRON_RUN_ID"
)

// cliTrace is the trace of a CLI command: --conversation, else
// HERMES_SESSION_KEY; HERMES_CRON_RUN_ID as the run; route names the
// command ("cli trader apply"). A bad value exits 2 naming its source.
func (a *app) cliTrace(route, conversation string) (contract.Trace, error) {
	t := contract.Trace{Route: route}
	where := "--conversation"
	if conversation == "" {
		conversation, where = a.getenv(EnvSessionKey), EnvSessionKey
	}
	if conversation != "" {
		if err := contract.CheckConversation(where, conversation); err != nil {
			return t, &exitError{2, err}
		}
		t.Conversation = conversation
	}
	if runID := a.getenv(EnvCronRunID); runID != "" {
		if err := contract.CheckRunID(EnvCronRunID, runID); err != nil {
			return t, &exitError{2, err}
		}
		t.RunID = runID
	}
	return t, nil
}

// trails is the trail reader over db: chains verified from the latest
// checkpoint in checkpointFile (signed by trusted; any key when trusted is
// nil) when there is one, else from genesis.
func (a *app) trails(db *store.DB, checkpointFile string, trusted ed25519.PublicKey) trail.Reader {
	opt := trail.Options{}
	if checkpointFile != "" {
		opt.Checkpoint = func(context.Context) (*audit.Checkpoint, error) {
			b, err := os.ReadFile(checkpointFile)
			if errors.Is(err, os.ErrNotExist) {
				return nil, nil
			}
			if err != nil {
				return nil, err
			}
			cp, err := audit.ParseCheckpoint(b, trusted)
			if err != nil {
				// A checkpoint that does not authenticate anchors nothing:
				// verify from genesis, and say so.
				a.log.Warn("trail: checkpoint not used", "file", checkpointFile, "err", err)
				return nil, nil
			}
			return &cp, nil
		}
	}
	return trail.New(db.Trail(), opt)
}

func (a *app) traceCmd() *cobra.Command {
	var tenant, checkpointFile, publicKey string
	var asJSON bool
	var limit int
	cmd := &cobra.Command{
		Use:   "trace [ID]",
		Short: "Print one conversation's trail across the gates as a timeline (no ID: the recent conversations)",
		Long: `Print what every gate recorded for one conversation, oldest first: the relay's
inbound messages and outbound replies, the shim's LLM turns with the rules that
fired, the trader's decisions with their validation, the executor's ticks with
each intent's outcome and order. Each line names its audit record and whether
the tenant's hash chain verifies through it (from genesis, or from a signed
checkpoint with --checkpoint or the configured audit.checkpoint_file).

ID is a conv_ id or a session key ("agent:main:telegram:dm:42"). Without
--tenant every tenant is searched and the one with the newest record is shown.
Works on the data directory (or --store); no server needed.`,
		Example: `  caduceus trace agent:main:telegram:dm:42 --tenant slot-1
  caduceus trace conv_0f3c... --json
  caduceus trace --tenant slot-1 -n 20`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if tenant != "" && !contract.ValidTenantSlot(tenant) {
				return &exitError{2, fmt.Errorf("--tenant %q must look like slot-N", tenant)}
			}
			db, err := a.openExistingStore(cmd.Context())
			if err != nil {
				return err
			}
			defer db.Close()
			file := orDefault(checkpointFile, a.cfg.Audit.CheckpointFile)
			var trusted ed25519.PublicKey
			switch {
			case publicKey != "":
				pk, err := base64.StdEncoding.DecodeString(publicKey)
				if err != nil || len(pk) != ed25519.PublicKeySize {
					return &exitError{2, fmt.Errorf("--public-key: want the base64 of a 32-byte Ed25519 public key")}
				}
				trusted = pk
			case file != "":
				key, err := a.signingKey(false)
				if err != nil {
					return err
				}
				if key != nil {
					trusted = key.Public().(ed25519.PublicKey)
				}
			}
			tr := a.trails(db, file, trusted)
			if len(args) == 0 {
				list, err := tr.List(cmd.Context(), tenant, limit)
				if err != nil {
					return err
				}
				if asJSON {
					if list == nil {
						list = []trail.Summary{}
					}
					return printJSON(a.stdout, map[string]any{"conversations": list})
				}
				return printSummaries(a.stdout, list)
			}
			t, err := tr.Get(cmd.Context(), tenant, args[0])
			switch {
			case errors.Is(err, trail.ErrNotFound):
				return &exitError{1, fmt.Errorf("no conversation %q%s", args[0], inTenant(tenant))}
			case contract.KindOf(err) == contract.KindInvalid:
				return &exitError{2, fmt.Errorf("%s", userMessage(err))}
			case err != nil:
				return err
			}
			if asJSON {
				return printJSON(a.stdout, t)
			}
			printTimeline(a.stdout, t)
			if !t.Verified {
				return &exitError{1, fmt.Errorf("the audit chain does not verify through every event: %s", orDefault(t.Break, "see above"))}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&tenant, "tenant", "", "the tenant whose conversation ID names (default: every tenant)")
	f.BoolVar(&asJSON, "json", false, "print the trail as JSON (the same document as GET /v1/trail/conversations/{id})")
	f.IntVarP(&limit, "limit", "n", 20, "without ID: how many recent conversations to list")
	f.StringVar(&checkpointFile, "checkpoint", "", "verify from this signed checkpoint file (default: audit.checkpoint_file when configured)")
	f.StringVar(&publicKey, "public-key", "", "base64 Ed25519 public key the checkpoint must be signed with (default: the data directory's or "+audit.EnvSigningKey+"'s key)")
	return cmd
}

func inTenant(t string) string {
	if t == "" {
		return ""
	}
	return " in " + t
}

// printTimeline writes a trail as a readable timeline: a header, then one
// line per event (time, gate, kind, verified, audit record, summary).
func printTimeline(w io.Writer, t trail.Trail) {
	fmt.Fprintf(w, "conversation %s", t.ConversationID)
	if t.SessionKey != "" {
		fmt.Fprintf(w, " (session %s)", t.SessionKey)
	}
	fmt.Fprintf(w, " in %s: %d events\n", t.Tenant, len(t.Events))
	from := "from genesis"
	if t.Checkpoint != "" {
		from = "from checkpoint " + t.Checkpoint
	}
	if t.Verified {
		fmt.Fprintf(w, "audit chain: verified through every event (%s)\n\n", from)
	} else {
		fmt.Fprintf(w, "audit chain: NOT verified through every event (%s): %s\n\n", from, t.Break)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, e := range t.Events {
		mark := "ok"
		if !e.Verified {
			mark = "UNVERIFIED"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s #%d\t%s\n", e.At.UTC().Format("2006-01-02 15:04:05.000"), e.Gate, e.Kind, mark, e.AuditID, e.AuditSeq, e.Summary)
	}
	tw.Flush()
}

func printSummaries(w io.Writer, list []trail.Summary) error {
	if len(list) == 0 {
		fmt.Fprintln(w, "no conversations recorded")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "LAST\tTENANT\tCONVERSATION\tSESSION\tEVENTS\tGATES")
	for _, s := range list {
		gates := make([]string, len(s.Gates))
		for i, g := range s.Gates {
			gates[i] = string(g)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\n", s.LastAt.UTC().Format("2006-01-02 15:04:05"), s.Tenant, s.ConversationID, orDefault(s.SessionKey, "-"), s.Events, strings.Join(gates, ","))
	}
	return tw.Flush()
}
