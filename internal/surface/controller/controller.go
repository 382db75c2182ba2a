// Package controller is ferry inside a Kubernetes cluster: a
// controller-runtime manager whose reconciler drives each Upgrade
// resource with ferry's engine, keeping the engine's record in the
// resource's status (so that 'kubectl get upgrades' shows progress and
// a restarted or failed-over controller resumes from it). Leader
// election makes one replica act at a time.
package controller

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8sclient "k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	krecord "k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/ferry-upgrade/ferry/internal/core/config"
	"github.com/ferry-upgrade/ferry/internal/run/engine"
	"github.com/ferry-upgrade/ferry/internal/substrate/driver"
	"github.com/ferry-upgrade/ferry/internal/substrate/kubernetes"
)

// Options configure the controller.
type Options struct {
	// Namespace is where it watches Upgrades (and holds its lease).
	Namespace string
	// LeaderElection makes replicas take turns; LeaseDuration bounds how
	// long a dead leader blocks the next (default 15s).
	LeaderElection bool
	LeaseDuration  time.Duration
	// Identity names this replica in the lease (default: the host name).
	Identity string
	// Deployment is the controller's own Deployment in Namespace: what
	// it moves to a newer ferry image when a release requires one
	// (ferry first); empty: it asks the operator to.
	Deployment string
	// NewDriver builds the Kubernetes driver over the controller's own
	// connection.
	NewDriver func(*rest.Config) (driver.Driver, error)
	Logger    *slog.Logger
}

// Run starts the manager and blocks until ctx ends or leadership is
// lost (then it returns an error: the process should exit, and a
// restarted one campaigns again).
func Run(ctx context.Context, cfg *rest.Config, o Options) error {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Namespace == "" {
		return errors.New("controller: a namespace is required")
	}
	if o.LeaseDuration == 0 {
		o.LeaseDuration = 15 * time.Second
	}
	log.SetLogger(logrFromSlog(o.Logger))
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := AddToScheme(scheme); err != nil {
		return err
	}
	renew := o.LeaseDuration * 2 / 3
	retryPeriod := o.LeaseDuration / 5
	var lock resourcelock.Interface
	var lease *leaseHolder
	if o.LeaderElection {
		// The lock is built here, not by the manager, so that this
		// replica knows its identity in the Lease: its engines' fence.
		// A process is a holder of its own (the suffix): a restarted
		// replica on the same host takes a new term.
		var err error
		if lock, lease, err = leaseLock(cfg, o); err != nil {
			return err
		}
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                              scheme,
		Cache:                               cache.Options{DefaultNamespaces: map[string]cache.Config{o.Namespace: {}}},
		LeaderElection:                      o.LeaderElection,
		LeaderElectionID:                    leaseName,
		LeaderElectionNamespace:             o.Namespace,
		LeaderElectionReleaseOnCancel:       true,
		LeaderElectionResourceLockInterface: lock,
		LeaseDuration:                       &o.LeaseDuration,
		RenewDeadline:                       &renew,
		RetryPeriod:                         &retryPeriod,
		Metrics:                             metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:              "0",
	})
	if err != nil {
		return fmt.Errorf("controller: manager: %w", err)
	}
	events, stopEvents, err := newEventRecorder(cfg, scheme)
	if err != nil {
		return err
	}
	defer stopEvents()
	r := &Reconciler{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Rest: cfg, NewDriver: o.NewDriver, Logger: o.Logger,
		Events: events, lease: lease}
	if o.Deployment != "" {
		r.Deployment = types.NamespacedName{Namespace: o.Namespace, Name: o.Deployment}
	}
	if err := ctrl.NewControllerManagedBy(mgr).Named("upgrade").For(&Upgrade{}).Complete(r); err != nil {
		return fmt.Errorf("controller: %w", err)
	}
	o.Logger.Info("controller: starting", "namespace", o.Namespace, "leader_election", o.LeaderElection)
	err = mgr.Start(ctx)
	r.stopAll()
	return err
}

// leaseName is the leader election's Lease.
const leaseName = "ferry-controller"

// leaseLock is the leader election's lock on the Lease, with this
// replica's identity (o.Identity and a random suffix).
func leaseLock(cfg *rest.Config, o Options) (resourcelock.Interface, *leaseHolder, error) {
	id := o.Identity
	if id == "" {
		id, _ = os.Hostname()
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	id += "_" + hex.EncodeToString(b[:])
	cs, err := k8sclient.NewForConfig(rest.AddUserAgent(cfg, "leader-election"))
	if err != nil {
		return nil, nil, fmt.Errorf("controller: leader election: %w", err)
	}
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, o.Namespace, leaseName, cs.CoreV1(), cs.CoordinationV1(),
		resourcelock.ResourceLockConfig{Identity: id})
	if err != nil {
		return nil, nil, fmt.Errorf("controller: leader election: %w", err)
	}
	return lock, &leaseHolder{key: types.NamespacedName{Namespace: o.Namespace, Name: leaseName}, identity: id}, nil
}

// Reconciler drives each Upgrade with an engine of its own.
type Reconciler struct {
	Client client.Client
	// Reader reads from the apiserver, uncached: what the engine's
	// store reads (default Client).
	Reader    client.Reader
	Rest      *rest.Config
	NewDriver func(*rest.Config) (driver.Driver, error)
	Logger    *slog.Logger
	// Events receives the upgrades' events as Kubernetes Events on
	// their Upgrade (nil: none).
	Events krecord.EventRecorder
	// Deployment is the controller's own Deployment (ferry first).
	Deployment types.NamespacedName

	lease *leaseHolder // the leader election's, when there is one

	mu      sync.Mutex
	running map[types.NamespacedName]context.CancelFunc
	wg      sync.WaitGroup
}

// Reconcile makes sure an engine drives every Upgrade that has not
// ended. The engine itself is level-triggered: it observes the
// cluster and takes the record up where the status says it was; spec
// actions reach it through the record's intent (statusStore.Get).
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var obj Upgrade
	if err := r.Client.Get(ctx, req.NamespacedName, &obj); err != nil {
		if apierrors.IsNotFound(err) {
			r.stop(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	u, ok, err := record(&obj)
	if err != nil {
		return ctrl.Result{}, err
	}
	if ok && u.State.Terminal() {
		return ctrl.Result{}, nil
	}
	if !ok && obj.Status.ObservedGeneration == obj.Generation &&
		(meta.IsStatusConditionTrue(obj.Status.Conditions, "Failed") || meta.IsStatusConditionTrue(obj.Status.Conditions, "Completed")) {
		return ctrl.Result{}, nil // refused, or nothing to do, before it began; a new spec tries again
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.running == nil {
		r.running = map[types.NamespacedName]context.CancelFunc{}
	}
	if _, busy := r.running[req.NamespacedName]; busy {
		return ctrl.Result{}, nil
	}
	dctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r.running[req.NamespacedName] = cancel
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		err := r.drive(dctx, req.NamespacedName)
		r.mu.Lock()
		delete(r.running, req.NamespacedName)
		r.mu.Unlock()
		cancel()
		if err != nil && dctx.Err() == nil {
			r.Logger.Error("controller: upgrade stopped", "upgrade", req.NamespacedName, "err", err)
		}
	}()
	return ctrl.Result{}, nil
}

func (r *Reconciler) stop(key types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if cancel, ok := r.running[key]; ok {
		cancel()
		delete(r.running, key)
	}
}

func (r *Reconciler) stopAll() {
	r.mu.Lock()
	for k, cancel := range r.running {
		cancel()
		delete(r.running, k)
	}
	r.mu.Unlock()
	r.wg.Wait()
}

// drive runs one Upgrade to its end: parse the description, find the
// members, begin if the status holds no record yet, and run.
func (r *Reconciler) drive(ctx context.Context, key types.NamespacedName) error {
	rd := r.Reader
	if rd == nil {
		rd = r.Client
	}
	st := &statusStore{c: r.Client, r: rd, key: key, timeout: 15 * time.Second, lease: r.lease, events: r.Events}
	var obj Upgrade
	if err := r.Client.Get(ctx, key, &obj); err != nil {
		return err
	}
	refuse := func(reason string, err error) error { return refuse(st, reason, err) }
	// Ferry first: a controller older than the release moves nothing.
	if wait, err := r.ferryFirst(ctx, st, &obj); wait || err != nil {
		return err
	}
	c, err := config.Parse([]byte(obj.Spec.Description), key.String()+": spec.description")
	if err != nil {
		return refuse("InvalidDescription", err)
	}
	if c.Substrate != kubernetes.Name {
		return refuse("InvalidDescription", fmt.Errorf("spec.description: substrate is %q; the controller drives substrate %s", c.Substrate, kubernetes.Name))
	}
	d, err := r.NewDriver(r.Rest)
	if err != nil {
		return err
	}
	if closer, ok := d.(io.Closer); ok {
		// The Kubernetes driver's informers live as long as this drive.
		defer closer.Close()
	}
	if err := engine.Discover(ctx, c, d); err != nil {
		return refuse("DiscoveryFailed", err)
	}
	e, err := engine.New(engine.Config{Cluster: c, Driver: d, Store: st, Logger: r.Logger.With("upgrade", key.String())})
	if err != nil {
		return refuse("InvalidDescription", err)
	}
	if _, ok, err := st.Current(); err != nil {
		return err
	} else if !ok {
		if obj.Spec.To == "" {
			return refuse("InvalidSpec", errors.New("spec.to must name the release to upgrade to"))
		}
		if _, err := e.Begin(ctx, obj.Spec.To); errors.Is(err, engine.ErrNothingToDo) {
			// Every member runs the target already: nothing was run or
			// recorded, and the resource says so once, as completed.
			return st.write(func(o *Upgrade) error {
				o.Status.State, o.Status.Reason = "completed", err.Error()
				o.Status.ObservedGeneration = o.Generation
				meta.SetStatusCondition(&o.Status.Conditions, metav1.Condition{Type: "Completed", Status: metav1.ConditionTrue,
					Reason: "NothingToDo", Message: err.Error(), ObservedGeneration: o.Generation})
				return nil
			})
		} else if err != nil {
			return refuse("PreflightFailed", err)
		}
	}
	u, err := e.Run(ctx)
	if err != nil {
		return err
	}
	r.Logger.Info("controller: upgrade ended", "upgrade", key.String(), "state", u.State, "reason", u.Reason)
	return nil
}
