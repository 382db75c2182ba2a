package controller

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/ferry-upgrade/ferry/internal/run/store"
	"github.com/ferry-upgrade/ferry/internal/run/store/storetest"
	"github.com/ferry-upgrade/ferry/internal/testenv/kubetest"
)

// TestStatusStoreContract runs the records' suite on the Upgrade's
// status store against a real kube-apiserver: each writer a status
// store of its own (a replica), the Lease moved and expired by the
// test as leader election moves it.
func TestStatusStoreContract(t *testing.T) {
	c := crdClient(t)
	ctx := context.Background()
	n := 0
	storetest.Run(t, func(t *testing.T) storetest.Subject {
		n++
		key := types.NamespacedName{Namespace: "suite", Name: fmt.Sprintf("suite-%d", n)}
		leaseKey := types.NamespacedName{Namespace: "suite", Name: fmt.Sprintf("lease-%d", n)}
		if err := c.Create(ctx, &Upgrade{ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace},
			Spec: UpgradeSpec{Description: "cluster: suite", To: "2.0.0"}}); err != nil {
			t.Fatal(err)
		}
		if err := c.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: leaseKey.Name, Namespace: leaseKey.Namespace}}); err != nil {
			t.Fatal(err)
		}
		// lease changes the Lease as client-go's leader election does.
		lease := func(t *testing.T, change func(l *coordinationv1.Lease)) {
			var l coordinationv1.Lease
			if err := c.Get(ctx, leaseKey, &l); err != nil {
				t.Fatal(err)
			}
			change(&l)
			if err := c.Update(ctx, &l); err != nil {
				t.Fatal(err)
			}
		}
		return storetest.Subject{
			Writer: func(t *testing.T, name string) store.Records {
				return &statusStore{c: c, r: c, key: key, timeout: 10 * time.Second,
					lease: &leaseHolder{key: leaseKey, identity: name}}
			},
			TakeOver: func(t *testing.T, name string) {
				lease(t, func(l *coordinationv1.Lease) {
					if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != name {
						l.Spec.LeaseTransitions = ptr.To(ptr.Deref(l.Spec.LeaseTransitions, -1) + 1)
					}
					now := metav1.NewMicroTime(time.Now())
					l.Spec.HolderIdentity, l.Spec.AcquireTime, l.Spec.RenewTime = ptr.To(name), &now, &now
					l.Spec.LeaseDurationSeconds = ptr.To(int32(15))
				})
			},
			Expire: func(t *testing.T) {
				lease(t, func(l *coordinationv1.Lease) {
					past := metav1.NewMicroTime(time.Now().Add(-time.Minute))
					l.Spec.RenewTime = &past
				})
			},
		}
	})
}

// crdClient starts a control plane with the Upgrade resource's CRD
// (deploy/crd.yaml) and a namespace "suite", and returns a client of it.
func crdClient(t *testing.T) client.Client {
	env := kubetest.Start(t, kubetest.Options{})
	log.SetLogger(logr.Discard())
	crd, err := os.ReadFile("../../../deploy/crd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Apply(string(crd) + "\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: suite}\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Kubectl("wait", "--for=condition=established", "crd/upgrades.ferry.dev", "--timeout=60s"); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", env.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestActionNeedsItsSequence applies Upgrades to a real kube-apiserver:
// the CRD refuses an action without the request's number, naming the
// field, and takes one with it.
func TestActionNeedsItsSequence(t *testing.T) {
	c := crdClient(t)
	ctx := context.Background()
	err := c.Create(ctx, &Upgrade{ObjectMeta: metav1.ObjectMeta{Name: "no-seq", Namespace: "suite"},
		Spec: UpgradeSpec{Description: "cluster: suite", To: "2.0.0", Action: "resume"}})
	if err == nil || !strings.Contains(err.Error(), "spec.action needs spec.actionSeq") {
		t.Errorf("an action without actionSeq: %v, want refused naming spec.actionSeq", err)
	}
	if err := c.Create(ctx, &Upgrade{ObjectMeta: metav1.ObjectMeta{Name: "with-seq", Namespace: "suite"},
		Spec: UpgradeSpec{Description: "cluster: suite", To: "2.0.0", Action: "resume", ActionSeq: 1}}); err != nil {
		t.Errorf("an action with actionSeq 1: %v", err)
	}
	if err := c.Create(ctx, &Upgrade{ObjectMeta: metav1.ObjectMeta{Name: "no-action", Namespace: "suite"},
		Spec: UpgradeSpec{Description: "cluster: suite", To: "2.0.0"}}); err != nil {
		t.Errorf("no action: %v", err)
	}
}
