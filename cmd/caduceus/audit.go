package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/store"
)

func (a *app) auditCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Verify and read the audit trail (works on the data directory; no server needed)",
		Example: `  caduceus audit verify
  caduceus audit checkpoint --out /backup/checkpoint.json
  caduceus audit tail -n 20 --tenant slot-1`,
	}
	var tenant, checkpointFile, publicKey string
	verify := &cobra.Command{
		Use:   "verify",
		Short: "Recompute the hash chains; exit 1 naming the first broken record",
		Example: `  caduceus audit verify
  caduceus audit verify --tenant slot-2 --data /srv/caduceus`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			db, err := a.openExistingStore(cmd.Context())
			if err != nil {
				return err
			}
			defer db.Close()
			var tenants []contract.TenantSlot
			if tenant != "" {
				if !contract.ValidTenantSlot(tenant) {
					return &exitError{2, fmt.Errorf("--tenant %q must look like slot-N", tenant)}
				}
				tenants = append(tenants, contract.TenantSlot(tenant))
			}
			start := time.Now()
			progress := func(n int64) {
				if n%100000 == 0 {
					fmt.Fprintf(a.stderr, "checked %d records...\n", n)
				}
			}
			opt := audit.Options{Tenants: tenants, Progress: progress}
			if checkpointFile != "" {
				cp, err := a.readCheckpoint(checkpointFile, publicKey)
				if err != nil {
					return &exitError{1, err}
				}
				opt.Checkpoint = &cp
			}
			rep, err := audit.VerifyWith(cmd.Context(), db.Audit(), opt)
			if err != nil {
				return err
			}
			if rep.Break != nil {
				fmt.Fprintf(a.stdout, "checked %d records in %d tenants before the break\n", rep.Records, rep.Tenants)
				return &exitError{1, rep.Break}
			}
			fmt.Fprintf(a.stdout, "ok: verified %d records in %d tenants (%s)\n", rep.Records, rep.Tenants, time.Since(start).Round(time.Millisecond))
			return nil
		},
	}
	verify.Flags().StringVar(&tenant, "tenant", "", "verify only this tenant's chain")
	verify.Flags().StringVar(&checkpointFile, "checkpoint", "", "a signed checkpoint file every chain must still reach (exit 1 naming it when one does not)")
	verify.Flags().StringVar(&publicKey, "public-key", "", "base64 Ed25519 public key the checkpoint must be signed with (default: the data directory's or "+audit.EnvSigningKey+"'s key)")
	verify.Example += `
  caduceus audit verify --checkpoint /backup/audit-checkpoint.json`

	var out string
	checkpoint := &cobra.Command{
		Use:   "checkpoint",
		Short: "Verify the chains and write a signed checkpoint of their ends (Ed25519)",
		Long: `Verify every chain and write a checkpoint signed with the audit signing key
(` + audit.EnvSigningKey + `, or audit-signing.key in the data directory, made on first use):
per tenant the seq and hash of its last record, and the time. Keep checkpoints
outside the database; caduceus audit verify --checkpoint FILE then fails when a
chain was truncated, rewound or rewritten since.`,
		Example: `  caduceus audit checkpoint --out /backup/audit-checkpoint.json
  caduceus audit checkpoint --data /srv/caduceus > checkpoint.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			db, err := a.openStore(cmd.Context())
			if err != nil {
				return err
			}
			defer db.Close()
			key, err := a.signingKey(true)
			if err != nil {
				return err
			}
			cp, err := makeCheckpoint(cmd.Context(), db.Audit(), key)
			if err != nil {
				return &exitError{1, err}
			}
			if out == "" {
				return printJSON(a.stdout, cp)
			}
			if err := audit.WriteCheckpointFile(out, cp); err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "wrote checkpoint of %d tenants to %s (key %s)\n", len(cp.Heads), out, cp.KeyID)
			return nil
		},
	}
	checkpoint.Flags().StringVar(&out, "out", "", "write the checkpoint to this file (atomically) instead of stdout")

	var n int
	var asJSON bool
	var tailTenant string
	tail := &cobra.Command{
		Use:   "tail",
		Short: "Show the latest audit records, newest first",
		Example: `  caduceus audit tail
  caduceus audit tail -n 100 --tenant slot-1 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			db, err := a.openExistingStore(cmd.Context())
			if err != nil {
				return err
			}
			defer db.Close()
			recs, err := db.Audit().Tail(cmd.Context(), store.AuditFilter{Tenant: contract.TenantSlot(tailTenant), Limit: n})
			if err != nil {
				return err
			}
			if asJSON {
				return printJSONLines(a.stdout, recs)
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "AT\tTENANT\tSEQ\tACTION\tOUTCOME\tSENSITIVITY\tRESOURCE\tREASON\tREDACTION")
			for _, r := range recs {
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Outcome.At, r.Tenant, r.Seq, r.Outcome.Action, r.Outcome.Outcome,
					orDefault(string(r.Sensitivity), "-"), r.Outcome.Resource, orDefault(r.Outcome.Reason, "-"), redactionText(r.Redaction))
			}
			return tw.Flush()
		},
	}
	tail.Flags().IntVarP(&n, "lines", "n", 20, "how many records")
	tail.Flags().BoolVar(&asJSON, "json", false, "one JSON record per line")
	tail.Flags().StringVar(&tailTenant, "tenant", "", "only this tenant")
	cmd.AddCommand(verify, tail, checkpoint)
	return cmd
}

// redactionText is a record's redaction as audit tail shows it: "-" for
// none (a record sealed before records carried one has none either), else
// the level and the reason.
func redactionText(r *contract.Redaction) string {
	if r == nil {
		return "-"
	}
	if r.Reason == "" {
		return string(r.Level)
	}
	return string(r.Level) + ": " + r.Reason
}

// signingKey loads the audit signing key (env, then the data directory),
// creating it in the data directory when create is set.
func (a *app) signingKey(create bool) (ed25519.PrivateKey, error) {
	key, found, err := audit.LoadSigningKey(a.getenv(audit.EnvSigningKey), a.cfg.Data, create)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, nil
	}
	return key, nil
}

// readCheckpoint reads and authenticates a checkpoint file: signed by the
// given public key, else by this installation's signing key; with neither,
// only its own embedded key (said on stderr).
func (a *app) readCheckpoint(path, publicKey string) (audit.Checkpoint, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return audit.Checkpoint{}, fmt.Errorf("checkpoint: %w", err)
	}
	var trusted ed25519.PublicKey
	switch {
	case publicKey != "":
		pk, err := base64.StdEncoding.DecodeString(publicKey)
		if err != nil || len(pk) != ed25519.PublicKeySize {
			return audit.Checkpoint{}, fmt.Errorf("--public-key: want the base64 of a 32-byte Ed25519 public key")
		}
		trusted = pk
	default:
		key, err := a.signingKey(false)
		if err != nil {
			return audit.Checkpoint{}, err
		}
		if key != nil {
			trusted = key.Public().(ed25519.PublicKey)
		} else {
			fmt.Fprintf(a.stderr, "caduceus: no signing key here (%s or %s in the data directory); the checkpoint is checked against its own key only\n", audit.EnvSigningKey, audit.SigningKeyFile)
		}
	}
	cp, err := audit.ParseCheckpoint(b, trusted)
	if err != nil {
		return cp, fmt.Errorf("checkpoint %s: %w", path, err)
	}
	return cp, nil
}

// makeCheckpoint verifies every chain and signs their ends; a broken chain
// gets no checkpoint.
func makeCheckpoint(ctx context.Context, src audit.Source, key ed25519.PrivateKey) (audit.Checkpoint, error) {
	rep, err := audit.VerifyWith(ctx, src, audit.Options{})
	if err != nil {
		return audit.Checkpoint{}, err
	}
	if rep.Break != nil {
		return audit.Checkpoint{}, fmt.Errorf("no checkpoint: %w", rep.Break)
	}
	return audit.Sign(key, rep.Ends, time.Now())
}

// checkpointer writes a checkpoint to the configured file and/or URL every
// interval until ctx ends, and once more then (serve ends its background
// work only after the HTTP server has stopped). Failures are logged; the
// next interval tries again.
func (a *app) checkpointer(ctx context.Context, src audit.Source, key ed25519.PrivateKey) {
	c := a.cfg.Audit
	if c.CheckpointFile == "" && c.CheckpointURL == "" {
		return
	}
	every := DefaultCheckpointInterval
	if c.CheckpointInterval != "" {
		every, _ = time.ParseDuration(c.CheckpointInterval) // checked by layerHardening
	}
	write := func(ctx context.Context) {
		cp, err := makeCheckpoint(ctx, src, key)
		if err != nil {
			if ctx.Err() != nil {
				return // the server is stopping: the last checkpoint follows
			}
			a.log.Error("audit checkpoint", "err", err)
			return
		}
		if c.CheckpointFile != "" {
			if err := audit.WriteCheckpointFile(c.CheckpointFile, cp); err != nil {
				a.log.Error("audit checkpoint: write file", "file", c.CheckpointFile, "err", err)
			}
		}
		if c.CheckpointURL != "" {
			if err := postCheckpoint(ctx, c.CheckpointURL, cp); err != nil {
				a.log.Error("audit checkpoint: post", "url", c.CheckpointURL, "err", err)
			}
		}
		a.log.Info("audit checkpoint written", "tenants", len(cp.Heads), "key", cp.KeyID)
	}
	write(ctx)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			// The server has stopped taking requests: one last checkpoint
			// signs every record written before the store closes.
			last, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			write(last)
			cancel()
			return
		case <-t.C:
			write(ctx)
		}
	}
}

func postCheckpoint(ctx context.Context, u string, cp audit.Checkpoint) error {
	b, err := json.Marshal(cp)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s answered %s", u, resp.Status)
	}
	return nil
}
