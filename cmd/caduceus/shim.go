package main

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/shim/shimserve"
	"github.com/caduceus-dev/caduceus/shim/wire"
	"github.com/caduceus-dev/caduceus/store"
)

// shimSection is the shim section of the configuration.
func (a *app) shimSection() *shimserve.Section { return a.sections().Of("shim").(*shimserve.Section) }

// shimParts builds the shim over db as serve does (shimserve.Open).
func (a *app) shimParts(db *store.DB) (shimserve.Parts, error) {
	p, err := shimserve.Open(a.host(db), a.shimSection())
	return p, asExit(err)
}

func (a *app) shimCmd() *cobra.Command {
	var tenant, harness string
	cmd := &cobra.Command{
		Use:   "shim",
		Short: "Manage shim provisions and dry-run requests (works on the data directory)",
		Example: `  caduceus shim provisions apply provisions.yaml --harness claude-code
  caduceus shim dry-run --protocol messages request.json`,
	}
	cmd.PersistentFlags().StringVar(&tenant, "tenant", "slot-1", "tenant slot the command acts in")
	withShim := func(ctx context.Context, fn func(shimserve.Parts, *store.DB, contract.Caller) error) error {
		if !contract.ValidTenantSlot(tenant) {
			return &exitError{2, fmt.Errorf("--tenant %q must look like slot-N", tenant)}
		}
		return a.withStore(ctx, func(db *store.DB) error {
			g, err := a.shimParts(db)
			if err != nil {
				return err
			}
			c := operatorCaller(contract.TenantSlot(tenant))
			c.Harness = harness
			return fn(g, db, c)
		})
	}

	provisions := &cobra.Command{
		Use:     "provisions",
		Short:   "Manage provisions and context entries",
		Example: "  caduceus shim provisions apply provisions.yaml --harness claude-code",
	}
	apply := &cobra.Command{
		Use:   "apply FILE",
		Short: "Create or update the provisions and context entries of a YAML or JSON bundle",
		Example: `  caduceus shim provisions apply provisions.yaml --harness claude-code
  caduceus shim provisions apply builtins.json --tenant slot-0`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			doc, err := os.ReadFile(args[0])
			if err != nil {
				return &exitError{2, err}
			}
			return withShim(cmd.Context(), func(g shimserve.Parts, _ *store.DB, c contract.Caller) error {
				rep, err := g.Service.Apply(cmd.Context(), c, c.Harness, doc)
				if err != nil {
					if contract.KindOf(err) == contract.KindInvalid {
						return &exitError{2, fmt.Errorf("%s: %s", args[0], userMessage(err))}
					}
					return err
				}
				if err := printJSON(a.stdout, rep); err != nil {
					return err
				}
				if n := rep.Failed(); n > 0 {
					return &exitError{1, fmt.Errorf("%d of %d items were not applied", n, len(rep.Items))}
				}
				return nil
			})
		},
	}
	apply.Flags().StringVar(&harness, "harness", "", "the harness the written provisions are attested for")
	provisions.AddCommand(apply)

	var protocol string
	dryRun := &cobra.Command{
		Use:   "dry-run --protocol chat|responses|messages FILE",
		Short: "Evaluate an LLM request against the tenant's provisions and print the decision (persists nothing, calls no provider)",
		Example: `  caduceus shim dry-run --protocol chat request.json
  caduceus shim dry-run --protocol messages request.json --tenant slot-2`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := wire.ParseProtocol(protocol)
			if err != nil {
				return &exitError{2, fmt.Errorf("--protocol %q: want chat, responses or messages", protocol)}
			}
			body, err := os.ReadFile(args[0])
			if err != nil {
				return &exitError{2, err}
			}
			if err := a.storeMustExist(); err != nil {
				return err
			}
			return withShim(cmd.Context(), func(g shimserve.Parts, _ *store.DB, c contract.Caller) error {
				res, err := g.Service.DryRun(cmd.Context(), c, p, body)
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
	dryRun.Flags().StringVar(&protocol, "protocol", "chat", "wire protocol of FILE: chat, responses or messages")
	var from string
	syncCmd := &cobra.Command{
		Use:   "sync --from DIR|URL|handshake+URL --harness H",
		Short: "Sync governed provisions and context entries from a provision source",
		Long: `Load provisions and context entries from a directory of JSON bundles, an
http(s) URL serving a bundle, or a provision server's handshake
(handshake+https://host). Only verified records whose visibility, cohort and
harness admit the tenant are taken; blobs are checked against their SHA-256;
every write is a compare-and-swap, so a newer local version is never
overwritten. The report lists what was taken, refused (with the reason) and
in conflict.`,
		Example: `  caduceus shim sync --from ./fabric --harness claude-code
  caduceus shim sync --from https://fabric.example.com/bundle.json --harness claude-code --tenant slot-2`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if harness == "" {
				return &exitError{2, fmt.Errorf("--harness is required: synced records are attested for a harness")}
			}
			return withShim(cmd.Context(), func(g shimserve.Parts, db *store.DB, c contract.Caller) error {
				rep, err := g.Syncer(db, a.shimSection(), true).Sync(cmd.Context(), c, harness, from)
				if err != nil {
					if contract.KindOf(err) == contract.KindInvalid {
						return &exitError{2, fmt.Errorf("%s", userMessage(err))}
					}
					return err
				}
				return printJSON(a.stdout, rep)
			})
		},
	}
	syncCmd.Flags().StringVar(&from, "from", "", "provision source: a directory, an http(s) URL, or handshake+http(s)://host (required)")
	syncCmd.Flags().StringVar(&harness, "harness", "", "the harness the synced records are attested for (required)")
	syncCmd.MarkFlagRequired("from")
	cmd.AddCommand(provisions, dryRun, syncCmd)
	return cmd
}
