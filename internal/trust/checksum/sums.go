package checksum

import (
	"bufio"
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
)

// A Sum is one file's SHA-256, its path relative to the directory
// summed.
type Sum struct {
	Path   string
	SHA256 string
}

// Dir returns the SHA-256 of every regular file under dir, in path
// order, leaving out the files named in skip (relative paths). Anything
// else than a regular file or a directory under dir (a symlink, a FIFO,
// a device) is refused: a backup holds files, and hashing a FIFO would
// block.
func Dir(ctx context.Context, dir string, skip ...string) ([]Sum, error) {
	var out []Sum
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		for _, s := range skip {
			if rel == s {
				return nil
			}
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s is not a regular file (%s)", p, d.Type())
		}
		sum, err := FileContext(ctx, p)
		if err != nil {
			return err
		}
		out = append(out, Sum{Path: rel, SHA256: sum})
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// FormatSums writes sums as sha256sum does: "HEX  PATH" lines.
func FormatSums(sums []Sum) string {
	var b strings.Builder
	for _, s := range sums {
		b.WriteString(s.SHA256 + "  " + s.Path + "\n")
	}
	return b.String()
}

// ParseSums reads sha256sum's lines ("HEX  PATH", or "HEX *PATH" for
// its binary mode; blank lines skipped), each problem named by its
// line. name names the text in errors.
func ParseSums(text, name string) ([]Sum, error) {
	var out []Sum
	sc := bufio.NewScanner(strings.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimRight(sc.Text(), "\r")
		if strings.TrimSpace(line) == "" {
			continue
		}
		sum, path, ok := strings.Cut(line, " ")
		path = strings.TrimPrefix(strings.TrimPrefix(path, " "), "*")
		if !ok || len(sum) != 64 || strings.Trim(strings.ToLower(sum), "0123456789abcdef") != "" || path == "" {
			return nil, fmt.Errorf("%s:%d: not a sha256sum line (64 hex digits, two spaces, a path): %q", name, n, truncate(line, 100))
		}
		out = append(out, Sum{Path: strings.TrimPrefix(filepath.ToSlash(path), "./"), SHA256: strings.ToLower(sum)})
	}
	return out, sc.Err()
}

// Compare says how got differs from want ("" when they list the same
// files with the same sums): the first file missing, extra or
// different.
func Compare(got, want []Sum) string {
	w := map[string]string{}
	for _, s := range want {
		w[s.Path] = s.SHA256
	}
	g := map[string]bool{}
	for _, s := range got {
		g[s.Path] = true
		switch ws, ok := w[s.Path]; {
		case !ok:
			return fmt.Sprintf("%s is not listed", s.Path)
		case ws != s.SHA256:
			return fmt.Sprintf("%s has SHA-256 %s, listed as %s", s.Path, s.SHA256, ws)
		}
	}
	for _, s := range want {
		if !g[s.Path] {
			return fmt.Sprintf("%s is listed but missing", s.Path)
		}
	}
	return ""
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
