package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

func (a *app) healthCmd() *cobra.Command {
	var url string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "health",
		Short: "Probe a running server's /healthz; exit 0 when it answers 200 (for container health checks)",
		Long: `Probe a running server: GET /healthz on the address serve listens on (--addr,
CADUCEUS_ADDR or the config's addr; 0.0.0.0 and :: are probed on loopback),
or on --url. Exit 0 when it answers 200 OK, 1 otherwise, with one line. A
container image built FROM scratch has no shell or curl: its HEALTHCHECK is
this command.`,
		Example: `  caduceus health
  caduceus health --url http://127.0.0.1:7600/healthz`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if url == "" {
				url = "http://" + probeAddr(a.cfg.Addr) + "/healthz"
			} else if !strings.HasPrefix(url, "http://") && !strings.HasPrefix(url, "https://") {
				return &exitError{2, fmt.Errorf("--url %q: want an http(s) URL", url)}
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			if err != nil {
				return &exitError{2, fmt.Errorf("--url %q: %w", url, err)}
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return &exitError{1, fmt.Errorf("unhealthy: %s: %w", url, err)}
			}
			defer resp.Body.Close()
			io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
			if resp.StatusCode != http.StatusOK {
				return &exitError{1, fmt.Errorf("unhealthy: %s answered %s", url, resp.Status)}
			}
			fmt.Fprintf(a.stdout, "ok: %s answered %s\n", url, resp.Status)
			return nil
		},
	}
	cmd.Flags().StringVar(&url, "url", "", "the URL to probe (default http://ADDR/healthz from the serve address)")
	cmd.Flags().StringVar(&a.cfg.Addr, "addr", "", "the address serve listens on (default 127.0.0.1:7600; env CADUCEUS_ADDR)")
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Second, "how long to wait for the answer")
	return cmd
}

// probeAddr is a listen address as a client reaches it: an unspecified
// host (0.0.0.0, ::, empty) is loopback.
func probeAddr(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}
