package buildinfo

import "testing"

func TestString(t *testing.T) {
	for _, c := range []struct {
		i    Info
		want string
	}{
		{Info{Version: "v1.2.0", Go: "go1.26.8", Revision: "6a05249c1d2e3f40", Modified: true}, "v1.2.0 (rev 6a05249c1d2e, modified; go1.26.8)"},
		{Info{Version: "(devel)", Go: "go1.26.8"}, "(devel) (go1.26.8)"},
		{Info{Version: "unknown"}, "unknown"},
	} {
		if got := c.i.String(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.i, got, c.want)
		}
	}
	if i := Read(); i.Version == "" || i.Go == "" {
		t.Errorf("Read() = %+v: no version or toolchain", i)
	}
}
