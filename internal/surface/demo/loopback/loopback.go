// Package loopback picks ports on 127.0.0.1 for clusters that tests and
// the demo start themselves. Ports are taken below the kernel's
// ephemeral range: a port asked of the kernel with ":0" and released is
// in that range, where an outgoing connection (a health check, a client
// of another test) may take it between the check and the member's bind.
package loopback

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// span is how many ports below the ephemeral range are drawn from.
const span = 12000

// Ports picks n distinct ports at random from seed (the same seed, the
// same draw while the ports are free), each free on 127.0.0.1 when
// picked, all below the ephemeral range.
func Ports(seed uint64, n int) ([]int, error) {
	hi := ephemeralLow()
	lo := max(hi-span, 1024)
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	seen := map[int]bool{}
	var out []int
	for tries := 0; len(out) < n; tries++ {
		if tries > 10*span {
			return nil, fmt.Errorf("loopback: %d free ports wanted between %d and %d, found %d", n, lo, hi, len(out))
		}
		p := lo + r.IntN(hi-lo)
		if seen[p] {
			continue
		}
		seen[p] = true
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			continue
		}
		l.Close()
		out = append(out, p)
	}
	return out, nil
}

// Clash reports whether a process's output says its address was taken:
// the port was free when picked and another process bound it first.
func Clash(output []byte) bool {
	return strings.Contains(string(output), "address already in use")
}

// ephemeralLow is the first port of the kernel's ephemeral range
// (32768 when it cannot be read).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	low, err := parseRange(string(b))
	if err != nil {
		return 32768
	}
	return low
}

func parseRange(s string) (int, error) {
	f := strings.Fields(s)
	if len(f) != 2 {
		return 0, errors.New("want two numbers")
	}
	low, err := strconv.Atoi(f[0])
	if err != nil {
		return 0, err
	}
	if low < 1024+span/4 || low > 65535 {
		return 0, fmt.Errorf("range starts at %d", low)
	}
	return low, nil
}
