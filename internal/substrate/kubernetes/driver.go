package kubernetes

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/ferry-upgrade/ferry/internal/substrate/driver"
)

// Annotations the driver writes on pod templates (and so on pods).
const (
	// AnnotationVersion is the version of the artifact the template
	// was given.
	AnnotationVersion = "ferry.dev/version"
	// AnnotationImage is the image reference written with it: the
	// version annotation holds for a pod only while it runs that image.
	AnnotationImage = "ferry.dev/image"
)

// RBAC is the ClusterRole the driver needs (rbac.yaml).
//
//go:embed rbac.yaml
var RBAC string

// Defaults.
const (
	// DefaultDrainTimeout bounds a node's drain when the workload
	// gives none.
	DefaultDrainTimeout = 5 * time.Minute
	// DefaultSyncTimeout bounds the wait, in Start, for a controller to
	// take in a changed template before a pod is deleted.
	DefaultSyncTimeout = 30 * time.Second
)

// Config says how to reach the API server.
type Config struct {
	// Kubeconfig is a kubeconfig file; empty means $KUBECONFIG, then
	// the in-cluster service account.
	Kubeconfig string
	// Context picks a context of the kubeconfig (default: its current).
	Context string
	// Logger receives what the driver does that the engine does not
	// see (strategy changes, refused evictions); nil discards it.
	Logger *slog.Logger
}

// Driver drives Kubernetes workloads and nodes.
type Driver struct {
	client kubernetes.Interface
	// watchClient serves the informers: no overall timeout, which would
	// cut every watch after it and make the informer list again.
	watchClient kubernetes.Interface
	watches     *informers
	requests    *RequestCounter
	log         *slog.Logger
	poll        time.Duration
	evictRetry  time.Duration
	syncTimeout time.Duration
	cacheSync   time.Duration

	mu       sync.Mutex
	rollouts map[string]*rollout // Deployments with Starts in progress
	keep     *keeper             // the output of the pods it replaces

	revsMu sync.Mutex            // one list of revisions at a time
	revs   map[string]*revisions // DaemonSets' template revisions (in place)
}

var (
	_ driver.Driver     = (*Driver)(nil)
	_ driver.Discoverer = (*Driver)(nil)
)

// Option configures a Driver.
type Option func(*Driver)

// WithLogger makes the driver log to l.
func WithLogger(l *slog.Logger) Option { return func(d *Driver) { d.log = l } }

// WithPollInterval sets how often the driver looks again while it
// waits (a node's new version, a controller's sync). Default 500ms.
func WithPollInterval(p time.Duration) Option { return func(d *Driver) { d.poll = p } }

// WithCacheSyncTimeout bounds the first wait for an informer's cache
// to sync (Observe's and Discover's first reads); past it, reads of a
// cache not synced fail at once with driver.ErrUnreachable. Default 30s.
func WithCacheSyncTimeout(t time.Duration) Option { return func(d *Driver) { d.cacheSync = t } }

// WithEvictionRetry sets the pause between two tries of an eviction a
// PodDisruptionBudget refused. Default 2s.
func WithEvictionRetry(p time.Duration) Option { return func(d *Driver) { d.evictRetry = p } }

// New returns a driver for the cluster cfg names: cfg.Kubeconfig, else
// $KUBECONFIG, else the in-cluster service account. ~/.kube/config is
// not read implicitly: which cluster ferry upgrades is never a guess.
func New(cfg Config) (*Driver, error) {
	var rc *rest.Config
	var err error
	switch {
	case cfg.Kubeconfig != "" || os.Getenv(clientcmd.RecommendedConfigPathEnvVar) != "":
		// With $KUBECONFIG set, the default rules read its files (and
		// not ~/.kube/config); an explicit path wins over both.
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		rules.ExplicitPath = cfg.Kubeconfig
		rc, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules,
			&clientcmd.ConfigOverrides{CurrentContext: cfg.Context}).ClientConfig()
	default:
		if cfg.Context != "" {
			return nil, fmt.Errorf("kubernetes driver: context %q given but no kubeconfig (set kubeconfig or $KUBECONFIG)", cfg.Context)
		}
		rc, err = rest.InClusterConfig()
		if errors.Is(err, rest.ErrNotInCluster) {
			return nil, fmt.Errorf("kubernetes driver: no kubeconfig given, $KUBECONFIG unset and not in a cluster: %w", err)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("kubernetes driver: %w", err)
	}
	var opts []Option
	if cfg.Logger != nil {
		opts = append(opts, WithLogger(cfg.Logger))
	}
	return NewForConfig(rc, opts...)
}

// NewForConfig returns a driver for the API server rc reaches.
func NewForConfig(rc *rest.Config, opts ...Option) (*Driver, error) {
	rc = rest.CopyConfig(rc)
	if rc.UserAgent == "" {
		rc.UserAgent = "ferry"
	}
	if rc.Timeout == 0 {
		// A last bound for a request; Start's long waits are loops of
		// short requests.
		rc.Timeout = time.Minute
	}
	if rc.QPS == 0 && rc.RateLimiter == nil {
		// client-go's default (5 requests/s, bursts of 10) starves a
		// batch of a hundred pods on a thousand nodes: each needs a
		// delete, and every observation a listing. The API server's own
		// priority and fairness still protects it.
		rc.QPS, rc.Burst = 100, 200
	}
	requests := &RequestCounter{}
	rc.Wrap(requests.wrap)
	c, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes driver: %w", err)
	}
	wc := rest.CopyConfig(rc)
	wc.Timeout = 0 // a watch ends when the reflector's timeoutSeconds says
	watch, err := kubernetes.NewForConfig(wc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes driver: %w", err)
	}
	d := newDriver(c, opts...)
	d.watchClient, d.requests = watch, requests
	return d, nil
}

func newDriver(c kubernetes.Interface, opts ...Option) *Driver {
	d := &Driver{
		client:      c,
		watchClient: c,
		requests:    &RequestCounter{},
		poll:        500 * time.Millisecond,
		evictRetry:  2 * time.Second,
		syncTimeout: DefaultSyncTimeout,
		cacheSync:   DefaultSyncTimeout,
		rollouts:    map[string]*rollout{},
		keep:        newKeeper(),
		revs:        map[string]*revisions{},
	}
	for _, o := range opts {
		o(d)
	}
	if d.log == nil {
		d.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	d.watches = newInformers(d, d.cacheSync)
	return d
}

// Changed receives after a change to any cache the driver watches
// (driver.Watcher): a pod's readiness is seen when the watch brings it,
// not at the engine's next tick. It has one reader, the run's observer;
// a second would share the wakes and see the rest at its tick.
func (d *Driver) Changed() <-chan struct{} { return d.watches.changed }

// Close stops the driver's informers (its only background work: a
// Deployment's gate is waited for within its Start).
func (d *Driver) Close() error {
	d.watches.close()
	return nil
}

// Requests counts the requests the driver has sent to the API server.
func (d *Driver) Requests() *RequestCounter { return d.requests }

// Discover lists the members of w (see the package doc for each kind).
func (d *Driver) Discover(ctx context.Context, component string, w driver.Workload) ([]driver.Member, error) {
	w = withDefaults(w)
	var ms []driver.Member
	var err error
	switch memberKind(w) {
	case kindStatefulSet:
		ms, err = d.discoverStatefulSet(ctx, w)
	case kindDaemonSet:
		ms, err = d.discoverDaemonSet(ctx, w)
	case kindDeployment:
		ms, err = d.discoverDeployment(ctx, w)
	case kindNodePool:
		ms, err = d.discoverNodePool(ctx, w)
	case kindDeploymentPerWorkload:
		ms, err = d.discoverPerWorkload(ctx, w)
	default:
		return nil, unknownKind(w)
	}
	if err != nil {
		return nil, err
	}
	if err := d.domains(ctx, ms); err != nil {
		return nil, err
	}
	for i := range ms {
		ms[i].Component = component
		wc := w
		ms[i].Workload = &wc
	}
	return ms, nil
}

// ZoneLabel is the node label a member's failure domain is read from:
// Kubernetes' well-known zone, which cloud providers and operators set.
const ZoneLabel = "topology.kubernetes.io/zone"

// domains sets each member's Domain to its node's zone (ZoneLabel), so
// that strategies and budgets by domain see Kubernetes' own topology,
// and its Labels to its node's (a flow's parts select by them), from
// one list of the nodes (a DaemonSet's thousand members are one
// request, not a thousand). A node without the label leaves its members
// without a domain.
func (d *Driver) domains(ctx context.Context, ms []driver.Member) error {
	if !slices.ContainsFunc(ms, func(m driver.Member) bool { return m.Host != "" }) {
		return nil
	}
	l, err := d.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return apiError(ctx, err, "listing the nodes for their zones")
	}
	labels := make(map[string]map[string]string, len(l.Items))
	for _, n := range l.Items {
		labels[n.Name] = n.Labels
	}
	for i := range ms {
		ms[i].Domain, ms[i].Labels = labels[ms[i].Host][ZoneLabel], labels[ms[i].Host]
	}
	return nil
}

// Observe reports the members' statuses from the driver's informers'
// caches: an observation asks the API server nothing once they are
// synced (the first waits for that; a cache that does not sync is
// driver.ErrUnreachable).
func (d *Driver) Observe(ctx context.Context, members []driver.Member) ([]driver.Status, error) {
	out := make([]driver.Status, len(members))
	groups := map[string][]int{}
	var order []string
	for i, m := range members {
		if m.Workload == nil {
			return nil, fmt.Errorf("kubernetes driver: member %s has no workload", m.Name)
		}
		k := workloadKey(withDefaults(*m.Workload))
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], i)
	}
	for _, k := range order {
		idx := groups[k]
		w := withDefaults(*members[idx[0]].Workload)
		ms := make([]driver.Member, len(idx))
		for j, i := range idx {
			ms[j] = members[i]
		}
		var st []driver.Status
		var err error
		switch memberKind(w) {
		case kindStatefulSet:
			st, err = d.observeStatefulSet(ctx, w, ms)
		case kindDaemonSet:
			st, err = d.observeDaemonSet(ctx, w, ms)
		case kindDeployment:
			st, err = d.observeDeployment(ctx, w, ms)
		case kindNodePool:
			st, err = d.observeNodePool(ctx, w, ms)
		case kindDeploymentPerWorkload:
			st, err = d.observePerWorkload(ctx, w, ms)
		default:
			err = unknownKind(w)
		}
		if err != nil {
			return nil, err
		}
		for j, i := range idx {
			st[j].Name = members[i].Name
			out[i] = st[j]
		}
	}
	return out, nil
}

// Start puts m on a. For workloads it returns once the change is made
// (the engine watches the member come back); for a node it blocks
// through the drain, the upgrade and the node's return.
func (d *Driver) Start(ctx context.Context, m driver.Member, a driver.Artifact) error {
	if m.Workload == nil {
		return fmt.Errorf("kubernetes driver: member %s has no workload", m.Name)
	}
	w := withDefaults(*m.Workload)
	if w.Kind == kindNodePool {
		return d.startNode(ctx, w, m, a)
	}
	ref, err := ImageRef(a)
	if err != nil {
		return fmt.Errorf("kubernetes driver: member %s: %w", m.Name, err)
	}
	switch memberKind(w) {
	case kindStatefulSet:
		return d.startStatefulSet(ctx, w, m, a.Version, ref)
	case kindDaemonSet:
		return d.startDaemonSet(ctx, w, m, a.Version, ref)
	case kindDeployment:
		return d.startDeployment(ctx, w, m, a.Version, ref)
	case kindDeploymentPerWorkload:
		return d.startPerWorkload(ctx, w, m, a.Version, ref)
	}
	return unknownKind(w)
}

// StartReplaces: Start replaces a workload's pod itself (driver.Replacer);
// a pod Stop deleted would come back from its controller on the release
// it runs, only for Start to replace it again. A node pool's member is
// stopped by cordoning and draining its node, which Start does not do.
func (d *Driver) StartReplaces(m driver.Member) bool {
	return m.Workload != nil && withDefaults(*m.Workload).Kind != kindNodePool
}

// Stop takes m down. A pod comes back at once, on its template's
// version, since its controller replaces it: for a workload, Stop is a
// restart. A node is cordoned and drained, and stays so.
func (d *Driver) Stop(ctx context.Context, m driver.Member) error {
	if m.Workload == nil {
		return fmt.Errorf("kubernetes driver: member %s has no workload", m.Name)
	}
	w := withDefaults(*m.Workload)
	switch memberKind(w) {
	case kindStatefulSet:
		return d.stopStatefulSet(ctx, w, m)
	case kindDaemonSet:
		return d.stopDaemonSet(ctx, w, m)
	case kindDeployment:
		return d.stopDeployment(ctx, w, m)
	case kindNodePool:
		return d.stopNode(ctx, w, m)
	case kindDeploymentPerWorkload:
		return d.stopPerWorkload(ctx, w, m)
	}
	return unknownKind(w)
}

// apiError wraps an error of a call to the API server. Errors that say
// the server did not answer (a transport error, a proxy's or the
// server's 5xx, 429 throttling) wrap driver.ErrUnreachable: they are
// worth retrying and are no verdict on a member.
func apiError(ctx context.Context, err error, format string, args ...any) error {
	what := fmt.Sprintf(format, args...)
	if ctx.Err() != nil {
		return fmt.Errorf("kubernetes driver: %s: %w", what, err)
	}
	if unreachable(err) {
		return fmt.Errorf("%w: kubernetes driver: %s: %w", driver.ErrUnreachable, what, err)
	}
	return fmt.Errorf("kubernetes driver: %s: %w", what, err)
}

func unreachable(err error) bool {
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		// Not an answer of the API server: the request did not get one.
		return !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
	}
	code := st.Status().Code
	return code >= 500 || code == 429 || apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err)
}
