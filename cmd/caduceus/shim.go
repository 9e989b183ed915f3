package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/shim"
	"github.com/caduceus-dev/caduceus/shim/wire"
	"github.com/caduceus-dev/caduceus/store"
)

// shimConfig is the shim section of the config file.
type shimConfig struct {
	// Upstreams by provider: openai (chat completions, responses) and
	// anthropic (messages). Keys come from CADUCEUS_OPENAI_API_KEY and
	// CADUCEUS_ANTHROPIC_API_KEY, never from the file or a flag.
	Upstreams map[string]string `yaml:"upstreams"`
	// Offline: no provider is ever called (no forwarding, no remote tiers).
	Offline bool `yaml:"offline"`
	// ClassifierURL is an OpenAI-compatible chat endpoint for tier 3
	// (key: CADUCEUS_CLASSIFIER_API_KEY); empty: tier 3 never fires.
	ClassifierURL string `yaml:"classifier_url"`
	// EmbeddingsURL and EmbeddingsModel select an OpenAI-compatible
	// /v1/embeddings service for tier 2 (key: CADUCEUS_EMBEDDINGS_API_KEY);
	// empty: the deterministic local embedder.
	EmbeddingsURL   string `yaml:"embeddings_url"`
	EmbeddingsModel string `yaml:"embeddings_model"`
}

// shimService builds the shim over db from the configuration and the
// environment (provider keys, the edge secret).
func (a *app) shimService(db *store.DB) (*shim.Service, error) {
	c := a.cfg.Shim
	cfg := shim.Config{
		Store:      db.Shim(),
		Audit:      db.Audit(),
		Upstreams:  map[string]shim.Upstream{},
		Offline:    c.Offline,
		EdgeSecret: a.getenv("CADUCEUS_EDGE_SECRET"),
		Logger:     a.log,
	}
	for name, url := range c.Upstreams {
		var key string
		switch name {
		case "openai":
			key = a.getenv("CADUCEUS_OPENAI_API_KEY")
		case "anthropic":
			key = a.getenv("CADUCEUS_ANTHROPIC_API_KEY")
		default:
			return nil, &exitError{2, fmt.Errorf("upstream %q: want openai or anthropic", name)}
		}
		if !strings.HasPrefix(url, "http://") && !strings.HasPrefix(url, "https://") {
			return nil, &exitError{2, fmt.Errorf("upstream %s=%q: want an http(s) URL", name, url)}
		}
		cfg.Upstreams[name] = shim.Upstream{BaseURL: strings.TrimRight(url, "/"), APIKey: key}
	}
	if c.ClassifierURL != "" {
		cfg.Classifier = &shim.ChatClassifier{BaseURL: c.ClassifierURL, APIKey: a.getenv("CADUCEUS_CLASSIFIER_API_KEY")}
	}
	if c.EmbeddingsURL != "" {
		cfg.Embedder = &shim.OpenAIEmbedder{BaseURL: c.EmbeddingsURL, Model: c.EmbeddingsModel, APIKey: a.getenv("CADUCEUS_EMBEDDINGS_API_KEY")}
	}
	return shim.New(cfg), nil
}

// parseUpstreams turns --upstream openai=URL flags into the config map.
func parseUpstreams(flags []string) (map[string]string, error) {
	out := map[string]string{}
	for _, f := range flags {
		name, url, ok := strings.Cut(f, "=")
		if !ok || name == "" || url == "" {
			return nil, &exitError{2, fmt.Errorf("--upstream %q: want NAME=URL, e.g. openai=https://api.openai.com", f)}
		}
		out[name] = url
	}
	return out, nil
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
	withShim := func(ctx context.Context, fn func(*shim.Service, contract.Caller) error) error {
		if !contract.ValidTenantSlot(tenant) {
			return &exitError{2, fmt.Errorf("--tenant %q must look like slot-N", tenant)}
		}
		db, err := a.openStore(ctx)
		if err != nil {
			return err
		}
		defer db.Close()
		svc, err := a.shimService(db)
		if err != nil {
			return err
		}
		c := operatorCaller(contract.TenantSlot(tenant))
		c.Harness = harness
		return fn(svc, c)
	}

	provisions := &cobra.Command{Use: "provisions", Short: "Manage provisions and context entries"}
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
			return withShim(cmd.Context(), func(svc *shim.Service, c contract.Caller) error {
				rep, err := svc.Apply(cmd.Context(), c, c.Harness, doc)
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
			return withShim(cmd.Context(), func(svc *shim.Service, c contract.Caller) error {
				res, err := svc.DryRun(cmd.Context(), c, p, body)
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
	cmd.AddCommand(provisions, dryRun)
	return cmd
}
