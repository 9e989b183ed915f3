package main

import (
	"encoding/json"
	"fmt"
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
  caduceus audit tail -n 20 --tenant slot-1`,
	}
	var tenant string
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
			rep, err := audit.Verify(cmd.Context(), db.Audit(), progress, tenants...)
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
				enc := json.NewEncoder(a.stdout)
				for _, r := range recs {
					if err := enc.Encode(r); err != nil {
						return err
					}
				}
				return nil
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "AT\tTENANT\tSEQ\tACTION\tOUTCOME\tRESOURCE\tREASON")
			for _, r := range recs {
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\n", r.Outcome.At, r.Tenant, r.Seq, r.Outcome.Action, r.Outcome.Outcome, r.Outcome.Resource, orDefault(r.Outcome.Reason, "-"))
			}
			return tw.Flush()
		},
	}
	tail.Flags().IntVarP(&n, "lines", "n", 20, "how many records")
	tail.Flags().BoolVar(&asJSON, "json", false, "one JSON record per line")
	tail.Flags().StringVar(&tailTenant, "tenant", "", "only this tenant")
	cmd.AddCommand(verify, tail)
	return cmd
}
