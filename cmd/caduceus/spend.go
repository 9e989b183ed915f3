package main

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/shim/ledger"
	"github.com/caduceus-dev/caduceus/shim/upstream"
)

func (a *app) spendCmd() *cobra.Command {
	var tenant, key, since string
	cmd := &cobra.Command{
		Use:   "spend",
		Short: "Report the shim gateway's spend per key and model (works on the data directory; no server needed)",
		Example: `  caduceus spend --tenant slot-1
  caduceus spend --tenant slot-1 --key 3f9a0c1d2e4b5a67 --since 2026-11-01T00:00:00Z`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !contract.ValidTenantSlot(tenant) {
				return &exitError{2, fmt.Errorf("--tenant %q: want a tenant slot like slot-1", tenant)}
			}
			now := time.Now().UTC()
			from := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
			if since != "" {
				t, err := time.Parse(time.RFC3339, since)
				if err != nil {
					return &exitError{2, fmt.Errorf("--since %q: want an RFC 3339 time, e.g. 2026-11-01T00:00:00Z", since)}
				}
				from = t
			}
			db, err := a.openExistingStore(cmd.Context())
			if err != nil {
				return err
			}
			defer db.Close()
			rows, err := ledger.Of(db).Spend(cmd.Context(), contract.TenantSlot(tenant), key, from)
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintf(tw, "KEY\tMODEL\tATTEMPTS\tRESERVED $\tSETTLED $\tOPEN $\n")
			for _, r := range rows {
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", r.KeyID, r.Model, r.Attempts,
					upstream.Microdollars(r.Reserved), upstream.Microdollars(r.Settled), upstream.Microdollars(r.Open))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&tenant, "tenant", "", "tenant slot, e.g. slot-1 (required)")
	cmd.Flags().StringVar(&key, "key", "", "one key id (default: every key of the tenant)")
	cmd.Flags().StringVar(&since, "since", "", "count attempts from this RFC 3339 time (default: the start of the current UTC month)")
	cmd.MarkFlagRequired("tenant")
	return cmd
}
