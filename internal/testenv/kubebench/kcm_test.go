package kubebench

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/rest"

	"github.com/ferry-upgrade/ferry/internal/testenv/kubetest"
)

// controllerRequests reads the controller manager's own count of its
// requests to the API server, by method (its rest_client_requests_total,
// every controller's client together): the DaemonSet controller's pod
// creates and deletes are what Kubernetes' rollout is made of, and what
// its client's rate limit (20 a second by default) bounds.
func controllerRequests(env *kubetest.Env, rc *rest.Config) (map[string]float64, error) {
	port, err := os.ReadFile(filepath.Join(env.Dir, "kcm-port"))
	if err != nil {
		return nil, err
	}
	// The controller manager serves with the certificate it made itself
	// in the control plane's cert directory.
	ca, err := os.ReadFile(filepath.Join(env.Dir, "certs", "kube-controller-manager.crt"))
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("no certificate in the controller manager's %s", "kube-controller-manager.crt")
	}
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}}}
	req, err := http.NewRequest(http.MethodGet, "https://127.0.0.1:"+strings.TrimSpace(string(port))+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+rc.BearerToken)
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("controller manager's /metrics: %s", resp.Status)
	}
	method := regexp.MustCompile(`method="([A-Z]+)"`)
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "rest_client_requests_total{") {
			continue
		}
		m := method.FindStringSubmatch(line)
		f := strings.Fields(line)
		if m == nil || len(f) < 2 {
			continue
		}
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			continue
		}
		out[m[1]] += v
	}
	return out, sc.Err()
}

// requests are a count of requests, in all and by method.
type requests struct {
	total    float64
	byMethod string
}

func (r requests) String() string { return fmt.Sprintf("%.0f (%s)", r.total, r.byMethod) }

// requestsSince is the requests of after beyond before.
func requestsSince(before, after map[string]float64) requests {
	var r requests
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(after)) {
		if d := after[k] - before[k]; d > 0 {
			r.total += d
			parts = append(parts, fmt.Sprintf("%s %.0f", k, d))
		}
	}
	r.byMethod = strings.Join(parts, ", ")
	return r
}

// controllerQPS is the controller manager's client's limit of requests
// a second: FERRY_KUBE_KCM_QPS (scripts/kube-testenv.sh), or its
// default of 20.
func controllerQPS() float64 {
	if v, err := strconv.ParseFloat(os.Getenv("FERRY_KUBE_KCM_QPS"), 64); err == nil && v > 0 {
		return v
	}
	return 20
}
