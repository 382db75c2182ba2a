package cli

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/ferry-upgrade/ferry/internal/substrate/driver"
	"github.com/ferry-upgrade/ferry/internal/substrate/kubernetes"
	"github.com/ferry-upgrade/ferry/internal/surface/controller"
	"github.com/ferry-upgrade/ferry/internal/trust/safefile"
)

func controllerCmd(g *globals) *cobra.Command {
	var o controller.Options
	var kubeconfig, kubeContext string
	cmd := &cobra.Command{
		Use:   "controller",
		Short: "run ferry's Kubernetes controller: it drives each Upgrade resource (deploy/crd.yaml) in its namespace",
		Long: `Run the controller of the Upgrade resource (kubectl apply -f deploy/crd.yaml).
'kubectl apply' of an Upgrade (spec.description: a cluster description with
substrate kubernetes; spec.to: the release) starts it; 'kubectl get upgrades'
shows state, phase, batch and progress; spec.action (pause, resume, abort,
finalize) asks for a change. The engine's record lives in the Upgrade's status,
so that a restarted controller, or another replica after a fail-over
(--leader-elect), takes the upgrade up where it was. The least privilege it
needs is in deploy/controller.yaml. A release that requires a newer ferry
(requires_ferry) is never driven by an older controller: it moves its own
Deployment (--deployment) to the ferry image the release or spec.ferryImage
names, pinned by digest, and the replica on the new release takes the upgrade
up; without an image, the Upgrade's condition FerryUnderstands says what is
needed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Identity == "" {
				o.Identity, _ = os.Hostname()
			}
			if kubeconfig != "" {
				// (client-go would block on a FIFO there.)
				if _, err := safefile.Read(kubeconfig, kubernetes.MaxKubeconfig, safefile.DefaultTimeout); err != nil {
					return fmt.Errorf("--kubeconfig: %w", err)
				}
			}
			rules := clientcmd.NewDefaultClientConfigLoadingRules()
			rules.ExplicitPath = kubeconfig
			rc, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules,
				&clientcmd.ConfigOverrides{CurrentContext: kubeContext}).ClientConfig()
			if err != nil {
				return fmt.Errorf("kubeconfig: %w", err)
			}
			o.Logger = g.logger()
			o.NewDriver = func(rc *rest.Config) (driver.Driver, error) {
				return kubernetes.NewForConfig(rc, kubernetes.WithLogger(o.Logger))
			}
			return controller.Run(cmd.Context(), rc, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file (default $KUBECONFIG, then the in-cluster service account)")
	f.StringVar(&kubeContext, "context", "", "kubeconfig context")
	f.StringVar(&o.Namespace, "namespace", envOr("FERRY_NAMESPACE", "ferry-system"), "the namespace of the Upgrades it drives (env FERRY_NAMESPACE)")
	f.BoolVar(&o.LeaderElection, "leader-elect", false, "take turns with other replicas through a lease")
	f.DurationVar(&o.LeaseDuration, "lease-duration", 15*time.Second, "how long a replica that stopped renewing keeps the lease")
	f.StringVar(&o.Deployment, "deployment", envOr("FERRY_DEPLOYMENT", "ferry-controller"), "the controller's own Deployment in --namespace: moved to the ferry image a release names when it requires a newer ferry (ferry first); empty: the Upgrade says what is needed instead (env FERRY_DEPLOYMENT)")
	return cmd
}
