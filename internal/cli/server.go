package cli

import (
	"fmt"
	"log/slog"
	"net"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/ferry-upgrade/ferry/internal/server"
	"github.com/ferry-upgrade/ferry/internal/store"
)

func serverCmd(g *globals) *cobra.Command {
	var listen, cert, key string
	cmd := &cobra.Command{
		Use:   "server",
		Short: "run ferry as a server: the REST API (/v1), the dashboard and /metrics, driving upgrades",
		Long: `Run ferry as a long-running server over one cluster description and its data
directory: the REST API under /v1 (api/openapi.yaml), a live dashboard at
/dashboard/, and Prometheus metrics at /metrics. Upgrades started through the API
run in this process; an upgrade the store holds that has not ended is taken up
at start (and whenever no other ferry process drives it).

Every call but /v1/healthz and the dashboard's files needs the bearer token in
<data-dir>/api-token (created at the first start, mode 0600):
  curl -H "Authorization: Bearer $(cat .ferry/api-token)" http://127.0.0.1:7400/v1/members
The dashboard asks for it once per browser tab (or takes it from the address's
#token= fragment, which never leaves the browser).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.load()
			if err != nil {
				return err
			}
			d, err := newDriver(c, g.driverLogger())
			if err != nil {
				return err
			}
			st, err := store.Open(g.dataDir)
			if err != nil {
				return err
			}
			tokenPath := filepath.Join(g.dataDir, server.TokenFile)
			tok, created, err := server.LoadOrCreateToken(tokenPath)
			if err != nil {
				return err
			}
			level := slog.LevelWarn
			if g.verbose {
				level = slog.LevelInfo
			}
			logger := slog.New(slog.NewTextHandler(g.stderr, &slog.HandlerOptions{Level: level}))
			s, err := server.New(server.Config{Cluster: c, Driver: d, Store: st, Token: tok, Logger: logger})
			if err != nil {
				return err
			}
			if host, _, err := net.SplitHostPort(listen); err == nil && cert == "" {
				if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
					fmt.Fprintf(g.stderr, "ferry server: warning: listening on %s without TLS: the token travels in clear (--tls-cert, --tls-key)\n", listen)
				}
			}
			return s.ListenAndServe(cmd.Context(), server.ListenConfig{Addr: listen, CertFile: cert, KeyFile: key,
				OnListen: func(url string) {
					how := "read from"
					if created {
						how = "created in"
					}
					fmt.Fprintf(g.stdout, "ferry server: cluster %s, listening on %s\n  API:       %s/v1/ (token %s %s)\n  dashboard: %s/dashboard/\n  metrics:   %s/metrics\n",
						c.Name, url, url, how, tokenPath, url, url)
				}})
		},
	}
	cmd.Flags().StringVar(&listen, "listen", envOr("FERRY_LISTEN", "127.0.0.1:7400"), "address to listen on (env FERRY_LISTEN)")
	cmd.Flags().StringVar(&cert, "tls-cert", "", "TLS certificate file (PEM); with --tls-key, the server speaks HTTPS only")
	cmd.Flags().StringVar(&key, "tls-key", "", "TLS private key file (PEM)")
	return cmd
}
