package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParse feeds Parse anything: it must not panic or hang, and an
// error must be an *Errors whose every problem names the file and has
// a line, unless it is about the whole file. A description it accepts
// must pass Validate again, and its helpers must work on it.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.yaml")
	bad, _ := filepath.Glob("testdata/bad/*.yaml") // every refusal, as seeds
	files = append(files, bad...)
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(base))
	for _, s := range []string{
		"", "---\n", "- a\n", "cluster: x\n", "a: &a [*a]\n", "policy: &a {<<: *a}\n",
		"cluster: x\ncomponents: [{name: a, members: [{name: m, host: h, address: 'a:1'}]}]\n",
		"cluster: !!binary aGVsbG8=\n", "{cluster: [x, {y: z}]}", "\xff\xfe", "cluster: \"\\u0000\"\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		const file = "fuzz.yaml"
		c, err := Parse(data, file)
		if err != nil {
			if c != nil {
				t.Fatal("Parse returned a cluster and an error")
			}
			var errs *Errors
			if !errors.As(err, &errs) || len(errs.Problems) == 0 {
				t.Fatalf("error %T %v, want a non-empty *Errors", err, err)
			}
			for _, p := range errs.Problems {
				if p.File != file {
					t.Fatalf("problem without the file: %+v", p)
				}
				if p.Line <= 0 && p.Path != "" {
					t.Fatalf("problem about a field without a line: %+v", p)
				}
				if p.Reason == "" {
					t.Fatalf("problem without a reason: %+v", p)
				}
			}
			if !strings.HasPrefix(err.Error(), file) {
				t.Fatalf("error does not start with the file: %v", err)
			}
			return
		}
		if c == nil {
			t.Fatal("Parse returned neither a cluster nor an error")
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("accepted description fails Validate: %v", err)
		}
		for _, comp := range c.ComponentsInOrder() {
			for i := range comp.Members {
				m := &comp.Members[i]
				if gc, gm := c.MemberOf(m.Name); gc != comp || gm != m {
					t.Fatalf("MemberOf(%s) is wrong", m.Name)
				}
				d := c.DataFor(comp, m)
				for _, a := range comp.Run.Args {
					if _, err := Render(a, d); err != nil {
						t.Fatalf("arg %q of %s passed Validate but does not render: %v", a, m.Name, err)
					}
				}
			}
			for _, r := range c.Releases {
				if _, ok := r.ArtifactFor(comp.Name); !ok {
					t.Fatalf("release %s has no artifact for %s", r.Version, comp.Name)
				}
			}
		}
	})
}
