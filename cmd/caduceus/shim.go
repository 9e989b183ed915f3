package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/guard/detect"
	"github.com/caduceus-dev/caduceus/server"
	"github.com/caduceus-dev/caduceus/shim"
	"github.com/caduceus-dev/caduceus/shim/gateway"
	"github.com/caduceus-dev/caduceus/shim/memory"
	"github.com/caduceus-dev/caduceus/shim/provsync"
	"github.com/caduceus-dev/caduceus/shim/shimsql"
	"github.com/caduceus-dev/caduceus/shim/wire"
	"github.com/caduceus-dev/caduceus/store"
)

// shimGate is the shim service with its memory and governance parts.
type shimGate struct {
	svc *shim.Service
	mem *memory.Memory
	gov *shim.Governor
	gw  *gateway.Gateway // nil without shim.routes
}

// syncer returns a Syncer for the server (allowlisted URLs only) or the CLI
// (any source, directories included).
func (g shimGate) syncer(a *app, db *store.DB, cli bool) *provsync.Syncer {
	cfg := provsync.Config{Governor: g.gov, Ledger: shimsql.NewMemory(db), MaxChars: a.cfg.Shim.MaxCharsCeiling, AllowDir: cli}
	if !cli {
		cfg.AllowURL = provsync.AllowPrefixes(a.cfg.Shim.SyncAllow)
	}
	return provsync.New(g.svc, cfg)
}

// shimService builds the shim over db from the configuration and the
// environment (provider keys, the edge secret).
func (a *app) shimService(db *store.DB) (shimGate, error) {
	c := a.cfg.Shim
	gov := &shim.Governor{Cohorts: map[contract.TenantSlot][]string{}}
	for t, cohorts := range c.Cohorts {
		if !contract.ValidTenantSlot(t) {
			return shimGate{}, &exitError{2, fmt.Errorf("shim.cohorts: %q is not a tenant slot", t)}
		}
		gov.Cohorts[contract.TenantSlot(t)] = cohorts
	}
	cfg := shim.Config{
		Store:     shimsql.New(db),
		Audit:     db.Audit(),
		Turns:     shimsql.New(db), // receipt and audit record in one transaction
		Upstreams: map[string]shim.Upstream{},
		Offline:   c.Offline,
		Logger:    a.log,
		Admit:     gov.Admit,
		AdmitOnly: shim.Governed, // the lens admits ungoverned provisions anyway
		Gateway:   a.gateway(db),
		Isolation: shim.Isolation(c.Isolation),
		// A receipt not stored because the store is down is a 503 with
		// Retry-After.
		Unavailable: store.IsUnavailable,
	}
	for name, url := range c.Upstreams {
		var key string
		switch name {
		case "openai":
			key = a.getenv("CADUCEUS_OPENAI_API_KEY")
		case "anthropic":
			key = a.getenv("CADUCEUS_ANTHROPIC_API_KEY")
		default:
			return shimGate{}, &exitError{2, fmt.Errorf("upstream %q: want openai or anthropic", name)}
		}
		if !strings.HasPrefix(url, "http://") && !strings.HasPrefix(url, "https://") {
			return shimGate{}, &exitError{2, fmt.Errorf("upstream %s=%q: want an http(s) URL", name, url)}
		}
		cfg.Upstreams[name] = shim.Upstream{BaseURL: strings.TrimRight(url, "/"), APIKey: key}
	}
	if c.ClassifierURL != "" {
		cfg.Classifier = &shim.ChatClassifier{BaseURL: c.ClassifierURL, APIKey: a.getenv("CADUCEUS_CLASSIFIER_API_KEY")}
	}
	if c.EmbeddingsURL != "" {
		cfg.Embedder = &shim.OpenAIEmbedder{BaseURL: c.EmbeddingsURL, Model: c.EmbeddingsModel, APIKey: a.getenv("CADUCEUS_EMBEDDINGS_API_KEY")}
	}
	if c.Guardrails.Active() {
		// The detectors are built here, once, not on a first request.
		det, err := detect.Default()
		if err != nil {
			return shimGate{}, err
		}
		cfg.Guardrails, cfg.Scanner, cfg.OnGuardrail = &c.Guardrails, det, server.GuardrailFinding
	}
	mem := memory.New(memory.Config{Store: shimsql.NewMemory(db), Rules: shimsql.New(db),
		Logf: func(format string, args ...any) { a.log.Warn(fmt.Sprintf(format, args...)) }})
	cfg.Observers = append(cfg.Observers, mem)
	if err := shim.CheckConfig(cfg); err != nil {
		return shimGate{}, &exitError{2, fmt.Errorf("%s", userMessage(err))}
	}
	return shimGate{svc: shim.New(cfg), mem: mem, gov: gov, gw: cfg.Gateway}, nil
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
	withShim := func(ctx context.Context, fn func(shimGate, *store.DB, contract.Caller) error) error {
		if !contract.ValidTenantSlot(tenant) {
			return &exitError{2, fmt.Errorf("--tenant %q must look like slot-N", tenant)}
		}
		return a.withStore(ctx, func(db *store.DB) error {
			g, err := a.shimService(db)
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
			return withShim(cmd.Context(), func(g shimGate, _ *store.DB, c contract.Caller) error {
				rep, err := g.svc.Apply(cmd.Context(), c, c.Harness, doc)
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
			return withShim(cmd.Context(), func(g shimGate, _ *store.DB, c contract.Caller) error {
				res, err := g.svc.DryRun(cmd.Context(), c, p, body)
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
			return withShim(cmd.Context(), func(g shimGate, db *store.DB, c contract.Caller) error {
				rep, err := g.syncer(a, db, true).Sync(cmd.Context(), c, harness, from)
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
