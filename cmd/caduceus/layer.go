package main

// The layering of the configuration: file < environment < flags.

import (
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/caduceus-dev/caduceus/gate/registry"
)

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
		"CADUCEUS_NATS": &cfg.NATS,
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
	set("nats", &cfg.NATS, flags.NATS)
	if f := cmd.Flags().Lookup("gates"); f != nil && f.Changed {
		cfg.Gates = flags.Gates
	}
	if err := a.layerSections(cmd, &cfg); err != nil {
		return cfg, err
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
		cfg.Gates = registry.Names()
	}
	return cfg, nil
}

// layerHardening layers the audit checkpoint and MCP origin settings
// (file < environment < flags) into cfg.
func (a *app) layerHardening(cmd *cobra.Command, cfg *config) error {
	for k, p := range map[string]*string{
		"CADUCEUS_AUDIT_CHECKPOINT_FILE":     &cfg.Audit.CheckpointFile,
		"CADUCEUS_AUDIT_CHECKPOINT_URL":      &cfg.Audit.CheckpointURL,
		"CADUCEUS_AUDIT_CHECKPOINT_INTERVAL": &cfg.Audit.CheckpointInterval,
	} {
		if v := a.getenv(k); v != "" {
			*p = v
		}
	}
	if v := a.getenv("CADUCEUS_MCP_ALLOWED_ORIGINS"); v != "" {
		cfg.MCPAllowedOrigins = splitList(v)
	}
	set := func(name string, dst *string, v string) {
		if f := cmd.Flags().Lookup(name); f != nil && f.Changed {
			*dst = v
		}
	}
	set("audit-checkpoint-file", &cfg.Audit.CheckpointFile, a.auditFlags.CheckpointFile)
	set("audit-checkpoint-url", &cfg.Audit.CheckpointURL, a.auditFlags.CheckpointURL)
	set("audit-checkpoint-interval", &cfg.Audit.CheckpointInterval, a.auditFlags.CheckpointInterval)
	if f := cmd.Flags().Lookup("mcp-allowed-origin"); f != nil && f.Changed {
		cfg.MCPAllowedOrigins = a.originFlags
	}
	if v := cfg.Audit.CheckpointInterval; v != "" {
		if d, err := time.ParseDuration(v); err != nil || d < time.Second {
			return &exitError{2, fmt.Errorf("audit checkpoint interval %q: want a duration of at least 1s, e.g. 5m", v)}
		}
	}
	if u := cfg.Audit.CheckpointURL; u != "" {
		if pu, err := url.Parse(u); err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
			return &exitError{2, fmt.Errorf("audit checkpoint URL %q: want http(s)://host/path", u)}
		}
	}
	return nil
}

// layerSections layers the environment and the command's flags over the
// gates' sections (file < environment < flags), each setting as its
// module declares it.
func (a *app) layerSections(cmd *cobra.Command, cfg *config) error {
	if cfg.sections == nil {
		cfg.sections = registry.Sections{}
	}
	for _, m := range registry.Modules() {
		for _, st := range m.Settings {
			var vals []string
			if v := a.getenv(st.Env); st.Env != "" && v != "" {
				vals = []string{v}
				if st.Kind == registry.Strings {
					vals = splitList(v)
				}
			}
			if f := cmd.Flags().Lookup(st.Flag); st.Flag != "" && f != nil && f.Changed {
				vals = a.sectionFlag(st)
			}
			if vals == nil {
				continue
			}
			if err := st.Set(cfg.sections.Of(m.Name), vals); err != nil {
				return &exitError{2, err}
			}
		}
	}
	return nil
}

// sectionFlag is the value given to a section's flag, as Setting.Set takes
// it.
func (a *app) sectionFlag(st registry.Setting) []string {
	switch v := a.moduleFlags[st.Flag].(type) {
	case *string:
		return []string{*v}
	case *bool:
		return []string{strconv.FormatBool(*v)}
	case *[]string:
		return *v
	}
	return nil
}

// addSectionFlags adds the flags of the gates' sections to serve.
func (a *app) addSectionFlags(cmd *cobra.Command) {
	if a.moduleFlags == nil {
		a.moduleFlags = map[string]any{}
	}
	for _, m := range registry.Modules() {
		for _, st := range m.Settings {
			if st.Flag == "" {
				continue
			}
			switch st.Kind {
			case registry.Bool:
				a.moduleFlags[st.Flag] = cmd.Flags().Bool(st.Flag, false, st.Usage)
			case registry.Strings:
				a.moduleFlags[st.Flag] = cmd.Flags().StringArray(st.Flag, nil, st.Usage)
			default:
				a.moduleFlags[st.Flag] = cmd.Flags().String(st.Flag, "", st.Usage)
			}
		}
	}
}
