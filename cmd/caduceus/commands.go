package main

// The command tree, and run: the whole program.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"

	"github.com/caduceus-dev/caduceus/store"
	"github.com/spf13/cobra"
)

// run is the whole program: parse args, run the command, return the exit
// code. main only calls it; tests call it with their own args and writers.
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	a := &app{env: env{getenv: getenv, stdin: stdin, stdout: stdout, stderr: stderr}, cli: run}
	root := a.rootCmd()
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	for _, l := range a.locks {
		l.Close()
	}
	if err == nil {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil && ee.err.Error() != "" {
			fmt.Fprintln(stderr, "caduceus:", ee.err)
		}
		return ee.code
	}
	if strings.HasPrefix(err.Error(), "required flag") {
		// cobra's missing --flag: a usage error like any bad argument.
		fmt.Fprintln(stderr, "caduceus:", err)
		return 2
	}
	fmt.Fprintln(stderr, "caduceus:", userMessage(err))
	return 1
}

func (a *app) rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "caduceus",
		Short: "The governed edge of an AI agent",
		Long: `Caduceus stands between an AI agent and what it touches: chat platforms (relay),
LLM providers (shim) and a broker (trader, executor). Every crossing is
authenticated, scoped to one tenant, checked, idempotent and audited.`,
		Example: `  caduceus demo
  caduceus serve
  caduceus keys create --tenant slot-1 --scopes route,configure
  caduceus audit verify`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return a.loadConfig(cmd)
		},
	}
	pf := root.PersistentFlags()
	pf.StringVar(&a.cfg.Data, "data", "", "data directory (default ./.caduceus; env CADUCEUS_DATA)")
	pf.StringVar(&a.cfg.Store, "store", "", "store DSN: empty for SQLite in the data directory, sqlite:PATH (add ?synchronous=full for commits that wait for the disk), or postgres://... (env CADUCEUS_STORE)")
	pf.StringVar(&a.configFile, "config", "", "YAML config file (env CADUCEUS_CONFIG); flags win over environment, environment over file")
	pf.StringVar(&a.cfg.LogLevel, "log-level", "", "log level: debug, info, warn, error (env CADUCEUS_LOG_LEVEL)")
	pf.StringVar(&a.cfg.LogFormat, "log-format", "", "log format: text or json, one object a line (env CADUCEUS_LOG_FORMAT)")
	pf.StringVar(&a.cfg.NATS, "nats", "", "NATS URL routing relay sessions across processes, e.g. nats://127.0.0.1:4222 (env CADUCEUS_NATS)")
	root.AddCommand(a.versionCmd(), a.serveCmd(), a.healthCmd(), a.keysCmd(), a.spendCmd(), a.auditCmd(), a.backupCmd(), a.restoreCmd(), a.traceCmd(), a.traderCmd(), a.execCmd(), a.shimCmd(), a.relayCmd(), a.reloadCmd(), a.demoCmd(), a.benchCmd(), a.consoleCmd())
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &exitError{2, fmt.Errorf("%s: %w (see %s --help)", c.CommandPath(), err, c.CommandPath())}
	})
	root.CompletionOptions.DisableDefaultCmd = true
	strictArgs(root)
	return root
}

// strictArgs makes bad arguments exit 2 with one line, everywhere in the
// tree: a command that only groups subcommands refuses an unknown one
// (cobra would print help and exit 0), and a wrong number of arguments is
// a usage error, not a failure.
func strictArgs(c *cobra.Command) {
	if c.HasSubCommands() && c.Run == nil && c.RunE == nil {
		c.Args = cobra.ArbitraryArgs
		c.RunE = func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return &exitError{2, fmt.Errorf("unknown command %q for %q (see %s --help)", args[0], cmd.CommandPath(), cmd.CommandPath())}
			}
			return cmd.Help()
		}
	}
	if check := c.Args; check != nil {
		c.Args = func(cmd *cobra.Command, args []string) error {
			if err := check(cmd, args); err != nil {
				return &exitError{2, fmt.Errorf("%s: %w (see %s --help)", cmd.CommandPath(), err, cmd.CommandPath())}
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		strictArgs(sub)
	}
}

func (a *app) versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "Print the version and commit",
		Example: "  caduceus version",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v, c := buildInfo()
			fmt.Fprintf(a.stdout, "caduceus %s commit %s %s %s/%s schema %s\n", v, c, runtime.Version(), runtime.GOOS, runtime.GOARCH, store.SchemaVersion())
			return nil
		},
	}
}
