package server

import (
	"embed"
	"io/fs"
	"net/http"
)

// dashboardFS is the dashboard: one page, plain JavaScript and CSS, no
// build step and nothing loaded from elsewhere. Its files are public;
// everything it shows comes from the API, with the token.
//
//go:embed dashboard
var dashboardFS embed.FS

func (s *Server) dashboardRoutes(mux *http.ServeMux) {
	sub, err := fs.Sub(dashboardFS, "dashboard")
	if err != nil {
		panic(err) // the embedded directory is part of the binary
	}
	files := http.StripPrefix("/dashboard/", http.FileServerFS(sub))
	mux.Handle("GET /dashboard/", secureHeaders(files))
	mux.Handle("GET /{$}", http.RedirectHandler("/dashboard/", http.StatusFound))
}

// secureHeaders keeps the dashboard to its own files: no script from
// elsewhere, no inline script, no framing, no referrer (so that not
// even the page's address leaves it).
func secureHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("Referrer-Policy", "no-referrer")
		hd.Set("Cache-Control", "no-cache")
		h.ServeHTTP(w, r)
	})
}
