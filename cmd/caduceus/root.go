package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/relay/connector"
	"github.com/caduceus-dev/caduceus/store"
)

// Set by the linker: -ldflags "-X main.version=... -X main.commit=...".
var (
	version = "dev"
	commit  = ""
)

// exitError carries an exit code through cobra.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }

// env is the process environment as run sees it (injectable for tests).
type env struct {
	getenv func(string) string
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
}

// config is what every command reads: file, then environment, then flags.
type config struct {
	Addr     string   `yaml:"addr"`
	Data     string   `yaml:"data"`
	Store    string   `yaml:"store"`
	Gates    []string `yaml:"gates"`
	LogLevel string   `yaml:"log_level"`
	// LogFormat is text (slog's key=value lines, the default) or json.
	LogFormat string `yaml:"log_format"`
	Executor  struct {
		Skills   string `yaml:"skills"`   // skills root of the strategist manifests
		Broker   string `yaml:"broker"`   // paper (default) or robinhood
		Scenario string `yaml:"scenario"` // paper scenario YAML
		MCPURL   string `yaml:"mcp_url"`  // Robinhood MCP server
	} `yaml:"executor"`
	Shim  shimConfig           `yaml:"shim"`
	Relay connector.FileConfig `yaml:"relay"`
	// NATS routes relay session ownership across connector processes.
	NATS string `yaml:"nats"`
	// Audit checkpoints written by serve (see docs/audit.md).
	Audit auditConfig `yaml:"audit"`
	// MCPAllowedOrigins are the browser origins /mcp accepts.
	MCPAllowedOrigins []string `yaml:"mcp_allowed_origins"`
}

type app struct {
	env
	cfg           config
	locks         []*storeLock // store locks held until the command returns
	configFile    string
	upstreamFlags []string
	auditFlags    auditConfig
	originFlags   []string
	// shutdownTimeout bounds serve's wait for requests in flight at a stop.
	shutdownTimeout time.Duration
	// otlpEndpoint is serve's --otlp-endpoint (telemetry.go).
	otlpEndpoint string
	log          *slog.Logger
	// cmd and flagCfg are the command run and the values its flags held
	// before the layering (loadConfig), so a reload layers the re-read file
	// under the same environment and flags.
	cmd     *cobra.Command
	flagCfg config
}

// run is the whole program: parse args, run the command, return the exit
// code. main only calls it; tests call it with their own args and writers.
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	a := &app{env: env{getenv: getenv, stdin: stdin, stdout: stdout, stderr: stderr}}
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

// userMessage is an error as an operator should read it: the contract
// error's own message, internal detail included (this is the operator's
// terminal, not a remote caller).
func userMessage(err error) string {
	if e, ok := errors.AsType[*contract.Error](err); ok && e.Kind != contract.KindInternal {
		if e.Field != "" && !strings.Contains(e.Message, e.Field) {
			return e.Field + ": " + e.Message
		}
		return e.Message
	}
	return err.Error()
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

// loadConfig layers file < environment < flags into a.cfg.
func (a *app) loadConfig(cmd *cobra.Command) error {
	a.cmd, a.flagCfg = cmd, a.cfg
	cfg, err := a.layerConfig()
	if err != nil {
		return err
	}
	a.cfg = cfg
	var level slog.Level
	if err := level.UnmarshalText([]byte(orDefault(cfg.LogLevel, "info"))); err != nil {
		return &exitError{2, fmt.Errorf("log level %q: want debug, info, warn or error", cfg.LogLevel)}
	}
	opts := &slog.HandlerOptions{Level: level}
	switch cfg.LogFormat {
	case "", "text":
		a.log = slog.New(slog.NewTextHandler(a.stderr, opts))
	case "json":
		a.log = slog.New(slog.NewJSONHandler(a.stderr, opts))
	default:
		return &exitError{2, fmt.Errorf("log format %q: want text or json", cfg.LogFormat)}
	}
	return nil
}

// configFileName is the config file named by --config or CADUCEUS_CONFIG
// ("": none).
func (a *app) configFileName() string {
	if a.configFile != "" {
		return a.configFile
	}
	return a.getenv("CADUCEUS_CONFIG")
}

// layerConfig reads the config file and layers the environment and the
// command's flags (as they were given, a.flagCfg) over it.
func (a *app) layerConfig() (config, error) {
	cmd, flags := a.cmd, a.flagCfg
	var cfg config
	if file := a.configFileName(); file != "" {
		var err error
		if cfg, err = readConfigFile(file); err != nil {
			return cfg, err
		}
	}
	envs := map[string]*string{
		"CADUCEUS_ADDR": &cfg.Addr, "CADUCEUS_DATA": &cfg.Data, "CADUCEUS_STORE": &cfg.Store, "CADUCEUS_LOG_LEVEL": &cfg.LogLevel, "CADUCEUS_LOG_FORMAT": &cfg.LogFormat,
		"CADUCEUS_SKILLS": &cfg.Executor.Skills, "CADUCEUS_BROKER": &cfg.Executor.Broker, "CADUCEUS_SCENARIO": &cfg.Executor.Scenario,
		"CADUCEUS_MCP_URL": &cfg.Executor.MCPURL, "CADUCEUS_NATS": &cfg.NATS,
	}
	for k, p := range envs {
		if v := a.getenv(k); v != "" {
			*p = v
		}
	}
	if v := a.getenv("CADUCEUS_GATES"); v != "" {
		cfg.Gates = splitList(v)
	}
	set := func(name string, dst *string, v string) {
		if f := cmd.Flags().Lookup(name); f != nil && f.Changed {
			*dst = v
		}
	}
	set("data", &cfg.Data, flags.Data)
	set("store", &cfg.Store, flags.Store)
	set("log-level", &cfg.LogLevel, flags.LogLevel)
	set("log-format", &cfg.LogFormat, flags.LogFormat)
	set("addr", &cfg.Addr, flags.Addr)
	set("skills", &cfg.Executor.Skills, flags.Executor.Skills)
	set("broker", &cfg.Executor.Broker, flags.Executor.Broker)
	set("scenario", &cfg.Executor.Scenario, flags.Executor.Scenario)
	set("mcp-url", &cfg.Executor.MCPURL, flags.Executor.MCPURL)
	set("nats", &cfg.NATS, flags.NATS)
	if f := cmd.Flags().Lookup("gates"); f != nil && f.Changed {
		cfg.Gates = flags.Gates
	}
	if f := cmd.Flags().Lookup("upstream"); f != nil && f.Changed {
		ups, err := parseUpstreams(a.upstreamFlags)
		if err != nil {
			return cfg, err
		}
		cfg.Shim.Upstreams = ups
	}
	if f := cmd.Flags().Lookup("offline"); f != nil && f.Changed {
		cfg.Shim.Offline = flags.Shim.Offline
	}
	if err := a.layerHardening(cmd, &cfg); err != nil {
		return cfg, err
	}
	if cfg.Data == "" {
		cfg.Data = ".caduceus"
	}
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:7600"
	}
	if len(cfg.Gates) == 0 {
		cfg.Gates = allGates
	}
	return cfg, nil
}

// openExistingStore opens the store for a command that must not create
// one (it reads, or changes what must already be there): with SQLite, the
// data directory and its database file must exist, else exit 2 naming
// them. A Postgres DSN names a database that exists by definition.
func (a *app) openExistingStore(ctx context.Context) (*store.DB, error) {
	if err := a.storeMustExist(); err != nil {
		return nil, err
	}
	return a.openStore(ctx)
}

func (a *app) storeMustExist() error {
	file := a.sqliteFile()
	if file == "" {
		return nil // Postgres, or a name Open refuses and explains
	}
	if file == store.SQLiteFile("", a.cfg.Data) {
		if _, err := os.Stat(a.cfg.Data); err != nil {
			return &exitError{2, fmt.Errorf("data directory %s does not exist (caduceus serve or caduceus keys create makes one; or pass --data)", a.cfg.Data)}
		}
	}
	if _, err := os.Stat(file); err != nil {
		return &exitError{2, fmt.Errorf("no store at %s (caduceus serve or caduceus keys create makes one; or pass --data)", file)}
	}
	return nil
}

// readConfigFile reads a YAML config file. Unknown keys are refused, and
// relative paths in it (data, store sqlite:PATH, executor.skills,
// executor.scenario) resolve from the file's own directory, so a config
// works from any working directory. Paths given by flags or the
// environment resolve from the working directory as usual.
func readConfigFile(file string) (config, error) {
	var cfg config
	b, err := os.ReadFile(file)
	if err != nil {
		return cfg, &exitError{2, fmt.Errorf("config: %w", err)}
	}
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil && !errors.Is(err, io.EOF) {
		return cfg, &exitError{2, fmt.Errorf("config %s: %w", file, err)}
	}
	dir := filepath.Dir(file)
	rel := func(p string) string {
		if p == "" || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(dir, p)
	}
	cfg.Data = rel(cfg.Data)
	cfg.Executor.Skills = rel(cfg.Executor.Skills)
	cfg.Executor.Scenario = rel(cfg.Executor.Scenario)
	if prefix, path, params := store.SplitSQLiteName(cfg.Store); prefix != "" {
		cfg.Store = prefix + rel(path) + params
	}
	return cfg, nil
}

func (a *app) openStore(ctx context.Context) (*store.DB, error) {
	// A SQLite store is held under its shared lock while it is open, so
	// restore can tell it is in use (storelock.go).
	var lock *storeLock
	if file := a.sqliteFile(); file != "" {
		var err error
		if lock, err = lockStore(file, false); errors.Is(err, errStoreInUse) {
			return nil, &exitError{1, fmt.Errorf("the store %s is being restored (caduceus restore holds %s.lock); try again when it has finished", file, file)}
		} else if err != nil {
			return nil, err
		}
	}
	db, err := store.Open(ctx, a.cfg.Store, a.cfg.Data)
	if err != nil {
		if lock != nil {
			lock.Close()
		}
		if e, ok := errors.AsType[*store.SchemaTooNewError](err); ok {
			v, c := buildInfo()
			return nil, &exitError{1, fmt.Errorf("this store's schema is %s, newer than %s of caduceus %s (commit %.12s), which does not know %s: run the release that wrote it, or a newer one; nothing was changed",
				e.Store, e.Binary, v, c, strings.Join(e.Unknown, ", "))}
		}
		return nil, err
	}
	if lock != nil {
		// Held until the command has returned (run), after the store's
		// last connection has closed.
		a.locks = append(a.locks, lock)
	}
	return db, nil
}

// withStore opens the store, runs fn with it and closes it.
func (a *app) withStore(ctx context.Context, fn func(*store.DB) error) error {
	db, err := a.openStore(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	return fn(db)
}

func splitList(s string) []string {
	var out []string
	for p := range strings.SplitSeq(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func buildInfo() (ver, rev string) {
	ver, rev = version, commit
	if info, ok := debug.ReadBuildInfo(); ok {
		if ver == "dev" && info.Main.Version != "" && info.Main.Version != "(devel)" {
			ver = info.Main.Version
		}
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" && rev == "" {
				rev = s.Value
			}
		}
	}
	if rev == "" {
		rev = "unknown"
	}
	return ver, rev
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
