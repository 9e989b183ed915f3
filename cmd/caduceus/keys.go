package main

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/caduceus-dev/caduceus/auth"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/shim/upstream"
)

func (a *app) keysCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "keys",
		Short: "Create, list and revoke API keys (works on the data directory; no server needed)",
		Example: `  caduceus keys create --tenant slot-1 --scopes route,configure --harness claude-code
  caduceus keys list
  caduceus keys revoke 3f9a0c1d2e4b5a67`,
	}
	var spec struct{ tenant, scopes, harness, context, account, models string }
	create := &cobra.Command{
		Use:   "create",
		Short: "Create a key and print it (alone, once) on stdout",
		Example: `  caduceus keys create --tenant slot-1 --scopes route,configure
  caduceus keys create --tenant slot-1 --scopes route --models openai/gpt-4.1,anthropic/claude-sonnet-4-5
  caduceus keys create --tenant slot-2 --scopes operate --context cron --data /srv/caduceus
  caduceus keys create --tenant slot-1 --scopes operate --context cron --harness autotrader --account 777000222`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			scopes, err := auth.ParseScopes(spec.scopes)
			if err != nil {
				return &exitError{2, fmt.Errorf("%s", userMessage(err))}
			}
			grants, err := upstream.ParseGrants(spec.models)
			if err != nil {
				return &exitError{2, fmt.Errorf("--models: %s", strings.TrimPrefix(err.Error(), "upstream: "))}
			}
			s := auth.Spec{Tenant: contract.TenantSlot(spec.tenant), Scopes: scopes, Harness: spec.harness, RunContext: contract.RunContext(spec.context), Account: spec.account, Grants: grants}
			if err := s.Validate(); err != nil {
				return &exitError{2, fmt.Errorf("%s", userMessage(err))}
			}
			db, err := a.openStore(cmd.Context())
			if err != nil {
				return err
			}
			defer db.Close()
			token, _, err := auth.NewService(db.Keys(), nil, 0).Create(cmd.Context(), s)
			if err != nil {
				return err
			}
			fmt.Fprintln(a.stdout, token)
			return nil
		},
	}
	create.Flags().StringVar(&spec.tenant, "tenant", "", "tenant slot, e.g. slot-1 (required)")
	create.Flags().StringVar(&spec.scopes, "scopes", "", "comma-separated scopes: route, configure, operate, admin (required)")
	create.Flags().StringVar(&spec.harness, "harness", "", "harness name the key attests (optional)")
	create.Flags().StringVar(&spec.context, "context", "", "run context: cron, chat or analyst (optional)")
	create.Flags().StringVar(&spec.account, "account", "", "bind the key to this broker account: its executor ticks (HTTP, MCP) trade it, and a tick naming another is refused 403 account_not_bound (optional)")
	create.Flags().StringVar(&spec.models, "models", "", "comma-separated provider/model grants for operator-funded LLM turns, e.g. openai/gpt-4.1,anthropic/claude-sonnet-4-5")
	create.MarkFlagRequired("tenant")
	create.MarkFlagRequired("scopes")

	list := &cobra.Command{
		Use:     "list",
		Short:   "List keys (never their secrets)",
		Example: "  caduceus keys list",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			db, err := a.openExistingStore(cmd.Context())
			if err != nil {
				return err
			}
			defer db.Close()
			keys, err := auth.NewService(db.Keys(), nil, 0).List(cmd.Context())
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tTENANT\tSCOPES\tHARNESS\tCONTEXT\tACCOUNT\tMODELS\tCREATED\tREVOKED")
			for _, k := range keys {
				var scopes []string
				for _, s := range k.Scopes {
					scopes = append(scopes, string(s))
				}
				revoked := "-"
				if k.RevokedAt != nil {
					revoked = contract.Timestamp(*k.RevokedAt)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", k.ID, k.Tenant, strings.Join(scopes, ","), orDefault(k.Harness, "-"), orDefault(string(k.RunContext), "-"), orDefault(k.Account, "-"), orDefault(strings.Join(k.Grants, ","), "-"), contract.Timestamp(k.CreatedAt), revoked)
			}
			return tw.Flush()
		},
	}
	revoke := &cobra.Command{
		Use:     "revoke KEYID",
		Short:   "Revoke a key",
		Example: "  caduceus keys revoke 3f9a0c1d2e4b5a67",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			db, err := a.openExistingStore(cmd.Context())
			if err != nil {
				return err
			}
			defer db.Close()
			if err := auth.NewService(db.Keys(), nil, 0).Revoke(cmd.Context(), args[0]); err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "revoked %s\n", args[0])
			return nil
		},
	}
	var grantTenant, grantModels string
	grant := &cobra.Command{
		Use:   "grant",
		Short: "Set the provider/model grants every key of a tenant holds (replaces the tenant's grants)",
		Example: `  caduceus keys grant --tenant slot-1 --models openai/gpt-4.1-mini
  caduceus keys grant --tenant slot-1 --models ""     # the tenant's keys keep only their own grants`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !contract.ValidTenantSlot(grantTenant) {
				return &exitError{2, fmt.Errorf("--tenant %q: want a tenant slot like slot-1", grantTenant)}
			}
			grants, err := upstream.ParseGrants(grantModels)
			if err != nil {
				return &exitError{2, fmt.Errorf("--models: %s", strings.TrimPrefix(err.Error(), "upstream: "))}
			}
			db, err := a.openStore(cmd.Context())
			if err != nil {
				return err
			}
			defer db.Close()
			if err := db.Keys().SetTenantGrants(cmd.Context(), contract.TenantSlot(grantTenant), grants); err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "%s: %s\n", grantTenant, orDefault(strings.Join(grants, ","), "no tenant grants"))
			return nil
		},
	}
	grant.Flags().StringVar(&grantTenant, "tenant", "", "tenant slot, e.g. slot-1 (required)")
	grant.Flags().StringVar(&grantModels, "models", "", "comma-separated provider/model pairs (required; empty clears)")
	grant.MarkFlagRequired("tenant")
	grant.MarkFlagRequired("models")
	cmd.AddCommand(create, list, revoke, grant)
	return cmd
}
