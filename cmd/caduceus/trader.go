package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/store"
	"github.com/caduceus-dev/caduceus/trader"
	"github.com/caduceus-dev/caduceus/trader/tradersql"
)

func (a *app) traderCmd() *cobra.Command {
	var tenant string
	cmd := &cobra.Command{
		Use:   "trader",
		Short: "Manage strategies and apply control decisions (works on the data directory)",
		Example: `  caduceus trader import strategies.yaml --tenant slot-1
  caduceus trader apply --payload decision.json
  caduceus trader history --concern qndd8o9ppop6:xrpusd`,
	}
	cmd.PersistentFlags().StringVar(&tenant, "tenant", "slot-1", "tenant slot the command acts in")
	caller := func() (contract.Caller, error) {
		if !contract.ValidTenantSlot(tenant) {
			return contract.Caller{}, &exitError{2, fmt.Errorf("--tenant %q must look like slot-N", tenant)}
		}
		return operatorCaller(contract.TenantSlot(tenant)), nil
	}

	importCmd := &cobra.Command{
		Use:   "import FILE",
		Short: "Load concerns and strategies from YAML or JSON; re-importing the same file changes nothing",
		Example: `  caduceus trader import strategies.yaml
  caduceus trader import strategies.json --tenant slot-2 --data /srv/caduceus`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := caller()
			if err != nil {
				return err
			}
			format, err := trader.FormatOf(args[0])
			if err != nil {
				return &exitError{2, fmt.Errorf("%s", userMessage(err))}
			}
			data, err := os.ReadFile(args[0])
			if err != nil {
				return &exitError{2, err}
			}
			return a.withTrader(cmd.Context(), func(svc *trader.Service) error {
				res, err := svc.Import(cmd.Context(), c, data, format)
				if err != nil {
					if contract.KindOf(err) == contract.KindInvalid {
						return &exitError{2, fmt.Errorf("%s: %s", args[0], userMessage(err))}
					}
					return err
				}
				return printJSON(a.stdout, res)
			})
		},
	}

	var payload, conversation string
	apply := &cobra.Command{
		Use:   "apply --payload FILE",
		Short: "Apply one control decision and print the response JSON (exit 0 for every contract status)",
		Example: `  caduceus trader apply --payload decision.json
  cat decision.json | caduceus trader apply --payload -`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := caller()
			if err != nil {
				return err
			}
			if c.Trace, err = a.cliTrace("cli trader apply", conversation); err != nil {
				return err
			}
			var raw []byte
			if payload == "-" {
				raw, err = io.ReadAll(io.LimitReader(a.stdin, trader.MaxRequestBytes+1))
			} else {
				raw, err = os.ReadFile(payload)
			}
			if err != nil {
				return &exitError{2, err}
			}
			return a.withTrader(cmd.Context(), func(svc *trader.Service) error {
				resp, err := svc.Apply(cmd.Context(), c, raw)
				if err != nil {
					return err
				}
				if err := printJSON(a.stdout, resp); err != nil {
					return err
				}
				if resp.NotARequest() {
					return &exitError{2, fmt.Errorf("%s is not a control decision request", payload)}
				}
				return nil
			})
		},
	}
	apply.Flags().StringVar(&payload, "payload", "", "the decision request JSON file, or - for stdin (required)")
	apply.Flags().StringVar(&conversation, "conversation", "", "the conversation the decision belongs to: a session key or conv_ id (default "+EnvSessionKey+")")
	apply.MarkFlagRequired("payload")

	var concern string
	var limit int
	history := &cobra.Command{
		Use:     "history",
		Short:   "Show decision attempts, newest first",
		Example: "  caduceus trader history --concern qndd8o9ppop6:xrpusd -n 20",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := caller()
			if err != nil {
				return err
			}
			if err := a.storeMustExist(); err != nil {
				return err
			}
			return a.withTrader(cmd.Context(), func(svc *trader.Service) error {
				list, err := svc.History(cmd.Context(), c.Identity.TenantSlot, concern, limit)
				if err != nil {
					return err
				}
				return printJSONLines(a.stdout, list)
			})
		},
	}
	history.Flags().StringVar(&concern, "concern", "", "only this concern (account_id:market_symbol)")
	history.Flags().IntVarP(&limit, "lines", "n", 50, "how many attempts")
	cmd.AddCommand(importCmd, apply, history)
	return cmd
}

// withTrader runs fn with the trader service over the store (withStore).
func (a *app) withTrader(ctx context.Context, fn func(*trader.Service) error) error {
	return a.withStore(ctx, func(db *store.DB) error {
		svc, err := trader.New(tradersql.New(db), trader.Options{Logger: a.log})
		if err != nil {
			return err
		}
		return fn(svc)
	})
}
