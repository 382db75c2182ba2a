package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// badCorpus lists the bad descriptions of testdata/bad: one file
// NNN-short-name.yaml each, its expected problems in NNN-short-name.errors
// beside it (exactly what Parse says; -update rewrites them). A sibling
// file rather than a "# want:" comment, because a comment would change
// the files whose first bytes are the point (binary garbage, a UTF-16
// BOM, an empty file) and because the golden files are rewritten by
// -update and reviewed as a diff.
func badCorpus(t testing.TB) []string {
	t.Helper()
	files, err := filepath.Glob("testdata/bad/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// corpusDeadline bounds one parse: 'ferry validate' answers every
// corpus file within a second (the largest, and the templates that
// reach their bounds, parse in tens of milliseconds); the race
// detector is allowed its slowdown.
const corpusDeadline = raceSlowdown * time.Second

// TestBadCorpus parses every description of testdata/bad: each must be
// refused (none accepted), without a panic, within corpusDeadline, with
// exactly the problems of its .errors file, each naming the file and,
// when it is about a field, a line.
func TestBadCorpus(t *testing.T) {
	files := badCorpus(t)
	if len(files) < 150 {
		t.Errorf("%d bad descriptions in testdata/bad, want at least 150", len(files))
	}
	var accepted, panicked, hung, wrong int
	for _, path := range files {
		name := filepath.Base(path)
		t.Run(strings.TrimSuffix(name, ".yaml"), func(t *testing.T) {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			type result struct {
				c     *Cluster
				err   error
				panic any
			}
			done := make(chan result, 1)
			go func() {
				defer func() {
					if r := recover(); r != nil {
						done <- result{panic: r}
					}
				}()
				c, err := Parse(data, name)
				done <- result{c: c, err: err}
			}()
			var r result
			select {
			case r = <-done:
			case <-time.After(corpusDeadline):
				hung++
				t.Fatalf("Parse did not return within %s", corpusDeadline)
			}
			switch {
			case r.panic != nil:
				panicked++
				t.Fatalf("Parse panicked: %v", r.panic)
			case r.err == nil:
				accepted++
				t.Fatalf("accepted: a bad description must be refused")
			}
			var errs *Errors
			if !errors.As(r.err, &errs) || len(errs.Problems) == 0 || r.c != nil {
				t.Fatalf("Parse = %v, %T %v; want nil and a non-empty *Errors", r.c, r.err, r.err)
			}
			for _, p := range errs.Problems {
				if p.File != name || p.Reason == "" || (p.Path != "" && p.Line <= 0) {
					t.Errorf("problem without its file, line or reason: %+v", p)
				}
			}
			got := r.err.Error() + "\n"
			golden := strings.TrimSuffix(path, ".yaml") + ".errors"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (go test -run TestBadCorpus -update writes it)", err)
			}
			if got != string(want) {
				wrong++
				t.Errorf("problems:\n%s\nwant (%s; -update rewrites it):\n%s", got, golden, want)
			}
		})
	}
	if t.Failed() {
		t.Logf("%d descriptions: %d accepted, %d panics, %d hangs, %d with other problems than expected", len(files), accepted, panicked, hung, wrong)
	}
	// Every .errors file has its description.
	goldens, _ := filepath.Glob("testdata/bad/*.errors")
	for _, g := range goldens {
		if _, err := os.Stat(strings.TrimSuffix(g, ".errors") + ".yaml"); err != nil {
			t.Errorf("%s has no description: %v", g, err)
		}
	}
}
