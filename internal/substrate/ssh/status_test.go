package ssh

import (
	"strings"
	"testing"
	"time"
)

func TestParseStatus(t *testing.T) {
	in := "member\tkv-1\trunning\t4242\t1767225600000000000\t2.0.0\tabc\t-\n" +
		"member\tkv-2\tdown\t0\t1767225600000000000\t1.0.0\tdef\texited with status 3\n" +
		"member\tkv-3\tnone\t0\t-\t-\t-\tnever started by ferry\n" +
		"member\tkv-4\tadopted\t77\t-\t-\t-\tfound by its pid file\n"
	got, err := parseStatus([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	s1 := got["kv-1"].driverStatus("kv-1")
	if !s1.Running || s1.PID != 4242 || s1.Version != "2.0.0" || !s1.Since.Equal(time.Unix(1767225600, 0)) || s1.Detail != "" {
		t.Errorf("kv-1: %+v", s1)
	}
	if s2 := got["kv-2"].driverStatus("kv-2"); s2.Running || s2.Version != "1.0.0" || s2.Detail != "exited with status 3" {
		t.Errorf("kv-2: %+v", s2)
	}
	if s3 := got["kv-3"].driverStatus("kv-3"); s3.Running || s3.Version != "" {
		t.Errorf("kv-3: %+v", s3)
	}
	if s4 := got["kv-4"].driverStatus("kv-4"); !s4.Running || !s4.Adopted || s4.PID != 77 || s4.Version != "" {
		t.Errorf("kv-4: %+v", s4)
	}
	for _, bad := range []string{
		"member\tkv-1\trunning\t0\t-\t-\t-\t-",         // running without a pid
		"member\tkv-1\tdown\t12\t-\t-\t-\t-",           // down with one
		"member\tkv-1\tzombie\t1\t-\t-\t-\t-",          // unknown state
		"member\tkv-1\trunning\t1\tyesterday\t-\t-\t-", // since
		"member\tkv-1\trunning\t1\t-\t-\t-",            // 7 fields
		"ferry-ssh: flock not found",                   // not a status
		"member\tkv-1\tnone\t0\t-\t-\t-\t-\nmember\tkv-1\tnone\t0\t-\t-\t-\t-",
	} {
		if _, err := parseStatus([]byte(bad)); err == nil {
			t.Errorf("parseStatus(%q) accepted it", bad)
		} else if !strings.Contains(err.Error(), "line ") {
			t.Errorf("parseStatus(%q): %v, want the line named", bad, err)
		}
	}
}

// FuzzParseStatus: whatever a host answers, parsing it does not panic,
// and a member it accepts as running has a pid.
func FuzzParseStatus(f *testing.F) {
	f.Add([]byte("member\tkv-1\trunning\t4242\t1767225600000000000\t2.0.0\tabc\t-\n"))
	f.Add([]byte("member\tkv-3\tnone\t0\t-\t-\t-\tnever started by ferry\n"))
	f.Add([]byte("member\t\t\t\t\t\t\t\n"))
	f.Add([]byte("\n\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := parseStatus(b)
		if err != nil {
			return
		}
		for name, st := range got {
			ds := st.driverStatus(name)
			if ds.Running && ds.PID <= 0 {
				t.Fatalf("%s running with pid %d", name, ds.PID)
			}
		}
	})
}
