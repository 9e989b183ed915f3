package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/caduceus-dev/caduceus/store"
)

// Set by the linker: -ldflags "-X main.version=... -X main.commit=...".
var (
	version = "dev"
	commit  = ""
)

// env is the process environment as run sees it (injectable for tests).
type env struct {
	getenv func(string) string
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
}

type app struct {
	env
	// cli runs a command line in this process, as main does (commands.go's
	// run): the demo runs `caduceus audit verify` through it.
	cli        func(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int
	cfg        config
	locks      []*storeLock // store locks held until the command returns
	configFile string
	// moduleFlags are the values of the gates' sections' flags, by flag
	// name (layer.go's addSectionFlags).
	moduleFlags map[string]any
	auditFlags  auditConfig
	originFlags []string
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

// sqliteFile is the SQLite database file the configuration names, or ""
// for Postgres.
func (a *app) sqliteFile() string { return store.SQLiteFile(a.cfg.Store, a.cfg.Data) }
