package cli

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/ferry-upgrade/ferry/internal/run/buildinfo"
	"github.com/ferry-upgrade/ferry/internal/run/store"
	"github.com/ferry-upgrade/ferry/internal/run/store/etcdstore"
	"github.com/ferry-upgrade/ferry/internal/surface/server"
	"github.com/ferry-upgrade/ferry/internal/trust/bearer"
)

func serverCmd(g *globals) *cobra.Command {
	var listen, cert, key, storeURL, advertise, prefix, tokensFile string
	var leaseTTL time.Duration
	var roots []string
	var maxArtifact int64
	var importTimeout time.Duration
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
#token= fragment, which never leaves the browser).

With --tokens FILE, the server takes named tokens instead, one "NAME TOKEN" per
line (mode 0600; # comments), and no <data-dir>/api-token: a request's identity
is its token's name, and that name is who the server records as making a change
(an override's "by"), whatever the client says.

A release imported with POST /v1/releases names its artifacts by path: only
regular files under <data-dir>/artifacts (where PUT /v1/artifacts/{sha256}
uploads land) or under an --artifact-root are read, at most --max-artifact-size
bytes each.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if maxArtifact <= 0 {
				return fmt.Errorf("--max-artifact-size %d: want a number of bytes above 0", maxArtifact)
			}
			if importTimeout <= 0 {
				return fmt.Errorf("--import-timeout %s: want a duration above 0", importTimeout)
			}
			c, err := g.load()
			if err != nil {
				return err
			}
			d, err := newDriver(c, g.driverLogger())
			if err != nil {
				return err
			}
			if advertise == "" && strings.HasPrefix(storeURL, "etcd://") {
				scheme := "http://"
				if cert != "" {
					scheme = "https://"
				}
				advertise = scheme + listen
			}
			st, closeStore, err := openServerStore(storeURL, g.dataDir, prefix, c.Name, advertise, leaseTTL)
			if err != nil {
				return err
			}
			closeStore = sync.OnceFunc(closeStore)
			defer closeStore()
			var tok string
			var named []bearer.Named
			var created bool
			tokenPath := filepath.Join(g.dataDir, server.TokenFile)
			if tokensFile != "" {
				// Named tokens only: a data directory's token would be
				// one nobody is named by.
				if named, err = bearer.ReadNamed(tokensFile); err != nil {
					return err
				}
			} else if tok, created, err = server.LoadOrCreateToken(tokenPath); err != nil {
				return err
			}
			level := slog.LevelWarn
			if g.verbose {
				level = slog.LevelInfo
			}
			logger := slog.New(slog.NewTextHandler(g.stderr, &slog.HandlerOptions{Level: level}))
			s, err := server.New(server.Config{Cluster: c, Driver: d, Store: st, DataDir: g.dataDir, Advertise: advertise, Token: tok, Tokens: named, Logger: logger,
				ArtifactRoots: roots, MaxArtifactSize: maxArtifact, ImportTimeout: importTimeout})
			if err != nil {
				return err
			}
			if host, _, err := net.SplitHostPort(listen); err == nil && cert == "" {
				if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
					fmt.Fprintf(g.stderr, "ferry server: warning: listening on %s without TLS: the token travels in clear (--tls-cert, --tls-key)\n", listen)
				}
			}
			err = s.ListenAndServe(cmd.Context(), server.ListenConfig{Addr: listen, CertFile: cert, KeyFile: key,
				OnListen: func(url string) {
					how := "token read from " + tokenPath
					switch {
					case created:
						how = "token created in " + tokenPath
					case named != nil:
						how = fmt.Sprintf("%d named tokens from %s", len(named), tokensFile)
					}
					fmt.Fprintf(g.stdout, "ferry server: cluster %s, listening on %s\n  API:       %s/v1/ (%s)\n  dashboard: %s/dashboard/\n  metrics:   %s/metrics\n",
						c.Name, url, url, how, url, url)
				}})
			var re *server.ReexecError
			if errors.As(err, &re) {
				// ferry self-upgrade --servers: the store closed first (a
				// leader's lease revoked: an upgraded standby leads),
				// then this process runs the new ferry, same arguments.
				closeStore()
				fmt.Fprintf(g.stderr, "ferry server: re-executing on %s\n", re.Path)
				return buildinfo.Reexec(re.Path, os.Args[1:])
			}
			return err
		},
	}
	cmd.Flags().StringVar(&listen, "listen", envOr("FERRY_LISTEN", "127.0.0.1:7400"), "address to listen on (env FERRY_LISTEN)")
	cmd.Flags().StringVar(&storeURL, "store", envOr("FERRY_STORE", "bolt"), "where records, events and the catalog live: bolt (the data directory's file, one machine) or etcd://HOST:PORT,HOST:PORT,... (shared by several servers; env FERRY_STORE)")
	cmd.Flags().StringVar(&advertise, "advertise", "", "this server's URL as the other servers reach it, with --store etcd:// (default: http(s)://--listen)")
	cmd.Flags().StringVar(&prefix, "etcd-prefix", "", "the etcd key prefix of this cluster's records, with --store etcd:// (default /ferry/CLUSTER/)")
	cmd.Flags().DurationVar(&leaseTTL, "lease-ttl", 10*time.Second, "the leader's etcd lease, with --store etcd://: how long a dead leader's standbys wait (whole seconds)")
	cmd.Flags().StringVar(&tokensFile, "tokens", envOr("FERRY_TOKENS", ""), "a file of named tokens, \"NAME TOKEN\" per line (mode 0600), instead of DATA-DIR/api-token: each request's identity is its token's name (env FERRY_TOKENS)")
	cmd.Flags().StringVar(&cert, "tls-cert", "", "TLS certificate file (PEM); with --tls-key, the server speaks HTTPS only")
	cmd.Flags().StringVar(&key, "tls-key", "", "TLS private key file (PEM)")
	cmd.Flags().StringArrayVar(&roots, "artifact-root", nil, "a directory whose files releases imported through the API may name as artifacts (repeatable; DATA-DIR/artifacts, where uploads land, always is one)")
	cmd.Flags().Int64Var(&maxArtifact, "max-artifact-size", server.DefaultMaxArtifactSize, "the largest artifact, in bytes, an import reads or an upload accepts")
	cmd.Flags().DurationVar(&importTimeout, "import-timeout", server.DefaultImportTimeout, "how long checking an import's artifacts, or receiving an upload, may take")
	return cmd
}

// openServerStore opens the server's store: the data directory's bbolt
// file ("bolt", the default), or etcd (etcd://HOST:PORT,...) under
// prefix (default /ferry/CLUSTER/), elected with leases of ttl, the
// writer named by its advertised URL.
func openServerStore(storeURL, dataDir, prefix, cluster, advertise string, ttl time.Duration) (server.Store, func(), error) {
	if storeURL == "" || storeURL == "bolt" {
		st, err := store.Open(dataDir)
		return st, func() {}, err
	}
	rest, ok := strings.CutPrefix(storeURL, "etcd://")
	if !ok {
		return nil, nil, fmt.Errorf("--store %q: want bolt or etcd://HOST:PORT[,HOST:PORT...]", storeURL)
	}
	var endpoints []string
	for _, hp := range strings.Split(rest, ",") {
		if _, _, err := net.SplitHostPort(hp); err != nil {
			return nil, nil, fmt.Errorf("--store %q: endpoint %q: want HOST:PORT: %v", storeURL, hp, err)
		}
		endpoints = append(endpoints, "http://"+hp)
	}
	if ttl < time.Second || ttl%time.Second != 0 {
		return nil, nil, fmt.Errorf("--lease-ttl %s: want whole seconds, at least 1s", ttl)
	}
	if prefix == "" {
		prefix = "/ferry/" + cluster + "/"
	}
	if !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	st, err := etcdstore.Open(etcdstore.Config{Endpoints: endpoints, Prefix: prefix, Name: advertise, TTL: int(ttl / time.Second)})
	if err != nil {
		return nil, nil, err
	}
	return st, func() { st.Close() }, nil
}
