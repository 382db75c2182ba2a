package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/ferry-upgrade/ferry/internal/trust/tlspin"
)

// ListenConfig says where and how the server listens.
type ListenConfig struct {
	Addr string
	// CertFile and KeyFile, both or neither: TLS when given.
	CertFile, KeyFile string
	// OnListen is called once the listener is open, with its URL
	// (http:// or https://, the real port when Addr asked for 0).
	OnListen func(url string)
}

// ListenAndServe starts the server's background work, serves until ctx
// ends, then shuts down: the event streams and the engine goroutine
// stop (the upgrade stays recorded and resumes at the next start), and
// requests in flight get a few seconds to finish.
func (s *Server) ListenAndServe(ctx context.Context, lc ListenConfig) error {
	if (lc.CertFile == "") != (lc.KeyFile == "") {
		return errors.New("server: TLS needs both a certificate and a key")
	}
	var tlsCfg *tls.Config
	if lc.CertFile != "" {
		cert, err := tlspin.LoadKeyPair(lc.CertFile, lc.KeyFile)
		if err != nil {
			return fmt.Errorf("server: %w", err)
		}
		tlsCfg = &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
	}
	ln, err := net.Listen("tcp", lc.Addr)
	if err != nil {
		return fmt.Errorf("server: listen: %w", err)
	}
	scheme := "http"
	if tlsCfg != nil {
		ln = tls.NewListener(ln, tlsCfg)
		scheme = "https"
	}
	if s.advertise == "" {
		s.advertise = scheme + "://" + ln.Addr().String()
	}
	if err := s.Start(); err != nil {
		ln.Close()
		return err
	}
	srv := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		// No WriteTimeout: the event stream sets its own per write.
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	if lc.OnListen != nil {
		lc.OnListen(scheme + "://" + ln.Addr().String())
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		s.Close()
		return err
	case <-ctx.Done():
	}
	s.Close() // ends the streams and the engine goroutine first
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Loopback serves on 127.0.0.1 on a free port until stop is called:
// the demo's server, and tests'. It returns the server's URL.
func (s *Server) Loopback(ctx context.Context) (url string, stop func(), err error) {
	sctx, cancel := context.WithCancel(ctx)
	urls := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- s.ListenAndServe(sctx, ListenConfig{Addr: "127.0.0.1:0", OnListen: func(u string) { urls <- u }})
	}()
	select {
	case u := <-urls:
		return u, func() { cancel(); <-done }, nil
	case err := <-done:
		cancel()
		return "", nil, err
	case <-time.After(30 * time.Second):
		cancel()
		return "", nil, errors.New("server: not listening after 30s")
	}
}
