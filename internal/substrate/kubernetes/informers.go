package kubernetes

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/ferry-upgrade/ferry/internal/substrate/driver"
)

// informers are the driver's watches: one shared informer per kind,
// namespace and selector the description's workloads name (a
// workload's object, filtered to its name or selector; its pods,
// filtered to its pod selector; a node pool's nodes, to its node
// selector), started the first time they are needed and kept until
// Close. Observe and Discover read these caches, so that an
// observation tick asks the API server nothing: the watches bring the
// changes. Writes (patch, delete, evict) go to the API server directly.
type informers struct {
	client      clientLister
	syncTimeout time.Duration

	mu     sync.Mutex
	stop   chan struct{}
	closed bool
	byKey  map[string]*watched
	// changed receives after any informer's cache changed (Driver's
	// Changed): one buffered wake stands for any number of changes.
	changed chan struct{}
}

// watched is one informer and the last error its list or watch met
// (said when it does not sync).
type watched struct {
	inf     cache.SharedIndexInformer
	lastErr atomic.Pointer[error]
	// syncBy is when the first wait for its sync ends: callers after it
	// are told at once that the cache is not synced, not held each tick.
	syncBy time.Time
}

func newInformers(c *Driver, syncTimeout time.Duration) *informers {
	return &informers{client: clientLister{c}, syncTimeout: syncTimeout, stop: make(chan struct{}), byKey: map[string]*watched{},
		changed: make(chan struct{}, 1)}
}

// close stops every informer.
func (in *informers) close() {
	in.mu.Lock()
	defer in.mu.Unlock()
	if !in.closed {
		in.closed = true
		close(in.stop)
	}
}

// store returns the synced cache of kind in ns (cluster-wide for
// nodes) filtered by the label selector sel and the field selector
// fsel, starting its informer the first time. A cache that does not
// sync within the sync timeout (or before ctx ends) is ErrUnreachable,
// with the last error its list or watch met.
func (in *informers) store(ctx context.Context, kind, ns, sel, fsel string) (cache.Store, error) {
	key := kind + "\x00" + ns + "\x00" + sel + "\x00" + fsel
	in.mu.Lock()
	if in.closed {
		in.mu.Unlock()
		return nil, fmt.Errorf("kubernetes driver: closed")
	}
	w, ok := in.byKey[key]
	if !ok {
		w = &watched{syncBy: time.Now().Add(in.syncTimeout)}
		opts := func(o *metav1.ListOptions) { o.LabelSelector, o.FieldSelector = sel, fsel }
		lw := &cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				opts(&o)
				return in.client.list(ctx, kind, ns, o)
			},
			WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				opts(&o)
				return in.client.watch(ctx, kind, ns, o)
			},
		}
		w.inf = cache.NewSharedIndexInformer(lw, exampleOf(kind), 0, cache.Indexers{})
		// Managed fields are most of a small object's bytes and the
		// driver reads none of them.
		_ = w.inf.SetTransform(stripManagedFields)
		_ = w.inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
			w.lastErr.Store(&err)
		})
		changed := func() {
			select {
			case in.changed <- struct{}{}:
			default:
			}
		}
		_, _ = w.inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { changed() },
			UpdateFunc: func(any, any) { changed() },
			DeleteFunc: func(any) { changed() },
		})
		in.byKey[key] = w
		go w.inf.Run(in.stop)
	}
	in.mu.Unlock()
	if w.inf.HasSynced() {
		return w.inf.GetStore(), nil
	}
	wctx, cancel := context.WithDeadline(ctx, w.syncBy)
	defer cancel()
	if !cache.WaitForCacheSync(wctx.Done(), w.inf.HasSynced) {
		what := fmt.Sprintf("the cache of %s in %q (selector %q, fields %q) not synced", kind, ns, sel, fsel)
		if ctx.Err() != nil {
			return nil, fmt.Errorf("kubernetes driver: %s: %w", what, ctx.Err())
		}
		if p := w.lastErr.Load(); p != nil {
			// Unreachable as any call's error is; refused (forbidden,
			// not found) is for the operator to fix, though the
			// informer keeps trying.
			return nil, apiError(ctx, *p, "%s", what)
		}
		return nil, fmt.Errorf("%w: kubernetes driver: %s within %s", driver.ErrUnreachable, what, in.syncTimeout)
	}
	return w.inf.GetStore(), nil
}

func stripManagedFields(o any) (any, error) {
	if m, ok := o.(metav1.Object); ok {
		m.SetManagedFields(nil)
	}
	return o, nil
}

// awaitCache waits until cond (a read of the caches) holds: after a
// write whose effect the next observation must see. The caches follow
// a watch, so this is milliseconds; past the sync timeout the cache is
// said to be behind (driver.ErrUnreachable).
func (d *Driver) awaitCache(ctx context.Context, what string, cond func() (bool, error)) error {
	deadline := time.Now().Add(d.cacheSync)
	for {
		ok, err := cond()
		if err != nil || ok {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: kubernetes driver: the cache does not show %s after %s", driver.ErrUnreachable, what, d.cacheSync)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kubernetes driver: waiting for the cache to show %s: %w", what, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// The kinds the driver watches besides the workloads.
const (
	watchPods = "Pod"
	watchNode = "Node"
)

func exampleOf(kind string) runtime.Object {
	switch kind {
	case kindStatefulSet:
		return &appsv1.StatefulSet{}
	case kindDaemonSet:
		return &appsv1.DaemonSet{}
	case kindDeployment:
		return &appsv1.Deployment{}
	case watchNode:
		return &corev1.Node{}
	}
	return &corev1.Pod{}
}

// clientLister lists and watches each kind through the driver's
// clientset.
type clientLister struct{ d *Driver }

func (c clientLister) list(ctx context.Context, kind, ns string, o metav1.ListOptions) (runtime.Object, error) {
	cs := c.d.watchClient
	switch kind {
	case kindStatefulSet:
		return cs.AppsV1().StatefulSets(ns).List(ctx, o)
	case kindDaemonSet:
		return cs.AppsV1().DaemonSets(ns).List(ctx, o)
	case kindDeployment:
		return cs.AppsV1().Deployments(ns).List(ctx, o)
	case watchNode:
		return cs.CoreV1().Nodes().List(ctx, o)
	}
	return cs.CoreV1().Pods(ns).List(ctx, o)
}

func (c clientLister) watch(ctx context.Context, kind, ns string, o metav1.ListOptions) (watch.Interface, error) {
	cs := c.d.watchClient
	switch kind {
	case kindStatefulSet:
		return cs.AppsV1().StatefulSets(ns).Watch(ctx, o)
	case kindDaemonSet:
		return cs.AppsV1().DaemonSets(ns).Watch(ctx, o)
	case kindDeployment:
		return cs.AppsV1().Deployments(ns).Watch(ctx, o)
	case watchNode:
		return cs.CoreV1().Nodes().Watch(ctx, o)
	}
	return cs.CoreV1().Pods(ns).Watch(ctx, o)
}

// cachedObjects is the objects of kind w names (filtered to its name,
// or its selector) from its informer, sorted by name. They are the
// cache's own: callers read them and never change them.
func cachedObjects[T any, P interface {
	*T
	GetName() string
}](ctx context.Context, d *Driver, w driver.Workload) ([]P, error) {
	var sel, fsel string
	if w.Name != "" {
		fsel = fields.OneTermEqualSelector("metadata.name", w.Name).String()
	} else {
		var err error
		if sel, err = parseSelector(w); err != nil {
			return nil, err
		}
	}
	st, err := d.watches.store(ctx, w.Kind, w.Namespace, sel, fsel)
	if err != nil {
		return nil, err
	}
	objs := st.List()
	out := make([]P, 0, len(objs))
	for _, o := range objs {
		if p, ok := o.(P); ok {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GetName() < out[j].GetName() })
	return out, nil
}

// cachedWorkload is the object of kind w names, from its informer
// (filtered to its name, or its selector); more or fewer than one
// matching is an error naming them.
func cachedWorkload[T any, P interface {
	*T
	GetName() string
}](ctx context.Context, d *Driver, w driver.Workload) (P, error) {
	objs, err := cachedObjects[T, P](ctx, d, w)
	if err != nil {
		return nil, err
	}
	if w.Name != "" && len(objs) == 0 {
		return nil, fmt.Errorf("kubernetes driver: %s not found", workloadString(w))
	}
	names := make([]string, len(objs))
	for i, o := range objs {
		names[i] = o.GetName()
	}
	if _, err := selectOne(w, names); err != nil {
		return nil, err
	}
	return objs[0], nil
}

// cachedPods is the pods of sel in w's namespace (of node alone unless
// node is ""), from the informer of that selector, sorted by name. The
// pods are the cache's own: read only.
func (d *Driver) cachedPods(ctx context.Context, w driver.Workload, sel *metav1.LabelSelector, node string) ([]*corev1.Pod, error) {
	st, err := d.podStore(ctx, w, sel)
	if err != nil {
		return nil, err
	}
	objs := st.List()
	ps := make([]*corev1.Pod, 0, len(objs))
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok && (node == "" || p.Spec.NodeName == node) {
			ps = append(ps, p)
		}
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i].Name < ps[j].Name })
	return ps, nil
}

// podStore is the synced cache of w's pods that sel selects.
func (d *Driver) podStore(ctx context.Context, w driver.Workload, sel *metav1.LabelSelector) (cache.Store, error) {
	s, err := podSelector(w, sel)
	if err != nil {
		return nil, err
	}
	return d.watches.store(ctx, watchPods, w.Namespace, s, "")
}

// cachedNodes is the nodes of a node pool's selector, sorted by name.
func (d *Driver) cachedNodes(ctx context.Context, w driver.Workload) ([]corev1.Node, error) {
	sel, err := labels.Parse(w.Selector)
	if err != nil {
		return nil, fmt.Errorf("kubernetes driver: %s: bad node selector: %w", workloadString(w), err)
	}
	st, err := d.watches.store(ctx, watchNode, "", sel.String(), "")
	if err != nil {
		return nil, err
	}
	objs := st.List()
	ns := make([]corev1.Node, 0, len(objs))
	for _, o := range objs {
		if n, ok := o.(*corev1.Node); ok {
			ns = append(ns, *n)
		}
	}
	sort.Slice(ns, func(i, j int) bool { return ns[i].Name < ns[j].Name })
	return ns, nil
}

// RequestCounter counts the requests a driver sends to the API server
// (a watch counts once, when it opens), by method: what an
// observation costs the API server, for the scale bench and the logs.
type RequestCounter struct {
	mu sync.Mutex
	n  map[string]int64
}

// Total is the number of requests so far.
func (c *RequestCounter) Total() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var t int64
	for _, n := range c.n {
		t += n
	}
	return t
}

// ByMethod is the number of requests so far per HTTP method (a LIST
// and a WATCH are both GETs; see the path's ?watch for which).
func (c *RequestCounter) ByMethod() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.n)
}

func (c *RequestCounter) add(method string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int64{}
	}
	c.n[method]++
}

// wrap is a rest.Config.WrapTransport that counts each request.
func (c *RequestCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return countingTransport{rt: rt, c: c}
}

type countingTransport struct {
	rt http.RoundTripper
	c  *RequestCounter
}

func (t countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	m := r.Method
	if r.URL.Query().Get("watch") == "true" {
		m = "WATCH"
	}
	t.c.add(m)
	return t.rt.RoundTrip(r)
}

// WrappedRoundTripper lets client-go reach the transport beneath (to
// cancel a request, for one).
func (t countingTransport) WrappedRoundTripper() http.RoundTripper { return t.rt }

var _ utilnet.RoundTripperWrapper = countingTransport{}
