package main

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/caduceus-dev/caduceus/console"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/gate"
	"github.com/caduceus-dev/caduceus/store"
	"github.com/caduceus-dev/caduceus/trail"
)

func (a *app) consoleCmd() *cobra.Command {
	var keyID, base string
	var all bool
	var ttl time.Duration
	cmd := &cobra.Command{
		Use:   "console",
		Short: "Print a one-time login link to the operator console",
		Long: `Print a one-time login URL for the operator console (/console) of the server on
this data directory or store. The link is signed with the installation's
console secret, expires after --ttl and works once; opening it sets a session
cookie valid only under /console. --key KEYID opens the key's tenant (the key
must be active; revoking it ends the session); --all-tenants opens every
tenant (the operator's view).`,
		Example: `  caduceus console --key 3f9a0c1d2e4b5a67
  caduceus console --all-tenants --url https://caduceus.example.com`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if (keyID == "") == !all {
				return &exitError{2, fmt.Errorf("console: give --key KEYID (a key's tenant) or --all-tenants")}
			}
			if ttl <= 0 || ttl > console.MaxTokenTTL {
				return &exitError{2, fmt.Errorf("console: --ttl %s: want a duration from 1s to %s", ttl, console.MaxTokenTTL)}
			}
			db, err := a.openExistingStore(cmd.Context())
			if err != nil {
				return err
			}
			defer db.Close()
			u, err := a.consoleLoginURL(cmd.Context(), db, keyID, base, ttl, time.Now())
			if err != nil {
				return err
			}
			fmt.Fprintln(a.stdout, u)
			fmt.Fprintf(a.stderr, "caduceus: open it within %s; it works once\n", ttl)
			return nil
		},
	}
	cmd.Flags().StringVar(&keyID, "key", "", "the key whose tenant the console shows")
	cmd.Flags().BoolVar(&all, "all-tenants", false, "show every tenant (instead of --key)")
	cmd.Flags().StringVar(&base, "url", "", "the server's base URL (default http:// and the configured --addr)")
	cmd.Flags().DurationVar(&ttl, "ttl", console.DefaultTokenTTL, "how long the link may wait to be opened (at most 1h)")
	return cmd
}

// consoleLoginURL mints a login link for keyID's tenant (every tenant when
// keyID is empty) on the server at base (default: the configured address).
func (a *app) consoleLoginURL(ctx context.Context, db *store.DB, keyID, base string, ttl time.Duration, now time.Time) (string, error) {
	login := console.Login{AllTenants: true}
	if keyID != "" {
		k, err := db.Keys().Key(ctx, keyID)
		if err != nil {
			if contract.AsError(err).Kind == contract.KindNotFound {
				return "", &exitError{2, fmt.Errorf("console: no key %s (caduceus keys list shows them)", keyID)}
			}
			return "", err
		}
		if k.RevokedAt != nil {
			return "", &exitError{2, fmt.Errorf("console: key %s is revoked", keyID)}
		}
		login = console.Login{Tenant: k.Tenant, KeyID: k.ID}
	}
	secret, err := db.Console().Secret(ctx)
	if err != nil {
		return "", err
	}
	token, err := console.MintLogin(secret, login, now, ttl)
	if err != nil {
		return "", err
	}
	if base == "" {
		base = "http://" + a.cfg.Addr
	}
	if !strings.HasPrefix(base, "http://") && !strings.HasPrefix(base, "https://") {
		return "", &exitError{2, fmt.Errorf("console: --url %q: want http://HOST[:PORT] or https://...", base)}
	}
	return console.LoginURL(base, token), nil
}

// consoleHandler is serve's console over db, reading trails through
// trails (the API's reader), with the gates' pages.
func (a *app) consoleHandler(ctx context.Context, db *store.DB, trails trail.Reader, pages []gate.Page, signer ed25519.PrivateKey) (*console.Console, error) {
	cfg := console.Config{DB: db, Trails: trails, Pages: pages, Logger: a.log, CheckpointFile: a.cfg.Audit.CheckpointFile}
	if signer != nil {
		cfg.CheckpointKey = signer.Public().(ed25519.PublicKey)
	}
	return console.New(ctx, cfg)
}
