package loopback

import (
	"net"
	"strconv"
	"testing"
)

func TestPortsBelowTheEphemeralRange(t *testing.T) {
	low := ephemeralLow()
	ps, err := Ports(7, 20)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ps {
		if p >= low || p < low-span || p < 1024 {
			t.Errorf("port %d outside [%d, %d)", p, low-span, low)
		}
		if seen[p] {
			t.Errorf("port %d twice", p)
		}
		seen[p] = true
	}
}

// TestPortsSkipsATakenPort holds the first port of a draw and draws
// again with the same seed: the held port is not given.
func TestPortsSkipsATakenPort(t *testing.T) {
	first, err := Ports(11, 1)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(first[0]))
	if err != nil {
		t.Skipf("port %d taken meanwhile: %v", first[0], err)
	}
	defer l.Close()
	again, err := Ports(11, 3)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range again {
		if p == first[0] {
			t.Fatalf("port %d is held, and was given", p)
		}
	}
}

func TestParseRange(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int
		ok   bool
	}{
		{"32768\t60999\n", 32768, true},
		{"40000 60999", 40000, true},
		{"", 0, false},
		{"1024 65535", 0, false},
		{"x 60999", 0, false},
		{"70000 80000", 0, false},
	} {
		got, err := parseRange(c.in)
		if (err == nil) != c.ok || (c.ok && got != c.want) {
			t.Errorf("parseRange(%q) = %d, %v; want %d ok=%v", c.in, got, err, c.want, c.ok)
		}
	}
}

func TestClash(t *testing.T) {
	if !Clash([]byte("listen tcp 127.0.0.1:21000: bind: address already in use\n")) {
		t.Error("a bind failure is not seen as a clash")
	}
	if Clash([]byte("panic: nil map\n")) {
		t.Error("another failure is seen as a clash")
	}
}
